"""Every fault of issue 11, run for real: one row each, and whether the harness survived it.

Why: the issue was found by trying faults as an attacker and a careless user
would ("32 of 40 faults were survived, 44 of 71 bad inputs refused cleanly").
This runs them all again -- the very scenarios of ``tests/faults/`` (their
helpers: ``fault_runs``, ``orphan_scenarios``, ``bad_inputs``, the sandbox
tests' hostile snippets) as real processes with real signals, on the
simulator, on ``stand_in.py`` (a stand-in server for protocol faults started
through the normal launcher) and on the hostile responder -- and prints, per
case: the trial status and failure reason, the exit status, the server
processes left afterwards (orphans), the secret canary found in any file or
output (secrets), the result files missing or unreadable (results lost),
and whether the row passed. Then the bad-input tally: every key of the key
table with every value its kind must refuse, plus the issue's examples,
through the real CLI (refused cleanly = exit 2, one line naming the key, no
traceback, nothing written or started). Every figure printed is measured in
this run; the exit status is 0 only when every row passed.

    python benchmarks/fault_matrix.py [--only sandbox,orphans,secrets,protocol,input,mlflow,files,classes,\
                                              issue32,issue39,issue39-readers]

Section ``classes`` (issue 24) adds a row per class of miss the independent
testers found: the up-front check checks what runs, one line for expressions,
storage URLs, run dirs and the sweeper's settings, path keys, what the server
reports, storage and filesystem faults (damaged study files, read-only dirs,
a full disk at start, two sweeps on one dir), secrets of a search and a host
pool, config files as input. The last line is the totals.

Section ``issue32`` adds a row per class of issue 32: files the project reads back (the commands
over good and hostile result files, calibrate's output dir, the file an error names), values whose
checks were skipped and SLURM options (classes 8, 9, through the real CLI; the empty search space;
a SLURM job that fails without a result, on the test cluster when it is up), what servers say
(counts the stream contradicts, through whole trials; an unknown ITL), interrupts (SIGTERM during
the max-load bisection, between repeats) and secrets through new doors (landscapes, calibrations,
SLURM job scripts).

Section ``issue39`` adds a row per class of issue 39 on verify_dynamic and the benchmarks: an export's
names that would be paths, its launch plumbing, its tables (unsorted, overlapping, negative, absurd,
outside the family), overrides checked like ``python -m sweep``, an api key never printed, one
verification of a dir at a time, a FIFO or an alias bomb as the export; ``dynamic_sd.py`` and
``record_landscape.py --summary`` answering bad arguments and truncated files in one line; the
duplicate-override warning with a secret; a FIFO as the sweep's command marker.

Section ``issue39-readers`` adds a row per class of issue 39 in the readers, through the real CLI: landscapes
judged as data (1e308 tok/s, text in a round, copied rounds, 100 MB, 30,000 rounds: each named by
``python -m sweep.schedule --dir``, exit 1), copies whose identity fields contradict their own launch
(a budget its argv did not run, another config's id, a malformed ``spec.per_load``: named by schedule
and report, left out), and ``python -m sweep.sim.predict``'s acceptance options (another engine's
acceptance, budgets past the measured one, an option without the one it needs, ``/dev/zero``, a FIFO:
one line, exit 2).

As root (CI) everything runs; without root the tmpfs row is skipped (the
RLIMIT_FSIZE row stands in for it).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from _support import free_port, subprocess_env

from faults import bad_inputs, fault_runs, orphan_scenarios
from faults.fault_runs import HangingServer, Run, sweep

BOUND_S = 10.0  # issue 11, section 2: nothing of a server 10 s after its controller's SIGKILL


@dataclass
class Row:
    section: str
    case: str
    status: str = "-"
    reason: str = "-"
    exit: str = "-"
    orphans: int | str = 0
    secrets: int | str = 0
    lost: int | str = 0
    passed: bool = False
    note: str = ""


def _row(section: str, case: str, run: Run, *, status: str, reason: str | None = None, exit_code: int,
         check: Callable[[Run], str] | None = None) -> Row:
    """A row from a finished run against what the case expects."""
    statuses = ",".join(d.get("status", "?") for d in run.results) or "-"
    reasons = ",".join(sorted({(d.get("failure") or {}).get("reason") or "-" for d in run.results})) or "-"
    orphans, secrets = run.orphans(), run.secrets_found()
    problems = []
    if statuses != status:
        problems.append(f"status {statuses} != {status}")
    if reason is not None and reasons != reason:
        problems.append(f"reason {reasons} != {reason}")
    if run.proc.returncode != exit_code:
        problems.append(f"exit {run.proc.returncode} != {exit_code}")
    if "Traceback" in run.output:
        problems.append("a traceback")
    if check is not None and (extra := check(run)):
        problems.append(extra)
    run.cleanup()
    return Row(section, case, statuses, reasons, str(run.proc.returncode), len(orphans), len(secrets),
               len(run.lost), not (problems or orphans or secrets or run.lost),
               "; ".join(problems) or f"{run.seconds:.1f} s")


def _work(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"fault-matrix-{name}-"))


# ----------------------------------------------------------------------------- 1. sandbox


def sandbox_rows() -> list[Row]:
    from faults import test_sandbox_e2e, test_sandbox_hostile
    from faults.sandbox_util import USABLE, pids_with_marker

    rows = []
    for mech in USABLE:
        marker = f"specsweep-matrix-{uuid.uuid4().hex}"
        work = _work(f"sandbox-{mech}")
        code = work / "hostile.py"
        with tempfile.TemporaryDirectory() as outside:
            code.write_text(test_sandbox_e2e.HOSTILE.format(port=free_port(), marker=marker, cwd=outside))
            run = sweep(work / "run", f"workload.sandbox.mechanism={mech}", stand_in="code",
                        env={"HOSTILE_CODE_FILE": str(code)})

        def contained(run: Run, marker: str = marker) -> str:
            probs = (run.results[0].get("coding") or {}).get("problems", []) if run.results else []
            escaped = [p["error"] for p in probs if any(w in (p["error"] or "") for w in
                                                       ("connected", "setns", "wrote", "SPECSWEEP_", "HF_TOKEN"))]
            left = pids_with_marker(marker)
            return "; ".join(([f"escaped: {escaped[0][:80]}"] if escaped else []) +
                             ([f"{len(left)} processes of the answer left"] if left else []) +
                             ([] if len(probs) == 5 else [f"{len(probs)} problems run"]))

        rows.append(_row("1 sandbox", f"hostile model code, whole trial ({mech})", run, status="ok",
                         reason="-", exit_code=0, check=contained))
    seen: list[Any] = []
    real_run = test_sandbox_hostile.run_python

    def recording(*a: Any, **k: Any) -> Any:
        seen.append(real_run(*a, **k))
        return seen[-1]

    test_sandbox_hostile.run_python = recording  # what the snippet's sandbox run left, measured here
    os.environ.update(test_sandbox_hostile.CANARIES)
    try:
        for name, fn in inspect.getmembers(test_sandbox_hostile, inspect.isfunction):
            if not name.startswith("test_"):
                continue
            for mech in USABLE:
                seen.clear()
                args = {"mech": mech, "tmp_path": _work("snippet")}
                t0 = time.monotonic()
                try:
                    fn(**{k: v for k, v in args.items() if k in inspect.signature(fn).parameters})
                    status, note = "blocked", ""
                except BaseException as exc:  # noqa: BLE001 - an escape is a row, not a crash
                    status, note = "ESCAPED", f"{type(exc).__name__}: {str(exc)[:100]}"
                blobs = [json.dumps(r.to_dict()) for r in seen]
                leaks = sum(v in b for b in blobs for v in test_sandbox_hostile.CANARIES.values())
                left = sum(r.survivors for r in seen)
                rows.append(Row("1 sandbox", f"{name[5:].replace('_', ' ')} ({mech})", status, "-", "-", left,
                                leaks, 0, status == "blocked" and not left and not leaks,
                                note or f"{time.monotonic() - t0:.1f} s"))
    finally:
        test_sandbox_hostile.run_python = real_run
    return rows


# ----------------------------------------------------------------------------- 2. orphans


def orphan_rows() -> list[Row]:
    rows = []
    canary = f"hf_canary_{uuid.uuid4().hex}"
    os.environ[fault_runs.CANARY_ENV] = canary
    for stage in orphan_scenarios.STAGES:
        for stubborn in (False, True):
            work = _work(f"orphans-{stage}")
            out = orphan_scenarios.kill_at_stage(
                work, stage, stubborn=stubborn, limit=BOUND_S,
                extra=(f"+server.extra_env.{fault_runs.CANARY_ENV}=${{oc.env:{fault_runs.CANARY_ENV}}}",))
            doc = orphan_scenarios.result(out.run_dir)
            leaks = [p for p in work.rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
            rows.append(Row("2 orphans", f"SIGKILL at {stage} ({'stubborn engine' if stubborn else 'sim'})",
                            doc["status"] if doc else "-", "-", "-9", len(out.left), len(leaks),
                            0 if doc else 1, out.reaped_s is not None and not out.left and not leaks and bool(doc),
                            f"gone {out.reaped_s:.2f} s after the kill" if out.reaped_s is not None else "outlived it"))
    for victim in ("controller", "worker"):
        try:
            pool = orphan_scenarios.kill_in_pool(_work(f"pool-{victim}"), victim, limit=BOUND_S)
        except Exception as exc:  # noqa: BLE001 - a scenario that went wrong is a failed row
            rows.append(Row("2 orphans", f"SIGKILL of the pool's {victim}", note=f"{type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:100]}"))
            continue
        ok = pool.reaped_s is not None and not pool.left and (victim == "controller") != bool(pool.workers_after)
        rows.append(Row("2 orphans", f"SIGKILL of the pool's {victim}", "-", "-", "-9", len(pool.left), "-", "-", ok,
                        f"gone {pool.reaped_s:.2f} s after the kill" if pool.reaped_s is not None else "outlived it"))
    return rows


# ----------------------------------------------------------------------------- 3. secrets


def secret_rows() -> list[Row]:
    from faults import test_secrets as ts

    rows = []
    key = ts.CANARIES["cli_api_key"]
    cases = [
        ("token via ${oc.env:}, WANDB key as extra_env (single run)",
         [*ts.FAST, f"server.port={free_port()}", "+server.extra_env.HF_TOKEN=${oc.env:HF_TOKEN}",
          f"+server.extra_env.WANDB_API_KEY={ts.CANARIES['WANDB_API_KEY']}"], "ok"),
        ("API key on the command line and in extra_args (multirun)",
         ["-m", *ts.FAST, f"server.port={free_port()}", "workload.max_tokens=16,24", f"server.api_key={key}",
          f"server.extra_args=['--api-key={key}']", "+server.extra_env.HF_TOKEN=${oc.env:HF_TOKEN}"], "ok,ok"),
        ("key only in server.extra_args (dry run)",
         ["dry_run=true", "server.api_key=null",
          f"server.extra_args=[--api-key,{ts.CANARIES['extra_args_key']}]"], "-"),
    ]
    for case, args, want in cases:
        work = _work("secrets")
        t0 = time.monotonic()
        proc = ts.run(work, *args)
        docs = ts.results(work)
        status = ",".join(d["status"] for d in docs) or "-"
        found = ts.hits(work, proc.stdout + proc.stderr)
        rows.append(Row("3 secrets", case, status, "-", str(proc.returncode), "-", len(found), 0,
                        proc.returncode == 0 and status == want and not found,
                        "; ".join(found)[:100] or f"{time.monotonic() - t0:.1f} s"))
    return rows


# ----------------------------------------------------------------------------- 4. protocol faults


def protocol_rows() -> list[Row]:
    rows = []
    timeout = "workload.request_timeout_s=1"
    for mode, what in (("http_500", "HTTP 500 to every request"), ("broken_sse", "broken SSE events"),
                       ("disconnect", "connection cut mid-stream"), ("stall", "stalls past the request timeout")):
        rows.append(_row("4 protocol", f"stand-in: {what}", sweep(_work(mode), timeout, stand_in=mode),
                         status="failed", reason="bench_errors", exit_code=1))
    partial = ("workload.coding=off", "workload.min_requests=8")
    rows.append(_row("4 protocol", "stand-in: 1 in 4 requests fails, max_error_rate 0",
                     sweep(_work("partial"), *partial, stand_in="fail_every_4"),
                     status="failed", reason="bench_errors", exit_code=1))
    rows.append(_row("4 protocol", "stand-in: 1 in 4 requests fails, max_error_rate 0.5",
                     sweep(_work("partial-ok"), *partial, "workload.max_error_rate=0.5", stand_in="fail_every_4"),
                     status="ok", exit_code=0))
    rows.append(_row("4 protocol", "stand-in: answers every request, all coding answers wrong",
                     sweep(_work("wrong"), stand_in="ok"), status="ok", exit_code=0,
                     check=lambda r: "" if r.results and r.results[0]["coding"]["passed"] == 0 else "coding passed"))

    rows.append(_row("4 protocol", "simulator frozen with SIGSTOP once ready",
                     sweep(_work("frozen"), timeout, during=fault_runs.freeze_when_ready), status="failed",
                     reason="bench_errors", exit_code=1))

    def capped(run: Run) -> str:
        cells = run.results[0]["cells"] if run.results else []
        cap = cells[0].get("concurrency_capped") if cells else None
        said = any("concurrency 30000 capped at" in line for line in run.output.splitlines())
        return "" if cap and said and cells[0]["errors"] == 0 else f"capped={cap}, said={said}"

    big = sweep(_work("30k"), "workload.coding=off", "workload.concurrency=[30000]",
                "workload.requests_per_cell=2000", "workload.max_tokens=16", "server.sim.time_scale=0",
                preexec_fn=fault_runs.file_limit_1024)
    cap = (big.results[0]["cells"][0].get("concurrency_capped") if big.results and big.results[0]["cells"] else None)
    row = _row("4 protocol", "concurrency 30,000 with a 1024-file limit", big, status="ok", exit_code=0, check=capped)
    row.note = f"in flight capped at {cap}; " + row.note
    rows.append(row)
    rows.append(_row("4 protocol", "multirun, every trial failed (500, stall)",
                     sweep(_work("all-failed"), timeout, multirun=True, stand_in="http_500,stall"),
                     status="failed,failed", reason="bench_errors", exit_code=1))
    rows.append(_row("4 protocol", "multirun, one trial of two failed",
                     sweep(_work("one-failed"), multirun=True, stand_in="ok,http_500"),
                     status="ok,failed", reason="-,bench_errors", exit_code=0))
    return rows


# ----------------------------------------------------------------------------- 5. bad input


def _refused(case: bad_inputs.BadInput) -> tuple[bad_inputs.BadInput, bool, str]:
    """Through the real CLI: (case, refused cleanly?, the line it printed)."""
    cwd = _work("input")
    port = free_port()
    try:
        # the port first: a case that sets server.port itself must win
        proc = subprocess.run([sys.executable, "-m", "sweep", *case.argv(f"server.port={port}")], cwd=cwd,
                              env=subprocess_env(), capture_output=True, text=True, timeout=60)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        clean = (proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {case.key}")
                 and "Traceback" not in proc.stderr and not proc.stdout and not any(cwd.iterdir())
                 and orphan_scenarios.port_free(port))
        return case, clean, (lines[0] if lines else f"exit {proc.returncode}")[:120]
    except subprocess.TimeoutExpired:  # accepted: a trial started
        orphan_scenarios.Server([port], token=None).kill_all()
        return case, False, "accepted: a trial started"
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


def input_rows() -> tuple[list[Row], str]:
    cases = bad_inputs.cases(full=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(_refused, cases))
    clean = sum(ok for _, ok, _ in outcomes)
    rows = [Row("5 input", f"refused: {c.label[:70]}", "-", c.why, "-", 0, 0, 0, False, line)
            for c, ok, line in outcomes if not ok]
    tally = f"bad input refused cleanly: {clean} / {len(cases)} ({time.monotonic() - t0:.0f} s)"
    rows.append(Row("5 input", f"{len(cases)} bad command lines, every key", f"{clean}/{len(cases)} refused",
                    "-", "2", 0, 0, 0, clean == len(cases), f"{time.monotonic() - t0:.0f} s"))
    return rows, tally


# ----------------------------------------------------------------------------- 6. MLflow


def mlflow_rows() -> list[Row]:
    rows = []
    warning = "MLflow tracking is off for the rest of this sweep"
    for case, extra in (("hanging MLflow, grid of 3 trials", ["workload.max_tokens=16,24,32"]),
                        ("hanging MLflow, host pool of 2 workers, 4 trials", [
                            "hydra/sweeper=optuna", f"launcher.hosts=[{{server_port: {free_port()}}},"
                            f"{{server_port: {free_port()}}}]", "hydra.sweeper.n_trials=4",
                            "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=4,8",
                            "spec.topk=1,2", "spec.window=1024", "hydra.sweeper.plots.enabled=false"])):
        with HangingServer() as hang:
            run = sweep(_work("mlflow"), "mlflow.enabled=true", f"mlflow.tracking_uri={hang.url}",
                        "mlflow.timeout_s=2", *extra, multirun=True)
            asked = hang.connections

        def once(run: Run, asked: int = asked) -> str:
            warned = sum(warning in line for line in run.output.splitlines())
            return "" if asked == 1 and warned == 1 else f"{asked} connections, {warned} warnings"

        row = _row("6 mlflow", case, run, status=",".join(["ok"] * (3 if "grid" in case else 4)), exit_code=0,
                   check=once)
        row.note = f"server asked {asked}x; " + row.note
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- 7. files


def file_rows() -> list[Row]:
    rows = []
    work = _work("unreadable")
    bad = fault_runs.broken_sweep(work / "multirun" / "2026-01-01" / "12-00-00")
    for case, args in (("sync with 7 unreadable result files", ["sweep.sync", str(work / "multirun"),
                                                                "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}"]),
                       ("report --dir with 7 unreadable result files", ["sweep.report", "--dir",
                                                                        str(work / "multirun")])):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", *args], cwd=work, env=subprocess_env(COLUMNS="300"),
                              capture_output=True, text=True, timeout=300)
        named = sum(str(p) in proc.stdout + proc.stderr for p in bad)
        rows.append(Row("7 files", case, f"{named}/{len(bad)} named failed", "-", str(proc.returncode), "-", "-",
                        "-", proc.returncode == 1 and named == len(bad) and "Traceback" not in proc.stderr,
                        f"{time.monotonic() - t0:.1f} s"))

    def one_line(run: Run) -> str:
        lines = run.error_lines
        return "" if len(lines) == 1 and ("disk full" in lines[0] or "file size limit" in lines[0]) else str(lines)

    disk = _work("disk") / "mnt"
    if fault_runs.free_disk_mount(disk, "2m"):
        def fill(out_dir: Path) -> None:
            if fault_runs.server_recorded(out_dir):
                fault_runs.fill(disk)
        try:
            rows.append(_row("7 files", "disk (a 2 MiB tmpfs) full mid-trial", sweep(disk, "server.sim.time_scale=3",
                             during=fill), status="running", exit_code=1, check=one_line))
        finally:
            fault_runs.unmount(disk)
    else:
        rows.append(Row("7 files", "disk (tmpfs) full mid-trial", note="skipped: mounting needs root", passed=True))

    def limit(out_dir: Path) -> None:
        if fault_runs.server_recorded(out_dir) and (pid := fault_runs.controller_pid(out_dir)) is not None:
            size = (out_dir / "result.json").stat().st_size + 64
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))

    rows.append(_row("7 files", "file size limit (RLIMIT_FSIZE) hit mid-trial",
                     sweep(_work("fsize"), "server.sim.time_scale=3", during=limit), status="running", exit_code=1,
                     check=one_line))
    return rows


# ----------------------------------------------------------------------------- 8. issue 24, class by class


CLASSES = {1: "the check checks what runs (-cd/-cp/-cn)", 2: "expressions, storage, run dirs, sweeper settings",
           3: "path keys (special files, wrong files, traversal)", 5: "damaged study files on resume",
           7: "config files as input (alias bomb)",
           8: "values whose checks were skipped (issue 32)",
           9: "SLURM options, where launcher=slurm applies (issue 32)"}


def class_rows() -> list[Row]:
    """A row per class of issue 24: its input cases through the real CLI, its runtime faults for real."""
    from faults import hardening_cases as hc
    from faults.test_secrets import SEARCH_CANARIES

    rows = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda ic: hc.run_cli(ic[1], _work(f"class{ic[1].cls}-{ic[0]}")),
                                 enumerate(c for c in hc.INPUT if c.cls <= 7)))
    for cls, what in CLASSES.items():
        if cls > 7:
            continue  # issue 32's classes: section issue32
        mine = [o for o in outcomes if o.case.cls == cls]
        clean = [o for o in mine if o.clean]
        worst = max((o.seconds for o in mine), default=0.0)
        rows.append(Row(f"8 class {cls}", f"{what}: {len(mine)} cases", f"{len(clean)}/{len(mine)} refused", "-",
                        "2", 0, 0, 0, len(clean) == len(mine),
                        "; ".join(f"{o.case.label}: {o.problem}" for o in mine if not o.clean)[:160]
                        or f"slowest {worst:.1f} s"))
    # 4: what the server reports (issue 32's count cross-checks: section issue32)
    runs = []
    for mode, field in hc.STAND_IN_USAGE.items():
        if "usage_mismatch" in field:
            continue
        run = sweep(_work(mode), "workload.request_timeout_s=5", stand_in=mode)
        doc = run.results[0] if run.results else {}
        named = field in ((doc.get("failure") or {}).get("message") or "")
        runs.append(_row("8 class 4", f"server reports {mode.replace('_', ' ')}", run, status="failed",
                         reason="bench_errors", exit_code=1, check=lambda r, named=named, f=field:
                         "" if named else f"the failure does not name {f!r}"))
    rows.extend(runs)
    # 5: faults of the filesystem and of a second sweep
    rows.extend(_fs_rows())
    # 6: secrets of a search and a host pool
    work = _work("secrets-search")
    from faults import test_secrets as ts

    t0 = time.monotonic()
    space = ["hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=choice(4,8)",
             "spec.topk=1", "spec.window=1024", "hydra.sweeper.n_trials=2", "hydra.sweeper.plots.enabled=false"]
    secret_args = [f"server.api_key={SEARCH_CANARIES['api_key']}",
                   f"+server.extra_env.SSH_PASS={SEARCH_CANARIES['ssh_pass']}",
                   f"+server.extra_env.MODEL_SOURCE=https://user:{SEARCH_CANARIES['url_password']}@hf.example.com/m"]
    for sub in ("search", "pool", "cfg"):
        (work / sub).mkdir()
    procs = [ts.run(work / "search", "-m", *ts.FAST, f"server.port={free_port()}", *space, *secret_args,
                    f"hydra.sweep.dir={work / 'search' / 'sweep'}"),
             ts.run(work / "pool", "-m", *ts.FAST, *space, *secret_args, f"hydra.sweep.dir={work / 'pool' / 'sweep'}",
                    f"launcher.hosts=[{{server_port: {free_port()}}},{{server_port: {free_port()}}}]"),
             ts.run(work / "cfg", "--cfg", "all", *secret_args)]
    found = ts.search_hits(work, *(p.stdout + p.stderr for p in procs))
    codes = ",".join(str(p.returncode) for p in procs)
    rows.append(Row("8 class 6", "secrets: search (best.yaml, rerun line), host pool, --cfg all; +key, URL user info",
                    "-", "-", codes, "-", len(found), 0, codes == "0,0,0" and not found,
                    "; ".join(found)[:100] or f"{time.monotonic() - t0:.1f} s"))
    # 7: a duplicated override
    proc = subprocess.run([sys.executable, "-m", "sweep", "dry_run=true", "spec.budget=8", "spec.budget=16"],
                          cwd=_work("dup"), env=subprocess_env(), capture_output=True, text=True, timeout=120)
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning: spec.budget is given 2 times")]
    rows.append(Row("8 class 7", "a key given twice (spec.budget=8 spec.budget=16): warned once", "-", "-",
                    str(proc.returncode), "-", "-", "-", proc.returncode == 0 and len(warned) == 1,
                    warned[0][:100] if warned else proc.stderr[-100:]))
    return rows


def _fs_rows() -> list[Row]:
    rows = []
    base = ["workload=smoke", "mlflow.enabled=false"]

    def one_line(case: str, args: list[str], key: str, what: str) -> Row:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "sweep", *args, *base], cwd=_work("fs"), env=subprocess_env(),
                              capture_output=True, text=True, timeout=300)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        ok = proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {key}") and what in lines[0]
        return Row("8 class 5", case, "-", "-", str(proc.returncode), 0, 0, 0, ok,
                   (lines[0][:100] if lines else "-") if ok else f"{lines}"[:160] or f"{time.monotonic() - t0:.1f} s")

    ro, full = _work("ro") / "mnt", _work("full") / "mnt"
    mounted = []
    for where, options in ((ro, "size=1m,ro"), (full, "size=64k")):
        where.mkdir(parents=True)
        if os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                                                capture_output=True).returncode == 0:
            mounted.append(where)
    try:
        if len(mounted) == 2:
            (full / "fill").write_bytes(b"\0" * 60 * 1024)
            rows.append(one_line("read-only sweep dir", ["-m", f"hydra.sweep.dir={ro / 'sw'}", "spec.budget=4,8"],
                                 "hydra.sweep.dir", "Read-only"))
            rows.append(one_line("read-only run dir", [f"hydra.run.dir={ro / 'run'}"], "hydra.run.dir", "Read-only"))
            rows.append(one_line("disk full at start", [f"hydra.run.dir={full / 'run'}"], "hydra.run.dir", "disk full"))
        else:
            rows.append(Row("8 class 5", "read-only dir / full disk at start", note="skipped: mounting needs root",
                            passed=True))
    finally:
        for where in mounted:
            subprocess.run(["umount", str(where)], capture_output=True)
    # two grids on one sweep dir at once: the second is refused, the first keeps its jobs
    work = _work("lock")
    sweep_dir = work / "sweep"
    common = ["-m", *fault_runs.FAST, "mlflow.enabled=false", f"hydra.sweep.dir={sweep_dir}", "server.sim.time_scale=3",
              "spec.budget=4,8"]
    first = subprocess.Popen([sys.executable, "-m", "sweep", *common, f"server.port={free_port()}"], cwd=work,
                             env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (sweep_dir / "0" / "server.log").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    second = subprocess.run([sys.executable, "-m", "sweep", *common, f"server.port={free_port()}"], cwd=work,
                            env=subprocess_env(), capture_output=True, text=True, timeout=120)
    first_rc = first.wait(timeout=300)
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    statuses = []
    for n in ("0", "1"):
        try:
            statuses.append(json.loads((sweep_dir / n / "result.json").read_text())["status"])
        except (OSError, ValueError):
            statuses.append("lost")
    ok = (second.returncode == 2 and len(lines) == 1 and "is in use by another sweep" in lines[0]
          and first_rc == 0 and statuses == ["ok", "ok"])
    rows.append(Row("8 class 5", "a second grid on the same hydra.sweep.dir at once", ",".join(statuses), "-",
                    f"{first_rc},{second.returncode}", 0, 0, statuses.count("lost"), ok,
                    lines[0][:100] if lines else "-"))
    return rows


# ----------------------------------------------------------------------------- 9. issue 32, class by class


def _test_row(section: str, case: str, fn: Callable[..., Any], **kwargs: Any) -> Row:
    """A row that runs one of tests/faults' scenarios in this process (it asserts what must hold)."""
    import pytest

    t0 = time.monotonic()
    params = inspect.signature(fn).parameters
    args = {k: v for k, v in {"tmp_path": _work("t32"), **kwargs}.items() if k in params}
    monkey = pytest.MonkeyPatch()
    if "monkeypatch" in params:
        args["monkeypatch"] = monkey
    try:
        fn(**args)
        ok, note = True, f"{time.monotonic() - t0:.1f} s"
    except BaseException as exc:  # noqa: BLE001 - a scenario that fails is a failed row
        ok, note = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:140] if str(exc).strip() else ''}"
    finally:
        monkey.undo()
    return Row(section, case, "held" if ok else "NOT HELD", "-", "-", "-", "-", "-", ok, note)


