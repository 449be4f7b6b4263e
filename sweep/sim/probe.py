"""Measure a CPU box's public-figure equivalents: memory bandwidth and matmul throughput.

    python -m sweep.sim.probe [--threads N] [--rounds 5] [--json]

``--threads N`` measures as an engine running N threads would see the box
(both the read and the BLAS matmul use N threads): give it the engine's own
thread count (llama.cpp ``server.threads``).

A GPU box's figures come from its spec sheet (``conf/hardware/*.yaml`` ``perf``);
a CPU box has none that mean anything for an inference engine (turbo clocks,
shared memory channels, a VM's share of a host), so the project measures them
instead of inventing them, the way STREAM does:

* ``mem_bw_tbs``: read bandwidth streaming a 256 MB array (far beyond the L3),
  split over ``threads`` threads (numpy releases the GIL in its reductions), in
  TB/s -- what streaming a model's weights once per step can reach;
* ``matmul_tflops``: float32 matrix multiply (numpy's BLAS, all its threads), in
  TFLOPS -- the compute ceiling the fitted ``compute_eff`` is a fraction of.

Median of ``rounds`` rounds: a shared machine is noisy, and the median is the
figure an engine sees most of the time. The twin's kernel efficiencies are
fitted relative to these figures, so they need not be peak numbers -- only
measured the same way on the box the landscape was recorded on (the recorder
stores them in the landscape's ``machine.perf``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

MB = 1 << 20


def read_bandwidth_gbs(size_mb: int = 256, threads: int = 0, rounds: int = 5) -> float:
    """Median GB/s of summing a float32 array of ``size_mb`` MB split over ``threads`` threads."""
    import numpy as np

    n_threads = threads or os.cpu_count() or 1
    data = np.ones(size_mb * MB // 4, dtype=np.float32)
    parts = np.array_split(data, n_threads)
    rates = []
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(np.sum, parts))  # warm the pages
        for _ in range(rounds):
            t0 = time.perf_counter()
            list(pool.map(np.sum, parts))
            rates.append(data.nbytes / (time.perf_counter() - t0) / 1e9)
    return statistics.median(rates)


def matmul_tflops(n: int = 1024, rounds: int = 5) -> float:
    """Median TFLOPS of an n x n float32 matrix multiply."""
    import numpy as np

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    a @ b  # warm up BLAS threads
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        a @ b
        rates.append(2.0 * n ** 3 / (time.perf_counter() - t0) / 1e12)
    return statistics.median(rates)


def measure(threads: int = 0, rounds: int = 5) -> dict[str, Any]:
    """The ``hardware.perf`` figures of this machine, and how they were measured."""
    bw = read_bandwidth_gbs(threads=threads, rounds=rounds)
    fl = matmul_tflops(rounds=rounds)
    return {"mem_bw_tbs": float(f"{bw / 1e3:.4g}"), "matmul_tflops": float(f"{fl:.4g}"),
            "probe": f"python -m sweep.sim.probe --threads {threads or os.cpu_count()}: read of 256 MB float32, "
                     f"1024^2 float32 matmul; median of {rounds}"}


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def measure_in_subprocess(threads: int = 0, rounds: int = 5) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter, so BLAS starts with ``threads`` threads."""
    import subprocess

    env = dict(os.environ)
    if threads:
        env.update({k: str(threads) for k in BLAS_THREADS})
    out = subprocess.run([sys.executable, "-m", "sweep.sim.probe", "--json", "--threads", str(threads),
                          "--rounds", str(rounds)], capture_output=True, text=True, env=env, check=True, timeout=600)
    return dict(json.loads(out.stdout))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweep.sim.probe", description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=0, help="threads (default: all cores)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.threads < 0:
        print("error: --rounds must be >= 1 and --threads >= 0", file=sys.stderr)
        return 2
    if args.threads and "numpy" not in sys.modules:  # BLAS reads its thread count when numpy loads
        for k in BLAS_THREADS:
            os.environ[k] = str(args.threads)
    got = measure(args.threads, args.rounds)
    if args.json:
        print(json.dumps(got))
    else:
        print(f"mem_bw_tbs: {got['mem_bw_tbs']}     # {got['mem_bw_tbs'] * 1e3:.1f} GB/s read")
        print(f"matmul_tflops: {got['matmul_tflops']}  # {got['matmul_tflops'] * 1e3:.1f} GFLOPS float32")
        print(f"# {got['probe']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
