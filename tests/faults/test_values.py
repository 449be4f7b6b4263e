"""Values whose checks were skipped (issue 32), beyond the one-line cases of ``hardening_cases`` (8, 9).

* a search space none of whose points can run is an error (exit 2, one line), not 0 trials and exit 0;
* a max-load search over rate is bounded by how long its arrivals alone could take (the search's
  worst path, computed from the workload), not by a start value;
* a number with a leading zero means one thing wherever it is written: refused in overrides and in
  config files, a quoted '017' is a string and stays one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _support import subprocess_env

from sweep.cli import plugins
from sweep.compose import cmdline
from sweep.compose.bench_checks import MAX_RATE_SEARCH_S, MaxLoadSearch, rate_search_seconds
from sweep.compose.yaml_guard import ambiguous_number
from sweep.errors import ConfigError

plugins.register()


@pytest.mark.slow
def test_a_search_space_with_no_valid_point_is_one_line_and_exit_2(tmp_path: Path) -> None:
    # topk <= budget (spec.constraints): every point of {budget 4} x {topk 8} breaks it
    proc = subprocess.run([sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", "spec.budget=choice(4)",
                           "spec.topk=choice(8)", "workload=smoke", "mlflow.enabled=false",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: hydra.sweeper.params: no point of the search space"), lines
    assert "break spec.constraints" in lines[0]
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("optuna.db"))


def test_the_rate_search_is_bounded_by_its_worst_path() -> None:
    def per_probe(rate: float) -> int:
        return max(2 * int(rate + 0.999), 2)

    fine = MaxLoadSearch(enabled=True, over="rate", start=1.0, max=256.0, max_rounds=6)
    assert rate_search_seconds(fine, per_probe) < 600
    slow = MaxLoadSearch(enabled=True, over="rate", start=0.001, max=256.0, max_rounds=6)
    assert rate_search_seconds(slow, per_probe) > 10 * MAX_RATE_SEARCH_S
    # many halvings from a fine start are as slow as a tiny start
    deep = MaxLoadSearch(enabled=True, over="rate", start=1.0, max=256.0, max_rounds=20)
    assert rate_search_seconds(deep, per_probe) > MAX_RATE_SEARCH_S
    base = ["workload=max_load", "workload.max_load.over=rate", "objective.slo.tpot_ms=50"]
    cmdline.validate([*base, "workload.max_load.start=1"])
    for extra in (["workload.max_load.start=0.001"], ["workload.max_load.max_rounds=20"],
                  ["workload.max_load.start=1", "workload.requests_per_cell=100000"]):
        with pytest.raises(ConfigError) as info:
            cmdline.validate([*base, *extra])
        assert info.value.key == "workload.max_load.start" and " h (" in info.value.message


@pytest.mark.parametrize("token, meant", [("017", "octal 15"), ("09", "the string '09'"), ("-007", "octal -7"),
                                          ("0_1", "octal 1")])
def test_a_leading_zero_is_ambiguous(token: str, meant: str) -> None:
    why = ambiguous_number(token)
    assert why is not None and meant in why


@pytest.mark.parametrize("token", ["0", "10", "0.5", "00.5", "0x1F", "1e5", "2026-01-01", "abc", "-0"])
def test_numbers_without_a_leading_zero_are_left_alone(token: str) -> None:
    assert ambiguous_number(token) is None


@pytest.mark.parametrize("override, refused", [
    ("workload.max_tokens=017", True), ("workload.contexts=[60,0128]", True), ("spec.budget=choice(04,8)", True),
    ("+hardware.perf.probe='017'", False), ("hydra.run.dir=outputs/2026-01-02/07-00-00", False),
    ("workload.max_tokens=17", False), ("+hardware.perf.probe=run_007", False)])
def test_overrides_with_a_leading_zero(override: str, refused: bool) -> None:
    argv = ["-m", "hydra/sweeper=optuna", override] if "choice" in override else [override]
    if refused:
        with pytest.raises(ConfigError, match="leading zero"):
            cmdline.validate(argv)
    else:
        cmdline.validate(argv)


def test_a_config_file_with_a_leading_zero_is_refused_but_a_quoted_one_is_a_string(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "zero.yaml").write_text("defaults:\n  - config\n  - _self_\nworkload:\n  max_tokens: 017\n")
    (conf / "quoted.yaml").write_text("defaults:\n  - config\n  - _self_\nhardware:\n  perf:\n    probe: '017'\n")
    with pytest.raises(ConfigError) as info:
        cmdline.validate(["-cd", str(conf), "-cn", "zero"])
    assert info.value.key == str(conf / "zero.yaml") and info.value.message.startswith("line 5: 017")
    cmdline.validate(["-cd", str(conf), "-cn", "quoted"])
