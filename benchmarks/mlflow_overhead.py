"""What recording one trial in MLflow costs: wall time of ``Tracker.log_trial``.

A trial ends with ``sweep.trial.run._record``: one ``Tracker(settings)`` and one
``log_trial(result, job_dir)`` into MLflow's default store (sqlite). This
times exactly that, on a realistic result, in three situations:

* fresh store, new process -- ``python -m sweep`` in a new directory: the
  first trial imports mlflow and creates (migrates) ``mlflow.db``;
* warm store, new process  -- the next ``python -m sweep`` in that directory;
* warm store, same process -- jobs 2.. of a multirun (mlflow already imported).

Each repetition logs a distinct result (so nothing is found and skipped);
every new-process figure is one fresh interpreter. Printed: median and range
of the measured wall times, per situation.

The result comes from a real run of the pipeline on the simulator unless
``--result`` names one: ``python -m sweep workload=smoke`` with the default
job's matrix (contexts 60/1024/4096 x concurrency 1/8/32/64, 12 cells,
short answers) on a free loopback port, with MLflow off.

    python benchmarks/mlflow_overhead.py [--reps 5] [--result outputs/.../result.json] [--dir DIR]

``--dir`` puts the stores on the filesystem to measure (sqlite syncs to disk
on every commit, so a network or cloud volume costs far more than tmpfs).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ["workload=smoke", "workload.contexts=[60,1024,4096]", "workload.concurrency=[1,8,32,64]",
          "server.sim.load_seconds=0.2", "mlflow.enabled=false"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # loopback only
    env.setdefault("DO_NOT_TRACK", "true")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def real_result(work: Path) -> Path:
    """result.json of a real pipeline run on the simulator (MLflow off)."""
    run = work / "pipeline"
    run.mkdir()
    cmd = [sys.executable, "-m", "sweep", *MATRIX, f"server.port={_free_port()}"]
    print(f"producing a result: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=run, env=_env(), capture_output=True, text=True, timeout=900)
    found = glob.glob(str(run / "outputs" / "*" / "*" / "result.json"))
    if out.returncode != 0 or not found:
        sys.exit(f"the pipeline run failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    print(f"  done in {time.perf_counter() - t0:.1f} s: {found[0]}", flush=True)
    return Path(found[0])


# -- worker: one interpreter, like the end of a `python -m sweep` process -------------
def worker(job_src: Path, store: Path, first: int, count: int) -> None:
    """Log ``count`` distinct copies of the result; print one wall time per line."""
    src_doc = json.loads((job_src / "result.json").read_text())
    from sweep.record.tracking import Tracker
    from sweep.report.mlflow_artifacts import trial_plots

    settings = {"enabled": True, "tracking_uri": f"sqlite:///{store / 'mlflow.db'}", "experiment": "specsweep"}
    for k in range(first, first + count):
        job = store / "jobs" / str(k)
        shutil.copytree(job_src, job)
        doc = json.loads(json.dumps(src_doc))
        doc["trial"].update({"job_dir": str(job), "sweep_dir": None, "job_num": k})
        doc["mlflow"] = {"run_id": None, "synced": False}
        (job / "result.json").write_text(json.dumps(doc))
        t0 = time.perf_counter()
        # what sweep.trial.run._record does
        run_id = Tracker(settings).log_trial(doc, job, parent_run_id=None, plots=trial_plots)
        wall = time.perf_counter() - t0
        if not run_id:
            sys.exit("log_trial returned no run id (see the warning above)")
        print(json.dumps({"wall_s": wall}), flush=True)


def _spawn(job_src: Path, store: Path, first: int, count: int) -> list[float]:
    cmd = [sys.executable, __file__, "--worker", str(job_src), str(store), str(first), str(count)]
    out = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"worker failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return [json.loads(line)["wall_s"] for line in out.stdout.splitlines() if line.startswith("{")]


def _line(label: str, values: list[float]) -> str:
    each = " ".join(f"{v:.2f}" for v in values)
    return (f"  {label:<34} median {statistics.median(values):6.2f} s   "
            f"(min {min(values):.2f}, max {max(values):.2f}; each: {each})")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.path.insert(0, str(ROOT))
        worker(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions per situation (default 5)")
    parser.add_argument("--result", type=Path, help="a result.json (its job dir's server.log is logged too)")
    parser.add_argument("--dir", type=Path, help="where the stores go (default: a temporary directory)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mlflow-overhead-", dir=args.dir))
    try:
        result = args.result.resolve() if args.result else real_result(work)
        job_src = result.parent
        doc = json.loads(result.read_text())
        import mlflow

        print(f"result: {result} ({len(doc.get('cells') or [])} cells, status {doc.get('status')})")
        print(f"code: {ROOT}   mlflow {mlflow.__version__}   python {sys.version.split()[0]}   stores under {work}")
        if os.environ.get("LD_PRELOAD"):
            print(f"LD_PRELOAD={os.environ['LD_PRELOAD']} (e.g. a simulated slow disk)")
        print(f"Tracker.log_trial wall time, {args.reps} repetitions each:", flush=True)

        fresh = []
        for i in range(args.reps):
            store = work / f"fresh-{i}"
            store.mkdir()
            fresh += _spawn(job_src, store, 0, 1)
        print(_line("fresh sqlite store, new process", fresh), flush=True)

        warm_store = work / "warm"
        warm_store.mkdir()
        _spawn(job_src, warm_store, 0, 1)  # creates the store; not counted
        warm = []
        for i in range(args.reps):
            warm += _spawn(job_src, warm_store, 1 + i, 1)
        print(_line("warm store, new process", warm), flush=True)

        same = _spawn(job_src, warm_store, 100, args.reps + 1)[1:]  # the first one pays the imports
        print(_line("warm store, same process (job 2+)", same), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
