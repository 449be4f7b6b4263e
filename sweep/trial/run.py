"""One trial end to end: launch/reuse -> benchmark -> record -> score.

The result file is written first (status ``running``) and rewritten at
every stage, so a crash, a Ctrl-C or a dead MLflow loses nothing. A server
that fails to start is a *failed* trial with a classified reason and its
log tail, never an exception that ends the sweep. Every secret of the trial
(the launch's, the config's, the overrides') is handed to
:mod:`sweep.secrets` first, so nothing written or printed afterwards shows it.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Any

from sweep import secrets
from sweep.io.atomic import DiskFull
from sweep.compose.config import TrialConfig
from sweep.launch import Launch
from sweep.record.result import FILENAME, SCHEMA, AcceptLen, Baseline, Failure, ServerInfo, TrialInfo, TrialResult
from sweep.score import configs
from sweep.score import metrics as score
from sweep.score.objective import trial_return
from sweep.trial import bench_errors, hooks, identity, prediction
from sweep.trial.autobaseline import search_roots
from sweep.trial.context import TrialContext, hydra_context
from sweep.trial.port import Ports

log = logging.getLogger(__name__)


def _new_result(cfg: TrialConfig, launch: Launch, ctx: TrialContext) -> TrialResult:
    red = secrets.redactor(launch.secrets)
    doc = TrialResult(
        schema=SCHEMA, status="running", simulated=cfg.simulated,
        trial=TrialInfo(
            name="?", hardware=cfg.hardware.name, spec=cfg.spec.algorithm,
            job_dir=str(ctx.job_dir), sweep_id=ctx.sweep_id,
            sweep_dir=str(ctx.sweep_dir) if ctx.sweep_dir else None, job_num=ctx.job_num,
            overrides=[red.text(o) for o in ctx.overrides], started=_now(), finished=None),
        command=launch.shell_line(),
        argv=secrets.mask_argv(launch.argv, cfg.server.secret_flags, launch.secrets),
        env=secrets.mask_env(launch.env, launch.secrets),
        fingerprint=launch.fingerprint,
        accept_len=AcceptLen(requests=None, log=None, metrics=None, absent=frozenset({"log_samples"})),
        config=secrets.mask_tree(dict(cfg.raw), red),
    )
    # one name and one id per config, from what runs and what is measured (sweep/score/configs.py)
    doc.trial.choices = {k: v for k, v in ctx.choices if k in configs.GROUPS}
    doc.trial.name = configs.name_of(doc)
    doc.trial.config_id = configs.config_id(doc)
    return doc


def _now() -> str:
    from sweep.io.atomic import now_iso

    return now_iso()


def _fail(doc: TrialResult, reason: str, message: str, log_tail: str = "") -> None:
    doc.status = "failed"
    doc.failure = Failure(reason=reason, message=message, log_tail=log_tail)


def _benchmark(cfg: TrialConfig, launcher: Any, handle: Any, doc: TrialResult, path: Path) -> None:
    """Coding eval, then the matrix, then acceptance as the server reports it for this window.

    Where the server reports acceptance (response fields, /metrics names, log
    lines) is its group's ``server.acceptance`` (:mod:`sweep.bench.acceptance`).
    After each cell the result file is rewritten and the cell hooks run
    (:mod:`sweep.trial.hooks`); one that raises StopTrial ends the matrix there:
    the trial is ``pruned`` with the cells measured so far.
    """
    from sweep.bench import acceptance, reported
    from sweep.bench.coding import run_coding_eval
    from sweep.bench.matrix import run_matrix, server_options
    from sweep.bench.serverstats import metrics_delta
    from sweep.record.result import Acceptance, Cell, Coding, CounterWindow, MaxLoad

    readers = acceptance.Readers.of(cfg.server.acceptance)
    wl, base_url, key = cfg.workload, handle.base_url, cfg.server.api_key
    identity.run_pass(cfg, doc, path, base_url)  # before the window: in no throughput or acceptance figure
    model_name = cfg.model.served_name
    coding = None
    if wl.coding != "off":
        from sweep.bench import sandbox

        sandbox.notice_once_in(doc.trial.sweep_dir)  # a missing bwrap is said once per sweep
        coding = run_coding_eval(base_url, wl, model_name, api_key=key, request_extras=cfg.server.request_extras)
        doc.coding = Coding.from_dict(coding.to_dict())
        doc.write(path)
    # the server's own acceptance (log lines, /metrics) over the matrix only, the window the
    # requests' figure covers (the coding eval's answers accept differently)
    mark = launcher.log_mark()
    before = _metrics(cfg, readers, base_url)
    cells: list[Any] = []

    def on_cell(measured: Any) -> None:
        """Each finished cell reaches result.json, with its headline metrics, before the next
        begins (Ctrl-C keeps it); then the cell hooks (the pruner) run."""
        cells.append(measured)
        acceptance.apply([measured], readers.request)
        cell = Cell.from_dict(measured.to_dict())
        doc.cells.append(cell)
        if plan:  # the search's answer so far reaches the file with the probe that established it
            doc.max_load = MaxLoad.from_dict(plan.summary())
        _finish_metrics(cfg, doc)
        doc.write(path)
        if wl.busy_box == "refuse" and cell.box_state is not None and cell.box_state.busy:
            from sweep.bench.boxstate import Busy, describe

            raise Busy(f"refused: the box got busy during cell ctx {cell.context} x conc {cell.concurrency} "
                       f"(workload.busy_box=refuse): {describe(cell.box_state.to_dict())}",
                       cell.box_state.to_dict())
        hooks.after_cell(doc, cell)

    slo = cfg.objective.slo if cfg.objective.slo.active else None
    plan = _load_plan(cfg, doc)
    probe = _counter_probe(cfg, readers, base_url)
    from sweep.bench import boxstate

    box = boxstate.Watch(busy_load=wl.busy_load, engine_pid=getattr(handle, "pid", None) or None)
    try:
        if plan is not False:
            run_matrix(base_url, wl, model_name, api_key=key, on_cell=on_cell, slo=slo, plan=plan or None,
                       counters=probe, box=box,
                       **server_options(cfg))
    except hooks.StopTrial as stop:
        doc.status = "pruned"
        doc.failure = Failure(reason="pruned", message=stop.reason)
    except boxstate.Busy as busy:  # workload.busy_box=refuse: the cells measured so far are kept, marked
        _refused(doc, busy)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the answer the probes established is kept, as a crash keeps it
        if plan:
            doc.max_load = MaxLoad.from_dict({**plan.summary(), "stopped": plan.search.stopped or "interrupted"})
        raise
    if plan:
        doc.max_load = MaxLoad.from_dict(plan.summary())
    from_requests = acceptance.apply(cells, readers.request)
    doc.cells = [Cell.from_dict(c.to_dict()) for c in cells]
    # requests sent twice because the server closed a kept-alive connection unanswered
    doc.requests_retried = sum(r.retries for c in cells for r in c.results)
    doc.accept_len.requests = score.trial_accept_len(doc.cells)
    bad: str | None = None
    from_log = _log_window(readers, launcher, mark, sum(c.requests - c.errors for c in cells))
    try:  # figures the server reports are checked like its usage (sweep/bench/reported.py)
        from_log = reported.metrics_window(from_log, "log") if from_log else from_log
    except reported.BadReport as exc:
        bad, from_log = str(exc), None
    doc.accept_len.log = from_log.get("accept_len") if from_log else None
    doc.accept_len.log_samples = from_log.get("samples") if from_log else 0
    doc.accept_len.absent = frozenset()
    doc.acceptance = Acceptance(requests=from_requests.to_dict() if from_requests else None,
                                log=from_log, synthetic=_synthetic(readers, handle))
    if before is not None:
        after = _metrics(cfg, readers, base_url) or {}
        window = readers.metrics.read(metrics_delta(before, after))
        window["per_position"] = readers.metrics.positions(before, after, window.get("drafts"))
        try:
            window = reported.metrics_window(window, "/metrics")
        except reported.BadReport as exc:
            bad, window = bad or str(exc), {}
        doc.acceptance.metrics = CounterWindow.from_dict(window)
        doc.accept_len.metrics = window.get("accept_len")
    failed = bench_errors.tally(score.within_load(cells, doc.max_load), coding)
    if not launcher.alive() or (failed.failed and _exits(launcher)):
        text = launcher.log_since(mark)
        _fail(doc, "crashed", _crash_message(text), _tail(text, cfg.launcher.log_tail_lines))
    elif message := bench_errors.verdict(failed, wl.max_error_rate):
        _fail(doc, bench_errors.REASON, message, _tail(launcher.log_since(mark), cfg.launcher.log_tail_lines))
    elif bad is not None:  # the server reported nonsense: nothing it measured is trusted
        _fail(doc, bench_errors.REASON, f"{reported.KIND}: {bad}",
              _tail(launcher.log_since(mark), cfg.launcher.log_tail_lines))


def _load_plan(cfg: TrialConfig, doc: TrialResult) -> Any:
    """The max-load search when ``workload.max_load`` is on (None: the matrix). ``False``: it is on, but
    the coding eval already failed the correctness gate -- a config whose answers changed has no max
    load, and its search would only spend the box's time (``max_load.stopped: correctness``)."""
    ml = cfg.workload.max_load
    if not ml.enabled:
        return None
    from sweep.record.result import MaxLoad

    floor = cfg.objective.constraints.coding_pass_rate_min
    rate = doc.coding.pass_rate if doc.coding is not None else None
    if floor is not None and rate is not None and float(rate) < float(floor):
        doc.max_load = MaxLoad(over=ml.over, value=None, context=int(cfg.workload.contexts[0]),  # type: ignore[arg-type]
                               stopped="correctness", probes=0, slo=cfg.objective.slo.to_dict(),
                               tolerance=ml.tolerance, max_rounds=ml.max_rounds)
        return False
    from sweep.bench.maxload import MaxLoadPlan

    return MaxLoadPlan(cfg.workload, cfg.objective.slo)


