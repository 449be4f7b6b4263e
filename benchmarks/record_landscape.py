"""Record a real landscape: a grid of configs x contexts x concurrencies on a real engine, in rounds.

    python benchmarks/record_landscape.py --engine llamacpp [--rounds 3] [--out FILE]
        [--contexts 64,256] [--concurrency 1,2,4] [--max-tokens 64] [--configs ID,ID] [--work DIR]
        [OVERRIDE ...]      (e.g. workload.min_requests=2: more for every trial)

Every trial is a real ``python -m sweep`` run (compose -> render -> launch the
engine -> benchmark -> result.json), one server start per config per round,
with MLflow off. The grid is measured in **rounds**: round 1 runs every config,
then round 2 runs every config again, ... so the box's slow drifts (other jobs
on a shared machine) spread over all configs instead of landing on whichever
config ran during them; each point's per-round tok/s are kept
(``output_tok_s_runs``: the measured noise) and its figures are their mean.

The file (``benchmarks/measured/landscapes/<engine>-<box>-<model>.json``) is the
shared landscape format (sweep/sim/landscape.py, /work/landscape-format.md): the
configs with their overrides and composed hardware/model/spec nodes, one
``trials`` entry per config (failed ones kept: a landscape has losers), one point
per (config, workload, context, concurrency), and the machine's measured
figures (``python -m sweep.sim.probe``) under ``machine.perf``. It is rewritten
after every trial, and a rerun with the same ``--work`` dir skips trials whose
result.json is already there, so an interrupted recording resumes.
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
        "base": ["server=llamacpp", "workload=cpu", "server.threads=1"],
        "threads": 1,
        "hardware": "cpu",
        # n-gram: budget (n_max), minimum draft (n_min) and lookup length (n_match, llama.cpp's
        # default 24) across what a user would try; the target drafting for itself (full
        # acceptance, a forward per drafted token); the autoregressive baseline
        "configs": [("none", ["spec=none"]),
                    _ngram(4, 1), _ngram(8, 2), _ngram(16, 2), _ngram(16, 8), _ngram(32, 2),
                    _ngram(8, 2, 12), _ngram(16, 2, 12), _ngram(16, 2, 8),
                    _draft(2), _draft(4), _draft(8)],
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
            "load_avg_at_start": os.getloadavg()[0]}


def _result(path: Path) -> dict[str, Any] | None:
    """A trial's result.json through the project's reader (sweep.readback: regular, bounded, every
    value checked); None when there is none or it is not one (the trial runs again)."""
    from sweep import readback
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


def _run_trial(overrides: list[str], run_dir: Path, timeout: float) -> dict[str, Any] | None:
    result = run_dir / "result.json"
    doc = _result(result)
    if doc is not None and doc.get("status") in ("ok", "failed"):
        return doc
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "load_avg").write_text(f"{os.getloadavg()[0]:.2f}\n")  # how busy the shared box was
    cmd = [sys.executable, "-m", "sweep", *overrides, f"server.port={_free_port()}", "mlflow.enabled=false",
           "baseline.auto_run=false", f"hydra.run.dir={run_dir}"]
    with open(run_dir / "stdout.log", "w") as out:
        try:
            subprocess.run(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None
    return _result(result)


def assemble(engine: str, spec: dict[str, Any], configs: list[tuple[str, list[str]]],
             runs: dict[str, list[dict[str, Any]]], workload: dict[str, Any], machine: dict[str, Any],
             command: str) -> dict[str, Any]:
    """The landscape document from every trial's result.json (per config, in round order)."""
    from sweep.sim.landscape import SCHEMA, merge_runs, round_floats

    first_ok = next((d for docs in runs.values() for d in docs if d.get("status") == "ok"), None)
    cfg0 = (first_ok or {}).get("config") or {}
    out: dict[str, Any] = {
        "schema": SCHEMA, "engine": engine,
        "engine_version": str(((cfg0.get("server") or {}).get("install") or {}).get("version") or ""),
        "model": str((cfg0.get("model") or {}).get("served_name") or (cfg0.get("model") or {}).get("name") or ""),
        "hardware": spec.get("hardware"), "machine": machine,
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command, "workloads": {}, "configs": [], "trials": [], "points": [],
    }
    for cid, overrides in configs:
        docs = runs.get(cid) or []
        ok = [d for d in docs if d.get("status") == "ok"]
        composed = {}
        if ok:
            c = ok[0]["config"]
            composed = {k: c.get(k) for k in ("hardware", "model", "spec")}
            keep = ("name", "flavor", "model_format", "parallel", "threads")
            composed["server"] = {k: (c.get("server") or {}).get(k) for k in keep}
            wl = c.get("workload") or {}
            out["workloads"].setdefault(str(wl.get("name")), wl)
        out["configs"].append({"id": cid, "overrides": overrides, "spec": _knobs(overrides).get("method", ""),
                               "knobs": _knobs(overrides), "composed": composed})
        failed = [d for d in docs if d.get("status") != "ok"]
        reason = (failed[0].get("failure") or {}) if failed else {}
        acc = [d.get("acceptance") or {} for d in ok]
        out["trials"].append({
            "config": cid, "workload": str(workload.get("name")), "status": "ok" if ok else "failed",
            "rounds": len(docs), "rounds_ok": len(ok),
            "failure": None if ok else {"reason": reason.get("reason") or "no result",
                                        "message": (reason.get("message") or "")[:300]},
            "startup_s": [((d.get("server") or {}).get("startup_s")) for d in ok],
            "load_avg": [d.get("_load_avg") for d in docs],  # 1-minute load average when each round started
            "accept": _accept_summary(acc), "greedy_identical": None, "coding_pass_rate": None,
            "result_json": None,
        })
        by_cell: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for d in ok:
            for cell in d.get("cells") or []:
                by_cell.setdefault((int(cell["context"]), int(cell["concurrency"])), []).append(cell)
        for (_ctx, _conc), cells in sorted(by_cell.items()):
            point = {"config": cid, "workload": str(workload.get("name")), **merge_runs(cells)}
            out["points"].append(point)
    return round_floats(out)


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
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--work", type=Path, default=Path("/tmp/specsweep-landscape"))
    p.add_argument("--trial-timeout", type=float, default=1800.0)
    p.add_argument("extra", nargs="*", help="more overrides for every trial")
    return p


