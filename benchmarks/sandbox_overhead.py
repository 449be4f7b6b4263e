"""What the coding sandbox costs per problem: bwrap vs the fallback vs before.

Runs the five seed problems exactly as the coding eval does (the
simulator's correct answer -> ``program_for`` -> ``run_python`` with the
seed workload's limits) through four variants, interleaved in one process
and rotated each round so drift and load hit all of them alike:

* ``bare``     -- ``python -I -S -B`` on the program, no isolation at all (the floor);
* ``before``   -- the in-process sandbox this project had before issue 11, loaded
                  from git (``--old-rev``; default: the parent of the commit that
                  replaced it);
* ``bwrap``    -- the sandbox now, through bubblewrap;
* ``fallback`` -- the sandbox now, through the built-in bootstrap.

Printed per variant: median wall time per problem over the rounds (each
round runs all five problems), its range, and the ratio to ``before``.
The first call of each variant (bwrap's usability check, the probe) is
warmed up outside the measurement.

    python benchmarks/sandbox_overhead.py [--rounds 7] [--old-rev REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweep.bench import sandbox  # noqa: E402
from sweep.bench.coding import five_problems, program_for  # noqa: E402
from sweep.sim.text import code_answer  # noqa: E402

TIMEOUT_S, MEMORY_MB = 10.0, 512   # conf/workload/seed.yaml


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _old_module(rev: str | None) -> object:
    if rev is None:  # the newest commit that touched the old bootstrap is the one that removed it
        rev = _git("log", "-n1", "--format=%H", "-S_BOOTSTRAP", "HEAD", "--", "sweep/bench/sandbox.py") + "^"
    path = Path(tempfile.mkdtemp(prefix="sbx-bench-")) / "old_sandbox.py"
    path.write_text(_git("show", f"{rev}:sweep/bench/sandbox.py"))
    spec = importlib.util.spec_from_file_location("old_sandbox", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_sandbox"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    print(f"before = sweep/bench/sandbox.py at {_git('rev-parse', '--short', rev)}")
    return mod


def _bare(program: str) -> bool:
    with tempfile.TemporaryDirectory() as d:
        Path(d, "main.py").write_text(program)
        return subprocess.run([sys.executable, "-I", "-S", "-B", "main.py"], cwd=d, capture_output=True,
                              timeout=TIMEOUT_S, check=False).returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--old-rev", default=None)
    args = ap.parse_args()
    old = _old_module(args.old_rev)
    programs = [program_for(p, code_answer(p.prompt) or "") for p in five_problems()]
    variants: dict[str, Callable[[str], bool]] = {
        "bare": _bare,
        "before": lambda code: old.run_python(code, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB).passed,
        "bwrap": lambda code: sandbox.run_python(code, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB,
                                                 mechanism="bwrap").passed,
        "fallback": lambda code: sandbox.run_python(code, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB,
                                                    mechanism="fallback").passed,
    }
    for name, run in variants.items():  # warm-up: first-call checks, imports, page cache
        assert run(programs[0]), f"{name}: a correct answer failed"
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    for r in range(args.rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            t0 = time.perf_counter()
            ok = all(variants[name](prog) for prog in programs)
            times[name].append((time.perf_counter() - t0) / len(programs))
            assert ok, f"{name}: a correct answer failed"
    base = statistics.median(times["before"])
    print(f"{args.rounds} rounds x {len(programs)} problems; wall time per problem (median, range):")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:9s} {med * 1000:7.1f} ms  ({min(ts) * 1000:.1f}-{max(ts) * 1000:.1f})  "
              f"x{med / base:.2f} vs before")


if __name__ == "__main__":
    main()