def _log_window(readers: Any, launcher: Any, mark: Any, answered: int, wait_s: float = 3.0) -> Any:
    """The acceptance the server's log reports over the window. A server writes a request's line
    after its response and the log pump lags behind it, so the last lines may not be in yet: wait
    (up to ``wait_s``) until the log has a sample per answered request, where the server declares
    a line per request (``server.acceptance.log.per_request``)."""
    deadline = time.monotonic() + wait_s
    while True:
        got = readers.log.read(launcher.log_since(mark))
        if not readers.log.per_request or int((got or {}).get("samples") or 0) >= answered \
                or time.monotonic() >= deadline:
            return got
        time.sleep(0.1)


def _exits(launcher: Any, wait_s: float = 5.0) -> bool:
    """Whether a server whose requests failed is on its way out (vLLM's API process takes a
    moment to tear down after its engine died; its requests are refused meanwhile)."""
    deadline = time.monotonic() + wait_s
    while launcher.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _crash_message(log_text: str) -> str:
    """'the server exited during the benchmark', with the server's last error line when it has one."""
    from launchers.classify import last_error

    said = last_error(log_text)
    return "the server exited during the benchmark" + (f": {said}" if said else "")


def _counter_probe(cfg: TrialConfig, readers: Any, base_url: str) -> Any:
    """Per-cell acceptance from /metrics counters, for a server whose responses carry none (vLLM)."""
    if not cfg.server.enable_metrics or not readers.metrics.counters or readers.request.paths:
        return None
    from sweep.bench.serverstats import CounterProbe

    return CounterProbe(lambda: _metrics(cfg, readers, base_url) or {}, readers.metrics)


