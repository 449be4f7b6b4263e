"""Record a real landscape: a grid of configs x workloads x contexts x concurrencies on a real engine, in rounds.

    python benchmarks/record_landscape.py --engine llamacpp|vllm [--rounds 3] [--out FILE]
        [--contexts 64,256] [--concurrency 1,2,4] [--max-tokens 64] [--configs ID,ID] [--work DIR]
        [--workloads edit,prose] [OVERRIDE ...]      (e.g. workload.min_requests=16: for every trial)

Every trial is a real ``python -m sweep`` run (compose -> render -> launch the
engine -> benchmark -> result.json), one server start per config per round
(its workloads share that server: a workload change keeps the fingerprint),
with MLflow off. The grid is measured in **rounds**: round 1 runs every config,
then round 2 runs every config again, ... and each round starts one config
later than the one before (round 2 begins with the second config), so the
box's slow drifts (other jobs on a shared machine) spread over all configs
instead of landing on whichever config ran during them, and no config always
runs first after a quiet spell. Each round of a config is a copy of the same
config: a reader pools them as repeats (sweep/score/configs.py).

The file (``benchmarks/measured/landscapes/<engine>-<box>-<model>.json``) is the
shared landscape format (sweep/sim/landscape.py): the configs with their
overrides and composed hardware/model/spec/server nodes, the composed
workloads, one ``trials`` entry per config and workload (failed ones kept: a
landscape has losers), one ``runs`` entry per config, workload and round (what
that trial measured, cell by cell, with the machine's load: what
``python -m sweep.schedule --dir`` pools), one point per (config, workload,
context, concurrency) merged over the rounds, and the machine's measured
figures (``python -m sweep.sim.probe``) under ``machine.perf``. It is rewritten
after every trial, and a rerun with the same ``--work`` dir skips trials whose
result.json is already there, so an interrupted recording resumes. Secrets
(``server.api_key=...`` among the overrides) are masked in every field.

A landscape is a measurement of the box, not of its neighbours: every trial runs with
``workload.busy_box=refuse`` and ``workload.busy_wait_s=300`` unless an override says
otherwise (sweep/bench/boxstate.py). A busy box is waited for; still busy, the trial is
refused and the recording stops with one line saying what was busy (exit 1; the refused
trial runs again when the recording is resumed). Every cell carries its ``box_state``, the
points the state of their rounds combined (busy when any round was).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sweep import errors  # noqa: E402 - after the path the script runs from

TARGET_DRAFT = "model.draft_paths.draft=${model.path}"  # the target drafts for itself: full acceptance


def _ngram(budget: int, n_min: int, match: int | None = None) -> tuple[str, list[str]]:
    over = ["spec=llamacpp_ngram", f"spec.budget={budget}", f"spec.ngram_n_min={n_min}"]
    if match is not None:
        over.append(f"spec.ngram_n_match={match}")
    return f"ngram-b{budget}-min{n_min}" + (f"-m{match}" if match else ""), over


def _draft(budget: int) -> tuple[str, list[str]]:
    return f"draft-self-b{budget}", ["spec=llamacpp_draft", f"spec.budget={budget}", TARGET_DRAFT]


# Per engine: the base overrides and the grid. Knob values span what a user would try.
ENGINES: dict[str, dict[str, Any]] = {
    "llamacpp": {
        # one thread: on a shared 2-core box two llama.cpp threads spin at barriers while the
        # other is descheduled (tests/engines/conftest.py); the box is "this machine, one core"
        "base": ["server=llamacpp", "server.threads=1"],
        "threads": 1,
        "hardware": "cpu",
        "workloads": ["cpu"],
        # n-gram: budget (n_max), minimum draft (n_min) and lookup length (n_match, llama.cpp's
        # default 24) across what a user would try; the target drafting for itself (full
        # acceptance, a forward per drafted token); the autoregressive baseline
        "configs": [("none", ["spec=none"]),
                    _ngram(4, 1), _ngram(8, 2), _ngram(16, 2), _ngram(16, 8), _ngram(32, 2),
                    _ngram(8, 2, 12), _ngram(16, 2, 12), _ngram(16, 2, 8),
                    _draft(2), _draft(4), _draft(8)],
    },
    "vllm": {
        # the engine's OpenMP threads on one core (hardware.cpu.threads_bind): the box is "this
        # machine, one core", and the other core is left to the client and whatever else runs
        # (a 2-core box shared with other work: docs/vllm.md)
        "base": ["server=vllm", "hardware.cpu.threads_bind=1"],
        "threads": 1,
        "hardware": "cpu",
        "workloads": ["edit", "prose"],
        # n-gram drafting: the budget (num_speculative_tokens) over what a user would try at the
        # lookup window vLLM's docs suggest (4/2), and that window shorter and longer at budget 4;
        # the autoregressive baseline
        "configs": [("none", ["spec=none"]),
                    *[(f"ngram-b{b}-max4-min2", ["spec=ngram", f"spec.budget={b}", "spec.ngram_n_max=4",
                                                 "spec.ngram_n_min=2"]) for b in (1, 2, 4, 8)],
                    ("ngram-b4-max2-min1", ["spec=ngram", "spec.budget=4", "spec.ngram_n_max=2",
                                            "spec.ngram_n_min=1"]),
                    ("ngram-b4-max6-min3", ["spec=ngram", "spec.budget=4", "spec.ngram_n_max=6",
                                            "spec.ngram_n_min=3"])],
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _knobs(overrides: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for o in overrides:
        key, _, value = o.partition("=")
        if key.startswith("spec."):
            out[key[5:]] = value
        elif key == "spec":
            out["method"] = value
    return out


def _machine(perf: dict[str, Any]) -> dict[str, Any]:
    flags: list[str] = []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = sorted(f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "fma", "amx")))
                break
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), platform.processor())
    except OSError:
        model = platform.processor()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return {"cpu_model": model, "cores": os.cpu_count(), "flags": flags, "mem_gb": round(mem_gb, 1),
            "python": platform.python_version(), "specsweep_commit": commit, "perf": perf,
            "load_avg_at_start": os.getloadavg()[0], "box_at_start": _box_now()}


def _box_now() -> dict[str, Any]:
    """The box's state over a second, before the recording starts (sweep/bench/boxstate.py)."""
    from sweep.bench.boxstate import Watch

    return Watch().now(1.0)


