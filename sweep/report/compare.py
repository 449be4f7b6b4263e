"""What a comparison compares: rows grouped like with like, ranked within each group only.

Why: a report that ranks a ``workload=smoke`` trial against ``workload=seed``
ones, or divides by a baseline measured on another workload, gives wrong
answers. Trials are grouped by what makes their numbers comparable -- box and
layout, model, workload matrix and load, simulated or real (the key the baseline rule
matches on, :func:`sweep.score.speedup.baseline_key`) -- and by objective.
Within a group rows are ranked by the group's objective, the best feasible
one is marked, and a speedup is computed only against a baseline of the same
group (the one rule in :mod:`sweep.score.speedup`). The best is not named alone
when noise cannot tell it from others: the runners-up whose 95% interval
overlaps its own are marked tied (the one rule in :mod:`sweep.score.noise`;
intervals come from ``workload.repeats``). Every format (terminal table, CSV,
JSON, Markdown, HTML) renders these groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep import secrets
from sweep.compose.settings import Objective
from sweep.record.result import Metrics, TrialResult
from sweep.score import objective as score_objective
from sweep.score import speedup as score_speedup
from sweep.score.acceptance import Speculation, speculation
from sweep.score import configs as score_configs
from sweep.score.noise import Candidate, Ties, objective_interval, spread_of, tied_within_noise
from sweep.score.metrics import Headline, headline, honest

STATUS_ORDER = {"ok": 0, "pruned": 1, "interrupted": 2, "running": 3, "failed": 4}


@dataclass
class Row:
    doc: TrialResult
    source: str
    head: Headline
    objective: Objective
    objective_value: float | None
    feasible: bool
    metrics: Metrics  # honest metrics (old files read right)
    speedup: float | None = None
    speedup_from_table: bool = False
    baseline_name: str | None = None
    rank: int | None = None  # 1 = the leader of its group (the best when its verdict is decided)
    tied_with_best: bool = False  # a runner-up the leader cannot be told apart from (95% intervals)
    copies: int = 1  # results of this one config pooled into the row (sweep/score/configs.py)
    config_id: str = ""
    parts: list[tuple[str, TrialResult]] = field(default_factory=list)  # the copies with their sources (rounds)

    @property
    def name(self) -> str:
        return self.doc.trial.name

    @property
    def hardware(self) -> str:
        return self.doc.trial.hardware

    @property
    def spec(self) -> str:
        spec = self.doc.trial.spec
        return str(spec if spec != "?" else self.doc.spec_value("algorithm") or "?")

    @property
    def budget(self) -> Any:
        return self.doc.spec_value("budget")

    @property
    def topk(self) -> Any:
        return self.doc.spec_value("topk")

    @property
    def window(self) -> Any:
        return self.doc.spec_value("window")

    @property
    def status(self) -> str:
        return str(self.doc.status)

    @property
    def reason(self) -> str | None:
        return self.doc.reason

    @property
    def status_text(self) -> str:
        """``failed: cuda_graph``, ``interrupted`` (a reason that repeats the status is said once)."""
        return self.status + (f": {self.reason}" if self.reason and self.reason != self.status else "")

    @property
    def simulated(self) -> bool:
        return bool(self.doc.simulated)

    @property
    def sweep_id(self) -> str | None:
        return self.doc.trial.sweep_id

    @property
    def workload(self) -> str:
        return str(self.doc.config_section("workload").get("name") or "?")

    @property
    def is_baseline(self) -> bool:
        return self.spec == "none"

    @property
    def speculation(self) -> Speculation:
        """What speculation did (accept length, rate, per position; sweep.score.acceptance)."""
        return speculation(self.doc)

    @property
    def knobs(self) -> str:
        """The spec knobs that are set, ``budget 8, topk 4, window 2048`` (``ddtree`` when none is)."""
        set_ = [f"{k} {v}" for k in ("budget", "topk", "window") if (v := getattr(self, k)) is not None]
        return ", ".join(set_) or self.spec


@dataclass
class Group:
    key: tuple[Any, ...]
    rows: list[Row] = field(default_factory=list)
    ties: Ties[Row] | None = None  # the best and its runners-up within noise (None: nothing feasible)

    @property
    def first(self) -> TrialResult:
        return self.rows[0].doc

    @property
    def leader(self) -> Row | None:
        """The feasible row with the best objective value, decided or not."""
        return next((r for r in self.rows if r.rank == 1), None)

    @property
    def best(self) -> Row | None:
        """The config the verdict picks (sweep/score/campaign.py): the leader when it beats every other
        beyond noise, the cheapest config within the practical margin of the best when that is the
        decision (equivalent); None while the verdict is open: nothing is called best over a config
        it is not told apart from."""
        leader = self.leader
        if leader is None:
            return None
        if sum(1 for r in self.rows if r.feasible) == 1:
            return leader
        if self.ties is None or not self.ties.decided:
            return None
        return self.ties.chosen.key

    @property
    def verdict(self) -> str:
        """``decided`` | ``equivalent`` | ``open`` | ``unknown`` (measured once, no spread) | ``none``
        (nothing feasible)."""
        if self.leader is None:
            return "none"
        if sum(1 for r in self.rows if r.feasible) == 1:
            return "decided"
        return self.ties.state if self.ties is not None else "unknown"

    @property
    def noise_line(self) -> str | None:
        """``undecided: tied within noise with a (412.0), b (409.3) (...)`` / ``clear winner ...`` /
        noise unknown."""
        return self.ties.line(lambda r: r.name) if self.ties is not None else None

    @property
    def objective_name(self) -> str:
        return score_objective.metric_name(self.rows[0].objective)

    @property
    def headline_label(self) -> str:
        """``low-load tok/s (c2)`` when every row has the same headline concurrency (sweep/score/names.py)."""
        from sweep.score.names import label

        levels = {r.head.concurrency for r in self.rows if r.head.concurrency is not None}
        return label("tok_s_lowc", levels.pop() if len(levels) == 1 else None)

    @property
    def hardware_label(self) -> str:
        hw = self.first.config_section("hardware")
        layout = " ".join(f"{k}{hw[k]}" for k in ("tp", "ep", "dp") if hw.get(k) not in (None, 1))
        return f"{hw.get('name') or self.first.trial.hardware}" + (f" ({layout})" if layout else "")

    @property
    def engine_label(self) -> str:
        """The engine the group ran on (its key keeps engines apart; the title says which is which:
        a dir of llama.cpp and vLLM landscapes read as one box and model twice); the simulator's
        groups say ``simulated`` instead."""
        name = str(self.first.config_section("server").get("name") or "")
        return "" if self.simulated or name in ("", "sim") else name

    @property
    def model_label(self) -> str:
        return str(self.first.config_section("model").get("name") or "?")

    @property
    def workload_label(self) -> str:
        wl = self.first.config_section("workload")
        names = sorted({r.workload for r in self.rows})

        def listed(key: str) -> str:
            values = wl.get(key)
            return ",".join(str(v) for v in values) if isinstance(values, list) else str(values)

        matrix = (f"ctx {listed('contexts')} x conc {listed('concurrency')}, "
                  f"{wl.get('max_tokens')} new tokens")
        return f"{'/'.join(names)} ({', '.join([matrix, *_load_label(wl)])})"

    @property
    def simulated(self) -> bool:
        return bool(self.first.simulated)

    @property
    def label(self) -> str:
        from sweep.score.names import objective_label

        wanted = objective_label(self.objective_name, self.rows[0].objective.metrics)  # a study's metrics: each
        engine = f"{self.engine_label} · " if self.engine_label else ""
        return (f"{self.hardware_label} · {engine}{self.model_label} · workload {self.workload_label} · "
                f"objective {wanted}" + (" · simulated" if self.simulated else ""))


def _load_label(wl: dict[str, Any]) -> list[str]:
    """How the load differs from closed-loop greedy text prompts (part of the group key),
    so two groups that differ only there are told apart."""
    parts = []
    if wl.get("request_rate") is not None:
        parts.append(f"Poisson {wl['request_rate']} req/s")
    if wl.get("prompt_source", "text") != "text":
        source = wl.get("prompt_source")
        parts.append(f"prompts {source}" + (f" {wl['dataset_path']}" if wl.get("dataset_path") else ""))
    if wl.get("temperature") not in (None, 0, 0.0):
        parts.append(f"temperature {wl['temperature']}")
    if wl.get("ignore_eos", True) is False:
        parts.append("stops at EOS")
    return parts


def _row(doc: TrialResult, source: str, copies: int = 1, config_id: str = "") -> Row:
    objective = score_objective.objective_of(doc)
    return Row(doc=doc, source=source, head=headline(doc), objective=objective,
               objective_value=score_objective.objective_value(doc, objective) if doc.ok else None,
               feasible=score_objective.feasible(doc, objective), metrics=honest(doc), copies=copies,
               config_id=config_id)


def group_key(doc: TrialResult) -> tuple[Any, ...]:
    """Trials with equal keys are comparable: same baseline key, same objective."""
    objective = score_objective.objective_of(doc)
    return (score_speedup.baseline_key(doc.config, doc.simulated), score_objective.metric_name(objective))


def _sort_key(r: Row) -> tuple[Any, ...]:
    return (not r.feasible, STATUS_ORDER.get(r.status, 5), -(r.objective_value or 0.0), r.name)


def _speedups(group: Group) -> None:
    """Speedup against the group's own newest baseline row, else the trial's recorded one."""
    for row in group.rows:
        if not row.doc.ok:
            continue
        if row.is_baseline:
            row.speedup = 1.0 if row.head.tok_s else None
            continue
        found = score_speedup.best_baseline(row.doc.config, row.simulated,
                                            ((b, b.doc) for b in group.rows))
        if found is not None:
            base = found[0]
            row.speedup = score_speedup.speedup(row.head.tok_s, base.head.tok_s)
            row.speedup_from_table = row.speedup is not None
            row.baseline_name = base.name
        elif row.metrics.speedup_vs_baseline is not None:
            row.speedup = float(row.metrics.speedup_vs_baseline)


def _ties(group: Group) -> None:
    """The group's verdict on its objective from the campaign model (sweep/score/noise.py adapts the
    rows' summaries: the noise pooled over their repeats, the box's spread a prior where nothing was
    measured twice); runners-up still in contention are marked."""
    from sweep.score.verdicts import cost_of, margin_of

    feasible = [r for r in group.rows if r.feasible and r.objective_value is not None]
    cands = [Candidate(r, float(r.objective_value or 0.0),
                       objective_interval(r.doc, r.objective, r.objective_value), n=_measurements(r))
             for r in feasible]
    spread = spread_of(group.rows[0].doc) if group.rows else None
    group.ties = tied_within_noise(cands, spread=spread, cost=lambda r: cost_of(r.doc),
                                   margin=margin_of(feasible[0].doc) if feasible else None)
    if group.ties is not None and group.ties.best.key is not group.leader:
        group.ties = None  # equal values ranked by name: the verdict and the rank disagree on who leads
    for c in group.ties.tied if group.ties is not None else []:
        c.key.tied_with_best = True


def _measurements(row: Row) -> int:
    """How many measurements the row's headline cell pools (its copies' repeats)."""
    cell = next((c for c in row.doc.cells if c.concurrency == row.head.concurrency
                 and c.context == row.head.context), None)
    return int(cell.repeats or 1) if cell is not None else row.copies


def masked(docs: Sequence[TrialResult]) -> list[TrialResult]:
    """The documents with every secret masked (by name, and by value wherever it recurs:
    a log tail, a message), whatever wrote them: every format renders these."""
    red = secrets.redactor(secrets.collect_secrets(*(d.to_dict() for d in docs)))
    return [TrialResult.from_dict(secrets.mask_tree(d.to_dict(), red)) for d in docs]


def build_groups(docs: Sequence[TrialResult], sources: Sequence[str] | None = None) -> list[Group]:
    """Rows grouped like with like, one row per config (its copies pooled: sweep/score/configs.py),
    each group ranked by its objective (the leader first); groups in order of first appearance;
    secrets masked. A copy whose identity fields contradict its own launch is named on stderr and
    left out (sweep/score/consistency.py; a command that read the files named it already)."""
    from sweep.score.consistency import consistent

    pairs = list(zip(docs, sources if sources is not None else [""] * len(docs)))
    kept = consistent(pairs, lambda p: p[0], lambda p: p[1] or p[0].trial.job_dir or p[0].trial.name)
    if len(kept) < len(pairs):
        docs, sources = [d for d, _ in kept], ([s for _, s in kept] if sources is not None else None)
    docs = masked(docs)
    groups: dict[tuple[Any, ...], Group] = {}
    for pooled in score_configs.pool(docs, sources):
        doc = pooled.doc
        assert doc is not None
        key = group_key(doc)
        row = _row(doc, pooled.sources[-1], copies=max(1, pooled.n - pooled.failed_copies)
                   if doc.ok else pooled.n, config_id=pooled.config_id)
        row.parts = list(zip(pooled.sources, pooled.copies))
        groups.setdefault(key, Group(key)).rows.append(row)
    for group in groups.values():
        group.rows.sort(key=_sort_key)
        for rank, row in enumerate((r for r in group.rows if r.feasible), 1):
            row.rank = rank
        _speedups(group)
        _ties(group)
    return list(groups.values())


def all_rows(groups: Sequence[Group]) -> list[Row]:
    return [r for g in groups for r in g.rows]