def _synthetic(readers: Any, handle: Any) -> dict[str, Any] | None:
    """Synthetic acceptance as the server resolved it at startup (its log says so once)."""
    if readers.log.synthetic is None or not handle.log_path:
        return None
    try:
        text = Path(handle.log_path).read_text(errors="replace")
    except OSError:  # a remote log (launcher=ssh): not read here
        return None
    return readers.log.synthetic_rates(text)


def _metrics(cfg: TrialConfig, readers: Any, base_url: str) -> dict[str, float] | None:
    """The server's /metrics now (None when the server group disables them)."""
    if not cfg.server.enable_metrics:
        return None
    from sweep.bench.serverstats import fetch_metrics

    return fetch_metrics(base_url, api_key=cfg.server.api_key, prefixes=readers.metrics.prefixes,
                         split=readers.metrics.split,
                         timeout_s=min(10.0, cfg.workload.request_timeout_s))  # a frozen server: bounded


def _tail(text: str, n: int) -> str:
    return "\n".join(text.splitlines()[-int(n):])


def _attach_baseline(cfg: TrialConfig, doc: TrialResult, ctx: TrialContext, path: Path) -> None:
    from sweep.score import speedup

    tok = doc.metrics.tok_s_lowc
    if cfg.spec.algorithm == "none":
        doc.speedup_vs_baseline = 1.0 if tok else None
        identity.compare_with(doc, None, None)
        return
    found = speedup.find(doc.config, cfg.simulated, search_roots(cfg, ctx), exclude=path)
    if found:
        identity.compare_with(doc, *found)
    if found and tok:
        bpath, bdoc = found
        head = score.headline(bdoc)
        doc.baseline = Baseline(result=str(bpath), tok_s_lowc=head.tok_s,
                                headline_concurrency=head.concurrency,
                                tok_s_c1=head.tok_s if head.concurrency == 1 else None)
        # like with like: the baseline's cell at this trial's headline cell (a copy that measured only
        # concurrency 8 -- sweep.decide's -- is compared with the baseline at 8, not at 1)
        mine = score.headline(doc)
        same = next((c for c in score.ok_cells(bdoc.cells) if c.context == mine.context
                     and c.concurrency == mine.concurrency), None)
        doc.speedup_vs_baseline = speedup.speedup(tok, same.output_tok_s if same is not None else None)


