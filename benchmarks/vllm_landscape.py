"""Record vLLM's speculative landscape on this CPU box: method x budget x lookup sizes, two workloads.

    python benchmarks/vllm_landscape.py [--repeats 3] [--concurrency 1 2 4] [--out FILE] [--work DIR]
    python benchmarks/vllm_landscape.py --quick           # a tiny grid: validates the pipeline (~15 min)
    python benchmarks/vllm_landscape.py --summary FILE    # print a recorded file's table, run nothing

Every point is a real trial of the product: for each config one
``python -m sweep -m server=vllm <config> workload=edit,prose ...`` (one server
start, both workloads on it: a workload change keeps the fingerprint), each
cell measured ``--repeats`` times in a row (``workload.repeats``: the cell keeps
the mean, a 95% interval and every repeat's tok/s), with the greedy-identity
pass, MLflow off. The autoregressive baseline (``spec=none``) runs first and
again last (drift between the two is printed: a shared box drifts), and every
trial finds the first one through ``results.search_dirs``, so its result.json
carries ``speedup_vs_baseline`` and the greedy-identity comparison.

Writes ``benchmarks/measured/landscapes/vllm-cpu-smollm2.json`` in the shared
landscape format (/work/landscape-format.md; ``specsweep.landscape/1``): the
machine, versions, the composed workloads, every config (with its composed
spec node), a ``trials`` entry per config and workload (failed ones kept, with
their reason), and a point per config x workload x context x concurrency
copying the result.json cell generically (any key a cell has flows through),
floats to 4 significant digits. The file is rewritten after every config and a
rerun with the same ``--work`` dir skips configs already measured, so an
interrupted recording resumes. At the end it prints accept length, tok/s,
speedup over spec=none and the greedy-identity fraction per config, workload
and concurrency.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCHEMA = "specsweep.landscape/1"
OUT = ROOT / "benchmarks" / "measured" / "landscapes" / "vllm-cpu-smollm2.json"
WORKLOADS = ("edit", "prose")
SIG = 4
MAX_LATENCIES = 256


def _config(cid: str, spec: str, **knobs: Any) -> dict[str, Any]:
    names = {"budget": "budget", "lookup_max": "ngram_n_max", "lookup_min": "ngram_n_min",
             "spec_factor": "suffix_max_spec_factor", "min_prob": "suffix_min_token_prob"}
    overrides = [f"spec={spec}"] + [f"spec.{names[k]}={v}" for k, v in knobs.items()]
    return {"id": cid, "overrides": overrides, "spec": spec,
            "knobs": {"method": spec if spec != "none" else None, **knobs} if spec != "none" else {}}


def grid() -> list[dict[str, Any]]:
    """~31 configs: n-gram budget x lookup window, suffix decoding, SmolLM2 drafting for itself."""
    out = [_config("none", "none")]
    for budget in (1, 2, 3, 4, 6, 8):
        for lmax, lmin in ((2, 1), (4, 2), (6, 3)):
            out.append(_config(f"ngram-b{budget}-max{lmax}-min{lmin}", "ngram", budget=budget,
                               lookup_max=lmax, lookup_min=lmin))
    for budget in (4, 8, 16, 24):
        for factor in (1.0, 2.0):
            out.append(_config(f"suffix-b{budget}-f{factor:g}", "suffix", budget=budget, spec_factor=factor))
    for budget in (1, 2, 3, 4):
        out.append(_config(f"draft-self-b{budget}", "draft", budget=budget))
    return out


def medium_grid() -> list[dict[str, Any]]:
    """12 configs (~1 h at C=1,2,4,8 x 2 repeats): n-gram budget and window, suffix, self-drafting."""
    out = [_config("none", "none")]
    for budget in (1, 2, 4, 8):
        out.append(_config(f"ngram-b{budget}-max4-min2", "ngram", budget=budget, lookup_max=4, lookup_min=2))
    for lmax, lmin in ((2, 1), (6, 3)):
        out.append(_config(f"ngram-b4-max{lmax}-min{lmin}", "ngram", budget=4, lookup_max=lmax, lookup_min=lmin))
    for budget in (8, 16):
        out.append(_config(f"suffix-b{budget}-f1", "suffix", budget=budget, spec_factor=1.0))
    for budget in (2, 4):
        out.append(_config(f"draft-self-b{budget}", "draft", budget=budget))
    return out


def quick_grid() -> list[dict[str, Any]]:
    return [_config("none", "none"),
            _config("ngram-b2-max4-min2", "ngram", budget=2, lookup_max=4, lookup_min=2),
            _config("ngram-b4-max4-min2", "ngram", budget=4, lookup_max=4, lookup_min=2),
            _config("suffix-b8-f1", "suffix", budget=8, spec_factor=1.0)]


# ------------------------------------------------------------------------------ running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _results(sweep_dir: Path) -> list[dict[str, Any]]:
    docs = []
    from sweep import readback
    from sweep.record.result import check_document

    for path in sorted(sweep_dir.rglob("result.json")):
        try:  # the project's reader of files it wrote (sweep/readback.py): bad ones named, skipped
            doc = readback.read_json(path)
            check_document(doc)
        except (readback.BadFile, readback.Invalid) as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            continue
        doc["_path"] = str(path)
        docs.append(doc)
    return sorted(docs, key=lambda d: (d.get("trial") or {}).get("job_num") or 0)


def _measured(sweep_dir: Path) -> bool:
    done = {(d.get("config") or {}).get("workload", {}).get("name") for d in _results(sweep_dir)
            if d.get("status") in ("ok", "failed")}
    return set(WORKLOADS) <= done


def run_config(cfg: dict[str, Any], base: list[str], work: Path, timeout: float) -> list[dict[str, Any]]:
    """One ``python -m sweep -m`` run: this config on both workloads; its result documents."""
    sweep_dir = work / cfg["id"]
    if _measured(sweep_dir):
        return _results(sweep_dir)
    cmd = [sys.executable, "-m", "sweep", "-m", "server=vllm", *cfg["overrides"], f"workload={','.join(WORKLOADS)}",
           *base, f"server.port={_free_port()}", "mlflow.enabled=false", f"results.search_dirs=[{work}]",
           f"hydra.sweep.dir={sweep_dir}"]
    sweep_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(sweep_dir / "run.log", "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        try:
            subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            log.write(f"timed out after {timeout:.0f} s\n")
    return _results(sweep_dir)


# ------------------------------------------------------------------------------ the file


def sig(x: Any, digits: int = SIG) -> Any:
    """Floats to ``digits`` significant digits, recursively (the file stays small and readable)."""
    if isinstance(x, float):
        if not math.isfinite(x) or x == 0:
            return x if math.isfinite(x) else None
        return round(x, max(0, digits - 1 - int(math.floor(math.log10(abs(x))))))
    if isinstance(x, dict):
        return {k: sig(v, digits) for k, v in x.items()}
    if isinstance(x, list):
        return [sig(v, digits) for v in x]
    return x


def point(cfg_id: str, workload: str, cell: dict[str, Any]) -> dict[str, Any]:
    """A result.json cell copied generically (+ config, workload); long latency lists capped."""
    out = {"config": cfg_id, "workload": workload, **cell}
    if isinstance(out.get("latencies"), list) and len(out["latencies"]) > MAX_LATENCIES:
        step = len(out["latencies"]) / MAX_LATENCIES
        out["latencies"] = [out["latencies"][int(i * step)] for i in range(MAX_LATENCIES)]
    return out


def trial_entry(cfg_id: str, workload: str, doc: dict[str, Any] | None, work: Path) -> dict[str, Any]:
    if doc is None:
        return {"config": cfg_id, "workload": workload, "status": "failed",
                "failure": {"reason": "no result", "message": "the run left no result.json (see run.log)"},
                "startup_s": None, "accept": None, "greedy_identical": None, "coding_pass_rate": None,
                "result_json": None}
    window = (doc.get("acceptance") or {}).get("metrics") or {}
    ident = doc.get("identity") or {}
    failure = doc.get("failure") if doc.get("status") != "ok" else None
    return {
        "config": cfg_id, "workload": workload, "status": doc.get("status"),
        "failure": None if failure is None else {"reason": failure.get("reason"),
                                                 "message": (failure.get("message") or "")[:400]},
        "startup_s": (doc.get("server") or {}).get("startup_s"),
        "server_reused": (doc.get("server") or {}).get("reused"),
        "accept": None if not window.get("drafts") else {
            k: window.get(k) for k in ("accept_len", "accept_rate", "drafts", "drafted", "accepted", "per_position")},
        "greedy_identical": ident.get("greedy_identical"),
        "greedy_prefix_match": ident.get("prefix_match"),
        "greedy_compared": ident.get("compared"),
        "speedup_vs_baseline": doc.get("speedup_vs_baseline"),
        "coding_pass_rate": (doc.get("metrics") or {}).get("coding_pass_rate"),
        "result_json": os.path.relpath(doc["_path"], work) if doc.get("_path") else None,
    }


def machine(python: str) -> dict[str, Any]:
    text = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")),
                 platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), [])
    versions = subprocess.run([python, "-c", "import torch, vllm, transformers; "
                               "print(torch.__version__, vllm.__version__, transformers.__version__)"],
                              capture_output=True, text=True, timeout=300).stdout.split()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    return {"cpu_model": model, "cores": os.cpu_count(),
            "flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma"))),
            "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
            "python": platform.python_version(), "torch": versions[0] if versions else None,
            "vllm": versions[1] if len(versions) > 1 else None,
            "transformers": versions[2] if len(versions) > 2 else None,
            "specsweep_commit": commit, "load_avg_at_start": round(os.getloadavg()[0], 2)}


def assemble(configs: Sequence[dict[str, Any]], runs: dict[str, list[dict[str, Any]]], work: Path,
             meta: dict[str, Any]) -> dict[str, Any]:
    """The landscape document from the result documents of every config run so far."""
    out: dict[str, Any] = {"schema": SCHEMA, "engine": "vllm", **meta, "workloads": {}, "configs": [],
                           "trials": [], "points": []}
    for cfg in configs:
        docs = runs.get(cfg["id"])
        if docs is None:
            continue
        by_workload = {((d.get("config") or {}).get("workload") or {}).get("name"): d for d in docs}
        composed = {}
        for doc in docs:
            c = doc.get("config") or {}
            composed = composed or {k: c.get(k) for k in ("hardware", "model", "spec")}
            wl = c.get("workload") or {}
            out["workloads"].setdefault(str(wl.get("name")), wl)
        out["configs"].append({**cfg, "composed": composed})
        for workload in WORKLOADS:
            doc = by_workload.get(workload)
            out["trials"].append(trial_entry(cfg["id"], workload, doc, work))
            if doc is not None and doc.get("status") == "ok":
                out["points"] += [point(cfg["id"], workload, cell) for cell in doc.get("cells") or []]
    return sig(out)


def write(path: Path, doc: dict[str, Any]) -> None:
    """The landscape through its one writer (secrets masked as it leaves: sweep/sim/landscape.py)."""
    from sweep.sim.landscape import write as write_landscape

    write_landscape(path, doc, argv=sys.argv)


# ------------------------------------------------------------------------------ the table


def table(doc: dict[str, Any]) -> list[str]:
    """Markdown rows: accept length, tok/s, speedup over spec=none, greedy identity, per config x workload x C."""
    base = {(p["workload"], p["context"], p["concurrency"]): p.get("output_tok_s")
            for p in doc.get("points") or [] if p["config"] == "none"}
    trials = {(t["config"], t["workload"]): t for t in doc.get("trials") or []}
    rows = ["| config | workload | C | accept len | accept rate | tok/s | x spec=none | greedy same |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for p in doc.get("points") or []:
        t = trials.get((p["config"], p["workload"])) or {}
        ref = base.get((p["workload"], p["context"], p["concurrency"]))
        tok = p.get("output_tok_s")
        ratio = f"{tok / ref:.2f}x" if tok and ref else "-"
        same = t.get("greedy_identical")
        rows.append(f"| {p['config']} | {p['workload']} | {p['concurrency']} | {_f(p.get('accept_len'))} | "
                    f"{_f(p.get('accept_rate'))} | {_f(tok, 1)} | {ratio} | {_f(same)} |")
    for t in doc.get("trials") or []:
        if t.get("status") != "ok":
            reason = (t.get("failure") or {}).get("reason")
            rows.append(f"| {t['config']} | {t['workload']} | - | failed: {reason} | | | | |")
    return rows


def _f(x: Any, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _progress(i: int, n: int, cid: str, t0: float) -> str:
    elapsed = time.monotonic() - t0
    eta = elapsed / i * (n - i) if i else 0.0
    return f"[{i}/{n}] {cid}  elapsed {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min"


def main(argv: Iterable[str] | None = None) -> int:
    """The benchmark inside the commands' boundary: bad input is one line, exit 2."""
    from sweep import errors

    return errors.command("benchmarks/vllm_landscape.py")(_main)(argv)


