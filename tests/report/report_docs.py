"""Typed result files of a realistic multi-group sweep directory, for the report's tests.

Built the way the trial builds them: the composed config from the shipped
YAML groups, :class:`sweep.record.result.TrialResult` and its cells, headline
metrics from :func:`sweep.score.metrics.metrics`, written with
``TrialResult.write``. The numbers are made up but shaped like the b300
figures (per-stream speed falls with concurrency and context, acceptance
grows with the budget); they test the report, not the simulator.

The directory (``mixed_sweep``) holds three groups that must never be ranked
against each other:

1. b300 x seed-like matrix (ctx 60/1024 x conc 1/4/16): the spec=none
   baseline, ddtree budgets 4/8 x topk 2/4 (two repeated 3 times, with
   intervals), budgets 16/32 failed with cuda_graph, one interrupted with two
   cells kept, one pruned with one cell;
2. b300 x smoke (conc 2 only): budgets 4/8, no baseline (speedup unknown);
3. pro6000_tp8 x the seed-like matrix: its baseline and one ddtree trial.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from sweep.record.result import AcceptLen, Cell, Coding, Failure, ServerInfo, TrialInfo, TrialResult
from sweep.score import metrics as score

CONF = Path(__file__).resolve().parents[2] / "conf"
MATRIX = {"contexts": [60, 1024], "concurrency": [1, 4, 16], "max_tokens": 256}
SPEED = {"b300": 133.0, "pro6000_tp8": 61.0}  # baseline per-stream tok/s at c1, ctx 60


def _group(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    return {k: v for k, v in doc.items() if k != "defaults"}


def config(hardware: str, budget: int | None, topk: int | None, workload: str) -> dict[str, Any]:
    spec = _group("spec/none") if budget is None else _group("spec/ddtree") | {"budget": budget, "topk": topk}
    wl = _group("workload/seed") | (_group("workload/smoke") if workload == "smoke" else {"name": "seed", **MATRIX})
    return {"hardware": _group(f"hardware/{hardware}"), "spec": spec, "model": _group("model/kimi_k26"),
            "server": {"name": "sim", "sim": {"noise": 0.02}}, "workload": wl,
            "objective": {"metric": "tok_s_lowc", "context": 60, "concurrency": 1,
                          "constraints": {"coding_pass_rate_min": 1.0, "max_errors": 0, "ttft_ms_p99_max": None}}}


def accept_len(budget: int | None, topk: int | None) -> float | None:
    if budget is None:
        return None
    return round(1.0 + (budget - 1) * (1 - math.exp(-0.9 * (topk or 4) ** 0.5 / budget ** 0.5)), 3)


def _cell(hardware: str, budget: int | None, topk: int | None, ctx: int, conc: int, repeats: int) -> Cell:
    acc = accept_len(budget, topk)
    gain = 1.0 if acc is None else acc / (1.0 + 0.09 * (budget or 0)) ** 0.8
    per_stream = SPEED[hardware] * gain * (1 - ctx / 12000) / (1 + 0.05 * conc) ** 1.4
    agg = per_stream * conc * 0.93 ** math.log2(conc)
    tokens = 2 * conc * MATRIX["max_tokens"]
    doc: dict[str, Any] = {
        "context": ctx, "concurrency": conc, "requests": 2 * conc, "errors": 0, "error_kinds": {},
        "output_tok_s": round(agg, 2), "per_stream_tok_s": round(per_stream, 2),
        "ttft_ms_p50": round(35 + ctx / 25 + 6 * conc, 1), "ttft_ms_p90": round(48 + ctx / 20 + 9 * conc, 1),
        "ttft_ms_p99": round(60 + ctx / 18 + 12 * conc, 1), "itl_ms_p50": round(1000 / per_stream * (acc or 1), 2),
        "itl_ms_p90": round(1200 / per_stream * (acc or 1), 2), "itl_ms_p99": round(1500 / per_stream * (acc or 1), 2),
        "tpot_ms_p50": round(1000 / per_stream, 2), "tpot_ms_p90": round(1100 / per_stream, 2),
        "tpot_ms_p99": round(1250 / per_stream, 2), "e2e_ms_p50": round(MATRIX["max_tokens"] * 1000 / per_stream, 1),
        "accept_len": acc, "completion_tokens": tokens, "prompt_tokens_mean": float(ctx),
        "duration_s": round(tokens / agg, 3)}
    if repeats > 1:  # what workload.repeats records: the mean, the count, 95% intervals
        doc["repeats"] = repeats
        for key, spread in (("output_tok_s", 0.035), ("per_stream_tok_s", 0.03), ("accept_len", 0.02)):
            if doc[key] is not None:
                doc[f"{key}_ci"] = [round(doc[key] * (1 - spread), 3), round(doc[key] * (1 + spread), 3)]
    return Cell.from_dict(doc)


def trial(sweep_dir: Path, job: int, hardware: str, budget: int | None, topk: int | None = 4, *,
          workload: str = "seed", status: str = "ok", reason: str | None = None, keep: int | None = None,
          repeats: int = 1, scale: float = 1.0) -> Path:
    """Write ``<sweep_dir>/<job>/result.json``; ``keep``: only that many cells (interrupted, pruned);
    ``scale``: every cell's tok/s times this (another copy of the same config, measured again)."""
    cfg = config(hardware, budget, topk, workload)
    wl = cfg["workload"]
    name = f"{hardware}-none-{workload}" if budget is None else f"{hardware}-ddtree-b{budget}-t{topk}-w2048-{workload}"
    job_dir = sweep_dir / str(job)
    cells = [] if status == "failed" else [
        _cell(hardware, budget, topk, ctx, conc, repeats) for ctx in wl["contexts"] for conc in wl["concurrency"]]
    for c in cells:
        c.output_tok_s = c.output_tok_s * scale if c.output_tok_s is not None else None
    doc = TrialResult(
        status=status, simulated=True, fingerprint=f"{hash((hardware, budget, topk)) & 0xFFFFFFFF:016x}",
        trial=TrialInfo(name=name, hardware=hardware, spec="none" if budget is None else "ddtree",
                        job_dir=str(job_dir), sweep_id=f"{sweep_dir.parent.name}/{sweep_dir.name}",
                        sweep_dir=str(sweep_dir), job_num=job, started="2026-12-01T01:43:41+00:00",
                        finished=f"2026-12-01T01:{44 + job:02d}:00+00:00"),
        server=ServerInfo(reused=False, startup_s=2.1), cells=cells[:keep] if keep is not None else cells,
        accept_len=AcceptLen(requests=accept_len(budget, topk)), config=cfg)
    if status != "failed":
        doc.coding = Coding(eval="five", passed=5, total=5, pass_rate=1.0, mean_tok_s=280.0)
    if status != "ok":
        messages = {"cuda_graph": "server exited with code 1 before it was ready; CUDA-graph capture failed",
                    "interrupted": "stopped by the user (Ctrl-C)",
                    "pruned": "stopped by the pruner after cell 1: below the median of earlier trials"}
        tail = "Capturing cuda graph bs [1, 2, 4, 8]\nRuntimeError: CUDA error: operation not permitted" \
            if reason == "cuda_graph" else ""
        doc.failure = Failure(reason=reason or status, message=messages.get(reason or status, ""), log_tail=tail)
    doc.metrics = score.metrics(doc)
    doc.write(job_dir / "result.json")
    return job_dir / "result.json"


