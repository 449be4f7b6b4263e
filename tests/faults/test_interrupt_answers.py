"""An interrupt keeps every partial answer a crash keeps (issue 32).

* the max-load search: SIGTERM during the bisection keeps ``max_load`` with what the probes
  established (``value``, ``bracket``, ``probes``) and ``stopped: interrupted`` -- it was
  ``max_load: null`` while a crash kept it; and the answer so far is in result.json after every
  probe (a SIGKILL keeps it too);
* a cell measured ``workload.repeats`` times: the repeats that finished before the interrupt
  are the cell (``repeats`` says how many), as a server that died mid-cell would have left them;
* the sweeper's best on Ctrl-C: tests/sweeper/test_interrupt.py (best.yaml and the report are
  written before ``interrupted``).

The max-load run is the real ``python -m sweep`` on the simulator; the repeats run the real
matrix over real HTTP (tests/bench/misbehaving.py).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import free_port, subprocess_env

from sweep.bench.matrix import arun_matrix
from sweep.compose.config import Workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.misbehaving import MisbehavingServer  # noqa: E402

SEARCH = ["spec=none", "workload=max_load", "workload.max_tokens=48", "workload.coding=off",
          "server.sim.load_seconds=0.2", "server.sim.noise=0", "mlflow.enabled=false", "objective.slo.tpot_ms=12",
          "workload.max_load.max_rounds=8", "workload.max_load.tolerance=0.01"]


def _probes(path: Path) -> list[dict]:
    try:
        return list(json.loads(path.read_text()).get("cells") or [])
    except (OSError, ValueError):
        return []


@pytest.mark.slow
def test_sigterm_during_the_bisection_keeps_the_answer_so_far(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "sweep", *SEARCH, f"server.port={free_port()}",
                             f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = run_dir / "result.json"
    deadline = time.monotonic() + 300
    try:  # wait for the bisection: a probe that missed the SLO after one that met it
        while time.monotonic() < deadline and proc.poll() is None:
            cells = _probes(path)
            met = [c for c in cells if (c.get("slo_attainment") or 0) >= 0.9]
            missed = [c for c in cells if (c.get("slo_attainment") or 0) < 0.9]
            if met and missed:
                on_disk = json.loads(path.read_text())["max_load"]
                assert on_disk is not None and on_disk["value"] is not None  # after every probe, not only at the end
                break
            time.sleep(0.05)
        else:
            pytest.fail("the search never reached its bisection (or ended first): " + (proc.stderr.read() or ""))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    doc = json.loads(path.read_text())
    ml = doc["max_load"]
    assert doc["status"] == "interrupted" and ml is not None, doc.get("max_load")
    assert ml["stopped"] == "interrupted" and ml["probes"] == len(doc["cells"]) >= 2
    met = max(c["concurrency"] for c in doc["cells"] if c["slo_attainment"] >= 0.9)
    assert ml["value"] == met and ml["bracket"][0] == met
    assert doc["metrics"]["max_load"] == met


def test_an_interrupt_between_repeats_keeps_the_finished_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    import sweep.bench.matrix as matrix

    wl = Workload(name="t", contexts=(32,), concurrency=(1,), max_tokens=16, requests_per_cell=2, min_requests=2,
                  warmup_requests=0, request_rate=None, temperature=0.0, ignore_eos=True, flush_cache=False,
                  request_timeout_s=5.0, coding="off", coding_max_tokens=64, humaneval_limit=1,
                  sandbox_timeout_s=5.0, sandbox_memory_mb=256, repeats=3)
    kept: list = []
    finished: list = []
    real = matrix.run_cell
    with MisbehavingServer() as double:
        async def go() -> None:
            async def counting(*a, **k):  # type: ignore[no-untyped-def]
                out = await real(*a, **k)
                finished.append(out)
                if len(finished) == 1:
                    task.cancel()  # the interrupt lands while the second repeat is sent
                return out

            monkeypatch.setattr(matrix, "run_cell", counting)
            task = asyncio.create_task(arun_matrix(double.url, wl, "slow_ok", progress=False, endpoint="chat",
                                                   on_cell=kept.append))
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(go())
    [cell] = kept
    assert len(finished) == 1
    assert cell.repeats == 1 and cell.requests == 2 and cell.errors == 0 and cell.output_tok_s > 0
