"""The terminal summary of a trial (rich), printed when the trial ends."""

from __future__ import annotations

from pathlib import Path

from sweep.record.result import TrialResult
from sweep.report._console import console as _console
from sweep.report._console import fmt as _fmt
from sweep.report.outputs import shown
from sweep.score.acceptance import speculation
from sweep.score.metrics import headline
from sweep.score.names import LABELS


def _speedup(doc: TrialResult) -> str:
    x = doc.speedup_vs_baseline
    if x is None and (headline(doc).tok_s is None or not doc.ok):
        return "-"  # nothing (complete) measured to compare: no baseline hint
    if x is None:
        return "- (no spec=none baseline yet; baseline.auto_run=true runs one)"
    return f"{x:.2f}x"


def _pair(p50: float | None, p99: float | None, nd: int = 1) -> str:
    return f"{_fmt(p50, nd)} / {_fmt(p99, nd)}"


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _max_load_line(doc: TrialResult) -> str:
    """``max load under TPOT <= 12 ms at p90: concurrency 5 (6 missed; 6 probes), goodput 408 tok/s``."""
    ml = doc.max_load
    assert ml is not None
    from sweep.stats.slo import Slo

    slo = Slo.from_mapping(ml.slo).label()
    unit = "req/s" if ml.over == "rate" else "in flight"
    if ml.value is None:
        why = {"correctness": "the coding eval failed the correctness gate: not searched",
               "failed": "the server stopped answering"}.get(str(ml.stopped), "even the first probe missed it")
        return f"max load under {slo}: none ({why})"
    missed = ml.bracket[1] if ml.bracket and len(ml.bracket) > 1 else None
    ci = f", repeats agree up to {ml.value_ci[0]:g}, some reach {ml.value_ci[1]:g}" if ml.value_ci else ""
    return (f"max load under {slo}: {ml.value:g} {unit} at ctx {ml.context} "
            f"({f'{missed:g} missed' if missed is not None else 'the limit was reached'}; stopped: "
            f"{ml.stopped}; {ml.probes} probes{ci}), goodput {_fmt(ml.goodput_tok_s)} tok/s")


def print_trial(doc: TrialResult) -> None:
    from rich.table import Table

    console = _console()
    trial = doc.trial
    status = doc.status
    colour = {"ok": "green", "failed": "red", "interrupted": "yellow"}.get(status, "white")
    tag = " [dim](simulated)[/dim]" if doc.simulated else ""
    from rich.markup import escape

    console.print(f"[bold]{escape(trial.name)}[/bold]{tag}: [{colour}]{status}[/{colour}]{escape(_where(doc))}")
    failure = doc.failure
    if failure:
        console.print(f"  reason: [red]{failure.reason}[/red] - {failure.message}")
        tail = (failure.log_tail or "").strip().splitlines()[-8:]
        for line in tail:
            console.print("  " + line, style="dim", markup=False)
    if doc.cells:
        judged = any(c.slo_attainment is not None for c in doc.cells)
        table = Table(title="max-load search probes" if doc.max_load is not None else "throughput matrix",
                      show_lines=False)
        table.caption = CAPTION + ("; SLO: share of requests meeting objective.slo" if judged else "")
        for col in ("ctx", "conc", "req", "err", LABELS["output_tok_s"], LABELS["per_stream_tok_s"], "TTFT",
                    "ITL", "TPOT", LABELS["accept_len"], *(("SLO", LABELS["goodput_tok_s"]) if judged else ())):
            table.add_column(col, justify="right")
        for c in doc.cells:
            load = f"{c.request_rate:g}/s" if c.request_rate else str(c.concurrency)
            table.add_row(str(c.context), load, str(c.requests),
                          str(c.errors), _fmt(c.output_tok_s),
                          _fmt(c.per_stream_tok_s), _pair(c.ttft_ms_p50, c.ttft_ms_p99, 0),
                          _pair(c.itl_ms_p50, c.itl_ms_p99), _pair(c.tpot_ms_p50, c.tpot_ms_p99),
                          _fmt(c.accept_len, 2),
                          *((_percent(c.slo_attainment), _fmt(c.goodput_tok_s)) if judged else ()))
        console.print(table)
    if doc.max_load is not None:
        console.print(_max_load_line(doc), markup=False)
    coding = doc.coding
    if coding:
        names = ", ".join(f"{p['name']}{'' if p.get('passed') else ' (FAIL)'}" for p in coding.problems)
        console.print(f"coding: {coding.passed}/{coding.total} passed, "
                      f"mean {_fmt(coding.mean_tok_s)} tok/s  ({names})", markup=False)
    m = doc.metrics
    head = headline(doc)
    console.print(
        f"{head.label}: {_fmt(head.tok_s)}  {LABELS['tok_s_peak']}: {_fmt(m.tok_s_peak)}  "
        f"{LABELS['speedup_vs_baseline']}: {_speedup(doc)}  "
        f"startup: {_fmt(m.startup_s)} s", markup=False)
    for line in speculation_lines(doc):
        console.print(line, markup=False)
    console.print(f"result: {shown(Path(str(trial.job_dir)) / 'result.json')}", markup=False)


# What the matrix's columns mean; the two tok/s columns differ on purpose (even at one stream).
CAPTION = ("latencies ms, p50 / p99 · tok/s: all streams' tokens over the cell's wall time (TTFT included) · "
           "tok/s per user: one stream's speed after its first token (so above tok/s at conc 1) · "
           "accept len: tokens per verify step")


def speculation_lines(doc: TrialResult) -> list[str]:
    """Accept length and rate, per draft position where known, and the one line when the draft
    was never accepted (sweep.score.acceptance)."""
    spec = speculation(doc)
    if spec.accept_len is None and spec.rate is None:
        return []
    log = f" (server log {_fmt(doc.accept_len.log, 2)})" if doc.accept_len.log is not None else ""
    lines = [f"speculation: accept len {_fmt(spec.accept_len, 2)} tokens per verify step{log}, "
             f"accept rate {spec.rate_text()}"]
    if (positions := spec.positions_text()) is not None:
        lines.append(f"  accepted per draft position (share of drafting steps): {positions}")
    if (verdict := spec.verdict()) is not None:
        lines.append(verdict)
    if (same := _identity_line(doc)) is not None:
        lines.append(same)
    return lines


def _identity_line(doc: TrialResult) -> str | None:
    """The greedy-identity pass against the baseline's answers (speculation is lossless)."""
    ident = doc.identity
    if ident is None or not ident.answers:
        return None
    if ident.greedy_identical is None:
        return f"greedy identity: - ({len(ident.answers)} answers, no baseline answers to compare)"
    return f"greedy identity: {ident.identical}/{ident.compared} answers as the baseline's"


def _where(doc: TrialResult) -> str:
    """`` · server http://127.0.0.1:30124 (30123 in use)``: where the trial's server listened."""
    server = doc.server
    if server is None or not server.base_url:
        return ""
    moved = f" ({server.configured_port} in use: next free port)" if server.configured_port else ""
    reused = " [reused]" if server.reused else ""
    return f" · server {server.base_url}{moved}{reused}"
