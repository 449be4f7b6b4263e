"""The terminal summary of a trial (rich), printed when the trial ends."""

from __future__ import annotations

from sweep.record.result import TrialResult
from sweep.report._console import console as _console
from sweep.report._console import fmt as _fmt
from sweep.score.metrics import headline


def _speedup(doc: TrialResult) -> str:
    x = doc.speedup_vs_baseline
    if x is None and headline(doc).tok_s is None:
        return "-"  # nothing measured to compare (a failed trial): no baseline hint
    if x is None:
        return "- (no spec=none baseline yet; baseline.auto_run=true runs one)"
    return f"{x:.2f}x"


def _pair(p50: float | None, p99: float | None, nd: int = 1) -> str:
    return f"{_fmt(p50, nd)} / {_fmt(p99, nd)}"


def print_trial(doc: TrialResult) -> None:
    from rich.table import Table

    console = _console()
    trial = doc.trial
    status = doc.status
    colour = {"ok": "green", "failed": "red", "interrupted": "yellow"}.get(status, "white")
    tag = " [dim](simulated)[/dim]" if doc.simulated else ""
    console.print(f"[bold]{trial.name}[/bold]{tag}: [{colour}]{status}[/{colour}]")
    failure = doc.failure
    if failure:
        console.print(f"  reason: [red]{failure.reason}[/red] - {failure.message}")
        tail = (failure.log_tail or "").strip().splitlines()[-8:]
        for line in tail:
            console.print("  " + line, style="dim", markup=False)
    if doc.cells:
        table = Table(title="throughput matrix", show_lines=False)
        table.caption = "latencies in ms, p50 / p99; accept: tokens per verify step"
        for col in ("ctx", "conc", "req", "err", "tok/s", "tok/s/stream", "TTFT",
                    "ITL", "TPOT", "accept"):
            table.add_column(col, justify="right")
        for c in doc.cells:
            table.add_row(str(c.context), str(c.concurrency), str(c.requests),
                          str(c.errors), _fmt(c.output_tok_s),
                          _fmt(c.per_stream_tok_s), _pair(c.ttft_ms_p50, c.ttft_ms_p99, 0),
                          _pair(c.itl_ms_p50, c.itl_ms_p99), _pair(c.tpot_ms_p50, c.tpot_ms_p99),
                          _fmt(c.accept_len, 2))
        console.print(table)
    coding = doc.coding
    if coding:
        names = ", ".join(f"{p['name']}{'' if p.get('passed') else ' (FAIL)'}" for p in coding.problems)
        console.print(f"coding: {coding.passed}/{coding.total} passed, "
                      f"mean {_fmt(coding.mean_tok_s)} tok/s  ({names})", markup=False)
    m = doc.metrics
    head = headline(doc)
    console.print(
        f"{head.label}: {_fmt(head.tok_s)}  peak: {_fmt(m.tok_s_peak)}  "
        f"accept len: {_accept(doc)}  "
        f"speedup vs AR: {_speedup(doc)}  "
        f"startup: {_fmt(m.startup_s)} s"
        + ("  [server reused]" if doc.server is not None and doc.server.reused else ""))
    if (spec_line := _spec_line(doc)) is not None:
        console.print(spec_line, markup=False)
    console.print(f"result: {trial.job_dir}/result.json")


def _accept(doc: TrialResult) -> str:
    """Accept length where the server reports it: the requests' counters (log), else /metrics."""
    a = doc.accept_len
    if a.requests is not None or a.metrics is None:
        return f"{_fmt(a.requests, 2)} (log {_fmt(a.log, 2)})"
    return f"{_fmt(a.metrics, 2)} (/metrics)"


def _spec_line(doc: TrialResult) -> str | None:
    """Accept rate, acceptance per draft position, greedy identity: when there is any."""
    parts = []
    if doc.metrics.accept_rate is not None:
        parts.append(f"accept rate: {doc.metrics.accept_rate:.2f}")
    window = doc.acceptance.metrics if doc.acceptance is not None else None
    if window is not None and window.per_position:
        parts.append("accepted per position: " + " ".join(f"{p:.2f}" for p in window.per_position))
    ident = doc.identity
    if ident is not None and ident.answers:
        if ident.greedy_identical is None:
            parts.append(f"greedy identity: - ({len(ident.answers)} answers, no baseline answers to compare)")
        else:
            parts.append(f"greedy identity: {ident.identical}/{ident.compared} answers as the baseline's")
    return "  ".join(parts) if parts else None
