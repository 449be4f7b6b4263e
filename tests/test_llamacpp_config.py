"""server=llamacpp composes like the other servers: its group defaults, its knobs' checks,
the CPU box, and flags rendered only from YAML."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sweep.compose.group_defaults import implied
from sweep.compose.config import from_omegaconf
from sweep.errors import ConfigError
from sweep.compose.cmdline import compose
from sweep.compose.render import render


def build(*overrides: str):
    return from_omegaconf(compose(list(overrides)))


def test_server_brings_its_model_box_spec_and_workload_unless_named():
    assert implied(["server=llamacpp", "spec.budget=2"]) == [
        "server=llamacpp", "model=smollm2", "hardware=cpu", "spec=ngram", "workload=edit", "spec.budget=2"]
    assert implied(["-m", "model=kimi_k26", "server=llamacpp", "+hardware@x=cpu"]) == [
        "-m", "model=kimi_k26", "server=llamacpp", "spec=ngram", "workload=edit", "+hardware@x=cpu"]
    assert implied(["server=sim"]) == ["server=sim"] and implied(["server=sglang,sim"]) == ["server=sglang,sim"]
    cfg = build("server=llamacpp")
    assert (cfg.model.name, cfg.hardware.name, cfg.spec.algorithm, cfg.workload.name) == (
        "smollm2_135m", "cpu", "ngram", "edit")
    # the default spec drafts from n-grams (it accepts on the edit workload), never the random draft
    argv = render(cfg).argv
    assert argv[argv.index("--spec-type") + 1] == "ngram-mod" and "--spec-draft-model" not in argv
    assert cfg.model.path.endswith(".gguf")


def test_budget_is_the_draft_length_and_synthetic_rates_are_one_argument():
    argv = render(build("server=llamacpp", "spec=llamacpp_draft", "spec.budget=6")).argv
    assert argv[argv.index("--spec-draft-n-max") + 1] == "6"
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"
    argv = render(build("server=llamacpp", "spec=llamacpp_synth", "spec.synth_len=null",
                        "spec.synth_rates=[0.9,0.5,0.25,0]")).argv
    assert argv[argv.index("--spec-synth-rates") + 1] == "0.9,0.5,0.25,0"
    assert "--spec-synth-len" not in argv


@pytest.mark.parametrize("overrides, key", [
    (["spec=llamacpp_synth", "spec.synth_len=6"], "spec.synth_len"),          # > budget + 1
    (["spec=llamacpp_synth", "spec.synth_rates=[0.5]"], "spec.synth_rates"),  # both set
    (["spec=llamacpp_synth", "spec.synth_len=null", "spec.synth_rates=[0.5,0.6,0.1,0.1]"], "spec.synth_rates"),
    (["spec=llamacpp_synth", "spec.synth_len=null", "spec.synth_rates=[0.5,0.4]"], "spec.synth_rates"),
    (["spec=llamacpp_synth", "spec.synth_len=null", "spec.synth_rates=[1.5,1,1,1]"], "spec.synth_rates[0]"),
    (["spec=ddtree"], "spec"),                                                # no llama.cpp form
])
def test_bad_llamacpp_values_are_one_line_errors(overrides, key):
    with pytest.raises(ConfigError) as info:
        build("server=llamacpp", *overrides)
    assert info.value.key == key


def test_cpu_box_cannot_be_simulated_and_a_gpu_box_still_can():
    with pytest.raises(ConfigError) as info:
        build("hardware=cpu")
    # its memory bandwidth is measured (python -m sweep.sim.probe) but it has no GPU link
    assert info.value.key == "hardware.perf.link_bw_gbs" and "unknown" in info.value.message
    assert build("hardware=b300").hardware.num_gpus == 8


def test_cli_error_before_anything_starts(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweep", "server=llamacpp", "spec.synth_len=9"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: spec.synth_len: must be in [1, 5]")


def test_doctor_and_check_say_what_is_missing_and_how_to_install(tmp_path):
    env = {**__import__("os").environ, "SPECSWEEP_ENGINES_DIR": str(tmp_path / "engines")}
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "llamacpp", "--check"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["server", "model", "draft"]
    assert all(line.endswith("(missing)") and str(tmp_path) in line for line in proc.stdout.splitlines())
    assert "run: python -m sweep.engines llamacpp" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sweep.doctor", "server=llamacpp"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "engine, engine weights, model.path, executable" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "sim"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: server: server=sim declares no install block")
