"""Secrets through the doors added last round (issue 32): masked where text leaves, whatever the source.

* ``benchmarks/record_landscape.py ... server.api_key=<key>``: the key reached the landscape's
  ``command``; now the one landscape writer (``sweep.sim.landscape.write``) masks the document
  where it leaves (by name, by URL password, by the values of the command line and environment);
* ``python -m sweep.calibrate`` copied a landscape's ``command`` into every point's ``source``
  (131 times): a calibration is masked where it is written, whatever its input files carried;
* ``launcher.setup`` holding a token goes verbatim into each SLURM job script: refused in one line
  whether the line came from the command line, a config file or the environment
  (``${oc.env:HF_TOKEN}``) -- one rule, ``secrets.found_in``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import subprocess_env

from sweep.cli import plugins
from sweep.compose import cmdline
from sweep.errors import ConfigError

plugins.register()
ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-landscape-canary-7f3e9c1d"
TOKEN = "hf_env_canary_4d2b8a6e0c"


def _record_landscape() -> Any:
    import importlib.util

    name = "specsweep_bench_record_landscape"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "record_landscape.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_record_landscape_masks_a_key_of_its_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording's own code path, with the engine's trials replaced by recorded results
    (no llama.cpp here): the key given on its command line is nowhere in the file."""
    from record.result_docs import make_result

    rl = _record_landscape()
    _, doc = make_result(tmp_path / "src", 0, 8, api_key=KEY)
    doc["simulated"] = False
    monkeypatch.setattr(rl, "_run_trial", lambda overrides, workloads, run_dir, timeout:
                        {w: json.loads(json.dumps(doc)) for w in workloads})
    monkeypatch.setattr("sweep.sim.probe.measure_in_subprocess", lambda threads: {"mem_bw_tbs": 0.01})
    out = tmp_path / "land.json"
    argv = ["--rounds", "1", "--configs", "none", "--out", str(out), "--work", str(tmp_path / "work"),
            f"server.api_key={KEY}"]
    monkeypatch.setattr(sys, "argv", ["benchmarks/record_landscape.py", *argv])
    assert rl.main(argv) == 0
    text = out.read_text()
    assert KEY not in text and "server.api_key=***" in json.loads(text)["command"]


def test_calibrate_masks_what_its_input_files_carried(tmp_path: Path) -> None:
    land = json.loads((ROOT / "tests" / "fixtures" / "landscape-mini.json").read_text())
    land["command"] = (f"python benchmarks/record_landscape.py server.api_key={KEY} "
                       f"--hf-token {TOKEN} https://user:pw-canary-91@hf.example.com/x")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "land.json").write_text(json.dumps(land))
    proc = subprocess.run([sys.executable, "-m", "sweep.calibrate", "-o", str(tmp_path / "out"), str(tmp_path / "in")],
                          cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = "".join(p.read_text() for p in (tmp_path / "out").glob("*.yaml"))
    assert written and "source" in written
    for canary in (KEY, TOKEN, "pw-canary-91"):
        assert canary not in written and canary not in proc.stdout + proc.stderr, canary


SLURM = ["-m", "hydra/sweeper=optuna", "spec.budget=choice(4,8)", "launcher=slurm"]


def test_a_setup_line_with_a_token_is_refused_whatever_its_source(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nlauncher:\n  setup:\n"
                                    "    - module load cuda\n    - huggingface-cli login --token hf_file_canary_55\n")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    for argv in ([*SLURM, "launcher.setup=['export HF_TOKEN=hf_cli_canary_77']"],          # the command line
                 ["-cd", str(conf), "-cn", "mine", *SLURM],                              # a config file
                 [*SLURM, "launcher.setup=['echo ${oc.env:HF_TOKEN} > ~/.token']"],       # the environment
                 [*SLURM, "launcher.command=[python,-m,sweep,'--api-key=sk-cmd-canary-31']"]):
        with pytest.raises(ConfigError) as info:
            cmdline.validate(argv)
        line = info.value.one_line()
        assert info.value.key.startswith(("launcher.setup[", "launcher.command[")), line
        assert not any(c in line for c in ("hf_cli_canary_77", "hf_file_canary_55", TOKEN, "sk-cmd-canary-31"))
    cmdline.validate([*SLURM, "launcher.setup=['module load cuda','source /shared/.venv/bin/activate']"])


def test_the_job_script_is_checked_where_it_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever skipped the up-front check, the job script holding a secret is never written."""
    from launchers.slurm import SlurmJobs, SubmitError
    from sweep.launch import LauncherSettings, SlurmSettings

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    s = SlurmSettings(sbatch={}, extra=(), setup=(f"echo {TOKEN}",), command=None, signal_s=0, poll_s=1.0,
                      max_requeue=0, job_name="t")
    jobs = SlurmJobs(LauncherSettings(name="slurm", ready_timeout_s=1, poll_interval_s=1, poll_max_s=1,
                                      stop_grace_s=1, keep_server=False, log_tail_lines=1, slurm=s))
    with pytest.raises(SubmitError, match="would hold a secret"):
        jobs._write("t-0", ["python", "-m", "sweep"], tmp_path / "0", tmp_path)
    assert not (tmp_path / "0" / "slurm" / "job.sh").exists()


@pytest.mark.parametrize("value", [f"{KEY},{KEY}-2", f"{KEY}-1,{KEY}-2,{KEY}-3"])
def test_a_secret_given_as_a_sweep_without_m_is_named_not_shown(tmp_path: Path, value: str) -> None:
    """``server.api_key=a,b`` without -m: the "several values, a sweep" line printed the key's
    values (the key's own ``name: value`` was swallowed by the ``error:`` before it, and the
    values after the first comma were never masked)."""
    out = subprocess.run([sys.executable, "-m", "sweep", "dry_run=true", f"server.api_key={value}"], cwd=tmp_path,
                         env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert KEY not in out.stdout + out.stderr
    assert out.stderr.strip().splitlines()[-1] == ("error: server.api_key: *** is several values, a sweep: add -m "
                                                   "(python -m sweep -m dry_run=true server.api_key=***)")


def test_masking_reads_past_a_name_that_is_no_secret() -> None:
    from sweep import secrets

    assert secrets.mask_text(f"error: server.api_key: {KEY} is bad") == "error: server.api_key: *** is bad"
    assert secrets.mask_text(f"api_key={KEY},port=3") == "api_key=***,port=3"  # the next assignment stays
    assert secrets.mask_text("x: y: z, budget=8") == "x: y: z, budget=8"