def _readback_rows() -> list[Row]:
    from faults.readback_cases import calibrate_inputs, hostile_sweep

    rows = []
    work = _work("readback")
    good, bad = hostile_sweep(work / "sweep")
    for name, args in (("schedule", ["sweep.schedule", "--dir", str(work / "sweep")]),
                       ("report --dir", ["sweep.report", "--dir", str(work / "sweep")]),
                       ("sync", ["sweep.sync", str(work / "sweep"), "--tracking-uri",
                                 f"sqlite:///{work / 'mlflow.db'}"])):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", *args], cwd=work, env=subprocess_env(COLUMNS="300"),
                              capture_output=True, text=True, timeout=600)
        named = sum(sum(str(p) in line for line in proc.stderr.splitlines()) == 1 for p in bad.values())
        ok = proc.returncode == 1 and named == len(bad) and "Traceback" not in proc.stderr + proc.stdout \
            and "internal error" not in proc.stderr
        rows.append(Row("10 readback", f"{name}: 2 good result files and {len(bad)} bad ones (FIFO, /dev/zero, "
                        "1 GiB, wrong types and ranges)", f"{named}/{len(bad)} named once", "-", str(proc.returncode),
                        "-", "-", "-", ok, f"{time.monotonic() - t0:.1f} s"))
    inputs = work / "a" / "b" / "c" / "d" / "in"
    _, cal_bad = calibrate_inputs(inputs)
    out = inputs.parent / "out"
    before = set(work.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "sweep.calibrate", "-o", str(out), str(inputs)], cwd=work,
                          env=subprocess_env(), capture_output=True, text=True, timeout=1200)
    new = set(work.rglob("*")) - before
    outside = [str(p) for p in new if p != out and out not in p.parents]
    named = sum(str(p) in proc.stderr for p in cal_bad.values())
    rows.append(Row("10 readback", "calibrate: a box name ../../../../PWN_calib, a bad landscape, a FIFO",
                    f"{named}/{len(cal_bad)} named", "-", str(proc.returncode), "-", "-", "-",
                    proc.returncode == 1 and named == len(cal_bad) and not outside,
                    f"written outside -o: {outside}" if outside else "nothing outside -o"))
    (work / "sweep" / "schedule.yaml").unlink(missing_ok=True)
    (work / "sweep" / "schedule.yaml").mkdir()
    proc = subprocess.run([sys.executable, "-m", "sweep.schedule", "--dir", str(work / "sweep")], cwd=work,
                          env=subprocess_env(), capture_output=True, text=True, timeout=600)
    errs = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    rows.append(Row("10 readback", "schedule.yaml cannot be written: the error names it", "-", "-",
                    str(proc.returncode), "-", "-", "-",
                    len(errs) == 1 and "schedule.yaml:" in errs[0] and ".result-" not in proc.stderr,
                    errs[0][-90:] if errs else proc.stderr[-90:]))
    return rows


