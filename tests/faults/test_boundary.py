"""One error boundary per command: every known error type, made to reach each command's boundary.

Each ``python -m`` entry point (``sweep``, ``sweep.report``, ``sweep.sync``,
``sweep.calibrate``, ``sweep.engines``, ``sweep.doctor``, ``sweep.sim.predict``)
and the Optuna sweeper is called in this process with one of its first steps
replaced by one that raises the error under test -- the only way to bring
every error type to every boundary; what is checked is the real boundary
around the real ``main``: one line on stderr (``error: ...``, secrets masked),
the exit status of the error's class (2 input, 1 a fault after work started,
130 Ctrl-C), no traceback -- unless ``--debug``/``SPECSWEEP_DEBUG=1`` asks for
one. A static check keeps the family whole: no ``SystemExit`` raised from
library code, no literal 130 outside ``sweep/errors.py``.
"""

from __future__ import annotations

import ast
import errno
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from sweep import errors
from sweep.errors import EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-boundary-canary-4242"


def _error_types() -> list[tuple[str, Callable[[], BaseException], int, str]]:
    """(name, make it, exit status, a text its one line must hold)."""
    import yaml
    from omegaconf.errors import ConfigKeyError

    from launchers.base import LaunchFailure
    from sweep.io.atomic import DiskFull
    from sweep.bench.transport import TransportError
    from sweep.compose.yaml_guard import expanded_size
    from sweep.record.tracking import TrackingUnavailable
    from sweep.sim.constants import CalibrationError
    from hydra.errors import MissingConfigException

    def bomb() -> BaseException:
        try:
            expanded_size("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)), "c.yaml")
        except errors.ConfigError as err:
            return err
        raise AssertionError("no bomb")

    def wrapped() -> BaseException:  # Hydra wraps what a sweeper's constructor raises
        try:
            try:
                raise errors.ConfigError("hydra.sweeper.direction", "must be maximize or minimize")
            except errors.ConfigError as inner:
                raise RuntimeError("Error in call to target 'Sweeper'") from inner
        except RuntimeError as outer:
            return outer

    return [
        ("ConfigError", lambda: errors.ConfigError("spec.budget", f"must be in [1, 1024], got 0 {SECRET}"),
         EXIT_INPUT, "error: spec.budget: must be"),
        ("StorageError", lambda: errors.StorageError("hydra.sweeper.storage", "cannot connect"), EXIT_INPUT,
         "error: hydra.sweeper.storage: cannot connect"),
        ("CalibrationError", lambda: CalibrationError("hardware.perf.calibration", "no calibration file"),
         EXIT_INPUT, "error: hardware.perf.calibration"),
        ("SearchSpaceError", lambda: __import__("hydra_plugins.specsweep_optuna_sweeper._space",
                                                fromlist=["x"]).SearchSpaceError("spec.budget", "range() is empty"),
         EXIT_INPUT, "error: spec.budget: range() is empty"),
        ("alias bomb", bomb, EXIT_INPUT, "error: c.yaml: YAML aliases expand"),
        ("wrapped ConfigError", wrapped, EXIT_INPUT, "error: hydra.sweeper.direction"),
        ("InstallError", lambda: errors.InstallError("cmake failed; log: /tmp/build.log"), EXIT_FAILED,
         "error: cmake failed"),
        ("DiskFull", lambda: DiskFull("/data/result.json", OSError(errno.ENOSPC, "No space left on device")),
         EXIT_FAILED, "error: disk full: cannot write /data/result.json"),
        ("LaunchFailure", lambda: LaunchFailure("oom", "CUDA out of memory"), EXIT_FAILED,
         "error: the server did not start (oom)"),
        ("TransportError", lambda: TransportError("connect", "connection refused"), EXIT_FAILED,
         "error: connection refused"),
        ("TrackingUnavailable", lambda: TrackingUnavailable("MLflow at http://h is unreachable"), EXIT_FAILED,
         "error: MLflow at http://h is unreachable"),
        ("Failed", lambda: errors.Failed("no worker of the pool could run"), EXIT_FAILED, "error: no worker"),
        ("Interrupted", lambda: errors.Interrupted("resume with the same command"), EXIT_INTERRUPTED,
         "interrupted: resume with"),
        ("KeyboardInterrupt", lambda: KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"),
        ("PermissionError", lambda: PermissionError(errno.EACCES, "Permission denied", "/etc/x"), EXIT_INPUT,
         "error: /etc/x: Permission denied"),
        ("FileNotFoundError", lambda: FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/x"),
         EXIT_INPUT, "error: /no/x: No such file"),
        ("read-only", lambda: OSError(errno.EROFS, "Read-only file system", "/ro/x"), EXIT_INPUT,
         "error: /ro/x: Read-only file system"),
        ("ENOSPC", lambda: OSError(errno.ENOSPC, "No space left on device"), EXIT_FAILED, "error: disk full"),
        ("YAMLError", lambda: yaml.YAMLError("mapping values are not allowed here"), EXIT_INPUT,
         "error: mapping values are not allowed here"),
        ("Hydra MissingConfig", lambda: MissingConfigException("Cannot find primary config 'x'", "x"), EXIT_INPUT,
         "error: Cannot find primary config"),
        ("OmegaConf", lambda: ConfigKeyError("Key 'x' is not in struct"), EXIT_INPUT, "error: "),
        ("RecursionError", lambda: RecursionError("maximum recursion depth exceeded"), EXIT_INPUT,
         "error: input nested too deeply"),
        ("internal bug", lambda: TypeError(f"unsupported operand {SECRET}"), EXIT_FAILED,
         "error: internal error in"),
    ]


ERRORS = _error_types()


def _raiser(make: Callable[[], BaseException]) -> Callable[..., Any]:
    def raise_it(*_a: Any, **_k: Any) -> Any:
        raise make()
    return raise_it


def _commands(tmp_path: Path) -> dict[str, tuple[Callable[[pytest.MonkeyPatch, Callable[..., Any]], None],
                                                   Callable[[], int]]]:
    """name -> (put the raiser at one of its first steps, call its main -> exit status)."""
    import importlib

    from sweep import calibrate, doctor, engines, sync
    from sweep.engines import __main__ as engines_cli
    from sweep.report import __main__ as report
    from sweep.sim import predict

    main_mod = importlib.import_module("sweep.__main__")
    (tmp_path / "results").mkdir(exist_ok=True)

    def run_sweep() -> int:
        with pytest.raises(SystemExit) as info:
            main_mod.main()
        return int(info.value.code or 0)

    def run_sweeper() -> int:
        from hydra_plugins.specsweep_optuna_sweeper.optuna_sweeper import SpecsweepOptunaSweeper

        sweeper = SpecsweepOptunaSweeper.__new__(SpecsweepOptunaSweeper)
        sweeper._impl = type("Impl", (), {"sweep": staticmethod(_STATE["raiser"])})()
        with pytest.raises(SystemExit) as info:
            sweeper.sweep([])
        return int(info.value.code or 0)

    def patch_sweep(mp: pytest.MonkeyPatch, raiser: Callable[..., Any]) -> None:
        from sweep.compose import cmdline

        mp.setattr(sys, "argv", ["python -m sweep", "spec.budget=8"])
        mp.setattr(cmdline, "validate", raiser)

    return {
        "sweep": (patch_sweep, run_sweep),
        "sweep.report": (lambda mp, r: mp.setattr(report, "_parse", r), lambda: report.main(["--dir", "x"])),
        "sweep.sync": (lambda mp, r: mp.setattr("sweep.record.sync.sync_dir", r),
                       lambda: sync.main([str(tmp_path / "results")])),
        "sweep.calibrate": (lambda mp, r: mp.setattr(calibrate, "_parser", r), lambda: calibrate.main(["x"])),
        "sweep.engines": (lambda mp, r: mp.setattr(engines, "resolve", r), lambda: engines_cli.main(["llamacpp"])),
        "sweep.doctor": (lambda mp, r: mp.setattr("sweep.compose.cmdline.compose", r), lambda: doctor.main([])),
        "sweep.sim.predict": (lambda mp, r: mp.setattr("sweep.compose.cmdline.compose", r),
                              lambda: predict.main([])),
        "sweeper": (lambda mp, r: _STATE.__setitem__("raiser", r), run_sweeper),
    }


_STATE: dict[str, Any] = {}
COMMANDS = ["sweep", "sweep.report", "sweep.sync", "sweep.calibrate", "sweep.engines", "sweep.doctor",
            "sweep.sim.predict", "sweeper"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HYDRA_FULL_ERROR", errors.OWN_FULL_ERROR_ENV, errors.DEBUG_ENV):
        monkeypatch.setenv(var, "")  # restored (or removed) after the test, whatever main sets
        monkeypatch.delenv(var)
    monkeypatch.setenv("SPECSWEEP_BOUNDARY_TEST_KEY", SECRET)  # a secret-named env var: masked by value


@pytest.mark.parametrize("command", COMMANDS)
def test_every_error_type_reaches_the_boundary_as_one_line(command: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    patch, run = _commands(tmp_path)[command]
    for name, make, code, text in ERRORS:
        with monkeypatch.context() as mp:
            patch(mp, _raiser(make))
            got = run()
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert got == code, f"{command} / {name}: exit {got}, want {code}: {err}"
        assert "Traceback" not in err, f"{command} / {name}: {err}"
        assert len(lines) == 1 and lines[0].startswith(text), f"{command} / {name}: {lines}"
        assert SECRET not in err, f"{command} / {name}: the secret in {lines}"


@pytest.mark.parametrize("command", ["sweep", "sweep.report", "sweeper"])
def test_debug_shows_the_traceback(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    patch, run = _commands(tmp_path)[command]
    monkeypatch.setenv(errors.DEBUG_ENV, "1")
    patch(monkeypatch, _raiser(lambda: TypeError("a harness bug")))
    assert run() == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback" in err and "TypeError: a harness bug" in err
    assert err.strip().splitlines()[-1].startswith("error: internal error")


def test_hydra_full_error_set_by_the_user_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    patch, run = _commands(tmp_path)["sweep.doctor"]
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    patch(monkeypatch, _raiser(lambda: errors.ConfigError("spec.budget", "bad")))
    assert run() == EXIT_INPUT
    assert "Traceback" in capsys.readouterr().err


def test_debug_flag_is_taken_off_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from sweep.report import __main__ as report

    seen: list[Any] = []

    def parse(argv: Any) -> Any:
        seen.append(argv)
        raise KeyError("x")

    monkeypatch.setattr(report, "_parse", parse)
    assert report.main(["--dir", "x", "--debug"]) == EXIT_FAILED
    assert seen == [["--dir", "x"]] and "Traceback" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the family stays whole

ENTRY_MODULES = {  # separate programs with their own exit conventions, not library code
    "sweep/sim/server.py", "sweep/bench/_sandbox_boot.py", "launchers/_reaper.py", "launchers/_ssh_watchdog.py",
}


def _main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def test_library_code_never_raises_system_exit_and_130_lives_in_errors() -> None:
    found = []
    for pkg in ("sweep", "launchers", "hydra_plugins"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel in ENTRY_MODULES:
                continue
            tree = ast.parse(path.read_text())
            guarded = {id(n) for g in ast.walk(tree) if _main_guard(g) for n in ast.walk(g)}
            for node in ast.walk(tree):
                if id(node) in guarded:
                    continue
                if isinstance(node, ast.Call) and (
                        (isinstance(node.func, ast.Name) and node.func.id == "SystemExit")
                        or (isinstance(node.func, ast.Attribute) and node.func.attr == "exit"
                            and isinstance(node.func.value, ast.Name) and node.func.value.id == "sys")):
                    found.append(f"{rel}:{node.lineno} SystemExit/sys.exit")
                if isinstance(node, ast.Constant) and node.value == 130 and rel != "sweep/errors.py":
                    found.append(f"{rel}:{node.lineno} literal 130")
    allowed = {"sweep/errors.py", "sweep/__main__.py", "sweep/compose/cmdline.py",
               "hydra_plugins/specsweep_optuna_sweeper/optuna_sweeper.py",
               # a script run by the engine's own venv (no sweep there): its exit is its one line
               "sweep/engines/_gguf_to_hf.py"}
    assert [f for f in found if f.split(":")[0] not in allowed] == []


@pytest.mark.parametrize("module, argv, line", [
    ("sweep.report", ["/nonexist"], "error: /nonexist: is no argument this command takes (python -m sweep.report"),
    ("sweep.sync", [], "error: dir: is required (python -m sweep.sync --help)"),
    ("sweep.sync", [".", "--bogus"], "error: --bogus: is no argument this command takes"),
    ("sweep.calibrate", ["--box"], "error: --box: expected one argument"),
    ("sweep.engines", ["nope", "--x"], "error: --x: is no argument this command takes"),
    ("sweep.schedule", ["--dir", ".", "--percentile", "abc"], "error: --percentile: invalid float value: 'abc'"),
    ("sweep.schedule", ["--dir", ".", "--family", "x"], "error: --family: only with --export"),
    ("sweep.verify_dynamic", ["--dir", ".", "--rounds", "x"], "error: --rounds: invalid int value: 'x'"),
    ("sweep.verify_dynamic", ["--dir", "."], "error: --dir: .: no dynamic-<engine>.yaml"),
    ("sweep.doctor", ["-x"], "error: -x: is no option of python -m sweep.doctor"),
    ("sweep", ["--info", "nope"], "error: --info: invalid choice: 'nope'"),
])
def test_a_usage_error_of_any_command_is_one_line(module: str, argv: list[str], line: str, tmp_path: Path) -> None:
    """argparse's own usage errors printed a usage block and the error: one line now, exit 2."""
    import subprocess
    import sys

    from _support import subprocess_env

    proc = subprocess.run([sys.executable, "-m", module, *argv], cwd=tmp_path, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(line), proc.stderr
    assert proc.stdout == ""
