"""The trial result file (``result.json``): its typed form, how it reaches disk, how it is read.

The result file is the source of truth: it is written atomically in the
Hydra job dir before anything else (MLflow, plots, the summary) can fail,
and rewritten as the trial progresses (``running`` -> ``ok`` / ``failed`` /
``interrupted``). :class:`TrialResult` is what the trial builds and what
sync, the report, the baseline lookup, the plots and the sweeper read; files
of every earlier version load (schema 1: docs/ARCHITECTURE.md), keys this
version does not know are kept. The JSON Schema generated from these types is
``docs/result.schema.json``. Every write masks secrets (:mod:`sweep.secrets`).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from sweep import secrets
from sweep.io import readback
from sweep.io.atomic import write_atomic
from sweep.record._model import Record, check, json_schema

SCHEMA = 1
FILENAME = "result.json"
# pruned: stopped after some cells by the sweeper's pruner (sweep/trial/hooks.py), cells kept
Status = Literal["running", "ok", "failed", "interrupted", "pruned"]


@dataclass(kw_only=True)
class Failure(Record):
    """Why a trial did not end ``ok``."""

    REQUIRED = ("reason",)
    reason: str
    message: str = ""
    log_tail: str = ""


@dataclass(kw_only=True)
class TrialInfo(Record):
    """Which trial this is and where it ran."""

    REQUIRED = ("name", "hardware", "spec")
    name: str
    hardware: str
    spec: str
    job_dir: str | None = None
    sweep_id: str | None = field(default=None, metadata={"doc": "<date>/<time> of the multirun"})
    sweep_dir: str | None = None
    job_num: int | None = None
    overrides: list[str] = field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    config_id: str | None = field(default=None, metadata={
        "doc": "what ran and what was measured, hashed (sweep/score/configs.py): the same for every "
               "copy of one config, whatever launched it; copies are pooled as its repeats"})
    choices: dict[str, str] = field(default_factory=dict, metadata={
        "doc": "the config groups composed (hardware, spec, model, server, workload ...): the defaults "
               "a name's knobs are told apart from"})


@dataclass(kw_only=True)
class ServerInfo(Record):
    """The server the trial used: reused or started, and what it said about itself."""

    reused: bool | None = None
    startup_s: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    base_url: str | None = None
    log: str | None = None
    configured_port: int | None = field(default=None, metadata={
        "doc": "server.port as configured, when it was in use and the server was started on the "
               "next free port instead (server.port not given; base_url has the port used)"})


@dataclass(kw_only=True)
class BoxState(Record):
    """What the measuring box was doing around a measurement (sweep/bench/boxstate.py)."""

    busy: bool | None = field(default=None, metadata={
        "doc": "other work reached workload.busy_load cores of the engine's, or a GPU had another process "
               "or was held down by heat or power (why says which); null: nothing could be read"})
    why: list[str] = field(default_factory=list, metadata={"doc": "what was busy, in words"})
    window_s: float | None = field(default=None, metadata={"doc": "seconds the state was measured over"})
    cpus: int | None = None
    cores: list[int] | None = field(default=None, metadata={"doc": "the engine's cores (its CPU affinity)"})
    others_cpu: float | None = field(default=None, metadata={
        "doc": "cores' worth of CPU the engine's cores gave processes outside this run's own tree "
               "(/proc/stat per CPU minus our tree's /proc/<pid>/stat), steal included"})
    own_cpu: float | None = field(default=None, metadata={"doc": "cores' worth this run's own tree used"})
    load_avg: float | None = field(default=None, metadata={"doc": "1-minute load average at the end"})
    own_runnable: int | None = field(default=None, metadata={
        "doc": "runnable (R or D) threads of this run's own tree at the end"})
    load_beyond_own: float | None = field(default=None, metadata={
        "doc": "load_avg minus the larger of own_runnable and own_cpu (recorded, not judged: it lags)"})
    steal: float | None = field(default=None, metadata={"doc": "stolen / all ticks of the engine's cores"})
    cpu_mhz: float | None = None
    cpu_mhz_max: float | None = None
    busy_procs: list[dict[str, Any]] = field(default_factory=list, metadata={
        "doc": "other processes that used the engine's cores: pid, name, cpu (cores), the busiest first"})
    gpus: list[dict[str, Any]] | None = field(default=None, metadata={
        "doc": "per GPU (nvidia-smi): index, name, sm_mhz, mem_mhz and their maxima, temp_c, util_pct, throttle"})
    gpu_others: list[dict[str, Any]] | None = field(default=None, metadata={
        "doc": "processes on the GPUs that are not this run's: gpu, pid, name, memory_mib"})
    policy: str | None = field(default=None, metadata={"doc": "workload.busy_box of a check before a trial or cell"})
    waited_s: float | None = field(default=None, metadata={"doc": "seconds the policy waited for the box to settle"})


@dataclass(kw_only=True)
class Cell(Record):
    """One context x concurrency point of the throughput matrix."""

    REQUIRED = ("context", "concurrency")
    context: int
    concurrency: int
    requests: int | None = None
    errors: int | None = None
    error_kinds: dict[str, int] = field(default_factory=dict)
    output_tok_s: float | None = None
    per_stream_tok_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    ttft_ms_mean: float | None = None
    itl_ms_p50: float | None = field(default=None, metadata={
        "doc": "per token: each gap between content events spread over the tokens it carries "
               "(SGLang bench_serving); files before step_ms: the gap between content reads"})
    itl_ms_p90: float | None = None
    itl_ms_p99: float | None = None
    itl_tokens: str | None = field(default=None, metadata={
        "doc": "counted (running usage) | estimated (even split): tokens per event for itl_ms"})
    step_ms_p50: float | None = field(default=None, metadata={
        "doc": "gap between content events: one verify step (vLLM bench serve's ITL)"})
    step_ms_p90: float | None = None
    step_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p90: float | None = None
    e2e_ms_p99: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = field(default=None, metadata={
        "doc": "accepted / drafted draft tokens of the cell's measured requests (/metrics around its window)"})
    completion_tokens: int | None = None
    tokens_source: str | None = field(default=None, metadata={
        "doc": "usage: completion_tokens (and output_tok_s) are the server's usage counts, each checked "
               "against what the stream showed (at least one token per content event, running counts "
               "never down and ending at the final count, usage blocks that agree: sweep/bench/reported.py); "
               "null: no request answered"})
    prompt_tokens_mean: float | None = field(default=None, metadata={
        "doc": "mean usage.prompt_tokens of the cell's successful requests (the context sent)"})
    prompt_sizing: str | None = field(default=None, metadata={
        "doc": "tokenize | probe | exact (token ids) | approx: how prompts were cut to the context"})
    duration_s: float | None = None
    usd_per_mtok: float | None = None
    concurrency_capped: int | None = field(default=None, metadata={
        "doc": "in-flight requests used when the client could not open `concurrency` connections "
               "(RLIMIT_NOFILE); null: not capped"})
    repeats: int | None = field(default=None, metadata={
        "doc": "times the cell was measured (workload.repeats); the figures above are means"})
    output_tok_s_ci: list[float] | None = field(default=None, metadata={
        "doc": "95% t-interval [low, high] of the mean over repeats (null with one)"})
    per_stream_tok_s_ci: list[float] | None = field(default=None, metadata={
        "doc": "95% t-interval [low, high] of the mean over repeats (null with one)"})
    accept_len_ci: list[float] | None = field(default=None, metadata={
        "doc": "95% t-interval [low, high] of the mean over repeats (null with one)"})
    output_tok_s_runs: list[float] | None = field(default=None, metadata={
        "doc": "each repeat's output_tok_s (null with one repeat)"})
    request_rate: float | None = field(default=None, metadata={
        "doc": "Poisson arrivals in requests/s (concurrency: the in-flight cap); null: closed loop"})
    slo_attainment: float | None = field(default=None, metadata={
        "doc": "share of the cell's requests meeting every limit of objective.slo (sweep/stats/slo.py); "
               "null without an SLO"})
    goodput_req_s: float | None = field(default=None, metadata={
        "doc": "requests meeting the SLO per second of the cell's wall time (DistServe's goodput)"})
    goodput_tok_s: float | None = field(default=None, metadata={
        "doc": "output tokens of the requests meeting the SLO per second (mean over repeats)"})
    goodput_tok_s_ci: list[float] | None = field(default=None, metadata={
        "doc": "95% t-interval [low, high] of goodput_tok_s over repeats (null with one)"})
    latencies: list[list[float | None]] | None = field(default=None, metadata={
        "doc": "one row per successful request [ttft_ms, tpot_ms, e2e_ms, completion_tokens, itl_ms "
               "(its ITL at the SLO's percentile)], at most 256 evenly sampled: any SLO can be "
               "judged again from the file (sweep.stats.slo.judge)"})
    load_search: str | None = field(default=None, metadata={
        "doc": "max_load: a probe of the max-load search (workload.max_load); null: a matrix cell"})
    cache: str | None = field(default=None, metadata={
        "doc": "the prefix cache when the measured window opened: flushed (emptied after the warm-up) | "
               "off (the server keeps none) | fresh (prompts it never saw) | warm (not emptied, as the "
               "workload asked); null: files before this field. Repeats pool only within one state"})
    load_avg: float | None = field(default=None, metadata={
        "doc": "the measuring machine's 1-minute load average when the cell ended (the largest over its "
               "repeats): how quiet the box was"})
    box_state: BoxState | None = field(default=None, metadata={
        "doc": "what the box was doing over the cell's measured window (sweep/bench/boxstate.py); over "
               "repeats the worst; busy cells are a block of their own (boxstate.state_key)"})


@dataclass(kw_only=True)
class MaxLoad(Record):
    """The highest load meeting the SLO, searched in one server start (workload.max_load)."""

    REQUIRED = ("over",)
    over: Literal["concurrency", "rate"]
    value: float | None = field(default=None, metadata={
        "doc": "highest probed load whose attainment reached the target (null: not even the first)"})
    context: int | None = None
    goodput_tok_s: float | None = field(default=None, metadata={"doc": "goodput at that load"})
    goodput_tok_s_ci: list[float] | None = None
    output_tok_s: float | None = None
    slo_attainment: float | None = None
    value_ci: list[float] | None = field(default=None, metadata={
        "doc": "repeats > 1: [highest load every repeat met the SLO at, highest load any repeat met it at]"})
    bracket: list[float | None] | None = field(default=None, metadata={
        "doc": "[highest load that met the SLO, lowest load that missed it] when the search ended "
               "(either null: none met, none missed -- the search stopped at its limit)"})
    stopped: str | None = field(default=None, metadata={
        "doc": "tolerance | rounds | limit (met at workload.max_load.max) | first_missed | failed"})
    probes: int | None = None
    slo: dict[str, Any] = field(default_factory=dict, metadata={"doc": "the SLO judged (objective.slo)"})
    tolerance: float | None = None
    max_rounds: int | None = None


@dataclass(kw_only=True)
class Coding(Record):
    """The coding eval: generated code run against hidden tests in a sandbox."""

    eval: str | None = None
    passed: int | None = None
    total: int | None = None
    pass_rate: float | None = None
    mean_tok_s: float | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    sandbox: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class AcceptLen(Record):
    """Speculative acceptance length, three ways (requests' counters, server log, /metrics)."""

    requests: float | None = None
    log: float | None = None
    metrics: float | None = None
    log_samples: int | None = None


@dataclass(kw_only=True)
class CounterWindow(Record):
    """Acceptance from /metrics over the trial window: counters as differences, gauges at its end."""

    drafts: float | None = field(default=None, metadata={"doc": "drafting steps (vLLM num_drafts)"})
    drafted: float | None = field(default=None, metadata={"doc": "draft tokens proposed"})
    accepted: float | None = field(default=None, metadata={"doc": "draft tokens accepted"})
    tokens: float | None = field(default=None, metadata={"doc": "tokens generated (where a counter says)"})
    accept_len: float | None = field(default=None, metadata={
        "doc": "tokens per drafting step: a gauge, else 1 + accepted / drafts"})
    accept_rate: float | None = field(default=None, metadata={
        "doc": "accepted / drafted (a gauge where the server has one)"})
    per_position: list[float] | None = field(default=None, metadata={
        "doc": "accepted at draft position i / drafting steps, i = 0.. (the first drafted token first): "
               "the chance that a step accepts at least i + 1 draft tokens"})


@dataclass(kw_only=True)
class Acceptance(Record):
    """The counters behind accept_len, per place the server reports them (``server.acceptance``)."""

    requests: dict[str, Any] | None = field(default=None, metadata={
        "doc": "sums over the measured requests: tokens, verify_steps, drafted, accepted, accept_len, accept_rate"})
    log: dict[str, Any] | None = field(default=None, metadata={"doc": "the declared log fields, and samples"})
    metrics: CounterWindow | None = field(default=None, metadata={
        "doc": "/metrics over the trial window: counters as differences, gauges at its end, per_position"})
    synthetic: dict[str, Any] | None = field(default=None, metadata={
        "doc": "synthetic acceptance as the server resolved it at startup (rates, mean_len, n_max)"})


@dataclass(kw_only=True)
class Identity(Record):
    """The greedy-identity pass (sweep/bench/identity.py) and its comparison with the baseline's answers."""

    prompts: int | None = None
    context: int | None = None
    max_tokens: int | None = None
    answers: list[dict[str, Any]] = field(default_factory=list, metadata={
        "doc": "per prompt: prompt_sha, text, completion_tokens, error"})
    baseline: str | None = field(default=None, metadata={
        "doc": "the spec=none result whose answers were compared ('self' for a baseline trial)"})
    compared: int | None = None
    identical: int | None = None
    greedy_identical: float | None = field(default=None, metadata={
        "doc": "identical answers / compared (null: no baseline answers for these prompts)"})
    prefix_match: float | None = field(default=None, metadata={
        "doc": "mean share of the baseline's answer reproduced before the first different character"})


@dataclass(kw_only=True)
class Metrics(Record):
    """Headline figures (sweep.score.metrics): what MLflow, the report and the sweeper compare."""

    tok_s_lowc: float | None = field(default=None, metadata={
        "doc": "output tok/s of the headline cell: the lowest measured concurrency "
               "(headline_concurrency) at the shortest context (headline_context)"})
    headline_concurrency: int | None = None
    headline_context: int | None = None
    tok_s_c1: float | None = field(default=None, metadata={
        "doc": "output tok/s at concurrency 1: null when concurrency 1 was not measured (files "
               "without tok_s_lowc wrote the lowest concurrency's tok/s here; "
               "sweep.score.metrics.honest reads them right)"})
    tok_s_peak: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = field(default=None, metadata={
        "doc": "accepted / drafted draft tokens over the trial (the requests' or /metrics counters), "
               "else the server's own accept rate (SGLang's log or gauge); sweep.score.acceptance"})
    greedy_identical: float | None = field(default=None, metadata={
        "doc": "fraction of greedy answers identical to the autoregressive baseline's (identity.*)"})
    coding_pass_rate: float | None = None
    speedup_vs_baseline: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    startup_s: float | None = None
    errors: int | None = None
    usd_per_mtok: float | None = None
    per_stream_tok_s_lowc: float | None = field(default=None, metadata={
        "doc": "tok/s one user sees in the headline cell (interactivity at low load)"})
    goodput_tok_s: float | None = field(default=None, metadata={
        "doc": "the highest goodput_tok_s of any cell under objective.slo (null without an SLO)"})
    max_load: float | None = field(default=None, metadata={
        "doc": "the highest load meeting objective.slo: the max-load search's, else the highest "
               "measured concurrency at the shortest context whose cell met it"})


@dataclass(kw_only=True)
class Baseline(Record):
    """The spec=none result the speedup is measured against."""

    result: str | None = None
    tok_s_lowc: float | None = field(default=None, metadata={
        "doc": "the baseline's headline tok/s (its lowest measured concurrency, as the trial's)"})
    headline_concurrency: int | None = None
    tok_s_c1: float | None = field(default=None, metadata={
        "doc": "the baseline's tok/s at concurrency 1 (null when not measured)"})


@dataclass(kw_only=True)
class Prediction(Record):
    """What the twin predicted for this config before it ran (the sweeper's pre-screen)."""

    calibration: str | None = field(default=None, metadata={"doc": "the twin that predicted it"})
    rank: int | None = field(default=None, metadata={"doc": "place in the pre-screen's ranking, 1 = best"})
    objective: float | None = field(default=None, metadata={"doc": "predicted objective"})
    measured: float | None = field(default=None, metadata={"doc": "measured objective (null unless ok)"})
    error: float | None = field(default=None, metadata={"doc": "measured / predicted - 1"})
    cells: list[dict[str, Any]] = field(default_factory=list, metadata={
        "doc": "per cell: context, concurrency, predicted and measured output_tok_s"})


@dataclass(kw_only=True)
class MlflowInfo(Record):
    """Where the trial's MLflow run is (``synced``: it is complete there)."""

    run_id: str | None = None
    synced: bool = False
    tracking_uri: str | None = None
    experiment: str | None = None
    experiment_id: str | None = None


@dataclass(kw_only=True)
class TrialResult(Record):
    """One trial's result.json (schema 1)."""

    REQUIRED = ("schema", "status")
    schema: int = SCHEMA
    status: Status = "running"
    failure: Failure | None = None
    simulated: bool = False
    trial: TrialInfo = field(default_factory=lambda: TrialInfo(name="?", hardware="?", spec="?"))
    command: str | None = field(default=None, metadata={"doc": "the launch as one shell line (masked)"})
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    fingerprint: str | None = None
    server: ServerInfo | None = None
    cells: list[Cell] = field(default_factory=list)
    coding: Coding | None = None
    accept_len: AcceptLen = field(default_factory=AcceptLen)
    acceptance: Acceptance | None = None
    identity: Identity | None = field(default=None, metadata={
        "doc": "greedy answers to fixed prompts and how many equal the baseline's (workload.identity)"})
    requests_retried: int | None = field(default=None, metadata={
        "doc": "requests sent twice because the server closed a kept-alive connection unanswered"})
    metrics: Metrics = field(default_factory=Metrics)
    speedup_vs_baseline: float | None = None
    baseline: Baseline | None = None
    config: dict[str, Any] = field(default_factory=dict, metadata={
        "doc": "the resolved composed config (secrets masked)"})
    prediction: Prediction | None = field(default=None, metadata={
        "doc": "the twin's prediction for this config (Optuna sweeper's pre-screen), vs measured"})
    max_load: MaxLoad | None = field(default=None, metadata={
        "doc": "the max-load search's answer (workload.max_load.enabled; docs/deployment.md)"})
    box_state: BoxState | None = field(default=None, metadata={
        "doc": "the box's state before the trial, as the policy found it (workload.busy_box: its "
               "policy and how long it waited)"})
    mlflow: MlflowInfo = field(default_factory=MlflowInfo)

    def __post_init__(self) -> None:
        # A block an odd file has as null reads as an empty one: readers need no None checks.
        if self.trial is None:
            self.trial = TrialInfo(name="?", hardware="?", spec="?")
        for name, make in (("accept_len", AcceptLen), ("metrics", Metrics), ("mlflow", MlflowInfo)):
            if getattr(self, name) is None:
                setattr(self, name, make())

    # -- what readers ask ---------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str | None:
        """The failure reason of a trial that did not end ok."""
        return self.failure.reason if self.failure is not None and not self.ok else None

    def spec_value(self, key: str) -> Any:
        """``config.spec.<key>`` (budget, topk, window, algorithm) as recorded."""
        spec = self.config.get("spec")
        return spec.get(key) if isinstance(spec, dict) else None

    def config_section(self, name: str) -> dict[str, Any]:
        section = self.config.get(name)
        return section if isinstance(section, dict) else {}

    # -- disk -----------------------------------------------------------------------------------
    def masked(self) -> dict[str, Any]:
        """The document as written: secrets masked by name and by value, no NaN."""
        return clean_number(secrets.mask_tree(self.to_dict()))

    def write(self, path: Path) -> Path:
        return write_atomic(path, self.masked())

    @classmethod
    def load(cls, path: Path) -> TrialResult:
        """Read a result file (any schema-1 version) through the project's reader of files it
        wrote back (:mod:`sweep.io.readback`: a regular file of bounded size, strict JSON) and check
        what it holds (:func:`check_document`). :class:`~sweep.io.readback.BadFile` (a ValueError)
        naming the file and the first wrong value when it is not one."""
        doc = readback.read_json(path)
        try:
            check_document(doc)
        except readback.Invalid as exc:
            raise readback.BadFile(path, f"not a result file: {exc}") from None
        return cls.from_dict(doc)


# Numbers of a result file whose range is not the default [0, 1e15] (sweep/record/_model.py):
# what a cell says it measured must be a context and a load the harness can send.
def cell_ranges() -> dict[str, tuple[float, float]]:
    from sweep.compose.keys import MAX_CONCURRENCY, MAX_CONTEXT

    return {"Cell.context": (1, MAX_CONTEXT), "Cell.concurrency": (1, MAX_CONCURRENCY),
            "Cell.slo_attainment": (0, 1), "Cell.accept_rate": (0, 1),
            "MaxLoad.context": (1, MAX_CONTEXT), "MaxLoad.slo_attainment": (0, 1),
            "Metrics.headline_context": (1, MAX_CONTEXT), "Metrics.headline_concurrency": (1, MAX_CONCURRENCY),
            "Identity.context": (1, MAX_CONTEXT), "Prediction.error": (-1, 1e15),
            "ServerInfo.configured_port": (1, 65535)}


def check_document(doc: Any) -> None:
    """What a result document must hold to be read: an object with a known schema and status,
    every field of the types' annotations of the right type and range (a cell that is a string,
    tok/s as text, latency rows of strings, a context of 1e30 or -1 are refused), and a recorded
    config whose values pass the key table (:func:`sweep.compose.bounds.check_recorded`) and whose
objective builds (the score and the schedule judge with it).
    Raises :class:`~sweep.io.readback.Invalid` naming the value."""
    if not isinstance(doc, dict):
        raise readback.Invalid("document", "not an object")
    for key in TrialResult.REQUIRED:
        if key not in doc:
            raise readback.Invalid(key, "is missing")
    readback.count("schema", doc["schema"], lo=1, hi=1000, optional=False)
    if doc["status"] not in typing.get_args(Status):
        raise readback.Invalid("status", f"unknown status {readback.shown(doc['status'])}")
    check(TrialResult, doc, ranges=cell_ranges())
    config = doc.get("config")
    if config:
        from sweep.compose.bounds import check_recorded
        from sweep.compose.settings import Objective
        from sweep.errors import ConfigError

        check_recorded(config, where="config")
        if isinstance(config.get("objective"), dict):  # the score and the schedule build it to judge
            try:
                Objective.from_mapping(config["objective"])
            except ConfigError as err:
                raise readback.Invalid(f"config.{err.key}", err.message) from None


def iter_results(*roots: Path, on_error: Callable[[Path, Exception], None] | None = None
                 ) -> Iterator[tuple[Path, TrialResult]]:
    """Every readable result.json under the given directories; each one that cannot be
    read goes to ``on_error(path, exc)`` (commands that report on files must say so:
    :class:`sweep.io.readback.Skipped` prints one line per file and turns it into the exit status)."""
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for path in root.rglob(FILENAME):
            try:
                yield path, TrialResult.load(path)
            except (OSError, ValueError) as exc:
                if on_error is not None:
                    on_error(path, exc)


def clean_number(x: Any) -> Any:
    """JSON has no NaN/inf: turn them into None so writes never fail."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    if isinstance(x, dict):
        return {k: clean_number(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean_number(v) for v in x]
    return x


def schema_document() -> dict[str, Any]:
    """The JSON Schema of result.json (docs/result.schema.json)."""
    return json_schema(TrialResult, title="specsweep result.json",
                       schema_id="https://specsweep.invalid/result.schema.json", version=SCHEMA)