def issue32_rows() -> list[Row]:
    """A row per class of issue 32: files read back, values, SLURM, what servers say, interrupts, secrets."""
    from faults import hardening_cases as hc
    from faults import test_interrupt_answers as ti
    from faults import test_secret_doors as sd
    from faults import test_server_counts as sc
    from faults import test_values as tv

    rows = _readback_rows()
    mine = [c for c in hc.INPUT if c.cls in (8, 9)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda ic: hc.run_cli(ic[1], _work(f"class{ic[1].cls}-{ic[0]}")), enumerate(mine)))
    for cls in (8, 9):
        these = [o for o in outcomes if o.case.cls == cls]
        clean = [o for o in these if o.clean]
        rows.append(Row(f"11 class {cls}", f"{CLASSES[cls]}: {len(these)} cases", f"{len(clean)}/{len(these)} refused",
                        "-", "2", 0, 0, 0, len(clean) == len(these),
                        "; ".join(f"{o.case.label}: {o.problem}" for o in these if not o.clean)[:160]
                        or f"slowest {max(o.seconds for o in these):.1f} s"))
    rows.append(_test_row("11 class 8", "a search space with no runnable point: exit 2, one line",
                          tv.test_a_search_space_with_no_valid_point_is_one_line_and_exit_2))
    slurm_conf = os.environ.get("SLURM_CONF") or "/var/tmp/specsweep-slurm/slurm.conf"
    if shutil.which("sbatch") and Path(slurm_conf).is_file():
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(ROOT / "tests" / "slurm" / "test_failures.py"), "-k", "without_a_result"],
                              cwd=ROOT, env=subprocess_env(SLURM_CONF=slurm_conf), capture_output=True, text=True,
                              timeout=900)
        rows.append(Row("11 class 9", "a SLURM job ends FAILED without a result: the search exits 1, as without SLURM",
                        "-", "-", str(proc.returncode), "-", "-", "-", proc.returncode == 0,
                        proc.stdout.strip().splitlines()[-1][:100] if proc.stdout.strip()
                        else f"{time.monotonic() - t0:.0f} s"))
    else:
        rows.append(Row("11 class 9", "a SLURM job ends FAILED without a result", note="skipped: no SLURM cluster",
                        passed=True))
    # what servers say: through whole trials on the stand-in, then the client and the cell over real HTTP
    for mode in ("usage_fewer", "usage_twice", "running_short"):
        run = sweep(_work(mode), "workload.request_timeout_s=5", stand_in=mode)
        doc = run.results[0] if run.results else {}
        field = hc.STAND_IN_USAGE[mode]
        rows.append(_row("12 server counts", f"stand-in: {mode.replace('_', ' ')}", run, status="failed",
                         reason="bench_errors", exit_code=1, check=lambda r, d=doc, f=field: "" if f in
                         ((d.get("failure") or {}).get("message") or "") else f"the failure does not name {f!r}"))
    from bench.misbehaving import MisbehavingServer

    with MisbehavingServer() as double:
        rows.append(_test_row("12 server counts", "a cell of contradicted counts scores nothing; tokens_source",
                              sc.test_a_cell_of_contradicted_counts_scores_nothing, double=double))
        rows.append(_test_row("12 server counts", "an unknown ITL never meets an ITL limit",
                              sc.test_an_unknown_inter_token_latency_never_meets_an_itl_limit, double=double))
    rows.append(_test_row("13 interrupts", "SIGTERM in the max-load bisection keeps the answer (stopped: interrupted)",
                          ti.test_sigterm_during_the_bisection_keeps_the_answer_so_far))
    rows.append(_test_row("13 interrupts", "an interrupt between repeats keeps the finished repeats",
                          ti.test_an_interrupt_between_repeats_keeps_the_finished_repeats))
    rows.append(_test_row("14 secrets", "record_landscape server.api_key=<key>: not in the landscape",
                          sd.test_record_landscape_masks_a_key_of_its_command_line))
    rows.append(_test_row("14 secrets", "calibrate: a landscape's command with keys: not in the calibration",
                          sd.test_calibrate_masks_what_its_input_files_carried))
    rows.append(_test_row("14 secrets", "launcher.setup with a token: refused from CLI, config file, environment",
                          sd.test_a_setup_line_with_a_token_is_refused_whatever_its_source))
    rows.append(_test_row("14 secrets", "a job script holding a secret is never written",
                          sd.test_the_job_script_is_checked_where_it_is_written))
    return rows


