"""Compose + validate: every bad value is one ConfigError naming its key."""

from __future__ import annotations

import pytest

from sweep.compose import cmdline as preflight
from sweep.compose.config import from_omegaconf
from sweep.errors import ConfigError


def build(*overrides: str):
    return from_omegaconf(preflight.compose(list(overrides)))


def test_defaults_compose_to_typed_objects() -> None:
    cfg = build()
    assert cfg.hardware.name == "b300" and cfg.hardware.tp == 8 and cfg.hardware.arch == "sm_103"
    assert (cfg.spec.algorithm, cfg.spec.budget, cfg.spec.topk, cfg.spec.window) == ("ddtree", 8, 4, 2048)
    assert cfg.model.name == "kimi_k26" and cfg.server.name == "sim" and cfg.server.simulated
    assert cfg.launcher.name == "local"
    assert cfg.workload.name == "seed"
    assert cfg.workload.contexts == (60, 1024, 4096) and cfg.workload.concurrency == (1, 8, 32, 64)
    assert cfg.workload.max_tokens == 512 and cfg.workload.coding == "five"


@pytest.mark.parametrize("hardware", ["b300", "pro6000_tp8", "pro6000_ep4", "pro6000_ep8", "h200"])
@pytest.mark.parametrize("spec", ["none", "dflash", "ddtree", "eagle3"])
def test_every_hardware_and_spec_validates(hardware: str, spec: str) -> None:
    cfg = build(f"hardware={hardware}", f"spec={spec}")
    assert cfg.hardware.perf["mem_bw_tbs"] > 0 and cfg.hardware.perf["link_latency_us"] > 0
    assert cfg.hardware.tp * cfg.hardware.dp <= cfg.hardware.num_gpus


@pytest.mark.parametrize("override, key, fragment", [
    ("spec.budget=0", "spec.budget", "in [1, 1024]"),
    ("spec.topk=0", "spec.topk", "in [1, 1024]"),
    ("spec.topk=9", "spec.topk", "<= spec.budget=8"),
    ("spec.window=4", "spec.window", ">= spec.block=8 (declared: spec.constraints"),
    ("workload.concurrency=[1,0]", "workload.concurrency[1]", "in [1, 100000]"),
    ("workload.contexts=[-5]", "workload.contexts[0]", "in [1, "),
    ("workload.contexts=[300000]", "workload.contexts", "in [1, 262144]"),
    ("workload.coding=maybe", "workload.coding", "five, humaneval, off"),
    ("workload.sandbox.mechanism=docker", "workload.sandbox.mechanism", "auto, bwrap, fallback"),
    ("server.port=70000", "server.port", "in [1, 65535]"),
    ("hardware.ep=3", "hardware.ep", "must divide hardware.tp=8"),
    ("spec.budget=abc", "spec.budget", "integer"),
    ("workload.prompt_source=lorem", "workload.prompt_source", "text, edit, prose, random_ids, dataset"),
    ("workload.prompt_source=dataset", "workload.dataset_path", "JSONL"),
    ("workload.seed=-1", "workload.seed", "in [0, 4294967295]"),
    ("server.endpoint=generate", "server.endpoint", "completions, chat"),
    ("server.tokenize.path=tokenize", "server.tokenize.path", "URL path"),
    ("+server.tokenize.count=1", "server.tokenize.count", "path, field, batch, messages, extra"),
])
def test_bad_values_name_the_key(override: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(override)
    assert info.value.key == key
    assert fragment in info.value.message
    assert "\n" not in info.value.one_line()


def test_unknown_option_lists_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        build("spec=fast")
    assert info.value.key == "spec"
    assert info.value.message.endswith(
        "allowed: ddtree, dflash, draft, dspark, eagle, eagle3, llamacpp_draft, llamacpp_ngram, llamacpp_synth, mtp, "
        "ngram, none, suffix, synth")


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        build("spec.bugdet=8")
    assert info.value.key == "spec.bugdet"


def test_real_server_needs_paths() -> None:
    with pytest.raises(ConfigError) as info:
        build("server=sglang", "model.path=null")
    assert info.value.key == "model.path"
    with pytest.raises(ConfigError) as info:
        build("server=sglang", "spec=eagle3")
    assert info.value.key == "model.draft_paths.eagle3"
    # the simulator needs neither
    assert build("server=sim", "spec=eagle3", "model.path=null").spec.algorithm == "eagle3"


def test_spec_without_a_rendering_for_the_server_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        build("server=vllm", "spec=ddtree")
    assert "server=vllm" in info.value.message


def test_newlines_in_extra_args_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        build("server.extra_args=['--a\nb']")
    assert info.value.key == "server.extra_args[0]"


def test_workload_requests_default_to_twice_concurrency() -> None:
    wl = build().workload
    assert wl.requests_for(1) == 2 and wl.requests_for(32) == 64
    assert build("workload.requests_per_cell=5").workload.requests_for(32) == 5


def test_ssh_secrets_are_refused_in_the_config() -> None:
    with pytest.raises(ConfigError) as info:
        build("launcher=ssh", "launcher.host=127.0.0.1", "+launcher.password=hunter2")
    assert info.value.key == "launcher.password"
    assert "hunter2" not in info.value.one_line()


def test_prompt_source_keys() -> None:
    with pytest.raises(ConfigError) as info:
        build("workload.prompt_source=dataset", "workload.dataset_path=/nonexistent/p.jsonl")
    assert info.value.key == "workload.dataset_path" and "no such file" in info.value.message
    with pytest.raises(ConfigError) as info:
        build("workload.prompt_source=random_ids", "server.endpoint=chat")
    assert info.value.key == "workload.prompt_source" and "server.endpoint=completions" in info.value.message
    cfg = build("workload.prompt_source=random_ids", "workload.seed=7")
    assert (cfg.workload.prompt_source, cfg.workload.seed, cfg.server.endpoint) == ("random_ids", 7, "completions")
    assert cfg.server.tokenize and cfg.server.tokenize["path"] == "/v1/tokenize" and cfg.server.continuous_usage
