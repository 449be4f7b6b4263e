"""Test app for the Optuna sweeper plugin: a real Hydra app with a deterministic "server".

Not the trial pipeline: it returns dicts shaped like the trial return
contract (docs/ARCHITECTURE.md, "Task function return") from a closed-form
throughput model, so the plugin's tests run in seconds. Like the b300 box it
"crashes" for budget > hardware.cuda_graph_max_budget (status failed, reason
cuda_graph), and it rejects topk > budget the way sweep.compose.config does
(raising sweep.errors.ConfigError, which the sweeper recognises by type). window=512 answers the coding eval wrongly (pass rate 0.8):
fast but infeasible, so a test can check the best is feasible. ``block_file``
and ``raise_at_window`` let tests interrupt a job or make it raise.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from sweep.errors import ConfigError


def tok_s(budget: int, topk: int, window: int) -> tuple[float, float]:
    """(tok/s at concurrency 1, peak tok/s): bigger trees accept more but verify slower."""
    accept = 1 + 3.5 * (1 - math.exp(-budget / 5.0)) * (0.55 + 0.45 * min(topk, 4) / 4) \
        * (1 - 0.08 * abs(math.log2(window / 2048)))
    step_ms = 9.0 + 0.35 * budget + 0.6 * topk + window / 2048
    c1 = 1000.0 * accept / step_ms
    peak = c1 * 16 / (1 + budget / 6.0)
    return round(c1, 3), round(peak, 3)


def evaluate(cfg: Any) -> dict[str, Any]:
    b, k, w = int(cfg.spec.budget), int(cfg.spec.topk), int(cfg.spec.window)
    if k > b:
        raise ConfigError("spec.topk", f"must be <= spec.budget={b}, got {k}")
    command = f"python -m sweep.sim --speculative-ddtree-budget {b} --topk {k} --window {w}"
    job_dir = Path(os.getcwd()) if cfg.get("job_dir") is None else Path(cfg.job_dir)
    result_path = job_dir / "result.json"
    base = {"result_path": str(result_path), "fingerprint": f"{b}-{k}-{w}",
            "mlflow_run_id": f"run-{cfg.get('optuna', {}).get('trial_number', 'x')}"}
    if b > int(cfg.hardware.cuda_graph_max_budget):
        result_path.write_text(json.dumps({"schema": 1, "status": "failed", "command": command,
                                           "failure": {"reason": "cuda_graph"}}))
        return {**base, "status": "failed", "objective": None, "values": {}, "constraints": [],
                "constraint_names": [], "feasible": False, "failure_reason": "cuda_graph"}
    c1, peak = tok_s(b, k, w)
    pass_rate = 0.8 if w == 512 else 1.0
    values = {"tok_s_c1": c1, "tok_s_peak": peak, "coding_pass_rate": pass_rate,
              "speedup_vs_baseline": round(c1 / 100.0, 3), "errors": 0}
    # "schema": a result file without it is unreadable (sweep.record.result.TrialResult.load)
    result_path.write_text(json.dumps({"schema": 1, "status": "ok", "command": command, "metrics": values,
                                       "config": OmegaConf.to_container(cfg, resolve=True)}))
    constraints = [1.0 - pass_rate, 0.0]
    return {**base, "status": "ok", "objective": values[cfg.objective.metric], "values": values,
            "constraints": constraints, "constraint_names": ["coding_pass_rate", "errors"],
            "feasible": all(c <= 0 for c in constraints), "failure_reason": None}


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> Any:
    from hydra.core.hydra_config import HydraConfig

    out = Path(HydraConfig.get().runtime.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    OmegaConf.set_struct(cfg, False)
    cfg.job_dir = str(out)
    if cfg.block_file and Path(cfg.block_file).exists():
        (out / "blocked").touch()  # tells the test the job is running
        time.sleep(60)
    if cfg.raise_at_window is not None and int(cfg.spec.window) == int(cfg.raise_at_window):
        raise RuntimeError("a bug in the job, not in the config")
    if cfg.sleep_s:
        time.sleep(float(cfg.sleep_s))
    return evaluate(cfg)


if __name__ == "__main__":
    main()