@errors.command("benchmarks/record_landscape.py")
def main(argv: list[str] | None = None) -> int:
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/record_landscape.py", parser(), argv)  # every argument by its rule
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
    workload_over = [f"workload.contexts=[{args.contexts}]", f"workload.concurrency=[{args.concurrency}]",
                     f"workload.max_tokens={args.max_tokens}", "workload.repeats=1", "workload.coding=off"]
    base = [*spec["base"], *workload_over, *args.extra]
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.landscape import write as write_landscape
    from sweep.sim.probe import measure_in_subprocess

    wl = dict(from_omegaconf(compose(base)).raw["workload"])
    perf = measure_in_subprocess(int(spec.get("threads") or 0))
    machine = _machine(perf)
    model = "smollm2" if args.engine == "llamacpp" else args.engine
    out = args.out or ROOT / "benchmarks" / "measured" / "landscapes" / f"{args.engine}-{spec['hardware']}-{model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/record_landscape.py " + " ".join(sys.argv[1:])
    runs: dict[str, list[dict[str, Any]]] = {}
    total = args.rounds * len(configs)
    t0 = time.time()
    done = 0
    for rnd in range(1, args.rounds + 1):
        for cid, overrides in configs:
            run_dir = args.work / f"round{rnd}" / cid
            doc = _run_trial([*base, *overrides], run_dir, args.trial_timeout)
            doc = dict(doc or {"status": "failed", "failure": {"reason": "timeout"}})
            load = run_dir / "load_avg"
            doc["_load_avg"] = float(load.read_text()) if load.is_file() else None
            runs.setdefault(cid, []).append(doc)
            done += 1
            status = (doc or {}).get("status", "timeout")
            tok = [c.get("output_tok_s") for c in (doc or {}).get("cells") or []]
            eta = (time.time() - t0) / done * (total - done)
            print(f"[{done}/{total}] round {rnd} {cid}: {status} tok/s {tok} (eta {eta / 60:.0f} min)", flush=True)
            land = assemble(args.engine, spec, configs, runs, wl, machine, command)
            write_landscape(out, land, argv=sys.argv)  # masked where it leaves: a secret of the command line too
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
