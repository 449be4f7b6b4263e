"""The newcomer's three mistakes: each one line, exit 2, that leads to the right command.

* a key that does not exist names the nearest keys of the composed config
  ("did you mean spec.budget?") -- it used to advise ``+spec.budgit=VALUE``;
* a key added with ``+`` that nothing reads is refused (``+spec.budgit=4`` ran with
  budget 8, exit 0); keys under the free-form places (``server.extra_env`` ...), keys of
  the key table and keys a template interpolates are read, so they pass;
* a sweep value without ``-m`` says to add ``-m`` (Hydra: "Ambiguous value for argument").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweep.compose import cmdline, known_keys
from sweep.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _refused(*argv: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        cmdline.validate(list(argv))
    return info.value


@pytest.mark.parametrize("override, key, nearest", [
    ("spec.budgit=4", "spec.budgit", "spec.budget"),
    ("sepc.budget=4", "sepc.budget", "spec.budget"),
    ("workload.max_tokns=64", "workload.max_tokns", "workload.max_tokens"),
    ("server.disable_cuda_grap=true", "server.disable_cuda_grap", "server.disable_cuda_graph"),
])
def test_an_unknown_key_names_the_nearest_known_one(override: str, key: str, nearest: str) -> None:
    err = _refused(override, "workload=smoke")
    assert err.key == key
    assert f"no such key; did you mean {nearest}?" in err.message, err.message
    assert "+" + key not in err.message  # no advice to add the typo as a new key
    assert "\n" not in err.one_line()


def test_an_unknown_key_with_nothing_close_says_where_the_keys_are() -> None:
    err = _refused("hardware.zzzzzzzz=1")
    assert "no such key; no key is close to it (python -m sweep --cfg job lists them all)" in err.message


def test_a_key_of_your_own_under_a_free_place_is_added_with_plus() -> None:
    err = _refused("server.extra_env.MY_FLAG=1")
    assert err.message == "not set yet; server.extra_env takes keys of your own: add it with " \
                          "+server.extra_env.MY_FLAG=VALUE"
    cmdline.validate(["+server.extra_env.MY_FLAG=1", "dry_run=true"])  # and so it runs


@pytest.mark.parametrize("override", ["+spec.budgit=4", "++spec.budgit=4", "+launcher.ssh_pass=x", "+foo=1",
                                      "+workload.max_tokns=64"])
def test_a_plus_key_nothing_reads_is_refused(override: str) -> None:
    err = _refused(override, "workload=smoke")
    key = override.lstrip("+").split("=")[0]
    assert err.key == key and err.message.startswith(f"nothing reads this key, so +{key} would change nothing")
    if "budgit" in key:
        assert "did you mean spec.budget?" in err.message


def test_a_plus_key_nothing_reads_is_refused_in_a_grid_too() -> None:
    err = _refused("-m", "spec.budget=4,8", "+spec.budgit=4", "workload=smoke")
    assert err.key == "spec.budgit"


@pytest.mark.parametrize("override", [
    "+server.extra_env.HF_TOKEN=x",         # a free place: rendered into the server's environment
    "+server.request_extras.top_k=1",        # extra request fields, passed as given
    "+hardware.perf.calibration=none",       # a key of the table no group sets
    "+spec.render.sglang.env.MY_ENV=1",      # a spec's render block
    "+hardware@x=cpu",                       # a config group, not a key
    "++spec.budget=16",                      # ++ of a key the config has: sets it
    "++optuna.trial_number=3",               # what the search sweeper passes its jobs
])
def test_plus_keys_something_reads_pass(override: str) -> None:
    cmdline.validate([override, "dry_run=true"])


def test_a_key_a_template_interpolates_is_read(tmp_path: Path) -> None:
    """A render block of your own that names ${spec.myknob}: +spec.myknob=3 is read by the render."""
    conf = tmp_path / "conf"
    (conf / "spec").mkdir(parents=True)
    (conf / "spec" / "mine.yaml").write_text(
        "algorithm: MINE\nrender:\n  sglang:\n    args:\n      --speculative-algorithm: DDTREE\n"
        "      --speculative-ddtree-budget: ${spec.myknob}\n")
    cmdline.validate(["-cd", str(conf), "spec=mine", "+spec.myknob=3", "dry_run=true"])
    err = _refused("-cd", str(conf), "spec=mine", "+spec.myknob=3", "+spec.other=1", "dry_run=true")
    assert err.key == "spec.other"


def test_the_free_places_come_from_the_key_table() -> None:
    places = known_keys.free_places()
    assert {"server.extra_env", "server.args", "server.env", "spec.render"} <= set(places)
    assert "hardware.perf" not in places and "launcher.sbatch" not in places  # their children have rules


@pytest.mark.parametrize("argv, value", [
    (["spec.budget=4,8", "workload=smoke"], "4,8"),
    (["workload=smoke", "spec.budget=choice(4,8)"], "choice(4,8)"),
    (["spec=none,ddtree"], "none,ddtree"),
])
def test_a_sweep_value_without_m_says_add_m(argv: list[str], value: str) -> None:
    err = _refused(*argv)
    assert err.message.startswith(f"{value} is several values, a sweep: add -m (python -m sweep -m "), err.message


def test_the_three_mistakes_through_the_real_command(tmp_path: Path) -> None:
    """What a newcomer sees: one line each, exit 2, nothing started."""
    expected = {
        ("spec.budgit=4",): "error: spec.budgit: no such key; did you mean spec.budget? "
                            "(python -m sweep --cfg job lists them all)",
        ("+spec.budgit=4",): "error: spec.budgit: nothing reads this key, so +spec.budgit would change nothing; "
                             "did you mean spec.budget?",
        ("spec.budget=4,8", "workload=smoke"): "error: spec.budget: 4,8 is several values, a sweep: add -m "
                                                "(python -m sweep -m spec.budget=4,8 workload=smoke)",
    }
    for argv, line in expected.items():
        out = subprocess.run([sys.executable, "-m", "sweep", *argv], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
        assert out.returncode == 2, (argv, out.stderr)
        [said] = out.stderr.strip().splitlines()
        assert said.startswith(line), (argv, said)
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep", *argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})


@pytest.mark.slow
def test_every_typo_of_a_command_is_named_one_line_each(tmp_path: Path) -> None:
    # Hydra stops at the first; the user fixed it, ran again and met the next.
    out = _cli(tmp_path, "workload.max_tokns=64", "spec.budgit=4", "workload=smok", "hardware=b30")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: workload.max_tokns: no such key; did you mean workload.max_tokens? "
        "(python -m sweep --cfg job lists them all)",
        "error: spec.budgit: no such key; did you mean spec.budget? (python -m sweep --cfg job lists them all)",
        "error: workload: unknown option 'smok'; did you mean smoke? allowed: coding, cpu, edit, llamacpp_ci, "
        "long_context, max_load, prose, quick, saturation, seed, smoke, vllm_ci",
        "error: hardware: unknown option 'b30'; did you mean b300? allowed: b200, b300, cpu, h100, h200, "
        "pro6000_ep4, pro6000_ep8, pro6000_tp8",
    ]
    # one typo is still one line; a mistake of another kind is not hidden behind the typos
    one = _cli(tmp_path, "workload=smok")
    assert one.returncode == 2 and len(one.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.slow
def test_a_hydra_key_typo_points_to_where_hydra_keys_are_listed(tmp_path: Path) -> None:
    out = _cli(tmp_path, "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trail=2", "workload=smoke")
    assert out.returncode == 2, out.stderr
    [said] = out.stderr.strip().splitlines()
    pointer = "python -m sweep --cfg hydra hydra/sweeper=optuna"
    assert said == ("error: hydra.sweeper.n_trail: no such key; did you mean hydra.sweeper.n_trials? "
                    f"({pointer} lists them all)")
    # and that command does list the key the typo meant
    listed = _cli(tmp_path, *pointer.split()[3:])
    assert listed.returncode == 0, listed.stderr
    assert "    n_trials: " in listed.stdout


def test_a_typo_and_a_value_of_the_wrong_shape_are_both_named() -> None:
    err = _refused("spec.budgit=4", "workload.concurrency={a: 1}", "workload=smoke")
    lines = err.one_line().splitlines()
    assert [line.split(":", 2)[1].strip() for line in lines] == ["spec.budgit", "workload.concurrency"]
    assert "did you mean spec.budget?" in lines[0] and "cannot take this value" in lines[1]
    assert err.key == "spec.budgit"  # a caller reading one error gets the first