# ----------------------------------------------------------------------------- 10. issue 39: verify_dynamic, benchmarks


def _one_line_row(section: str, case: str, argv: list[str], cwd: Path, *, says: str, code: int = 2,
                  secret: str = "", timeout: float = 120) -> Row:
    """A command as a real process: ``code``, one line on stderr holding ``says``, no traceback, no ``secret``."""
    t0 = time.monotonic()
    cmd = [sys.executable, str(ROOT / argv[0]), *argv[1:]] if argv[0].endswith(".py") else [sys.executable, "-m",
                                                                                           *argv]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=subprocess_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Row(section, case, "hung", "-", "-", "-", "-", "-", False, f"no answer in {timeout:.0f} s")
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    leaked = int(bool(secret) and secret in proc.stdout + proc.stderr)
    one = len(lines) == 1 if code == 2 else True
    ok = proc.returncode == code and one and says in proc.stderr + proc.stdout and "Traceback" not in proc.stderr \
        and not leaked
    return Row(section, case, "refused" if proc.returncode == 2 else "ran", "-", str(proc.returncode), "-", leaked,
               "-", ok, (lines[-1][:110] if lines else "") + f" ({time.monotonic() - t0:.1f} s)")


def issue39_rows() -> list[Row]:
    """A row per class of issue 39 this side of it: verify_dynamic's export and command line, the benchmarks'
    arguments and files, the duplicate-override warning, the sweep's command marker."""
    import yaml

    from test_benchmark_inputs import LANDSCAPE

    work = _work("issue39")
    rows: list[Row] = []

    def export(name: str, **table: Any) -> Path:
        t: dict[str, Any] = {
            "workload": "seed", "context": 1024, "family": "f", "engine": "sim", "per_load": [[1, 2, 8], [3, 16, 4]],
            "overrides": ["spec=ddtree", "hardware=b300", "spec.budget=8"],
            "levels": [{"load": 1}, {"load": 2}, {"load": 4}, {"load": 8}],
            "statics": {4: {"name": "b4", "overrides": ["spec=ddtree", "spec.budget=4", "hardware=b300"]},
                        8: {"name": "b8", "overrides": ["spec=ddtree", "spec.budget=8", "hardware=b300"]}},
            "baseline": {"name": "n", "overrides": ["spec=none", "hardware=b300"]},
            "workload_overrides": ["workload.contexts=[1024]"]}
        t.update(table)
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "dynamic-sim.yaml").write_text(yaml.safe_dump({"format": "specsweep.dynamic/1", "tables": [t]}))
        return d

    sec = "15 verify_dynamic"
    d = export("escape", statics={"/../../x_statics": {"name": "x", "overrides": ["spec=ddtree"]}})
    rows.append(_one_line_row(sec, "a statics key /../../x_statics: no path outside --dir",
                              ["sweep.verify_dynamic", "--dir", str(d), "--dry-run"], work,
                              says="statics key '/../../x_statics'"))
    canary = work / "FORGED-RAN"
    d = export("forged", overrides=["spec=ddtree", "hardware=b300", "spec.budget=8",
                                    f"server.executable=[/bin/sh,-c,'touch {canary}']", "launcher=ssh"])
    row = _one_line_row(sec, "server.executable and launcher from the export: named, not run",
                        ["sweep.verify_dynamic", "--dir", str(d), "--dry-run", "--rounds", "1"], work, code=0,
                        says="not taken from the file")
    row.passed = row.passed and not canary.exists()
    rows.append(row)
    for label, table, says in (("unsorted", [[3, 16, 4], [1, 2, 8]], "sorted, not overlapping"),
                               ("overlapping", [[1, 4, 8], [3, 16, 4]], "sorted, not overlapping"),
                               ("negative", [[1, 2, -8], [3, 16, 4]], "must be in [0, 1024]"),
                               ("absurd", [[1, 2, 8], [3, 10**9, 4]], "must be in [1, 100000]"),
                               ("outside the family", [[1, 2, 16], [3, 16, 4]], "not one of the family's budgets")):
        d = export(f"table-{label.replace(' ', '-')}", per_load=table)
        rows.append(_one_line_row(sec, f"a table {label}: refused before any run",
                                  ["sweep.verify_dynamic", "--dir", str(d), "--dry-run"], work, says=says))
    d = export("keys")
    for given, says in (("spec.budgit=4", "no such key"), ("workload.cells=[[60,1]]", "set by the verification"),
                        ("workload.dataset_path=/proc/self/environ", "pseudo filesystem")):
        rows.append(_one_line_row(sec, f"the override {given}", ["sweep.verify_dynamic", "--dir", str(d), "--dry-run",
                                                                 given], work, says=says))
    key = f"sk-matrix-{uuid.uuid4().hex[:10]}"
    rows.append(_one_line_row(sec, "server.api_key=<key> on the command line: never printed",
                              ["sweep.verify_dynamic", "--dir", str(d), "--dry-run", "--rounds", "1",
                               f"server.api_key={key}"], work, code=0, says="server.api_key=***", secret=key))
    from sweep.io import dirlock

    lock = dirlock.acquire(d / "verify")
    try:
        rows.append(_one_line_row(sec, "a second verification of the same dir at once: refused",
                                  ["sweep.verify_dynamic", "--dir", str(d), "--rounds", "1"], work,
                                  says="is in use by another verify_dynamic"))
    finally:
        lock.release()
    fifo = work / "fifo"
    fifo.mkdir(exist_ok=True)
    if not (fifo / "dynamic-sim.yaml").exists():
        os.mkfifo(fifo / "dynamic-sim.yaml")
    rows.append(_one_line_row(sec, "a FIFO named dynamic-sim.yaml: refused, no hang",
                              ["sweep.verify_dynamic", "--dir", str(fifo), "--dry-run"], work, says="a FIFO",
                              timeout=60))
    bomb = work / "bomb"
    bomb.mkdir(exist_ok=True)
    lines = ["format: specsweep.dynamic/1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    (bomb / "dynamic-sim.yaml").write_text("\n".join([*lines, "tables: [{overrides: *a8}]"]) + "\n")
    rows.append(_one_line_row(sec, "an alias bomb as the export: refused before it is built",
                              ["sweep.verify_dynamic", "--dir", str(bomb), "--dry-run"], work, says="alias bomb",
                              timeout=60))
    sec = "16 benchmarks"
    truncated = work / "truncated.json"
    truncated.write_bytes(LANDSCAPE.read_bytes()[:3000])
    for argv, says in ((["--budgets", "a"], "--budgets[0]"), (["--requests", "x"], "--requests"),
                       (["--measured", str(truncated)], "--measured: landscape"),
                       (["--measured", str(work / "missing.json")], "--measured: no such file"),
                       (["spec.budgit=4"], "spec.budgit")):
        rows.append(_one_line_row(sec, "dynamic_sd.py " + " ".join(Path(a).name if "/" in a else a for a in argv),
                                  ["benchmarks/dynamic_sd.py", *argv, "--work", str(work / "sd")], work, says=says))
    rows.append(_one_line_row(sec, "record_landscape.py --summary of a truncated landscape",
                              ["benchmarks/record_landscape.py", "--summary", str(truncated)], work,
                              says="--summary: landscape"))
    sec = "17 sweep"
    key = f"sk-dup-{uuid.uuid4().hex[:10]}"
    rows.append(_one_line_row(sec, "server.api_key given twice: the warning masks it",
                              ["sweep", "server=sim", "server.api_key=sk-dup-first-0", f"server.api_key={key}",
                               "--cfg", "job"], work, code=0, says="the last one wins: server.api_key=***",
                              secret=key))
    marker = work / "marker"
    where = marker / "multirun" / "2026-01-01" / "00-00-00"
    where.mkdir(parents=True, exist_ok=True)
    if not (where / ".specsweep-command.json").exists():
        os.mkfifo(where / ".specsweep-command.json")
    rows.append(_one_line_row(sec, "a FIFO named .specsweep-command.json under multirun/: named, no hang",
                              ["sweep", "-m", "dry_run=true", "server=sim", "spec.budget=4,8"], marker, code=0,
                              says="a FIFO, not a regular file", timeout=300))


# ----------------------------------------------------------------------------- 10. issue 39: readers, predict


def _named_rows(section: str, what: str, proc: subprocess.CompletedProcess[str], bad: dict[str, Path],
                seconds: float) -> list[Row]:
    """A row per bad file: named in exactly one ``skipped <path>: <why>`` line, exit 1, no traceback."""
    rows = []
    clean = proc.returncode == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for case, path in bad.items():
        lines = [line for line in proc.stderr.splitlines() if str(path) in line]
        ok = clean and len(lines) == 1 and lines[0].startswith(f"skipped {path}: ")
        why = lines[0][len(f"skipped {path}: "):] if lines else proc.stderr.strip()[-100:]
        rows.append(Row(section, f"{what}: {case}", "named" if lines else "NOT NAMED", "-", str(proc.returncode),
                        "-", "-", "-", ok, f"{seconds:.1f} s; {why[:110]}"))
    return rows


def issue39_readers_rows() -> list[Row]:
    """A row per class of issue 39 in the readers: landscapes judged as data, copies that contradict
    their own launch, predict's acceptance options -- each through the real CLI."""
    from faults import landscape_cases as lc
    from faults.test_predict_inputs import LLAMA_B8, VLLM_B8, VLLM_NGRAM
    from record.result_docs import make_result

    rows: list[Row] = []
    work = _work("i39")
    _, bad = lc.hostile_dir(work / "land")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sweep.schedule", "--dir", str(work / "land"), "--no-write",
                           "--slo", "tpot_ms=100"], cwd=work, env=subprocess_env(COLUMNS="300"),
                          capture_output=True, text=True, timeout=600)
    rows += _named_rows("39 landscapes", "schedule --dir --slo", proc, bad, time.monotonic() - t0)
    # copies whose identity fields contradict their own launch, beside the real b8 and b4
    sweep_dir = work / "copies"
    _, b8 = make_result(sweep_dir, 0, 8)
    _, b4 = make_result(sweep_dir, 1, 4)
    from sweep.record.result import TrialResult
    from sweep.score.configs import config_id

    forged: dict[str, Path] = {}
    for i, (case, src, where, value) in enumerate((
            ("config.spec.budget 4, argv ran budget 8", b8, ("config", "spec", "budget"), 4),
            ("trial.config_id of another config", b4, ("trial", "config_id"), config_id(TrialResult.from_dict(b8))),
            ("a malformed spec.per_load on b8's newest copy", b8, ("config", "spec", "per_load"), [[0, 4, 8]])),
            start=2):
        doc = json.loads(json.dumps(src))
        doc["trial"]["finished"] = "2026-01-01T13:00:00+00:00"
        node = doc
        for part in where[:-1]:
            node = node[part]
        node[where[-1]] = value
        path = sweep_dir / str(i) / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(doc))
        forged[case] = path
    for name, args in (("schedule", ["sweep.schedule", "--dir", str(sweep_dir), "--no-write"]),
                       ("report --dir", ["sweep.report", "--dir", str(sweep_dir)])):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", *args], cwd=work, env=subprocess_env(COLUMNS="300"),
                              capture_output=True, text=True, timeout=600)
        rows += _named_rows("39 copies", name, proc, forged, time.monotonic() - t0)
    # predict: what --acceptance carries over, and what it reads
    os.mkfifo(work / "fifo.json")
    for case, argv, key, words in (
            ("a llama.cpp landscape's acceptance for a vLLM config", [*VLLM_NGRAM, "spec.budget=4",
                                                                       "--acceptance", LLAMA_B8],
             "--acceptance", "engine llamacpp (this config: vllm)"),
            ("--budgets 1,2,4,16 from acceptance measured at b8", [*VLLM_NGRAM, "--budgets", "1,2,4,16",
                                                                   "--acceptance", VLLM_B8],
             "--budgets", "16 past budget 8"),
            ("--accept-model truncate without --acceptance", [*VLLM_NGRAM, "--accept-model", "truncate"],
             "--accept-model", "only with --acceptance"),
            ("--acceptance /dev/zero", [*VLLM_NGRAM, "--acceptance", "/dev/zero"], "--acceptance",
             "character device"),
            ("--acceptance FIFO", [*VLLM_NGRAM, "--acceptance", str(work / "fifo.json")], "--acceptance", "FIFO")):
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "sweep.sim.predict", *argv], cwd=work,
                                  env=subprocess_env(), capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            rows.append(Row("39 predict inputs", case, "hung", "-", "-", "-", "-", "-", False, "no answer in 120 s"))
            continue
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        ok = (proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {key}: ")
              and words in lines[0] and not proc.stdout.strip())
        rows.append(Row("39 predict inputs", case, "refused" if ok else "NOT REFUSED", "-", str(proc.returncode),
                        "-", "-", "-", ok, f"{time.monotonic() - t0:.1f} s; " + (lines[0][:110] if lines else "-")))
    return rows


