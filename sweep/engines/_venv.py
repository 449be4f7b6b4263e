"""Install method ``pip_venv``: a pinned Python server in its own virtual environment.

Why its own venv: a Python engine (vLLM) pins its own torch, transformers,
pydantic and fastapi; installed into the project's environment it would
replace ours (and SGLang's parser the contract tests read). So it lives in
``<install.dir>/venv`` inside the engines cache, keyed by version and CPU,
and the server group starts it as ``<venv>/bin/python -m <module>``.

The recipe is the server group's ``install`` block (YAML):
``requirements`` are installed with the venv's pip (which reads the same
pip configuration, local wheel directories included), then ``remove``
uninstalls what a stock install gets wrong (vLLM's CPU wheel pulls CUDA builds
of torchvision/torchaudio/torchcodec, and transformers then fails with
``operator torchvision::nms does not exist``), ``check`` is a Python snippet the
venv must run without error, and each of ``optional`` (e.g. ``arctic-inference``
for suffix decoding, built from source) is tried and recorded as available or
not with its one-line reason -- a method that cannot build here is said to be
unavailable, it does not fail the install. Before anything is downloaded,
the free disk (``min_free_gb``) and this machine's memory (``min_mem_gb``) are
checked: what is missing is said in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from sweep.engines._common import (InstallError, check_memory, check_room, complete_entry, locked, pip_reason,
                                   read_manifest, run_logged, say, write_manifest)

# what decides the venv (optional packages do not: they are tried on top, each recorded)
RECIPE_KEYS = ("package", "version", "cpu_target", "requirements", "remove", "check")


def recipe_of(install: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``install`` that decide the venv (what the manifest must match)."""
    return {k: install.get(k) for k in RECIPE_KEYS}


def venv_dir(install: Mapping[str, Any]) -> Path:
    return Path(str(install["dir"])) / "venv"


def entry(install: Mapping[str, Any]) -> Path:
    """The venv's interpreter (the server group runs ``<it> -m <module>``)."""
    return venv_dir(install) / "bin" / "python"


def python(install: Mapping[str, Any]) -> str:
    """The interpreter weights steps run with: the venv's (its transformers and torch)."""
    return str(entry(install))


def complete(install: Mapping[str, Any]) -> Path | None:
    """The venv's interpreter when the entry is complete for this recipe, else None."""
    return complete_entry(Path(str(install["dir"])), recipe_of(install), entry(install))


def optional_status(install: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: "ok" | reason}`` of the optional packages, as the install recorded them."""
    manifest = read_manifest(Path(str(install["dir"]))) or {}
    status = manifest.get("optional")
    if not isinstance(status, Mapping):
        return {}
    return {str(k): (v.get("status") if isinstance(v, Mapping) else v) for k, v in status.items()}


def _ensure_optional(install: Mapping[str, Any], python: Path, log: Path) -> None:
    """Try each optional package the manifest has no verdict on for its requirement; record it."""
    root = Path(str(install["dir"]))
    manifest = read_manifest(root) or {}
    found = manifest.get("optional")
    done: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
    changed = False
    for spec in install.get("optional") or []:
        name = str(spec.get("name") or spec["requirement"])
        seen = done.get(name)
        if isinstance(seen, Mapping) and seen.get("requirement") == spec["requirement"]:
            continue  # tried with this requirement: ok, or unavailable for a reason already said
        status = _try_optional(python, spec, log)
        if status != "ok":
            say(f"optional {name} unavailable: {status}")
        done[name] = {"requirement": spec["requirement"], "status": status}
        changed = True
    if changed:
        write_manifest(root, {**manifest, "optional": done})


def _pip(python: Path, *args: str) -> list[str]:
    return [str(python), "-m", "pip", "--disable-pip-version-check", *args]


def _env(python: Path | None = None) -> dict[str, str]:
    """The environment of the venv's commands: its bin first on PATH (a source build's cmake
    must find this interpreter, not the project's), no PYTHONPATH (our checkout stays out)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    if python is not None:
        env["VIRTUAL_ENV"] = str(python.parent.parent)
        env["PATH"] = str(python.parent) + os.pathsep + env.get("PATH", "")
    return env


