"""``resume.deterministic_failures`` and ``hydra.sweeper.deterministic_failures`` name failure
reasons a result can carry; a typo (``cuda_grpah``) matched nothing, so the config it meant was
started again on every run. The allowed list is ``sweep.launch.FAILURE_REASONS``; the scan below
holds it to every reason the code writes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.compose import bounds
from sweep.errors import ConfigError
from sweep.launch import FAILURE_REASONS

ROOT = Path(__file__).resolve().parents[2]


def _reasons_written() -> set[str]:
    """Every string literal passed as a failure's reason: ``_fail(doc, "x", ...)``,
    ``failed("x", ...)``, ``Failure(reason="x")``, ``LaunchFailure("x", ...)``."""
    found: set[str] = set()
    for path in [*ROOT.joinpath("sweep").rglob("*.py"), *ROOT.joinpath("launchers").rglob("*.py"),
                 *ROOT.joinpath("hydra_plugins").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            args = list(node.args)
            if name == "_fail" and len(args) > 1:
                args = args[1:]
            elif name not in ("failed", "LaunchFailure"):
                args = []
            literal = [a.value for a in args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            literal += [k.value.value for k in node.keywords if name == "Failure" and k.arg == "reason"
                        and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)]
            found.update(literal)
    return found


def test_every_reason_the_code_writes_is_allowed() -> None:
    written = _reasons_written()
    assert {"interrupted", "pruned", "crashed", "disk_full", "no_objective"} <= written  # the scan sees them
    assert written - set(FAILURE_REASONS) == set()


def test_a_typo_is_named_with_the_allowed_reasons() -> None:
    assert bounds.check("resume.deterministic_failures", ["oom", "cuda_graph"]) == ("oom", "cuda_graph")
    with pytest.raises(ConfigError) as err:
        bounds.check("resume.deterministic_failures", ["oom", "cuda_grpah"])
    assert err.value.key == "resume.deterministic_failures[1]" and "cuda_graph" in str(err.value)
    assert "got 'cuda_grpah'" in str(err.value)


def test_the_searchs_list_is_checked_before_a_trial(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=1",
                          "hydra.sweeper.deterministic_failures=[oomm]", "workload=smoke", "mlflow.enabled=false",
                          f"hydra.sweep.dir={tmp_path}/m"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: hydra.sweeper.deterministic_failures[0]: must be one of ") and "'oomm'" in last
    assert not list(tmp_path.rglob("result.json"))  # no trial ran
