"""The shipped vLLM calibration transfers (issue 41): fitted on the quiet re-recorded landscape, it
predicts points the landscape does not hold -- loads 3 and 6, n-gram budget 3 -- measured afterwards on
the quiet box (benchmarks/verified/vllm-cpu-transfer/, real vLLM result files), within 10%, through
``python benchmarks/landscape_transfer.py`` and so through ``python -m sweep.sim.predict``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "landscape_transfer.py"
MEASURED = ROOT / "benchmarks" / "verified" / "vllm-cpu-transfer"
LANDSCAPE = ROOT / "benchmarks" / "measured" / "landscapes" / "vllm-cpu-smollm2.json"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_the_points_are_outside_the_landscape_and_were_measured_quiet() -> None:
    land = json.loads(LANDSCAPE.read_text())
    loads = {c["concurrency"] for r in land["runs"] for c in r["cells"]}
    budgets = {json.loads(a)["num_speculative_tokens"] for r in land["runs"] for a in r["argv"] if a.startswith("{")}
    assert loads == {1, 2, 4, 8} and budgets == {1, 2, 4, 8}
    docs = [json.loads(p.read_text()) for p in sorted(MEASURED.glob("round*/*/result.json"))]
    assert len(docs) == 4 and all(d["status"] == "ok" and d["simulated"] is False for d in docs)
    cells = [c for d in docs for c in d["cells"]]
    assert sorted({c["concurrency"] for c in cells}) == [3, 6]
    assert all(c["box_state"]["busy"] is False and c["box_state"]["others_cpu"] < 0.1 for c in cells)
    spec = [json.loads(a) for d in docs for a in d["argv"] if a.startswith("{")]
    assert [s["num_speculative_tokens"] for s in spec] == [3, 3]  # the budget the landscape never ran


def test_the_shipped_calibration_predicts_them_within_10_percent() -> None:
    proc = run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (none|b3) \| [36] \|", line)]
    assert len(rows) == 4
    errors = [float(line.split("|")[5].strip().rstrip("%")) for line in rows]
    assert all(abs(e) < 10.0 for e in errors), errors
    assert "calibrated: cpu-vllm" in proc.stdout
    inside = re.search(r"(\d+) of 8 rounds inside their 80% band", proc.stdout)
    assert inside is not None and int(inside.group(1)) >= 6


def test_priors_do_not_transfer_and_bad_input_is_one_line() -> None:
    priors = run("--calibration", "none")
    assert priors.returncode == 1 and "within 10%: no" in priors.stdout  # the check can fail
    bad = run("--rounds", "0")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --rounds: must be in [1, 20]"
    missing = run("--measure")
    assert missing.returncode == 2 and missing.stderr.strip() == "error: --work: --measure needs a directory to write to"
