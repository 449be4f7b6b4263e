"""Rendering: flags from YAML only, stable fingerprints, safe shell lines."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from sweep.compose import cmdline as preflight
from sweep.compose.config import from_omegaconf
from sweep.compose.render import flags, render


def launch(*overrides: str):
    return render(from_omegaconf(preflight.compose(list(overrides))))


def test_flag_value_conventions() -> None:
    words = flags({"--a": None, "--b": False, "--c": True, "--d": 3, "--e": 2.0,
                   "--f": {"x": 1, "y": "z"}, "--g": [1, 2]})
    assert words == ["--c", "--d", "3", "--e", "2", "--f", '{"x":1,"y":"z"}', "--g", "1", "2"]


def test_ddtree_sglang_renders_fork_flags_and_env() -> None:
    la = launch("hardware=b300", "spec=ddtree", "server=sglang")
    args = list(la.args)
    assert la.executable == ("python3", "-m", "sglang.launch_server")
    assert args[args.index("--speculative-algorithm") + 1] == "DDTREE"
    assert args[args.index("--speculative-ddtree-budget") + 1] == "8"
    assert args[args.index("--speculative-draft-window-size") + 1] == "2048"
    assert args[args.index("--tp-size") + 1] == "8"
    assert la.env == {"SGLANG_DDTREE_MAX_TOPK": "4"}


def test_overrides_flow_into_flags() -> None:
    la = launch("server=sglang", "spec.budget=16", "spec.topk=2", "server.disable_cuda_graph=true",
                "hardware=pro6000_ep4", "server.extra_args=[--attention-backend,trtllm_mla]")
    args = list(la.args)
    assert args[args.index("--speculative-ddtree-budget") + 1] == "16"
    assert la.env["SGLANG_DDTREE_MAX_TOPK"] == "2"
    # SGLang 0.5.23's current spelling (--disable-cuda-graph is deprecated there)
    assert args[args.index("--cuda-graph-backend-decode") + 1] == "disabled"
    assert args[args.index("--cuda-graph-backend-prefill") + 1] == "disabled"
    assert "--disable-cuda-graph" not in args
    assert args[args.index("--ep-size") + 1] == "4"
    assert args[-2:] == ["--attention-backend", "trtllm_mla"]


def test_none_renders_no_speculative_flags() -> None:
    la = launch("server=sglang", "spec=none")
    assert not [a for a in la.args if a.startswith("--speculative")]
    assert la.env == {}


def test_vllm_speculative_config_is_json() -> None:
    # a GPU box: the group's CPU defaults named away (server.group_defaults bring the CPU box)
    la = launch("server=vllm", "hardware=b300", "model=kimi_k26", "workload=seed", "spec=dflash")
    args = list(la.args)
    conf = json.loads(args[args.index("--speculative-config") + 1])
    assert conf == {"method": "dflash", "model": "z-lab/Kimi-K2.6-DFlash", "num_speculative_tokens": 8}
    assert la.executable[1:] == ("-m", "vllm.entrypoints.openai.api_server")
    assert args[args.index("--model") + 1] == "moonshotai/Kimi-K2.6"
    assert "--enforce-eager" not in args and "VLLM_CPU_KVCACHE_SPACE" not in la.env


def test_sim_is_sglang_plus_sim_flags() -> None:
    sim = launch("server=sim")
    real = launch("server=sglang")
    sim_args = list(sim.args)
    assert sim.executable[1:] == ("-m", "sweep.sim")
    i = sim_args.index("--sim-hardware")
    core = [a for a in sim_args[:i] if a not in ("30123",)]
    real_core = [a for a in real.args if a not in ("30000",)]
    assert core == real_core
    assert json.loads(sim_args[i + 1])["quirks"]["cuda_graph_max_budget"] == 8


def test_fingerprint_is_stable_and_server_sensitive() -> None:
    a, b = launch(), launch()
    assert a.fingerprint == b.fingerprint
    assert launch("spec.budget=16").fingerprint != a.fingerprint
    assert launch("spec.topk=2").fingerprint != a.fingerprint  # env changes too
    # workload-only changes never change the server
    assert launch("workload=smoke", "workload.max_tokens=32").fingerprint == a.fingerprint


def test_secrets_are_masked(monkeypatch) -> None:
    monkeypatch.setenv("SPECSWEEP_API_KEY", "sk-very-secret")
    la = launch("server=sglang")
    assert "sk-very-secret" in la.argv  # the server gets it ...
    assert "sk-very-secret" not in la.shell_line()  # ... no printout does
    assert "sk-very-secret" not in json.dumps(la.to_dict())


def test_shell_line_quotes_every_word() -> None:
    la = launch("server=sglang", "model.served_name='kimi; rm -rf /'")
    words = shlex.split(la.shell_line())
    assert "kimi; rm -rf /" in words


def test_dry_run_last_line_is_the_quoted_command(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "dry_run=true"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2].startswith("fingerprint: ")
    assert lines[-1].startswith("env SGLANG_DDTREE_MAX_TOPK=4 ")
    assert shlex.split(lines[-1])[3:5] == ["-m", "sweep.sim"]


def test_dspark_block_is_k_plus_one_on_vllm_and_the_window_on_sglang() -> None:
    """DSpark's ``spec.block`` is the verify window: SGLang takes it as --speculative-num-draft-tokens,
    vLLM's num_speculative_tokens K proposes K tokens, a block of K + 1 (it rendered 8 for block 8)."""
    for block in (8, 4):
        la = launch("server=vllm", "hardware=b300", "model=deepseek_v32", "spec=dspark", f"spec.block={block}")
        args = list(la.args)
        conf = json.loads(args[args.index("--speculative-config") + 1])
        assert conf["method"] == "dspark" and conf["num_speculative_tokens"] == block - 1
        sg = list(launch("server=sglang", "hardware=b300", "model=deepseek_v32", "spec=dspark",
                         f"spec.block={block}").args)
        assert sg[sg.index("--speculative-num-draft-tokens") + 1] == str(block)