def _result(path: Path) -> dict[str, Any] | None:
    """A trial's result.json through the project's reader (sweep.io.readback: regular, bounded, every
    value checked); None when there is none or it is not one (the trial runs again)."""
    from sweep.io import readback
    from sweep.record.result import check_document

    if not path.exists():
        return None
    try:
        doc = readback.read_json(path)
        check_document(doc)
    except (readback.BadFile, readback.Invalid) as exc:
        print(f"skipped {path}: {exc}", file=sys.stderr)
        return None
    return dict(doc)


def _run_trial(overrides: list[str], workloads: list[str], run_dir: Path,
               timeout: float) -> dict[str, dict[str, Any] | None]:
    """One server start: this config on each workload (a multirun when there are several);
    workload name -> its result document (None when the run left none)."""
    def results() -> dict[str, dict[str, Any] | None]:
        docs: dict[str, dict[str, Any] | None] = {w: None for w in workloads}
        for path in sorted(run_dir.rglob("result.json")):
            doc = _result(path)
            name = ((doc or {}).get("config") or {}).get("workload", {}).get("name")
            if doc is not None and name in docs and doc.get("status") in ("ok", "failed"):
                docs[name] = doc
        return docs

    from sweep.bench.boxstate import refused

    found = results() if run_dir.is_dir() else {}
    if found and all(d is not None and not refused(d) for d in found.values()):  # a refused trial runs again
        return found
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "load_avg").write_text(f"{os.getloadavg()[0]:.2f}\n")  # how busy the shared box was
    common = [*overrides, f"server.port={_free_port()}", "mlflow.enabled=false", "baseline.auto_run=false",
              f"results.search_dirs=[{run_dir.parent.parent}]"]  # the rounds' baselines: speedup, identity
    if len(workloads) > 1:
        cmd = [sys.executable, "-m", "sweep", "-m", *common, f"workload={','.join(workloads)}",
               f"hydra.sweep.dir={run_dir}"]
    else:
        cmd = [sys.executable, "-m", "sweep", *common, f"workload={workloads[0]}", f"hydra.run.dir={run_dir}"]
    with open(run_dir / "stdout.log", "w") as out:
        from launchers.local import run_tied

        try:  # tied to us: a stopped or killed recording leaves no trial or server behind
            run_tied(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    return results()


def run_entry(cid: str, workload: str, rnd: int, doc: dict[str, Any]) -> dict[str, Any]:
    """What one round of one config measured on one workload: the cells as the trial wrote them
    (latency rows capped), its acceptance window, its greedy-identity verdict, where it ran."""
    from sweep.sim.landscape import MAX_LATENCIES

    cells = []
    for cell in doc.get("cells") or []:
        cell = dict(cell)
        if isinstance(cell.get("latencies"), list):
            cell["latencies"] = cell["latencies"][:MAX_LATENCIES]
        cells.append(cell)
    failure = doc.get("failure") if doc.get("status") != "ok" else None
    trial = doc.get("trial") or {}
    ident = {**(doc.get("identity") or {}), **(doc.get("_identity") or {})}
    return {"config": cid, "workload": workload, "round": rnd, "status": doc.get("status"),
            "name": trial.get("name"), "config_id": trial.get("config_id"), "choices": trial.get("choices"),
            "failure": None if failure is None else {"reason": failure.get("reason"),
                                                     "message": str(failure.get("message") or "")[:300]},
            "started": trial.get("started"), "finished": trial.get("finished"),
            "load_avg": doc.get("_load_avg"), "fingerprint": doc.get("fingerprint"),
            "argv": doc.get("argv") or [], "env": doc.get("env") or {},
            "startup_s": (doc.get("server") or {}).get("startup_s"),
            "server_reused": (doc.get("server") or {}).get("reused"),
            "acceptance": (doc.get("acceptance") or {}).get("metrics"),
            "box_state": doc.get("box_state"),  # the box before the trial (its cells carry their own)
            "greedy_identical": ident.get("greedy_identical"), "greedy_compared": ident.get("compared"),
            "cells": cells if doc.get("status") == "ok" else []}


def assemble(engine: str, spec: dict[str, Any], configs: list[tuple[str, list[str]]],
             runs: dict[str, list[dict[str, Any]]], workloads: dict[str, dict[str, Any]],
             machine: dict[str, Any], command: str) -> dict[str, Any]:
    """The landscape document from every trial's result.json (per config, in round order;
    each document carries ``_round`` and ``_load_avg``)."""
    from sweep.sim.landscape import SCHEMA, merge_runs, round_floats

    first_ok = next((d for docs in runs.values() for d in docs if d.get("status") == "ok"), None)
    cfg0 = (first_ok or {}).get("config") or {}
    out: dict[str, Any] = {
        "schema": SCHEMA, "engine": engine,
        "engine_version": str(((cfg0.get("server") or {}).get("install") or {}).get("version") or ""),
        "model": str((cfg0.get("model") or {}).get("served_name") or (cfg0.get("model") or {}).get("name") or ""),
        "hardware": spec.get("hardware"), "machine": machine,
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command, "workloads": {}, "configs": [], "trials": [], "runs": [], "points": [],
    }
    for name, wl in workloads.items():
        out["workloads"][name] = wl
    _greedy_identity(configs, runs)
    for cid, overrides in configs:
        docs = runs.get(cid) or []
        ok = [d for d in docs if d.get("status") == "ok"]
        composed = {}
        if ok:
            c = ok[0]["config"]
            composed = {k: c.get(k) for k in ("hardware", "model", "spec", "server")}
        out["configs"].append({"id": cid, "overrides": overrides, "spec": _knobs(overrides).get("method", ""),
                               "knobs": _knobs(overrides), "composed": composed})
        for wname in workloads:
            mine = [d for d in docs if d.get("_workload") == wname]
            mine_ok = [d for d in mine if d.get("status") == "ok"]
            failed = [d for d in mine if d.get("status") != "ok"]
            reason = (failed[0].get("failure") or {}) if failed else {}
            acc = [d.get("acceptance") or {} for d in mine_ok]
            out["trials"].append({
                "config": cid, "workload": wname, "status": "ok" if mine_ok else "failed",
                "rounds": len(mine), "rounds_ok": len(mine_ok),
                "failure": None if mine_ok else {"reason": reason.get("reason") or "no result",
                                                 "message": (reason.get("message") or "")[:300]},
                "startup_s": [((d.get("server") or {}).get("startup_s")) for d in mine_ok],
                "load_avg": [d.get("_load_avg") for d in mine],  # 1-minute load average when each round started
                "accept": _accept_summary(acc),
                "greedy_identical": _mean([{**(d.get("identity") or {}), **(d.get("_identity") or {})}
                                           .get("greedy_identical") for d in mine_ok]),
                "coding_pass_rate": None, "result_json": None,
            })
            out["runs"] += [run_entry(cid, wname, int(d.get("_round") or 0), d) for d in mine]
            by_cell: dict[tuple[int, int], list[dict[str, Any]]] = {}
            for d in mine_ok:
                for cell in d.get("cells") or []:
                    by_cell.setdefault((int(cell["context"]), int(cell["concurrency"])), []).append(cell)
            for (_ctx, _conc), cells in sorted(by_cell.items()):
                out["points"].append({"config": cid, "workload": wname, **merge_runs(cells)})
    return round_floats(out)  # masked where it is written (sweep.sim.landscape.write)


def _greedy_identity(configs: list[tuple[str, list[str]]], runs: dict[str, list[dict[str, Any]]]) -> None:
    """Each round's greedy answers compared with the baseline's (the same prompts, prompt by prompt:
    sweep/score/identity.py) where the trial itself found no baseline to compare with (its
    ``results.search_dirs`` did not reach the recording's work dir); kept as ``_identity``."""
    from sweep.score.identity import compare

    base_ids = [cid for cid, over in configs if "spec=none" in over]
    baseline: dict[str, list[dict[str, Any]]] = {}
    for cid in base_ids:
        for d in runs.get(cid) or []:
            answers = (d.get("identity") or {}).get("answers")
            if d.get("status") == "ok" and answers and d.get("_workload") not in baseline:
                baseline[str(d.get("_workload"))] = answers
    for docs in runs.values():
        for d in docs:
            ident = d.get("identity") or {}
            ref = baseline.get(str(d.get("_workload")))
            if d.get("status") == "ok" and ident.get("answers") and ref and ident.get("greedy_identical") is None:
                got = compare(ident["answers"], ref)
                d["_identity"] = {k: got.get(k) for k in ("greedy_identical", "prefix_match", "compared")}


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


def _accept_summary(accs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Drafted / accepted counters summed over the rounds (from /metrics, else per request)."""
    total: dict[str, float] = {}
    per_pos: list[float] = []
    for a in accs:
        src = a.get("metrics") or a.get("requests") or {}
        for key in ("drafted", "accepted", "drafts", "tokens", "verify_steps"):
            if isinstance(src.get(key), (int, float)):
                total[key] = total.get(key, 0.0) + float(src[key])
        pos = src.get("per_position") or []
        if isinstance(pos, list):
            for i, v in enumerate(pos):
                if isinstance(v, (int, float)):
                    per_pos.extend([0.0] * (i + 1 - len(per_pos)))
                    per_pos[i] += float(v)
    if not total:
        return None
    out: dict[str, Any] = dict(total)
    if total.get("drafted"):
        out["accept_rate"] = total.get("accepted", 0.0) / total["drafted"]
    if per_pos:
        out["per_position_accepted"] = per_pos
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", default="llamacpp", choices=sorted(ENGINES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--contexts", default="64,256")
    p.add_argument("--concurrency", default="1,2,4")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--configs", default="", help="only these config ids (comma-separated)")
    p.add_argument("--workloads", default="", help="workload groups (comma-separated; default: the engine's)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--work", type=Path, default=Path("/tmp/specsweep-landscape"))
    p.add_argument("--trial-timeout", type=float, default=3600.0)
    p.add_argument("--summary", type=Path, default=None,
                   help="print a recorded landscape's tables (tok/s with intervals, speedups), run nothing")
    p.add_argument("extra", nargs="*", help="more overrides for every trial")
    return p


@errors.command("benchmarks/record_landscape.py")
def main(argv: list[str] | None = None) -> int:
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/record_landscape.py", parser(), argv)  # every argument by its rule
    if args.summary is not None:
        print("\n".join(readable_summary(args.summary)))
        return 0
    spec = ENGINES[args.engine]
    configs = list(spec["configs"])
    if args.configs:
        want = args.configs.split(",")
        unknown = sorted(set(want) - {c for c, _ in configs})
        if unknown:
            print(f"error: --configs: unknown {', '.join(unknown)}; allowed: {', '.join(c for c, _ in configs)}",
                  file=sys.stderr)
            return 2
        configs = [c for c in configs if c[0] in want]
    workloads = args.workloads.split(",") if args.workloads else list(spec["workloads"])
    workload_over = [f"workload.contexts=[{args.contexts}]", f"workload.concurrency=[{args.concurrency}]",
                     f"workload.max_tokens={args.max_tokens}", "workload.repeats=1", "workload.coding=off"]
    from sweep.bench.boxstate import recording_policy, refused

    base = [*spec["base"], *workload_over, *recording_policy(args.extra), *args.extra]  # the user's policy wins
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.landscape import write as write_landscape
    from sweep.sim.probe import measure_in_subprocess

    composed_wl = {w: dict(from_omegaconf(compose([*base, f"workload={w}"])).raw["workload"]) for w in workloads}
    perf = measure_in_subprocess(int(spec.get("threads") or 0))
    machine = _machine(perf)
    model = "smollm2"
    out = args.out or ROOT / "benchmarks" / "measured" / "landscapes" / f"{args.engine}-{spec['hardware']}-{model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from sweep import secrets

    command = secrets.mask_text("python benchmarks/record_landscape.py " + " ".join(
        secrets.mask_argv(sys.argv[1:])))
    runs: dict[str, list[dict[str, Any]]] = {}
    total = args.rounds * len(configs)
    t0 = time.time()
    done = 0
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(configs)
        for cid, overrides in configs[shift:] + configs[:shift]:
            run_dir = args.work / f"round{rnd}" / cid
            docs = _run_trial([*base, *overrides], workloads, run_dir, args.trial_timeout)
            load = run_dir / "load_avg"
            load_avg = float(load.read_text()) if load.is_file() else None
            for wname, doc in docs.items():
                doc = dict(doc or {"status": "failed", "failure": {"reason": "timeout",
                                                                   "message": "the run left no result.json"}})
                doc["_load_avg"], doc["_round"], doc["_workload"] = load_avg, rnd, wname
                runs.setdefault(cid, []).append(doc)
            done += 1
            said = "; ".join(f"{w}: {(d or {}).get('status', 'no result')} tok/s "
                                f"{[round(c.get('output_tok_s') or 0, 1) for c in (d or {}).get('cells') or []]}"
                                for w, d in docs.items())
            eta = (time.time() - t0) / done * (total - done)
            print(f"[{done}/{total}] round {rnd} {cid}: {said} (eta {eta / 60:.0f} min)", flush=True)
            land = assemble(args.engine, spec, configs, runs, composed_wl, machine, command)
            # the command line every trial shared (a config's own overrides and workload=W come after):
            # with a config's overrides, what python -m sweep.sim.predict takes to predict it again
            land["base_overrides"] = secrets.mask_argv(base)
            land["duration_min"] = round((time.time() - t0) / 60, 1)
            write_landscape(out, land, argv=sys.argv)  # masked where it leaves: a secret of the command line too
            line = next((r for r in map(refused, docs.values()) if r), None)
            if line:  # the box stayed busy: a landscape is not recorded on it without saying so
                print(f"{line}\nstopped: round {rnd} {cid} was refused; {out} holds what was recorded before "
                      f"(run the same command again on a quiet box to resume)", file=sys.stderr)
                return 1
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)")
    return 0



# ------------------------------------------------------------------------------------------ the tables


def readable_summary(path: Path) -> list[str]:
    """:func:`summary` of the file the user named: a file that is no landscape (truncated, of the wrong
    shape) is bad input, one line naming ``--summary`` and exit 2, never a traceback."""
    from sweep.sim.landscape import LandscapeError

    try:
        return summary(path)
    except (LandscapeError, ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        why = str(exc).removeprefix("error: ").strip().splitlines()
        raise errors.ConfigError("--summary", why[0] if why else f"{path}: not a landscape this version reads "
                                 f"({type(exc).__name__})") from None


def summary(path: Path) -> list[str]:
    """A recorded landscape as Markdown: per workload and load, every config's tok/s with its 95%
    interval over the rounds (its copies pooled: sweep/score/configs.py), its accept length, its
    speedup over the autoregressive baseline with an interval, greedy identity; then the box's
    measured spread (the median relative SD of one round's tok/s), what ``hardware.spread`` takes."""

    from sweep.score.configs import pool
    from sweep.score.metrics import metrics
    from sweep.sim import landscape

    land = landscape.load(path)
    docs = landscape.trial_docs(land)
    for _, d in docs:
        d.metrics = metrics(d)
    pooled = pool([d for _, d in docs], [s for s, _ in docs])
    from sweep.score.noise import Candidate, with_spread

    measured = landscape.box_spread(land)
    box = measured[0] if measured else None

    def judged(c: Any) -> tuple[float, float] | None:
        """The interval the schedule judges the cell with (never narrower than the box's spread)."""
        ci = tuple(c.output_tok_s_ci) if c.output_tok_s_ci else None
        return with_spread(Candidate(None, float(c.output_tok_s), ci, int(c.repeats or 1)), box).ci
    lines: list[str] = []
    for wname in land.doc.get("workloads") or {}:
        rows = [p for p in pooled if p.doc is not None and p.doc.ok
                and p.doc.config_section("workload").get("name") == wname]
        base = next((p for p in rows if p.doc is not None and p.doc.spec_value("algorithm") == "none"), None)
        lines += [f"**{wname}**", "", "| config | C | n | tok/s [95%] | accept len | x spec=none [95%] | "
                  "greedy same |", "|---|---:|---:|---:|---:|---:|---:|"]
        loads = sorted({c.concurrency for p in rows if p.doc for c in p.doc.cells})
        for conc in loads:
            ref = next((c for c in base.doc.cells if c.concurrency == conc), None) if base and base.doc else None
            for p in rows:
                assert p.doc is not None
                cell = next((c for c in p.doc.cells if c.concurrency == conc), None)
                if cell is None or cell.output_tok_s is None:
                    continue
                ci = judged(cell)
                tok = f"{cell.output_tok_s:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
                ratio = "-"
                if ref is not None and ref.output_tok_s:
                    r = cell.output_tok_s / ref.output_tok_s
                    rel = 0.0
                    for c in (cell, ref):
                        cci = judged(c)
                        if cci and c.output_tok_s:
                            rel += ((cci[1] - cci[0]) / 2 / c.output_tok_s) ** 2
                    ratio = f"{r:.2f}x" + (f" [{r * (1 - rel ** 0.5):.2f}, {r * (1 + rel ** 0.5):.2f}]"
                                           if rel and p is not base else "")
                same = p.doc.metrics.greedy_identical
                acc = "-" if cell.accept_len is None else f"{cell.accept_len:.2f}"
                lines.append(f"| {p.name} | {conc} | {cell.repeats or 1} | {tok} | {acc} | {ratio} | "
                             f"{'-' if same is None else f'{same:.2f}'} |")
        lines.append("")
    if measured is not None:
        lines.append(f"box spread: median relative SD of one round's tok/s over {measured[1]} cells = "
                     f"{measured[0]:.3f}; the intervals above are the ones the schedule and the report judge "
                     "with: over the rounds, never narrower than this spread gives (sweep/score/noise.py)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
