"""The twin on GPU boxes from their parts: a user's own model and box as YAML, no code change.

Every prediction here is ``python -m sweep.sim.predict`` run as a user runs it (a subprocess, real
config files in a real directory); what it is checked against is physics the files state (a box
with twice the memory bandwidth decodes a memory-bound model faster), the acceptance a row gives,
and the one-line refusal of what the twin does not model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

MODEL = """\
name: mymodel
path: me/mymodel
served_name: mymodel
context_length: 32768
trust_remote_code: false
draft_paths: {eagle3: null}
arch:
  layers: 40
  hidden_size: 5120
  intermediate_size: 13824
  attention: gqa
  heads: 40
  kv_heads: 8
  head_dim: 128
  vocab_size: 152064
  dense_weight_bits: 16
  compute_bits: 16
"""

BOX = """\
name: mybox
gpu: My GPU
num_gpus: 2
arch: sm_90
memory_gb: 96
interconnect: nvlink
tp: 2
ep: 1
dp: 1
cost_per_hour: null
spread: null
perf: {{mem_bw_tbs: {bw}, bf16_tflops: 1000, fp8_tflops: 2000, link_bw_gbs: 400, link_latency_us: 3.0, nvlink: true}}
quirks: {{cuda_graph_max_budget: null}}
"""


def predict(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep.sim.predict", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def user_dir(tmp: Path, bw: float) -> Path:
    (tmp / "model").mkdir(parents=True)
    (tmp / "hardware").mkdir()
    (tmp / "model" / "mymodel.yaml").write_text(MODEL, encoding="utf-8")
    (tmp / "hardware" / "mybox.yaml").write_text(BOX.format(bw=bw), encoding="utf-8")
    return tmp


def cell(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["cells"]) == 1
    return {**doc["cells"][0], "acceptance": doc["acceptance"], "calibration": doc["calibration"]}


def test_a_users_model_and_box_are_predicted_from_their_yaml(tmp_path: Path) -> None:
    wl = ["workload.contexts=[100]", "workload.concurrency=[1]", "workload.coding=off", "--json"]
    slow = user_dir(tmp_path / "slow", 2.0)
    fast = user_dir(tmp_path / "fast", 4.0)
    a = cell(predict("--config-dir", str(slow), "model=mymodel", "hardware=mybox", "spec=none", *wl))
    b = cell(predict("--config-dir", str(fast), "model=mymodel", "hardware=mybox", "spec=none", *wl))
    # 25 GB of BF16 weights over 2 GPUs: memory-bound at C=1, so twice the bandwidth is clearly faster
    assert 1.3 < b["output_tok_s"] / a["output_tok_s"] < 2.0
    spec = cell(predict("--config-dir", str(fast), "model=mymodel", "hardware=mybox", "spec=eagle3",
                        "spec.topk=1", "spec.num_steps=3", "spec.budget=4", "spec.accept_length=2.5", *wl))
    assert abs(spec["accept_len"] - 2.5) < 0.05 and spec["acceptance"].startswith("given: 2.5")
    assert spec["output_tok_s"] > b["output_tok_s"]
    # a GPU box nobody calibrated runs on its engine's constants, fitted on the public figures
    assert "gpu-sglang" in a["calibration"]


def test_the_engine_picks_its_own_constants() -> None:
    wl = ["model=llama31_8b", "hardware=h100", "spec=none", "workload.contexts=[100]", "workload.concurrency=[1]",
          "workload.coding=off", "--json"]
    vllm = cell(predict(*wl, "server.engine=vllm"))
    trt = cell(predict(*wl, "server.engine=trtllm"))
    assert "gpu-vllm" in vllm["calibration"] and "gpu-trtllm" in trt["calibration"]
    assert vllm["output_tok_s"] != trt["output_tok_s"]


def test_a_setup_the_twin_cannot_model_is_refused_in_one_line() -> None:
    wl = ["workload.contexts=[1000]", "workload.concurrency=[1]", "workload.coding=off"]
    adaptive = predict("hardware=b300", "model=deepseek_v32", "spec=dspark", "spec.adaptive=true",
                       "server.engine=vllm", *wl)
    split = predict("hardware=b300", "model=deepseek_v32", "spec=mtp", "hardware.disaggregated=true",
                    "server.engine=vllm", *wl)
    for proc, key in ((adaptive, "spec.adaptive"), (split, "hardware.disaggregated")):
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1
        assert proc.stderr.startswith(f"error: {key}: ") and "not modelled" in proc.stderr


def test_the_config_pages_example_runs_as_written(tmp_path: Path) -> None:
    """docs/config.md's ``--config-dir ~/myconf`` example (skipped by tests/test_readme.py: it reads the
    user's home): its two YAML blocks saved where the page says, under a stand-in home, and its command
    run exactly as the page prints it, the home swapped for that directory."""
    import re
    import shlex

    sys.path.insert(0, str(ROOT / "tests"))
    import readme_blocks

    page = ROOT / "docs" / "config.md"
    text = page.read_text(encoding="utf-8")
    home = tmp_path / "home"
    files = re.findall(r"^`~/(myconf/[\w/]+\.yaml)`[^\n]*\n(?:[^\n]*\n)*?```yaml\n(.*?)```", text, re.M | re.S)
    assert sorted(name for name, _ in files) == ["myconf/hardware/mybox.yaml", "myconf/model/mymodel.yaml"]
    for name, body in files:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(body, encoding="utf-8")
    [block] = [b for b in readme_blocks.blocks(page, "docs/config.md") if "--config-dir ~/myconf" in b.commands[0].text]
    assert block.skip and "tests/sim/test_twin_gpu_parts.py" in block.skip
    argv = shlex.split(block.commands[0].text.replace("~/myconf", str(home / "myconf")))
    assert argv[:3] == ["python", "-m", "sweep.sim.predict"]
    proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "acceptance: given" in proc.stdout and "gpu-vllm" in proc.stdout, proc.stdout
