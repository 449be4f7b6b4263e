"""Issue 24, class by class: what the independent testers found, fixed as classes.

The input classes (1 what runs, 2 expressions/storage/dirs/sweeper settings,
3 path keys, 5 damaged study files on resume, 7 config files as input) run
through the real CLI (``hardening_cases.INPUT``: exit 2, one line naming the
key or file, no traceback, nothing written, within a bound); the rest need
real runs on the simulator or the stand-in server: the README's documented
search form, ``--cfg`` printing what runs with secrets masked, server values
that are nonsense (class 4), a read-only dir, a full disk at start, two grids
on one sweep dir (class 5), duplicate overrides (class 7).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _support import free_port, subprocess_env

from faults import fault_runs
from faults.hardening_cases import INPUT, STAND_IN_USAGE, InputCase, run_cli
from sweep.bench import reported
from sweep.compose import cmdline, storage_url
from sweep.errors import SweepError

ROOT = Path(__file__).resolve().parents[2]


def _sweep(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = subprocess_env(COLUMNS="300")
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_every_input_case_is_refused_in_one_line_through_the_cli(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda ic: run_cli(ic[1], tmp_path / f"c{ic[0]}"), enumerate(INPUT)))
    bad = [f"class {o.case.cls} {o.case.label}: {o.problem}" for o in outcomes if not o.clean]
    assert bad == []


@pytest.mark.parametrize("case", [c for c in INPUT if c.cls in (2, 3, 8, 9)], ids=lambda c: c.label)
def test_input_classes_2_3_8_9_in_process(case: InputCase, tmp_path: Path) -> None:
    """The same cases through the check ``python -m sweep`` runs, in this process (fast)."""
    from sweep.cli import plugins

    plugins.register()
    if case.setup is not None:
        case.setup(tmp_path)
    with pytest.raises(SweepError) as info:
        cmdline.validate(case.argv(tmp_path))
    assert info.value.one_line().startswith(f"error: {case.key.replace('{work}', str(tmp_path))}")
    assert info.value.exit_code == 2


# ------------------------------------------------------------------------------ 1. what runs


def test_cfg_job_prints_the_users_config_and_hydra_masks_secrets(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nspec:\n  budget: 16\n"
                                    "server:\n  api_key: sk-user-config-secret-77\n")
    job = _sweep(tmp_path / "a", "-cd", str(conf), "-cn", "mine", "--cfg", "job")
    assert job.returncode == 0, job.stderr
    assert "  budget: 16\n" in job.stdout and "sk-user-config-secret-77" not in job.stdout
    for what in ("hydra", "all"):
        out = _sweep(tmp_path / what, "-cd", str(conf), "-cn", "mine", "--cfg", what,
                     "server.api_key=sk-cli-secret-88", "+launcher.ssh_pass=hunter2-ssh-99",
                     "+model.source=https://user:url-pw-77@hf.example.com/x")
        assert out.returncode == 0, out.stderr
        for secret in ("sk-user-config-secret-77", "sk-cli-secret-88", "hunter2-ssh-99", "url-pw-77"):
            assert secret not in out.stdout + out.stderr, (what, secret)
        assert "server.api_key=***" in out.stdout and "ssh_pass=***" in out.stdout


# ------------------------------------------------------------------------------ 2. the documented search form


def test_the_readme_form_of_a_search_space_is_canonical() -> None:
    assert cmdline.canonical(["-m", "hydra/sweeper=optuna", "hydra.sweeper.params.spec.budget='choice(4,8,16)'",
                              "++hydra.sweeper.params.spec.topk=choice(1,2)", "spec.window=1024"]) == [
        "-m", "hydra/sweeper=optuna", "spec.budget=choice(4,8,16)", "spec.topk=choice(1,2)", "spec.window=1024"]


@pytest.mark.slow
def test_the_readme_form_runs_that_search(tmp_path: Path) -> None:
    import optuna

    sweep_dir = tmp_path / "sweep"
    out = _sweep(tmp_path, "-m", "hydra/sweeper=optuna", "hydra.sweeper.params.spec.budget='choice(4,8,16)'",
                 "hydra.sweeper.n_trials=1", "dry_run=true", "mlflow.enabled=false", f"hydra.sweep.dir={sweep_dir}",
                 "hydra.sweeper.plots.enabled=false")
    assert out.returncode == 0, out.stderr[-3000:]
    study = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{sweep_dir}/optuna.db")[0],
                              storage=f"sqlite:///{sweep_dir}/optuna.db")
    assert study.trials[0].distributions["spec.budget"].choices == (4, 8, 16)


# ------------------------------------------------------------------------------ 4. server values


@pytest.mark.parametrize("raw, field", [
    ({"completion_tokens": -4, "prompt_tokens": 10}, "usage.completion_tokens: -4 is negative"),
    ({"completion_tokens": 10**30}, "is beyond any real count"),
    ({"completion_tokens": float("inf")}, "inf is not a whole count"),
    ({"completion_tokens": 4.5}, "4.5 is not a whole count"),
    ({"completion_tokens": "4"}, "'4' is not a number"),
    ({"completion_tokens": True}, "True is not a number"),
    ({"completion_tokens": 4, "prompt_tokens": -1}, "usage.prompt_tokens: -1 is negative"),
    ({"completion_tokens": 0}, "usage_mismatch: 0 tokens, although 3 events carried text"),
    ({"completion_tokens": 2}, "usage_mismatch: 2 tokens, although 3 events carried text"),
])
def test_usage_values_are_checked(raw: dict, field: str) -> None:
    with pytest.raises(reported.BadReport, match=field.replace("(", r"\(").replace(")", r"\)")):
        reported.usage(raw, content_events=3)
    assert reported.usage({"completion_tokens": 4, "prompt_tokens": 10}, content_events=3) == (4, 10)


def test_running_counts_and_metrics_are_checked() -> None:
    reported.running([1, 3, 3, 7], 7)
    with pytest.raises(reported.BadReport, match="went down from 3 to 1"):
        reported.running([3, 1], 4)
    with pytest.raises(reported.BadReport, match="more than the final count"):
        reported.running([3, 9], 4)
    assert reported.metrics_window({"accept_len": float("nan"), "drafts": 3.0}, "/metrics") == \
        {"accept_len": None, "drafts": 3.0}
    with pytest.raises(reported.BadReport, match="/metrics: drafted: -1"):
        reported.metrics_window({"drafted": -1.0}, "/metrics")
    with pytest.raises(reported.BadReport, match="not a finite number"):
        reported.metrics_window({"accept_len": float("inf")}, "log")


def test_request_counters_of_a_declared_reader_are_checked() -> None:
    from sweep.bench.acceptance import RequestReader

    reader = RequestReader({"paths": ["timings"], "tokens": "predicted_n", "drafted": "draft_n",
                            "accepted": "draft_n_accepted"})
    assert reader.read({"timings": {"predicted_n": 10, "draft_n": 8, "draft_n_accepted": 6}}).steps == 3
    # (10 tokens: the first from the prefill, 6 accepted drafts, so 3 verify steps gave the other 3)
    for bad, why in (({"predicted_n": 10, "draft_n": -8, "draft_n_accepted": 0}, "timings.draft_n: -8 is negative"),
                     ({"predicted_n": 10, "draft_n": 4, "draft_n_accepted": 6}, "6 accepted of 4 drafted"),
                     ({"predicted_n": 1e400, "draft_n": 4}, "inf is not a whole count")):
        with pytest.raises(reported.BadReport, match=why):
            reader.read({"timings": bad})


@pytest.mark.slow
def test_a_server_reporting_nonsense_fails_the_trial_naming_the_field(tmp_path: Path) -> None:
    def one(mode: str) -> tuple[str, fault_runs.Run]:
        return mode, fault_runs.sweep(tmp_path / mode, "workload.request_timeout_s=5", stand_in=mode)

    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = list(pool.map(one, STAND_IN_USAGE))
    for mode, run in runs:
        try:
            doc = run.results[0] if run.results else {}
            assert run.proc.returncode == 1 and doc.get("status") == "failed", (mode, run.output[-2000:])
            failure = doc["failure"]
            assert failure["reason"] == "bench_errors" and STAND_IN_USAGE[mode] in failure["message"], (mode, failure)
            assert "Traceback" not in run.output and "OverflowError" not in run.output, mode
            for cell in doc["cells"]:
                assert cell["output_tok_s"] >= 0 and cell["completion_tokens"] >= 0, (mode, cell)
        finally:
            run.cleanup()


# ------------------------------------------------------------------------------ 5. storage and filesystem


def test_study_files_are_checked_before_a_resume(tmp_path: Path) -> None:
    from faults.hardening_cases import make_study

    good = tmp_path / "good.db"
    make_study(good)
    storage_url.check_file(storage_url.parse(f"sqlite:///{good}"))
    data = good.read_bytes()
    for name, damaged, why in (("cut.db", data[: len(data) // 2], "cut short"), ("empty.db", b"", "empty"),
                               ("text.db", b"not sqlite at all" * 10, "not an SQLite database")):
        (tmp_path / name).write_bytes(damaged)
        with pytest.raises(SweepError, match=why):
            storage_url.check_file(storage_url.parse(f"sqlite:///{tmp_path / name}"))
    journal = tmp_path / "j.log"
    journal.write_bytes(b'{"op_code": 0, "worker_id": "w"}\n{"op_code": 4, "wor')
    with pytest.raises(SweepError, match=r"last line \(2\) is cut short"):
        storage_url.check_file(storage_url.parse(str(journal)))
    journal.write_bytes(b'{"op_code": 0}\nnot json\n{"op_code": 1}\n')
    with pytest.raises(SweepError, match="line 2 of the journal is not JSON"):
        storage_url.check_file(storage_url.parse(f"journal:{journal}"))


def test_a_journal_another_process_is_writing_is_not_damaged(tmp_path: Path) -> None:
    journal = tmp_path / "live.journal"
    journal.write_bytes(b'{"op_code": 0}\n{"op_code": 4, "wor')

    def finish() -> None:
        time.sleep(0.3)
        with journal.open("ab") as fh:
            fh.write(b'ker_id": "w"}\n')

    writer = threading.Thread(target=finish)
    writer.start()
    storage_url.check_file(storage_url.parse(str(journal)))
    writer.join()


def _mount(kind: str, where: Path, options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return os.geteuid() == 0 and subprocess.run(["mount", "-t", kind, "-o", options, kind, str(where)],
                                                capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_read_only_dir_and_a_full_disk_at_start_are_one_line(tmp_path: Path) -> None:
    ro, full = tmp_path / "ro", tmp_path / "full"
    if not _mount("tmpfs", ro, "size=1m,ro"):
        pytest.skip("mounting a read-only tmpfs needs root")
    try:
        assert _mount("tmpfs", full, "size=64k")
        (full / "fill").write_bytes(b"\0" * 60 * 1024)
        for args, key, what in ((["hydra.run.dir=" + str(ro / "run")], "hydra.run.dir", "Read-only file system"),
                                (["-m", "hydra.sweep.dir=" + str(ro / "sw")], "hydra.sweep.dir", "Read-only"),
                                (["hydra.run.dir=" + str(full / "run")], "hydra.run.dir", "disk full")):
            out = _sweep(tmp_path / "cwd", *args, "workload=smoke")
            lines = [line for line in out.stderr.splitlines() if line.strip()]
            assert out.returncode == 2 and len(lines) == 1, (args, out.stderr[-2000:])
            assert lines[0].startswith(f"error: {key}") and what in lines[0], lines
    finally:
        for d in (ro, full):
            subprocess.run(["umount", str(d)], capture_output=True)


@pytest.mark.slow
def test_a_second_sweep_on_the_same_dir_is_refused_and_the_first_keeps_its_jobs(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    common = ["-m", *fault_runs.FAST, "mlflow.enabled=false", f"hydra.sweep.dir={sweep_dir}",
              "server.sim.time_scale=3", "spec.budget=4,8"]
    env = subprocess_env(COLUMNS="300")
    first = subprocess.Popen([sys.executable, "-m", "sweep", *common, f"server.port={free_port()}"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not (sweep_dir / "0" / "server.log").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = _sweep(tmp_path, *common, f"server.port={free_port()}")
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert second.returncode == 2 and len(lines) == 1, second.stderr[-2000:]
        assert lines[0].startswith(f"error: hydra.sweep.dir: {sweep_dir} is in use by another sweep (pid {first.pid}")
        assert first.wait(timeout=300) == 0
    finally:
        if first.poll() is None:
            first.kill()
    docs = [json.loads((sweep_dir / n / "result.json").read_text()) for n in ("0", "1")]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert [d["config"]["spec"]["budget"] for d in docs] == [4, 8]


# ------------------------------------------------------------------------------ 7. config files as input


def test_duplicate_overrides_warn_once(capsys: pytest.CaptureFixture[str]) -> None:
    from sweep.cli import plugins

    plugins.register()
    cmdline.validate(["dry_run=true", "spec.budget=8", "spec.budget=16", "spec.budget=4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: spec.budget is given 3 times; the last one wins: spec.budget=4"]
    cmdline.validate(["dry_run=true", "spec.budget=8"])
    assert capsys.readouterr().err == ""


def test_the_duplicate_warning_never_shows_a_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """``wins: server.api_key=sk-...`` was read as the text ``wins`` = ``server.api_key=sk-...``: not masked."""
    from sweep.cli import plugins

    plugins.register()
    for last in ("sk-dup-second-5678", "my second secret"):
        cmdline.validate(["dry_run=true", "server=sim", "server.api_key=sk-dup-first-1234", f"server.api_key={last}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["warning: server.api_key is given 2 times; the last one wins: server.api_key=***"], err


def test_an_alias_bomb_is_refused_fast_and_small(tmp_path: Path) -> None:
    import resource

    from faults.hardening_cases import BOMB
    from sweep.compose.yaml_guard import expanded_size

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(SweepError, match="YAML aliases expand to more than"):
        expanded_size(BOMB, "bomb.yaml")
    assert time.monotonic() - t0 < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB
    # the root, "a" and its list of 2, "b" and its list of two copies of a's: 1 + 1 + 3 + 1 + 7
    assert expanded_size("a: &a [1, 2]\nb: [*a, *a]\n", "ok.yaml") == 13
