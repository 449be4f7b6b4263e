"""Realistic result.json documents (docs/ARCHITECTURE.md) for the tracking tests.

Built the way sweep.trial builds them: the composed config from the shipped
YAML groups, cells from a small context x concurrency matrix, headline
metrics from sweep.score.metrics. The b300 CUDA-graph quirk fails budgets above 8.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from sweep.io.atomic import write_atomic
from sweep.record.result import TrialResult
from sweep.score import metrics as score

CONF = Path(__file__).resolve().parents[2] / "conf"
CONTEXTS = (60, 1024)
CONCURRENCY = (1, 2, 4)
SECRET = "sk-specsweep-TEST-5f3c9a7e1d"


def _group(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / f"{name}.yaml").read_text())


def composed_config(budget: int, *, api_key: str | None = None, experiment: str = "specsweep",
                    tracking_uri: str | None = None) -> dict[str, Any]:
    """What Hydra composes for ``hardware=b300 spec=ddtree spec.budget=<b> workload=smoke``."""
    spec = _group("spec/ddtree") | {"budget": budget}
    spec["render"]["sglang"]["args"]["--speculative-ddtree-budget"] = budget
    workload = _group("workload/seed") | {k: v for k, v in _group("workload/smoke").items() if k != "defaults"}
    workload |= {"contexts": list(CONTEXTS), "concurrency": list(CONCURRENCY)}
    server = {k: v for k, v in _group("server/sglang").items() if k != "defaults"}
    server |= {k: v for k, v in _group("server/sim").items() if k != "defaults"}
    server["api_key"] = api_key
    server["executable"] = ["/usr/bin/python3", "-m", "sweep.sim"]
    return {
        "hardware": _group("hardware/b300"), "spec": spec, "model": _group("model/kimi_k26"),
        "server": server, "launcher": _group("launcher/local"), "workload": workload,
        "dry_run": False, "baseline": {"auto_run": False},
        "results": {"search_dirs": ["outputs", "multirun"]},
        "mlflow": {"enabled": True, "tracking_uri": tracking_uri, "experiment": experiment},
        "objective": {"metric": "tok_s_c1", "context": 60, "concurrency": 1,
                      "constraints": {"coding_pass_rate_min": 1.0, "max_errors": 0, "ttft_ms_p99_max": None}},
    }


def _cells(budget: int) -> list[dict[str, Any]]:
    cells = []
    for ctx in CONTEXTS:
        for conc in CONCURRENCY:
            per_stream = 290.0 * (1 - 0.05 * conc) * (1 - ctx / 20000) * (1 + budget / 64)
            cells.append({
                "context": ctx, "concurrency": conc, "requests": 2 * conc, "errors": 0, "error_kinds": {},
                "output_tok_s": round(per_stream * conc, 2), "per_stream_tok_s": round(per_stream, 2),
                "ttft_ms_p50": 30.0 + ctx / 50 + 4 * conc, "ttft_ms_p90": 40.0, "ttft_ms_p99": 55.0,
                "itl_ms_p50": 14.0 + conc, "itl_ms_p90": 18.0, "itl_ms_p99": 25.0,
                "tpot_ms_p50": 3.4 + 0.2 * conc, "tpot_ms_p90": 4.0, "tpot_ms_p99": 5.0,
                "e2e_ms_p50": 900.0, "accept_len": 4.5, "completion_tokens": 64 * 2 * conc,
                "prompt_tokens_mean": ctx, "duration_s": 0.5 + 0.1 * conc, "usd_per_mtok": None,
            })
    return cells


def make_result(sweep_dir: Path | None, job_num: int, budget: int, *, status: str = "ok",
                reason: str | None = None, api_key: str | None = None, experiment: str = "specsweep",
                tracking_uri: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Write ``<sweep_dir>/<job_num>/result.json`` (+ server.log); return (job_dir, doc)."""
    job_dir = (sweep_dir / str(job_num)) if sweep_dir else Path.cwd()
    job_dir.mkdir(parents=True, exist_ok=True)
    name = f"b300-ddtree-b{budget}-t4-w2048"
    key_flag = f" --api-key {api_key}" if api_key else ""
    command = (f"env SGLANG_DDTREE_MAX_TOPK=4 /usr/bin/python3 -m sweep.sim --model-path "
               f"moonshotai/Kimi-K2.6 --tp-size 8 --speculative-algorithm DDTREE "
               f"--speculative-ddtree-budget {budget}{key_flag} --port 30123")
    doc: dict[str, Any] = {
        "schema": 1, "status": status, "failure": None, "simulated": True,
        "trial": {"name": name, "hardware": "b300", "spec": "ddtree", "job_dir": str(job_dir),
                  "sweep_id": sweep_dir.name if sweep_dir else None,
                  "sweep_dir": str(sweep_dir) if sweep_dir else None, "job_num": job_num,
                  "overrides": ["hardware=b300", f"spec.budget={budget}", "workload=smoke"],
                  "started": "2026-01-01T12:00:00+00:00", "finished": "2026-01-01T12:01:00+00:00"},
        "command": command, "argv": command.split()[2:], "env": {"SGLANG_DDTREE_MAX_TOPK": "4"},
        "fingerprint": f"{budget:016x}", "server": {"reused": False, "startup_s": 2.1,
                                                    "info": {"version": "0.5.9-sim"}},
        "cells": [], "coding": None, "accept_len": {"requests": None, "log": None, "metrics": None},
        "metrics": {}, "speedup_vs_baseline": None, "baseline": None,
        "config": composed_config(budget, api_key=api_key, experiment=experiment, tracking_uri=tracking_uri),
        "mlflow": {"run_id": None, "synced": False},
    }
    log = [f"[2026-01-01 12:00:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', "
           f"api_key={api_key!r}, speculative_ddtree_budget={budget})"]
    if status == "ok":
        doc["cells"] = _cells(budget)
        doc["coding"] = {"eval": "five", "passed": 5, "total": 5, "pass_rate": 1.0, "mean_tok_s": 277.5,
                         "problems": [{"name": "gcd", "passed": True, "tok_s": 300.0,
                                       "completion_tokens": 200, "error": None}]}
        doc["accept_len"] = {"requests": 4.5, "log": 4.47, "metrics": 4.5}
        doc["speedup_vs_baseline"] = 2.2
        log.append("[2026-01-01 12:00:30] Decode batch. #running-req: 4, accept len: 4.47")
    else:
        tail = ("Capturing cuda graph bs [1, 2, 4, 8]\nRuntimeError: CUDA error: operation not "
                "permitted when stream is capturing\nCUDA graph capture failed")
        doc["failure"] = {"reason": reason or "cuda_graph", "message": "CUDA-graph capture crashed at startup",
                          "log_tail": tail + (f"\napi_key={api_key}" if api_key else "")}
        log.append(tail)
    doc["metrics"] = score.metrics(TrialResult.from_dict(doc)).to_dict()
    if status == "ok":
        doc["metrics"]["speedup_vs_baseline"] = 2.2
    doc["metrics"]["usd_per_mtok"] = None
    (job_dir / "server.log").write_text("\n".join(log) + "\n")
    write_atomic(job_dir / "result.json", doc)
    return job_dir, copy.deepcopy(doc)


def make_sweep(sweep_dir: Path, **kwargs: Any) -> list[tuple[Path, dict[str, Any]]]:
    """The issue's sweep: budgets 8 (ok), 16 and 32 (failed: cuda_graph on b300)."""
    return [make_result(sweep_dir, 0, 8, **kwargs),
            make_result(sweep_dir, 1, 16, status="failed", reason="cuda_graph", **kwargs),
            make_result(sweep_dir, 2, 32, status="failed", reason="cuda_graph", **kwargs)]


def read(job_dir: Path) -> dict[str, Any]:
    return json.loads((job_dir / "result.json").read_text())