def mixed_sweep(root: Path) -> Path:
    """The three groups above under ``root`` (two sweep dirs); returns ``root``."""
    seed = root / "multirun" / "2026-12-01" / "01-43-41"
    trial(seed, 0, "b300", None)
    job = 1
    for budget in (4, 8):
        for topk in (2, 4):
            trial(seed, job, "b300", budget, topk, repeats=3 if topk == 4 else 1)
            job += 1
    for budget in (16, 32):
        trial(seed, job, "b300", budget, status="failed", reason="cuda_graph")
        job += 1
    trial(seed, job, "b300", 4, 1, status="interrupted", keep=2)
    trial(seed, job + 1, "b300", 2, 2, status="pruned", keep=1)
    trial(seed, job + 2, "pro6000_tp8", None)
    trial(seed, job + 3, "pro6000_tp8", 8, 4)
    smoke = root / "multirun" / "2026-12-01" / "02-10-00"
    trial(smoke, 0, "b300", 4, workload="smoke")
    trial(smoke, 1, "b300", 8, workload="smoke")
    return root


def crowded_sweep(root: Path) -> Path:
    """:func:`mixed_sweep` plus what makes a report's tables and charts crowded: every optional
    column filled (accept rate, request errors, $/Mtok), long trial names, a group measured at
    one load only, a max-load study (its own column) and a deployment group with crossovers."""
    from sweep.record.result import Acceptance

    mixed_sweep(root)
    for path in sorted(root.rglob("result.json")):
        doc = TrialResult.load(path)
        if doc.status == "ok" and doc.trial.spec != "none":
            drafted = 1000 + 37 * doc.trial.job_num
            doc.acceptance = Acceptance.from_dict({"requests": {"drafted": drafted, "accepted": drafted * 3 // 5}})
        doc.metrics.usd_per_mtok = 1.2345 + doc.trial.job_num / 7
        doc.metrics.errors = doc.trial.job_num % 3
        doc.write(path)
    big = root / "multirun" / "2026-12-01" / "03-00-00"
    for job, budget in enumerate((None, 4, 8, 16)):
        path = trial(big, job, "pro6000_ep8" if "pro6000_ep8" in SPEED else "b300", budget, 8 if budget else None,
                     workload="seed")
        doc = TrialResult.load(path)
        doc.trial.name = doc.trial.name.replace("-seed", "-seed-server.disable_cuda_graph=true-max_tokens=4096")
        doc.config["objective"] = {"metric": "max_load", "context": 60, "concurrency": 1,
                                   "constraints": {"coding_pass_rate_min": 1.0, "max_errors": 0,
                                                   "ttft_ms_p99_max": None},
                                   "slo": {"tpot_ms": 20.0, "percentile": 90}}
        doc.metrics = score.metrics(doc)
        doc.metrics.max_load = float(4 * (job + 1))
        doc.write(path)
    return root
