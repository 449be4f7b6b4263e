"""Write the measured figures of shared/reference/figures.md as real-format result files.

Each file is what ``python -m sweep`` writes for a trial (docs/ARCHITECTURE.md,
result.json) with ``simulated: false``, the composed config of the setup the
figure was measured on, only the figures the source gives (everything else
null), and the figure's source in ``source``. ``python -m sweep.calibrate``
reads them like any real trial's result; rerun this script only to change
them (the committed JSON is the data).

    python benchmarks/measured/make.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sweep.bench.matrix import CELL_KEYS

FIGURES = "shared/reference/figures.md"
B300 = f"{FIGURES}, 'Measured on 8x B300, TP8, DDTree budget 8 / topk 4 / window 2048'"
PRO = f"{FIGURES}, 'Measured on 8x RTX PRO 6000 Blackwell (PCIe), TP8'"


def cell(context: int, concurrency: int, *, tok_s: float | None = None, accept: float | None = None,
         requests: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {k: None for k in CELL_KEYS}
    out.update({"context": context, "concurrency": concurrency, "requests": requests or concurrency,
                "errors": 0, "error_kinds": {}, "output_tok_s": tok_s, "accept_len": accept})
    return out


def config(*overrides: str) -> dict[str, Any]:
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose

    raw = from_omegaconf(compose(["server=sglang", *overrides])).raw
    return {k: raw[k] for k in ("hardware", "spec", "model", "server", "workload")}


def doc(name: str, source: str, overrides: list[str], cells: list[dict[str, Any]],
        coding: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = config(*overrides)
    c1 = next((c["output_tok_s"] for c in cells if c["concurrency"] == 1 and c["output_tok_s"]), None)
    accept = next((c["accept_len"] for c in cells if c["accept_len"]), None)
    return {
        "schema": 1, "status": "ok", "failure": None, "simulated": False, "source": source,
        "trial": {"name": name, "hardware": cfg["hardware"]["name"], "spec": cfg["spec"]["algorithm"],
                  "job_dir": None, "sweep_id": None, "job_num": None, "started": None, "finished": None},
        "command": None, "argv": [], "env": {}, "fingerprint": None, "server": None,
        "cells": cells, "coding": coding,
        "accept_len": {"requests": None, "log": accept, "metrics": None},
        "metrics": {"tok_s_c1": c1, "accept_len": accept,
                    "coding_pass_rate": coding["pass_rate"] if coding else None},
        "speedup_vs_baseline": None, "baseline": None, "config": cfg,
        "mlflow": {"run_id": None, "synced": False},
    }


def problem(name: str, tok_s: float | None = None, tokens: int | None = None) -> dict[str, Any]:
    return {"name": name, "passed": True, "tok_s": tok_s, "completion_tokens": tokens, "error": None}


def documents() -> dict[str, dict[str, Any]]:
    dd = ["hardware=b300", "spec=ddtree", "workload=seed", "workload.contexts=[60]"]
    return {
        "b300-ddtree-b8-t4-w2048-c1-first.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: context 60, concurrency 1, 512 max tokens: 285.4 tok/s (first run)",
            dd + ["workload.concurrency=[1]"], [cell(60, 1, tok_s=285.4)]),
        "b300-ddtree-b8-t4-w2048-c1-full.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: context 60, concurrency 1, 512 max tokens: 303 tok/s (later full run)",
            dd + ["workload.concurrency=[1]"], [cell(60, 1, tok_s=303.0)]),
        "b300-ddtree-b8-t4-w2048-c8.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: context 60, concurrency 8, 512 max tokens: 870.2 tok/s aggregate "
            "(8 streams at once; per-stream ~109 tok/s = 870.2 / 8, so one wave of 8 requests)",
            dd + ["workload.concurrency=[8]"], [cell(60, 8, tok_s=870.2, requests=8)]),
        "b300-ddtree-b8-t4-w2048-c128.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: context 60, concurrency 128, 512 max tokens: 4,723 tok/s aggregate "
            "(~37 tok/s per stream; the twin predicted ~7,900 before this figure was given)",
            dd + ["workload.concurrency=[128]"], [cell(60, 128, tok_s=4723.0, requests=256)]),
        "b300-ddtree-b8-t4-w2048-accept.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: steady-state accept length, budget 8: ~4.48 tokens per verify step "
            "(context and length not given: the ctx 60, 512-token setup of the same page)",
            dd + ["workload.concurrency=[1]"], [cell(60, 1, accept=4.48)]),
        "b300-ddtree-b8-t4-w2048-coding.json": doc(
            "b300-ddtree-b8-t4-w2048", f"{B300}: coding eval, 5 problems: 5/5 correct, mean 277.5 tok/s; per-problem "
            "216 tok/s (word_count, 1024 tokens) to 344 tok/s (merge_sorted, 289 tokens); the other three "
            "problems' speeds and lengths are not given",
            dd + ["workload.concurrency=[1]"], [],
            coding={"eval": "five", "passed": 5, "total": 5, "pass_rate": 1.0, "mean_tok_s": 277.5,
                    "problems": [problem("palindrome"), problem("fibonacci"), problem("merge_sorted", 344.0, 289),
                                 problem("word_count", 216.0, 1024), problem("gcd")]}),
        "b300-ddtree-b16-t4-w2048-eager-accept.json": doc(
            "b300-ddtree-b16-t4-w2048", f"{B300}: accept length, budget 16: ~5.3 (CUDA-graph capture crashed on sm_103 "
            "at this budget, so the server ran with --disable-cuda-graph)",
            dd + ["spec.budget=16", "server.disable_cuda_graph=true", "workload.concurrency=[1]"],
            [cell(60, 1, accept=5.3)]),
        "b300-ddtree-b32-t4-w2048-eager-accept.json": doc(
            "b300-ddtree-b32-t4-w2048", f"{B300}: accept length, budget 32: ~6.4 (CUDA-graph capture crashed on sm_103 "
            "at this budget, so the server ran with --disable-cuda-graph)",
            dd + ["spec.budget=32", "server.disable_cuda_graph=true", "workload.concurrency=[1]"],
            [cell(60, 1, accept=6.4)]),
        "b300-none-c1.json": doc(
            "b300-none", f"{B300}: autoregressive baseline, same box, concurrency 1: 133 tok/s (context 60 and "
            "512 tokens assumed: the same setup as the DDTree figure it is compared with)",
            ["hardware=b300", "spec=none", "workload=seed", "workload.contexts=[60]", "workload.concurrency=[1]"],
            [cell(60, 1, tok_s=133.0)]),
        "pro6000_tp8-ddtree-b8-t4-w2048-c1.json": doc(
            "pro6000_tp8-ddtree-b8-t4-w2048", f"{PRO}: concurrency 1: 26 tok/s (reported during the DDTree work; the "
            "source gives no more detail -- assumed b8/t4/w2048, short context 60, 512 tokens, as the page says)",
            ["hardware=pro6000_tp8", "spec=ddtree", "workload=seed", "workload.contexts=[60]",
             "workload.concurrency=[1]"], [cell(60, 1, tok_s=26.0)]),
    }


def main() -> None:
    for name, document in documents().items():
        (HERE / name).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