def _finish_metrics(cfg: TrialConfig, doc: TrialResult) -> None:
    from sweep.score import cost

    doc.metrics = score.metrics(doc)
    total_tokens = sum(c.completion_tokens or 0 for c in doc.cells)
    measured = sum(c.duration_s or 0 for c in doc.cells)
    doc.metrics.usd_per_mtok = cost.trial_usd_per_mtok(
        cfg.hardware.cost_per_hour, total_tokens, measured,
        (doc.server.startup_s if doc.server is not None else None) or 0.0)
    for c in doc.cells:
        c.usd_per_mtok = cost.cell_usd_per_mtok(cfg.hardware.cost_per_hour, c.output_tok_s or 0)


def _remember_secrets(cfg: TrialConfig, launch: Launch, ctx: TrialContext) -> None:
    """Everything secret about this trial, masked by value from now on in this process."""
    secrets.configure(cfg.secret_names)
    secrets.remember(launch.secrets | secrets.collect_secrets(cfg.raw, list(ctx.overrides)))


def run_trial(cfg: TrialConfig, launch: Launch, hydra_cfg: Any = None, *,
              ctx: TrialContext | None = None, ports: Ports | None = None) -> dict[str, Any]:
    """Run one trial; always leaves ``result.json``; returns the sweeper's values.

    ``ports``: how to render the trial on another port when the user did not set
    ``server.port`` (:mod:`sweep.trial.port`); a start that finds its port taken then
    tries the next free one."""
    import launchers
    from launchers.base import LaunchFailure

    ctx = ctx if ctx is not None else hydra_context()
    _remember_secrets(cfg, launch, ctx)
    path = ctx.job_dir / FILENAME
    doc = _new_result(cfg, launch, ctx)
    if ctx.sweep_dir is not None:  # a rerun grid: this job may be done already
        from sweep.trial.resume import earlier

        if (reuse := earlier(path, doc, cfg.results)) is not None:
            return _reused(cfg, reuse.doc, reuse.why, ctx, path)
    doc.write(path)
    launcher = None
    interrupted: BaseException | None = None
    disk_full: DiskFull | None = None
    try:
        from sweep.trial.autobaseline import ensure_baseline, wanted

        if wanted(cfg, ctx):
            ensure_baseline(cfg, ctx, lambda c, la, cx, p: run_trial(c, la, ctx=cx, ports=p))
        launcher = launchers.get_launcher(cfg.launcher)
        t0 = time.monotonic()
        try:
            _box_gate(cfg, doc, path)  # workload.busy_box: before any server is touched
            t0 = time.monotonic()
            cfg, launch, handle = _start(cfg, launch, launcher, ctx, ports, doc)
        except _Refused:
            pass
        except LaunchFailure as failure:
            _fail(doc, failure.reason, failure.message, launch.redact(failure.log_tail))
            doc.server = ServerInfo(reused=False, startup_s=time.monotonic() - t0, info={},
                                    base_url=cfg.server.base_url, configured_port=cfg.server.configured_port,
                                    absent=frozenset({"log"}))
        else:
            doc.server = ServerInfo(reused=handle.reused, startup_s=handle.startup_s, info=handle.info,
                                    base_url=handle.base_url,
                                    log=str(handle.log_path) if handle.log_path else None,
                                    configured_port=cfg.server.configured_port)
            doc.write(path)
            try:
                _benchmark(cfg, launcher, handle, doc, path)
            except LaunchFailure as failure:  # e.g. ssh_dropped while reading the log
                _fail(doc, failure.reason, failure.message, launch.redact(failure.log_tail))
            if doc.status == "running":
                doc.status = "ok"
    except KeyboardInterrupt as exc:
        interrupted = exc
        doc.status = "interrupted"
        doc.failure = Failure(reason="interrupted", message="stopped by the user (Ctrl-C)", log_tail="")
    except DiskFull as exc:  # the file on disk keeps its last good version; the caller says so
        disk_full = exc
        _fail(doc, "disk_full", exc.one_line())
    except Exception as exc:  # a harness bug must not end the sweep
        log.exception("trial failed")
        _fail(doc, "error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=8))
    finally:
        doc.trial.finished = _now()
        _finish_metrics(cfg, doc)
        prediction.record(cfg, doc)
        if doc.ok:
            _attach_baseline(cfg, doc, ctx, path)
            doc.metrics.speedup_vs_baseline = doc.speedup_vs_baseline
        try:
            doc.write(path)
        except DiskFull as exc:
            disk_full = disk_full or exc
        if interrupted is not None:
            launchers.stop_all(force=True)  # Ctrl-C stops even a keep_server server
        elif ctx.sweep_dir is None or disk_full is not None:
            launchers.stop_all()  # respects launcher.keep_server
    if disk_full is not None:
        raise disk_full  # nothing more can be recorded: sweep.cli.app prints its one line, exit 1
    _plots(doc, ctx.job_dir)  # <job dir>/plots/: on disk, and what MLflow logs
    _record(cfg, doc, ctx, path)  # an interrupted trial becomes a KILLED run
    if interrupted is not None:
        raise interrupted
    _summary(doc)
    return trial_return(doc, cfg.objective, str(path))


class _Refused(Exception):
    """The box was busy before the trial and workload.busy_box is refuse (the result says so)."""


def _refused(doc: TrialResult, busy: Any) -> None:
    """A trial the policy refused: failed ``busy_box`` with the one line; the line on stderr too."""
    from sweep.bench.boxstate import REASON

    _fail(doc, REASON, busy.line)
    log.warning("%s", busy.line)


def _box_gate(cfg: TrialConfig, doc: TrialResult, path: Path) -> None:
    """The box's state before the trial by ``workload.busy_box`` (sweep/bench/boxstate.py): recorded
    in ``result.box_state``; a busy box waited for (wait, refuse) and refused (refuse: :class:`_Refused`)."""
    import os

    from sweep.bench import boxstate
    from sweep.record.result import BoxState

    wl = cfg.workload
    watch = boxstate.Watch(busy_load=wl.busy_load, roots=(os.getpid(),))
    try:
        state = boxstate.settle(watch, wl.busy_box, wl.busy_wait_s, say=lambda line: log.warning("%s", line),
                                window_s=boxstate.SETTLE_WINDOW_S if wl.busy_box != "mark" else 0.5)
    except boxstate.Busy as busy:
        doc.box_state = BoxState.from_dict(busy.state)
        _refused(doc, busy)
        doc.write(path)
        raise _Refused() from None
    doc.box_state = BoxState.from_dict(state)
    if state.get("busy"):
        log.warning("box busy before the trial (workload.busy_box=%s): %s; its cells are marked",
                    wl.busy_box, boxstate.describe(state))


PORT_RETRIES = 2  # a chosen port taken before the server bound it: the next free one, this often


def _start(cfg: TrialConfig, launch: Launch, launcher: Any, ctx: TrialContext, ports: Ports | None,
           doc: TrialResult) -> tuple[TrialConfig, Launch, Any]:
    """``launcher.ensure`` -- again on the next free port when a port the launcher chose was taken
    by another process between the choice and the server's bind (only when ``ports`` is given)."""
    from launchers.base import LaunchFailure

    for attempt in range(PORT_RETRIES + 1):
        _say_port(cfg)
        try:
            return cfg, launch, launcher.ensure(launch, cfg.server, ctx.job_dir)
        except LaunchFailure as failure:
            if failure.reason != "port_in_use" or ports is None or attempt == PORT_RETRIES:
                raise
            port = launcher.pick_port(cfg.server.host, cfg.server.port + 1)
            log.warning("port %s was taken before the server bound it; trying %s", cfg.server.port, port)
            cfg, launch = ports.at(port)
            doc.command = launch.shell_line()
            doc.argv = secrets.mask_argv(launch.argv, cfg.server.secret_flags, launch.secrets)
    raise AssertionError("unreachable")


def _say_port(cfg: TrialConfig) -> None:
    """One line when the server does not listen where its group says (sweep/trial/port.py)."""
    moved_from = cfg.server.configured_port
    if moved_from is None:
        return
    from sweep.report._console import console

    console().print(f"server port {cfg.server.port}: {moved_from} is in use, so the next free port was "
                    f"chosen (server.port unset; set it to fix one)", highlight=False)


def _reused(cfg: TrialConfig, doc: TrialResult, why: str, ctx: TrialContext, path: Path) -> dict[str, Any]:
    """A job of a rerun grid whose earlier result stands: said, counted, not run."""
    from sweep.report._console import console

    console().print(f"job {ctx.job_num} [bold]{doc.trial.name}[/bold]: skipped, {why} for the same "
                    f"server fingerprint and workload: {path}", highlight=False)
    if not doc.mlflow.synced:
        _record(cfg, doc, ctx, path)
    out = trial_return(doc, cfg.objective, str(path))
    out["skipped"] = why
    return out


def _record(cfg: TrialConfig, doc: TrialResult, ctx: TrialContext, path: Path) -> None:
    """MLflow, after the file is safe on disk; never fails the trial."""
    if not cfg.mlflow.enabled:
        return
    try:
        from sweep.record.tracking import Tracker

        tracker = Tracker(cfg.mlflow)
        parent = tracker.parent_for(ctx.sweep_dir) if ctx.sweep_dir else None
        from sweep.report.mlflow_artifacts import trial_plots

        # the plots _plots drew into the job dir (drawn here when it could not), handed to the record
        tracker.log_trial(doc, ctx.job_dir, parent_run_id=parent, plots=trial_plots)
    except Exception as exc:  # noqa: BLE001 - tracking is best effort by design
        log.warning("MLflow logging failed (%s); result kept at %s, run `python -m sweep.sync`",
                    secrets.mask_text(str(exc)), path)


def _plots(doc: TrialResult, job_dir: Path) -> None:
    try:
        from sweep.report.outputs import trial_plots

        trial_plots(doc, job_dir)
    except Exception as exc:  # noqa: BLE001 - a plotting bug never fails a trial
        log.warning("could not draw the trial's plots: %s", exc)


def _summary(doc: TrialResult) -> None:
    try:
        from sweep.report.trial_summary import print_trial

        print_trial(doc)
    except Exception as exc:  # noqa: BLE001 - a display bug never fails a trial
        log.warning("could not print the summary: %s", exc)