def _try_optional(python: Path, spec: Mapping[str, Any], log: Path) -> str:
    """Install one optional package (and its build requirements); ``ok`` or why not, in one line."""
    name = str(spec.get("name") or spec["requirement"])
    build = [str(x) for x in spec.get("build_requires") or []]
    try:
        if build:
            run_logged(_pip(python, "install", *build), log, what=f"pip install {' '.join(build)}", env=_env(python),
                       progress="Collecting")
        flags = ["--no-build-isolation"] if build else []
        run_logged(_pip(python, "install", *flags, str(spec["requirement"])), log,
                   what=f"pip install {spec['requirement']}", env=_env(python), progress="Collecting")
        if spec.get("check"):
            proc = subprocess.run([str(python), "-c", str(spec["check"])], capture_output=True, text=True,
                                  env=_env(python), timeout=300)
            if proc.returncode != 0:
                return f"installed but does not import: {pip_reason(proc.stderr)}"
    except InstallError:
        return build_reason(log.read_text(errors="replace"))
    say(f"optional {name}: ok")
    return "ok"


# what a failed source build says first, most telling first (a missing module can be a mere warning)
_BUILD_ERRORS = tuple(re.compile(p) for p in (
    r'Could not find a package configuration file provided by "[^"]+"',
    r"fatal error: .*",
    r"CMake Error.*",
    r"error: command .* failed.*",
    r"No module named [\w.']+",
))


def build_reason(log_text: str) -> str:
    """Why a source build failed, in one line: its most telling error, else pip's last word."""
    tail = log_text[-200_000:]
    for pattern in _BUILD_ERRORS:
        m = pattern.search(tail)
        if m:
            return " ".join(m.group(0).split())[:300]
    return pip_reason(tail)[:300]


def make(install: Mapping[str, Any], **_: Any) -> Path:
    """Make the venv of ``install`` complete (creating it when needed); its interpreter."""
    root = Path(str(install["dir"]))
    what = f"{install['package']} {install['version']}"
    with locked(root.parent / f".{root.name}.lock"):
        done = complete(install)
        if done is not None:
            say(f"server already installed: {done}")
            _ensure_optional(install, done, root / "install.log")
            return done
        check_memory(install.get("min_mem_gb"), what=what)
        check_room(root.parent, install.get("min_free_gb"), what=what)
        t0 = time.monotonic()
        if root.exists():  # a half-made entry (no manifest): start over
            shutil.rmtree(root)
        root.mkdir(parents=True)
        log = root / "install.log"
        log.write_text("")
        say(f"creating the venv of {what} in {venv_dir(install)} (log: {log})")
        base = str(install.get("python") or sys.executable)
        run_logged([base, "-m", "venv", str(venv_dir(install))], log, what="python -m venv", env=_env())
        python = entry(install)
        requirements = [str(r) for r in install.get("requirements") or []]
        if not requirements:
            raise InstallError("server.install.requirements is empty: nothing to install")
        try:
            run_logged(_pip(python, "install", *requirements), log, what=f"pip install {' '.join(requirements)}",
                       env=_env(python), progress="Collecting")
        except InstallError as err:
            raise InstallError(f"pip install {' '.join(requirements)} failed: "
                               f"{pip_reason(log.read_text(errors='replace'))}; log: {log}") from err
        remove = [str(r) for r in install.get("remove") or []]
        if remove:
            run_logged(_pip(python, "uninstall", "-y", *remove), log, what=f"pip uninstall {' '.join(remove)}",
                       env=_env(python))
        if install.get("check"):
            proc = subprocess.run([str(python), "-c", str(install["check"])], capture_output=True, text=True,
                                  env=_env(python), timeout=600)
            if proc.returncode != 0:
                with open(log, "a") as fh:
                    fh.write(proc.stdout + proc.stderr)
                raise InstallError(f"{what} is installed but its check fails: {pip_reason(proc.stderr)}; "
                                   f"log: {log}")
        seconds = round(time.monotonic() - t0, 1)
        write_manifest(root, {"recipe": recipe_of(install), "install_seconds": seconds,
                              "size_mb": round(_size(venv_dir(install)) / 1e6)})
        say(f"installed {what} in {seconds:.0f} s: {python}")
        _ensure_optional(install, python, log)
        return python


def _size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total