SECTIONS: dict[str, Callable[[], Any]] = {
    "sandbox": sandbox_rows, "orphans": orphan_rows, "secrets": secret_rows, "protocol": protocol_rows,
    "input": input_rows, "mlflow": mlflow_rows, "files": file_rows, "classes": class_rows, "issue32": issue32_rows,
    "issue39": issue39_rows,
    "issue39-readers": issue39_readers_rows,
}


def totals(rows: list[Row]) -> str:
    """One line: runtime faults survived, bad-input rows refused, secrets found, orphans, results lost."""
    def count(xs: list[Row]) -> str:
        return f"{sum(r.passed for r in xs)}/{len(xs)}"

    inputs = [r for r in rows if r.section.startswith(("5 ", "11 class", "39 predict"))
              or r.section in (f"8 class {c}" for c in CLASSES)]
    inputs += [r for r in rows if r.section.startswith(("15 ", "16 "))]
    leaks = [r for r in rows if r.section.startswith(("1 ", "3 ", "8 class 6", "14 "))]
    faults = [r for r in rows if r not in inputs and r not in leaks]
    secrets = sum(r.secrets for r in rows if isinstance(r.secrets, int))
    orphans = sum(r.orphans for r in rows if isinstance(r.orphans, int))
    lost = sum(r.lost for r in rows if isinstance(r.lost, int))
    return (f"totals: rows {count(rows)} passed; runtime faults survived {count(faults)}; bad-input rows refused "
            f"cleanly {count(inputs)}; sandbox and secret rows held {count(leaks)}; secret canaries found {secrets}; "
            f"processes left {orphans}; results lost {lost}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    args = parser.parse_args()
    wanted = [s for s in SECTIONS if not args.only or s in args.only.split(",")]
    rows: list[Row] = []
    tally = ""
    t0 = time.monotonic()
    for name in wanted:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            out = SECTIONS[name]()
        except Exception as exc:  # noqa: BLE001 - the other sections still run; this one is a failed row
            out = [Row(name, "(the section did not finish)", note=f"{type(exc).__name__}: {str(exc)[:120]}")]
        if isinstance(out, tuple):  # the input section: (rows, tally)
            out, tally = out
        rows += out
    header = ("section", "case", "status", "reason", "exit", "orphans", "secrets", "lost", "pass", "note")
    table = [header] + [(r.section, r.case, r.status, r.reason, r.exit, str(r.orphans), str(r.secrets),
                         str(r.lost), "yes" if r.passed else "NO", r.note) for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(header) - 1)]
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)) + "  " + t[-1])
    passed = sum(r.passed for r in rows)
    print(f"\n{passed} of {len(rows)} rows passed in {time.monotonic() - t0:.0f} s")
    if tally:
        print(tally)
    print(totals(rows))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
