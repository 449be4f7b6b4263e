"""The terminal summary of a trial (rich), printed when the trial ends."""

from __future__ import annotations

from typing import Any, Mapping


def _console() -> "Console":
    """stderr console; 120 columns when not a terminal (logs, CI) so tables stay readable."""
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.is_terminal else Console(stderr=True, width=120)


def _fmt(x: Any, nd: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)


def _speedup(doc: Mapping[str, Any]) -> str:
    x = doc.get("speedup_vs_baseline")
    if x is None:
        return "- (no spec=none baseline yet; baseline.auto_run=true runs one)"
    return f"{x:.2f}x"


def print_trial(doc: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = _console()
    trial = doc.get("trial") or {}
    status = doc.get("status")
    colour = {"ok": "green", "failed": "red", "interrupted": "yellow"}.get(status, "white")
    tag = " [dim](simulated)[/dim]" if doc.get("simulated") else ""
    console.print(f"[bold]{trial.get('name')}[/bold]{tag}: [{colour}]{status}[/{colour}]")
    failure = doc.get("failure")
    if failure:
        console.print(f"  reason: [red]{failure.get('reason')}[/red] - {failure.get('message')}")
        tail = (failure.get("log_tail") or "").strip().splitlines()[-8:]
        for line in tail:
            console.print("  " + line, style="dim", markup=False)
    cells = doc.get("cells") or []
    if cells:
        table = Table(title="throughput matrix", show_lines=False)
        table.caption = "latencies: p50 in ms; accept: tokens per verify step"
        for col in ("ctx", "conc", "req", "err", "tok/s", "tok/s/stream", "TTFT",
                    "ITL", "TPOT", "accept"):
            table.add_column(col, justify="right")
        for c in cells:
            table.add_row(str(c["context"]), str(c["concurrency"]), str(c.get("requests")),
                          str(c.get("errors")), _fmt(c.get("output_tok_s")),
                          _fmt(c.get("per_stream_tok_s")), _fmt(c.get("ttft_ms_p50")),
                          _fmt(c.get("itl_ms_p50")), _fmt(c.get("tpot_ms_p50"), 2),
                          _fmt(c.get("accept_len"), 2))
        console.print(table)
    coding = doc.get("coding")
    if coding:
        names = ", ".join(f"{p['name']}{'' if p.get('passed') else ' (FAIL)'}" for p in coding.get("problems", []))
        console.print(f"coding: {coding.get('passed')}/{coding.get('total')} passed, "
                      f"mean {_fmt(coding.get('mean_tok_s'))} tok/s  ({names})", markup=False)
    m = doc.get("metrics") or {}
    acc = doc.get("accept_len") or {}
    console.print(
        f"tok/s c1: {_fmt(m.get('tok_s_c1'))}  peak: {_fmt(m.get('tok_s_peak'))}  "
        f"accept len: {_fmt(acc.get('requests'), 2)} (log {_fmt(acc.get('log'), 2)})  "
        f"speedup vs AR: {_speedup(doc)}  "
        f"startup: {_fmt(m.get('startup_s'))} s"
        + ("  [server reused]" if (doc.get("server") or {}).get("reused") else ""))
    console.print(f"result: {trial.get('job_dir')}/result.json")
