"""Wall time of a 12-trial Optuna sweep on 1 vs 3 simulated hosts (the host pool).

On the real boxes a trial is dominated by the server start (~150 s to load
the model) and the benchmark after it is short. This reproduces that shape on
the simulator: ``server.sim.load_seconds=10`` and a tiny workload (one cell,
16 tokens, no coding eval), and every trial is a distinct config (the grid
sampler over budget x topk x window, 24 cells), so every trial restarts its
server. Both sweeps are the real command line,

    python -m sweep -m hydra/sweeper=optuna hydra/sweeper/sampler=grid ~hydra/sweeper/space \\
        'launcher.hosts=[{server_port: P1}, ...]' ...

run one after the other in this process's machine, each in a fresh temp dir
with its own study (the pool's default journal file) and free loopback ports.
The wall time runs from the command's start to its exit (Hydra start,
workers, report). Afterwards each study is checked: 12 COMPLETE trials, each
with its own server start, so the comparison is like for like.

    python benchmarks/parallel_sweep.py [--trials 12] [--hosts 3] [--load-seconds 10]
        [--plain]   # also time the plain sweeper (no pool) on one box

Target: speedup >= 2.5x with 3 hosts (the ideal is 3x: 12 trials in 4 rounds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 2.5
SPACE = ["spec.budget=choice(4,6,8)", "spec.topk=choice(1,2)",
         "spec.window=choice(512,1024,2048,4096)"]   # 24 feasible cells on b300
WORKLOAD = ["workload=smoke", "workload.coding=off", "workload.concurrency=[1]",
            "workload.max_tokens=16", "workload.min_requests=1"]


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def run_sweep(hosts: int | None, trials: int, load_seconds: float, work: Path) -> dict[str, object]:
    """One sweep; ``hosts=None``: the plain sweeper on one box (no pool)."""
    sweep_dir = work / "sweep"
    ports = free_ports(hosts or 1)
    where = [f"server.port={ports[0]}"] if hosts is None else \
        ["launcher.hosts=[" + ",".join(f"{{server_port: {p}}}" for p in ports) + "]"]
    storage = [] if hosts is not None else [f"hydra.sweeper.storage=journal:{sweep_dir}/optuna.journal"]
    argv = [sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna",
            "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", *SPACE, *where, *storage,
            f"hydra.sweeper.n_trials={trials}", "hydra.sweeper.study_name=parallel-bench",
            "hydra.sweeper.plots.enabled=false", f"hydra.sweep.dir={sweep_dir}",
            f"server.sim.load_seconds={load_seconds}", "mlflow.enabled=false", *WORKLOAD]
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = work / "sweep.log"
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run(argv, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sweep on {hosts or 'plain'} host(s) failed ({proc.returncode}):\n"
                         + log.read_text()[-4000:])
    return {"wall_s": wall, **check(sweep_dir, trials)}


def check(sweep_dir: Path, trials: int) -> dict[str, object]:
    """The study has ``trials`` COMPLETE trials, each with its own server start."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "optuna.journal")))
    study = optuna.load_study(study_name="parallel-bench", storage=storage)
    states = [t.state for t in study.trials]
    if states != [TrialState.COMPLETE] * trials:
        raise SystemExit(f"{sweep_dir}: expected {trials} COMPLETE trials, got "
                         f"{[s.name for s in states]}")
    starts, startup = 0, []
    for t in study.trials:
        doc = json.loads((Path(t.user_attrs["job_dir"]) / "result.json").read_text())
        server = doc.get("server") or {}
        if not server.get("reused"):
            starts += 1
            startup.append(float(server.get("startup_s") or 0.0))
    hosts = {t.user_attrs.get("host") for t in study.trials} - {None}
    return {"trials": len(states), "starts": starts, "hosts_used": len(hosts),
            "mean_startup_s": sum(startup) / max(len(startup), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--load-seconds", type=float, default=10.0)
    ap.add_argument("--plain", action="store_true",
                    help="also time the plain sweeper (no pool) on one box")
    args = ap.parse_args(argv)
    print(f"{args.trials}-trial grid sweep on the simulator: server.sim.load_seconds="
          f"{args.load_seconds:g}, tiny workload, every trial a new config (a server start); "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}", flush=True)
    runs: list[tuple[str, int | None]] = [("1 host", 1), (f"{args.hosts} hosts", args.hosts)]
    if args.plain:
        runs.insert(0, ("plain (no pool)", None))
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="parallel-sweep-") as tmp:
        for name, hosts in runs:
            work = Path(tmp) / name.replace(" ", "-").replace("(", "").replace(")", "")
            work.mkdir()
            r = run_sweep(hosts, args.trials, args.load_seconds, work)
            results[name] = r
            print(f"  {name:>16}: {r['wall_s']:7.1f} s wall  ({r['trials']} trials, "
                  f"{r['starts']} server starts, mean start {r['mean_startup_s']:.1f} s, "
                  f"{r['hosts_used']} host(s) used)", flush=True)
    one = float(results["1 host"]["wall_s"])  # type: ignore[arg-type]
    many = float(results[f"{args.hosts} hosts"]["wall_s"])  # type: ignore[arg-type]
    ideal = args.trials / math.ceil(args.trials / args.hosts)
    speedup = one / many
    print(f"speedup {args.hosts} hosts vs 1: {speedup:.2f}x (ideal {ideal:.1f}x; target >= "
          f"{TARGET}x: {'met' if speedup >= TARGET else 'NOT met'})")
    if args.plain:
        plain = float(results["plain (no pool)"]["wall_s"])  # type: ignore[arg-type]
        print(f"pool of 1 vs the plain sweeper: {one / plain:.2f}x the plain wall time "
              "(the pool's own overhead)")
    return 0 if speedup >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
