"""Does the harness measure what llama.cpp itself measures, request by request?

Why: everything else in this project was checked against a server the project
wrote (the simulator), so a wrong assumption shared by both could never show.
llama.cpp's server reports, on the last chunk of each stream, its own count
of generated tokens (``timings.predicted_n``) and its own decode time and
speed (``timings.predicted_ms``, ``predicted_per_second``: from the first
generated token to the last). This starts the real llama-server through the
same compose -> render -> launcher path as a trial, runs the harness
(``sweep.bench.matrix.run_matrix``) at concurrency 1, and prints per request:
tokens from ``usage`` vs llama.cpp's count (must be equal) and the harness's
decode speed vs llama.cpp's (ratio; the issue asks for 5%). Same definition on
both sides: llama.cpp's ``predicted_per_second`` is (n - 1) / (last token - first
token), "the first token is free" (server-common.h), i.e. 1 / TPOT as the
harness defines TPOT ((e2e - TTFT) / (n - 1)); the harness's ``per_stream_tok_s``
(n / (e2e - TTFT)) is larger by n / (n - 1) by definition. Every number
printed is measured in this run.

    python benchmarks/llamacpp_crosscheck.py [--requests 6] [--max-tokens 96] [OVERRIDE ...]

Needs `python -m sweep.engines llamacpp` first; tests/engines/test_llamacpp_crosscheck.py
runs the same function and asserts on it.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    request: int
    usage_tokens: int | None
    server_tokens: int | None
    harness_tok_s: float | None
    server_tok_s: float | None
    harness_decode_ms: float | None
    server_decode_ms: float | None

    @property
    def ratio(self) -> float | None:
        if not self.harness_tok_s or not self.server_tok_s:
            return None
        return self.harness_tok_s / self.server_tok_s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def crosscheck(overrides: Sequence[str], *, requests: int, max_tokens: int,
               workdir: Path) -> tuple[list[Row], dict[str, Any]]:
    """Run ``requests`` requests on a fresh llama-server; per-request rows and totals."""
    import launchers
    from sweep.bench import acceptance
    from sweep.bench.matrix import run_matrix, server_options
    from sweep.compose.config import from_omegaconf, replace
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    cfg = from_omegaconf(compose(["server=llamacpp", "workload=llamacpp_ci", f"server.port={_free_port()}",
                                  *overrides]))
    wl = replace(cfg.workload, concurrency=(1,), requests_per_cell=requests, max_tokens=max_tokens,
                 warmup_requests=1, coding="off")
    launcher = launchers.get_launcher(cfg.launcher)
    try:
        handle = launcher.ensure(render(cfg), cfg.server, workdir)
        cells = run_matrix(handle.base_url, wl, cfg.model.served_name, progress=False, **server_options(cfg))
    finally:
        launchers.stop_all(force=True)
    counted = acceptance.apply(cells, acceptance.RequestReader(cfg.server.acceptance.get("request")))
    rows = []
    for i, r in enumerate(cells[0].results):
        t = (r.extras or {}).get("timings") or {}
        decode = (r.e2e_s - r.ttft_s) if r.ok and r.e2e_s is not None and r.ttft_s is not None else None
        rows.append(Row(i, r.completion_tokens, t.get("predicted_n"), 1.0 / r.tpot_s if r.tpot_s else None,
                        t.get("predicted_per_second"), None if decode is None else decode * 1e3,
                        t.get("predicted_ms")))
    ok = [x for x in rows if x.harness_decode_ms and x.server_decode_ms and x.usage_tokens]
    tokens = sum(x.usage_tokens - 1 for x in ok)  # type: ignore[operator]  # decode steps after the first
    totals = {
        "errors": cells[0].errors,
        "tokens_equal": all(x.usage_tokens == x.server_tokens for x in rows),
        "harness_tok_s": tokens / (sum(x.harness_decode_ms for x in ok) / 1e3) if ok else None,  # type: ignore[misc]
        "server_tok_s": tokens / (sum(x.server_decode_ms for x in ok) / 1e3) if ok else None,  # type: ignore[misc]
        "accept_len": counted.accept_len if counted else None,
        "cell_output_tok_s": cells[0].output_tok_s,
    }
    if totals["harness_tok_s"] and totals["server_tok_s"]:
        totals["ratio"] = totals["harness_tok_s"] / totals["server_tok_s"]
    return rows, totals


def table(rows: Sequence[Row], totals: dict[str, Any]) -> str:
    lines = [f"{'req':>3} {'usage tok':>9} {'llama tok':>9} {'harness 1/TPOT':>13} "
             f"{'llama tok/s':>11} {'ratio':>6} {'harness ms':>10} {'llama ms':>9}"]
    for x in rows:
        lines.append(f"{x.request:>3} {x.usage_tokens!s:>9} {x.server_tokens!s:>9} "
                     f"{(x.harness_tok_s or 0):>13.2f} {(x.server_tok_s or 0):>11.2f} "
                     f"{(x.ratio or 0):>6.3f} {(x.harness_decode_ms or 0):>10.1f} {(x.server_decode_ms or 0):>9.1f}")
    lines.append(f"all: tokens equal={totals['tokens_equal']}, harness {totals['harness_tok_s'] or 0:.2f} tok/s, "
                 f"llama.cpp {totals['server_tok_s'] or 0:.2f} tok/s, ratio {totals.get('ratio', 0):.4f}, "
                 f"accept_len {totals['accept_len']}, errors {totals['errors']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The benchmark inside the commands' boundary: bad input is one line, exit 2."""
    from sweep import errors

    return errors.command("benchmarks/llamacpp_crosscheck.py")(_main)(argv)


def _main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("overrides", nargs="*", default=["spec=llamacpp_draft", "spec.budget=4"])
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/llamacpp_crosscheck.py", ap, argv)  # every argument by its rule
    with tempfile.TemporaryDirectory(prefix="llamacpp-crosscheck-") as tmp:
        rows, totals = crosscheck(args.overrides, requests=args.requests, max_tokens=args.max_tokens,
                                  workdir=Path(tmp))
    print(table(rows, totals))
    return 0 if totals["tokens_equal"] and abs(totals.get("ratio", 0) - 1) <= 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
