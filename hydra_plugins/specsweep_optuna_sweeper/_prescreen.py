"""The twin pre-screen (multi-fidelity): rank the whole valid space on the twin, run the K best first.

A real trial costs a ~150 s server restart plus its benchmark; the calibrated
twin (``sweep.sim.predict``: the simulator's performance model, no server)
predicts a config's cells in about a millisecond. With
``hydra.sweeper.prescreen.top_k=K`` the sweeper, before its first trial:

1. predicts every valid point of the space (``_rules``: declared constraints and
   the box's quirks already applied, workarounds included), with the app's own
   objective (``objective.metric``, its cell or weights: ``sweep.score.predicted``)
   and the constraints the twin can predict (a startup failure; a median TTFT
   already above the p99 limit);
2. queues the K best (after ``hydra.sweeper.enqueue``, i.e. the production config),
   so they are the first real trials -- in place of a sampler's random startup;
3. records the ranking: the study's user attr ``prescreen``, ``prescreen.csv`` in the
   sweep dir, and the MLflow parent run (params ``prescreen.*`` and the table
   ``prescreen.json``);

then the sampler goes on from the real results. Every job gets
``++optuna.prescreen.{rank,calibration,predicted}``, so its result.json records the
twin's prediction beside the measurement (``sweep/trial/prediction.py``).
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import optuna

from sweep.errors import ConfigError

from ._rules import Rules
from ._space import format_value

log = logging.getLogger(__name__)
ATTR = "prescreen"


@dataclass
class Ranked:
    params: dict[str, Any]
    predicted: float | None
    why_not: str | None = None        # predicted startup failure / infeasible
    workaround: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.why_not is None and self.predicted is not None


def rank(rules: Rules, *, calibration: str | None, direction: str) -> list[Ranked]:
    """Every valid point, best predicted first (unusable ones last, in grid order)."""
    from sweep.compose.settings import Objective
    from sweep.score.predicted import predicted_infeasible, predicted_objective
    from sweep.sim.predict import predict

    points = rules.valid_points()
    if points is None:
        raise ConfigError("hydra.sweeper.prescreen", "needs a discrete space (choice/range): the twin "
                         "ranks every point of it")
    out: list[Ranked] = []
    for params in points:
        verdict = rules.check(params)
        cfg = rules.source.plain(params, verdict.workaround)
        pred = predict(cfg, calibration=calibration)
        if pred["failure"]:
            out.append(Ranked(params, None, f"predicted startup failure: {pred['failure']}",
                              verdict.workaround))
            continue
        objective = Objective.from_mapping(cfg.get("objective"))
        value = predicted_objective(pred["cells"], objective)
        out.append(Ranked(params, value, predicted_infeasible(pred["cells"], objective),
                          verdict.workaround))
    sign = -1.0 if direction == "maximize" else 1.0
    return sorted(out, key=lambda r: (not r.usable, sign * (r.predicted or 0.0)))


def twin_label(calibration: str | None) -> str:
    return calibration if calibration not in (None, "") else "default"


@dataclass
class Prescreen:
    """The ranking as stored in the study (every worker of a pool reads it from there)."""

    calibration: str
    top_k: int
    rows: list[dict[str, Any]]

    def to_attr(self) -> dict[str, Any]:
        return {"calibration": self.calibration, "top_k": self.top_k, "ranking": self.rows}

    @classmethod
    def build(cls, ranking: Sequence[Ranked], calibration: str | None, top_k: int) -> "Prescreen":
        rows = [{"rank": i + 1, "params": r.params, "predicted": r.predicted,
                 "why_not": r.why_not, "workaround": list(r.workaround)}
                for i, r in enumerate(ranking)]
        return cls(twin_label(calibration), top_k, rows)

    @classmethod
    def load(cls, study: optuna.Study) -> "Prescreen | None":
        attr = study.user_attrs.get(ATTR)
        if not isinstance(attr, Mapping):
            return None
        return cls(str(attr.get("calibration") or "default"), int(attr.get("top_k") or 0),
                   list(attr.get("ranking") or []))

    def _row(self, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        want = {k: repr(v) for k, v in params.items()}
        for row in self.rows:
            if {k: repr(v) for k, v in (row.get("params") or {}).items()} == want:
                return row
        return None

    def rank_of(self, params: Mapping[str, Any]) -> int | None:
        row = self._row(params)
        return int(row["rank"]) if row is not None else None

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """What a job is told: which twin ranked it, where, and what it predicted."""
        row = self._row(params)
        if row is None:
            return []
        out = [f"++optuna.prescreen.rank={row['rank']}",
               "++optuna.prescreen.calibration='" + self.calibration.replace("'", "\\'") + "'"]
        if row.get("predicted") is not None:
            out.append(f"++optuna.prescreen.predicted={float(row['predicted']):.6g}")
        return out

    def top(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("predicted") is not None and not r.get("why_not")][:self.top_k]

    # -- records -------------------------------------------------------------------------------
    def table(self) -> dict[str, list[Any]]:
        names = list(dict.fromkeys(k for r in self.rows for k in (r.get("params") or {})))
        cols: dict[str, list[Any]] = {"rank": [], **{n: [] for n in names}, "predicted": [],
                                      "why_not": [], "workaround": [], "run_first": []}
        top = {r["rank"] for r in self.top()}
        for r in self.rows:
            cols["rank"].append(r["rank"])
            for n in names:
                cols[n].append((r.get("params") or {}).get(n))
            cols["predicted"].append(r.get("predicted"))
            cols["why_not"].append(r.get("why_not"))
            cols["workaround"].append(" ".join(r.get("workaround") or []))
            cols["run_first"].append(r["rank"] in top)
        return cols

    def write_csv(self, path: Path) -> Path:
        cols = self.table()
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(list(cols))
            w.writerows(zip(*cols.values()))
        return path

    def log_lines(self, n: int = 8) -> list[str]:
        out = []
        for r in self.rows[:n]:
            params = " ".join(f"{k}={format_value(v)}" for k, v in (r.get("params") or {}).items())
            value = "-" if r.get("predicted") is None else f"{r['predicted']:.6g}"
            out.append(f"  #{r['rank']:<3} {value:>10}  {params} {r.get('why_not') or ''}".rstrip())
        return out


def log_to_mlflow(app_config: Any, sweep_dir: Path, pre: Prescreen, points: int) -> str | None:
    """Params and the ranking table on the sweep's MLflow parent run (best effort)."""
    mlflow_node = app_config.get("mlflow") if hasattr(app_config, "get") else None
    if mlflow_node is None:
        return None
    try:
        from omegaconf import OmegaConf

        from sweep.compose.settings import Mlflow
        from sweep.record.tracking import Tracker

        settings = Mlflow.from_mapping(OmegaConf.to_container(mlflow_node, resolve=True))  # type: ignore[arg-type]
        if not settings.enabled:
            return None
        tracker = Tracker(settings)
        run_id = tracker.parent_for(sweep_dir)
        if not run_id:
            return None
        client, _ = tracker.connect()
        tracker.log_batch(run_id, params={"prescreen.top_k": str(pre.top_k),
                                          "prescreen.calibration": pre.calibration,
                                          "prescreen.points": str(points)})
        client.log_table(run_id, data=pre.table(), artifact_file="prescreen.json")
        return run_id
    except Exception as exc:  # noqa: BLE001 - tracking never stops a search
        log.warning("pre-screen not logged to MLflow: %s (kept in %s)", exc, sweep_dir / "prescreen.csv")
        return None


def prescreen(study: optuna.Study, loop: Any, rules: Rules, *, top_k: int, calibration: str | None,
              direction: str, sweep_dir: Path | None = None) -> Prescreen:
    """Rank, record (study attr, prescreen.csv) and queue the K best (``loop.enqueue``)."""
    ranking = rank(rules, calibration=calibration, direction=direction)
    pre = Prescreen.build(ranking, calibration, top_k)
    study.set_user_attr(ATTR, pre.to_attr())
    if sweep_dir is not None:
        pre.write_csv(Path(sweep_dir) / "prescreen.csv")
    usable = sum(1 for r in ranking if r.usable)
    log.info("pre-screen on the twin (%s): %d valid points ranked (%d predicted to run), the %d "
             "best run first:\n%s", pre.calibration, len(ranking), usable, min(top_k, usable),
             "\n".join(pre.log_lines(max(top_k, 5))))
    loop.enqueue([r["params"] for r in pre.top()], attrs=lambda p: {"prescreen_rank": pre.rank_of(p)})
    return pre
