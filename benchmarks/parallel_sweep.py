"""Wall time of a 12-trial Optuna sweep on 1 vs 3 simulated hosts (the host pool) or SLURM jobs.

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
    python benchmarks/parallel_sweep.py --backend slurm   # launcher=slurm, n_jobs=3 vs 1

``--backend slurm`` starts (or reuses) the single-host test cluster of
``tests/_support/slurm_cluster.py`` (three slurmd: n1..n3) and runs the same
study with ``launcher=slurm``: every trial one SLURM job, 3 jobs at a time
(``hydra.sweeper.n_jobs=3``) against 1 at a time. The trial is made of what a
real one is made of: mostly the model load (the simulator's emulated
``load_seconds``, a wait, 20 s by default here; 150 s on a real B300), plus the
job's own Python start (Hydra, Optuna and the app: a few CPU-seconds). This
machine has 2 CPUs for "three nodes", so the Python starts of three jobs
compete for 2 cores where a cluster gives each job its own node; the load
time, which the jobs really do overlap, is what a cluster overlaps too. A
short load would measure the 2 CPUs, not the scheduling.

Target: speedup >= 2.5x with 3 hosts or 3 jobs (the ideal is 3x: 12 trials in 4 rounds).
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


def run_sweep(hosts: int | None, trials: int, load_seconds: float, work: Path,
              slurm: dict[str, str] | None = None) -> dict[str, object]:
    """One sweep; ``hosts=None``: the plain sweeper on one box (no pool); ``slurm``: the
    cluster's environment, ``hosts`` jobs at a time (launcher=slurm)."""
    sweep_dir = work / "sweep"
    ports = free_ports(hosts or 1)
    if slurm is not None:
        where = ["launcher=slurm", f"hydra.sweeper.n_jobs={hosts}", "launcher.poll_s=0.5",
                 "launcher.job_name=bench"]
    elif hosts is None:
        where = [f"server.port={ports[0]}"]
    else:
        where = ["launcher.hosts=[" + ",".join(f"{{server_port: {p}}}" for p in ports) + "]"]
    storage = [] if hosts is not None and slurm is None else \
        [f"hydra.sweeper.storage=journal:{sweep_dir}/optuna.journal"]
    argv = [sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna",
            "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", *SPACE, *where, *storage,
            f"hydra.sweeper.n_trials={trials}", "hydra.sweeper.study_name=parallel-bench",
            "hydra.sweeper.plots.enabled=false", f"hydra.sweep.dir={sweep_dir}",
            f"server.sim.load_seconds={load_seconds}", "mlflow.enabled=false", *WORKLOAD]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(slurm or {}),
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
    hosts = {t.user_attrs.get("host") or t.user_attrs.get("slurm_node") for t in study.trials} - {None}
    return {"trials": len(states), "starts": starts, "hosts_used": len(hosts),
            "mean_startup_s": sum(startup) / max(len(startup), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--load-seconds", type=float, default=None,
                    help="the emulated model load (default: 10 s; 20 s with --backend slurm)")
    ap.add_argument("--plain", action="store_true",
                    help="also time the plain sweeper (no pool) on one box")
    ap.add_argument("--backend", choices=("pool", "slurm"), default="pool",
                    help="pool: launcher.hosts (local); slurm: launcher=slurm on the test cluster")
    args = ap.parse_args(argv)
    slurm: dict[str, str] | None = None
    unit = "host"
    if args.backend == "slurm":
        sys.path.insert(0, str(ROOT / "tests"))
        from _support.slurm_cluster import start

        cluster = start()
        slurm, unit = cluster.env, "job"
        print(f"SLURM test cluster: {cluster.conf} ({cluster.proctrack})", flush=True)
    if args.load_seconds is None:
        args.load_seconds = 20.0 if slurm is not None else 10.0
    print(f"{args.trials}-trial grid sweep on the simulator: server.sim.load_seconds="
          f"{args.load_seconds:g}, tiny workload, every trial a new config (a server start); "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}", flush=True)
    runs: list[tuple[str, int | None]] = [(f"1 {unit}", 1), (f"{args.hosts} {unit}s", args.hosts)]
    if args.plain:
        runs.insert(0, ("plain (no pool)", None))
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="parallel-sweep-") as tmp:
        for name, hosts in runs:
            work = Path(tmp) / name.replace(" ", "-").replace("(", "").replace(")", "")
            work.mkdir()
            r = run_sweep(hosts, args.trials, args.load_seconds, work,
                          slurm if hosts is not None else None)
            results[name] = r
            print(f"  {name:>16}: {r['wall_s']:7.1f} s wall  ({r['trials']} trials, "
                  f"{r['starts']} server starts, mean start {r['mean_startup_s']:.1f} s, "
                  f"{r['hosts_used']} {'node' if slurm else 'host'}(s) used)", flush=True)
    one = float(results[f"1 {unit}"]["wall_s"])  # type: ignore[arg-type]
    many = float(results[f"{args.hosts} {unit}s"]["wall_s"])  # type: ignore[arg-type]
    ideal = args.trials / math.ceil(args.trials / args.hosts)
    speedup = one / many
    print(f"speedup {args.hosts} {unit}s vs 1: {speedup:.2f}x (ideal {ideal:.1f}x; target >= "
          f"{TARGET}x: {'met' if speedup >= TARGET else 'NOT met'})")
    if args.plain:
        plain = float(results["plain (no pool)"]["wall_s"])  # type: ignore[arg-type]
        print(f"pool of 1 vs the plain sweeper: {one / plain:.2f}x the plain wall time "
              "(the pool's own overhead)")
    print(f"speedup: {speedup:.2f}x")
    return 0 if speedup >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