def _main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 configs, C=1,4, 1 repeat, 64 tokens: a check")
    ap.add_argument("--grid", choices=("full", "medium"), default="full",
                    help="full: ~31 configs (hours); medium: 11 configs + the baseline (~1 h at 2 repeats)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--contexts", type=int, nargs="+", default=[512])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--requests", type=int, default=4, help="workload.min_requests (a cell sends max(2C, this))")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--work", type=Path, default=None, help="where the runs go (default: <out>.work/); resumable")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per config run")
    ap.add_argument("--summary", type=Path, help="print the table of a recorded landscape file and exit")
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/vllm_landscape.py", ap, None if argv is None else list(argv))
    if args.summary:
        print("\n".join(table(json.loads(args.summary.read_text()))))
        return 0
    if args.quick:
        args.repeats, args.concurrency, args.max_tokens = 1, [1, 4], 64
    from sweep.engines import missing, paths, resolve

    install, model = resolve("vllm", [])
    if missing(install, model):
        print("error: vLLM is not installed: run python -m sweep.engines vllm", file=sys.stderr)
        return 1
    configs = quick_grid() if args.quick else medium_grid() if args.grid == "medium" else grid()
    configs = [*configs, {**configs[0], "id": "none-end"}]  # the baseline again at the end: the box's drift
    work = (args.work or args.out.with_suffix(".work")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    base = [f"workload.repeats={args.repeats}", f"workload.concurrency=[{','.join(map(str, args.concurrency))}]",
            f"workload.contexts=[{','.join(map(str, args.contexts))}]", f"workload.max_tokens={args.max_tokens}",
            f"workload.min_requests={args.requests}"]
    command = "python benchmarks/vllm_landscape.py " + " ".join(
        ["--quick"] if args.quick else [f"--grid {args.grid}", f"--repeats {args.repeats}",
                                        f"--concurrency {' '.join(map(str, args.concurrency))}",
                                        f"--contexts {' '.join(map(str, args.contexts))}",
                                        f"--max-tokens {args.max_tokens}", f"--requests {args.requests}"])
    meta = {"engine_version": str(install.get("version")), "model": str(model.get("served_name")),
            "hardware": "cpu", "machine": machine(str(paths(install, model)["server"])),
            "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "command": command}
    runs: dict[str, list[dict[str, Any]]] = {}
    t0 = time.monotonic()
    for i, cfg in enumerate(configs):
        print(_progress(i, len(configs), cfg["id"], t0), flush=True)
        runs[cfg["id"]] = run_config(cfg, base, work, args.timeout)
        write(args.out, assemble(configs, runs, work, meta))
    doc = assemble(configs, runs, work, meta)
    doc["duration_min"] = round((time.monotonic() - t0) / 60, 1)
    write(args.out, doc)
    print("\n".join(table(doc)))
    _drift(doc)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e3:.0f} kB, {len(doc['points'])} points, {len(doc['configs'])} configs) "
          f"in {doc['duration_min']} min")
    return 0


def _drift(doc: dict[str, Any]) -> None:
    """The baseline measured first and last: how much the box moved meanwhile."""
    first = {(p["workload"], p["concurrency"]): p.get("output_tok_s") for p in doc["points"] if p["config"] == "none"}
    for p in doc["points"]:
        if p["config"] == "none-end" and first.get((p["workload"], p["concurrency"])):
            ratio = p["output_tok_s"] / first[(p["workload"], p["concurrency"])]
            print(f"drift of spec=none, {p['workload']} C={p['concurrency']}: last/first = {ratio:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
