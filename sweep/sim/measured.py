"""Measured points from real trials' result files (the format ``sweep.trial.run`` writes).

A point is one figure a real server produced and the twin can predict: a
cell's output tok/s or accept length (context x concurrency x max_tokens),
or one coding problem's decode speed at its answer length. Simulated
results are refused: the twin is fitted to real boxes only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweep.io.readback import BadFile, Invalid, checked_name, number, read_bytes
from sweep.sim.arch import as_served
from sweep.sim.constants import box_name, engine_hardware

CODING_PROMPT_TOKENS = 100  # the five-problem prompts, when a problem does not record its own
KINDS = ("output_tok_s", "accept_len", "ttft_ms", "stream_tok_s")


@dataclass(frozen=True)
class Point:
    """One measured figure and everything needed to predict it."""

    label: str
    kind: str                     # output_tok_s | accept_len | ttft_ms | stream_tok_s (a coding problem)
    box: str
    measured: float
    hardware: Mapping[str, Any] = field(repr=False)
    model: Mapping[str, Any] = field(repr=False)
    spec: Mapping[str, Any] = field(repr=False)
    context: int = 60
    concurrency: int = 1
    max_tokens: int = 512
    requests: int = 1
    eager: bool = False
    file: str = ""                # the result file's name
    source: str = ""
    workload: str = ""            # what the prompts were (chain drafters' acceptance is fitted per workload)
    max_running: int | None = None  # the engine's cap on requests decoded together (llama.cpp --parallel)
    config: str = ""              # a landscape's config id (held-out splits)
    runs: tuple[float, ...] = ()  # per-repeat measurements (the measured noise)
    repeats: int = 1              # measurements the figure is the mean (accept, tok/s) or median (TTFT) of
    per_draft: bool = False       # an accept length per drafting step (vLLM's 1 + accepted / drafts)
    # the composed config (hardware, model, spec, server, workload: this cell) sweep.sim.predict takes
    # for this figure: the fidelity figures and the tests predict it the way a user does
    composed: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the box's state while it was measured (sweep/bench/boxstate.py): the 1-minute load average per
    # round, busy by the recorded state (None: not recorded), other work in cores, the box's cores
    load_avg: tuple[float, ...] = ()
    busy: bool | None = None
    others_cpu: float | None = None
    cpus: int | None = None


@dataclass
class Loaded:
    points: list[Point]
    files: list[tuple[Path, str]]          # (path, sha256) of every file that gave points
    skipped: list[tuple[Path, str]]        # (path, why): not a real box's finished measurement
    bad: list[BadFile] = field(default_factory=list)  # files that are not what they claim (sweep/io/readback.py)


SPEC_KEYS = ("algorithm", "budget", "topk", "window", "block", "num_steps", "ngram_n_min", "ngram_n_match",
             "draft_n_min", "draft_p_min", "synth_len")


def draft_size(cfg: Mapping[str, Any]) -> float:
    """A separate draft model's size relative to the target: 1 when the target drafts for itself,
    else from the draft's declared shape (model.install.draft), else 1 (unknown: assume as large)."""
    spec, model = cfg.get("spec") or {}, cfg.get("model") or {}
    fam = spec.get("draft_family")
    path = (model.get("draft_paths") or {}).get(fam) if fam else None
    if not path or path == model.get("path"):
        return 1.0
    d = (model.get("install") or {}).get("draft") or {}
    a = model.get("arch") or {}
    if d.get("layers") and d.get("hidden") and a.get("hidden_size") and a.get("layers"):
        vocab = float(a.get("vocab_size") or 0)
        small = d["layers"] * 12.0 * d["hidden"] ** 2 + vocab * d["hidden"]
        big = a["layers"] * 12.0 * a["hidden_size"] ** 2 + vocab * a["hidden_size"]
        return max(1e-4, small / big)
    return 1.0


# What an engine does when a chain drafter's flag is not given (llama.cpp common/common.h).
LLAMACPP_DEFAULTS = {"--spec-ngram-mod-n-min": 48, "--spec-ngram-mod-n-match": 24, "--spec-draft-n-min": 0}


# The shortest n-gram key vLLM's ngram_hit is the hit rate at: spec=ngram's ngram_n_min (its
# prompt_lookup_min) as shipped (conf/spec/ngram.yaml).
VLLM_LOOKUP_REFERENCE = 2


def chain_keys(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A chain drafter's numbers as the engine runs them, read from its rendered flags (the knobs'
    names differ by engine and branch; the flags do not): ``chain_n_max`` (tokens drafted at most),
    ``chain_floor`` (drafts shorter than this are dropped), ``lookup_key`` (the shortest n-gram an
    n-gram lookup accepts), ``draft_p_min``."""
    spec, server = cfg.get("spec") or {}, cfg.get("server") or {}
    flavor = str(server.get("flavor") or server.get("name") or "")
    args = (((spec.get("render") or {}).get(flavor) or {}).get("args")) or {}
    ngram = str(spec.get("algorithm") or "").lower() == "ngram"
    if flavor == "llamacpp" and args:
        def flag(name: str) -> Any:
            value = args.get(name)
            return LLAMACPP_DEFAULTS.get(name) if value is None else value

        return {"chain_n_max": args.get("--spec-ngram-mod-n-max" if ngram else "--spec-draft-n-max")
                or spec.get("budget"),
                "chain_floor": flag("--spec-ngram-mod-n-min" if ngram else "--spec-draft-n-min"),
                "lookup_key": flag("--spec-ngram-mod-n-match") if ngram else None,
                "draft_p_min": args.get("--spec-draft-p-min")}
    # vLLM's one mapping-valued argument is its speculative config (the flag's name lives in YAML)
    conf = next((v for v in args.values() if isinstance(v, Mapping)), None) if flavor == "vllm" else None
    if isinstance(conf, Mapping):
        return {"chain_n_max": conf.get("num_speculative_tokens") or spec.get("budget"), "chain_floor": 0,
                "lookup_key": conf.get("prompt_lookup_min") if ngram else None, "draft_p_min": None,
                "lookup_reference": VLLM_LOOKUP_REFERENCE if ngram else None,
                # vLLM's n-gram proposer drafts the K tokens after the match whenever it finds one
                # (vllm/v1/spec_decode/ngram_proposer.py): 7.9 of 8 per draft measured here
                "full_draft": bool(ngram)}
    return {}


def spec_of(cfg: Mapping[str, Any]) -> dict[str, Any]:
    spec = cfg.get("spec") or {}
    out = {k: spec.get(k) for k in SPEC_KEYS}
    out["draft_size"] = draft_size(cfg)
    out.update(chain_keys(cfg))
    return out


def max_running_of(cfg: Mapping[str, Any]) -> int | None:
    """The engine's cap on requests decoded together (llama.cpp's slots), if it declares one."""
    server = cfg.get("server") or {}
    for key in ("parallel", "max_running_requests"):
        if isinstance(server.get(key), int) and server[key] > 0:
            return int(server[key])
    return None


def accept_per_draft(server: Mapping[str, Any] | None) -> bool:
    """Whether this engine's recorded accept length counts drafting steps only: with no per-request
    counters declared (vLLM), a cell's accept length is its /metrics window's 1 + accepted / drafts --
    steps where the n-gram lookup found nothing draft nothing and are not counted. The project's own
    figure (tokens per verify step, sweep/bench/acceptance.py) counts every step."""
    server = server or {}
    decl = server.get("acceptance")
    if decl is None and server.get("name"):
        try:
            from sweep.bench.acceptance import declared

            decl = declared(str(server["name"]))
        except (KeyError, OSError, ValueError):
            decl = {}
    request = (decl or {}).get("request") if isinstance(decl, Mapping) else None
    return bool(server.get("name")) and not request and str(server.get("name")) not in ("sim", "sglang")


def inputs(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What the twin runs a composed config on, derived once for the fit's points and for
    ``sweep.sim.predict``: the engine's box (its own calibration), the model as the engine serves it
    (format, dtype), the spec with the numbers the engine runs (its flags), eager or not, the
    engine's cap on requests decoded together, and how its accept length is counted."""
    server = cfg.get("server") or {}
    hardware = engine_hardware(cfg.get("hardware") or {}, server)
    return {"hardware": hardware, "model": as_served(cfg.get("model") or {}, server, hardware),
            "spec": spec_of(cfg), "eager": bool(server.get("disable_cuda_graph")),
            "max_running": max_running_of(cfg), "box": box_name(hardware), "per_draft": accept_per_draft(server)}


def spec_label(spec: Mapping[str, Any]) -> str:
    algo = str(spec.get("algorithm") or "none")
    if algo == "ddtree":
        return f"ddtree b{spec.get('budget')}/t{spec.get('topk')}/w{spec.get('window')}"
    if algo == "none":
        return "AR"
    if algo == "ngram":
        return f"ngram b{spec.get('budget')}/min{spec.get('ngram_n_min')}" + (
            f"/m{spec['ngram_n_match']}" if spec.get("ngram_n_match") else "")
    return f"{algo} b{spec.get('budget')}"


def cell_config(cfg: Mapping[str, Any], workload: Mapping[str, Any], *, context: int, concurrency: int,
                max_tokens: int, requests: int, repeats: int = 1) -> dict[str, Any]:
    """A composed config whose workload is this one cell: what ``sweep.sim.predict`` takes for it."""
    wl = {**workload, "contexts": [int(context)], "concurrency": [int(concurrency)], "max_tokens": int(max_tokens),
          "requests_per_cell": int(requests), "repeats": int(repeats), "cells": None}
    return {**{k: cfg.get(k) for k in ("hardware", "model", "spec", "server")}, "workload": wl}


def state_of(cell: Mapping[str, Any], loads: tuple[float, ...], cpus: Any = None) -> dict[str, Any]:
    """A point's box state from its cell (``box_state``, recorded since issue 41) and load averages."""
    raw = cell.get("box_state")
    state: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    others, busy, n = state.get("others_cpu"), state.get("busy"), state.get("cpus") or cpus
    return {"load_avg": tuple(float(v) for v in loads), "busy": busy if isinstance(busy, bool) else None,
            "others_cpu": float(others) if isinstance(others, (int, float)) else None,
            "cpus": int(n) if isinstance(n, (int, float)) and n > 0 else None}


def _points(doc: Mapping[str, Any], name: str) -> list[Point]:
    cfg = doc.get("config") or {}
    workload = cfg.get("workload") or {}
    got = inputs(cfg)
    hardware, spec, eager = got["hardware"], got["spec"], got["eager"]
    max_tokens = int(workload.get("max_tokens") or 512)
    head = f"{hardware.get('name')} {spec_label(spec)}" + (" eager" if eager else "")
    box = checked_name(got["box"], "config.hardware (the box a calibration is written for)")
    common: dict[str, Any] = {"hardware": hardware, "model": got["model"], "spec": spec, "box": box,
                              "eager": eager, "file": name, "source": f"{name}: {doc.get('source') or ''}".strip(),
                              "workload": str(workload.get("name") or ""), "max_running": got["max_running"]}
    out: list[Point] = []
    for cell in doc.get("cells") or []:
        ctx, conc = int(cell["context"]), int(cell["concurrency"])
        where: dict[str, Any] = {"context": ctx, "concurrency": conc, "max_tokens": max_tokens,
                                 "requests": int(cell.get("requests") or conc)}
        composed = cell_config(cfg, workload, context=ctx, concurrency=conc, max_tokens=max_tokens,
                               requests=where["requests"])
        where.update(state_of(cell, (cell["load_avg"],) if isinstance(cell.get("load_avg"), (int, float)) else ()))
        if cell.get("output_tok_s"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} {max_tokens}tok tok/s", kind="output_tok_s",
                             measured=float(cell["output_tok_s"]), composed=composed, **where, **common))
        if cell.get("accept_len") and spec["algorithm"] not in (None, "none"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} accept len", kind="accept_len",
                             measured=float(cell["accept_len"]), composed=composed, per_draft=got["per_draft"],
                             **where, **common))
    coding = doc.get("coding") or {}
    for prob in coding.get("problems") or []:
        if prob.get("tok_s") and prob.get("completion_tokens"):
            n = int(prob["completion_tokens"])
            out.append(Point(label=f"{head} coding {prob.get('name')} {n}tok tok/s", kind="stream_tok_s",
                             measured=float(prob["tok_s"]), context=int(prob.get("prompt_tokens")
                                                                        or CODING_PROMPT_TOKENS),
                             concurrency=1, max_tokens=n, requests=1, **common))
    return out


def _files(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        found.extend(sorted(p.rglob("*.json")) if p.is_dir() else [p])
    return found


def _round_values(land: Any, pt: Mapping[str, Any], key: str) -> tuple[float, ...]:
    """One figure of a point's cell in each round that measured it (from ``runs``; older files: none)."""
    out: list[float] = []
    for run in land.doc.get("runs") or []:
        if not isinstance(run, Mapping) or run.get("status") != "ok" or str(run.get("config")) != str(pt["config"]) \
                or str(run.get("workload")) != str(pt.get("workload")):
            continue
        for c in run.get("cells") or []:
            here = isinstance(c, Mapping) and (c.get("context"), c.get("concurrency")) == (pt["context"],
                                                                                          pt["concurrency"])
            if here and isinstance(c.get(key), (int, float)) and c[key] > 0:
                out.append(float(c[key]))
    return tuple(out)


def landscape_points(path: Path) -> list[Point]:
    """Points of a recorded landscape (sweep/sim/landscape.py): each cell's tok/s, TTFT and accept length,
    with the composed config ``sweep.sim.predict`` takes for it (the box's recorded figures)."""
    import statistics

    from sweep.sim.landscape import LandscapeError, load as load_landscape

    path = Path(path)
    land = load_landscape(path)
    out: list[Point] = []
    for pt in land.points:
        cid = str(pt.get("config"))
        comp = land.composed(cid)
        wname = str(pt.get("workload") or "")
        wl = dict((land.doc.get("workloads") or {}).get(wname) or comp.get("workload") or {})
        wl["name"] = wname
        cfg = {**comp, "workload": wl}
        try:
            from sweep.sim.constants import check_figures

            check_figures(engine_hardware(comp.get("hardware") or {}, comp.get("server")))
        except ValueError as exc:
            raise LandscapeError(f"error: landscape {path}: {exc} -- recorded without the box's measured "
                                 "figures (machine.perf); benchmarks/record_landscape.py records them") from None
        got = inputs(cfg)
        spec = got["spec"]
        box = checked_name(got["box"], f"configs {cid}: hardware (the box a calibration is written for)")
        ctx, conc = int(pt["context"]), int(pt["concurrency"])
        per_req = pt.get("completion_tokens") and pt.get("requests") and \
            round(float(pt["completion_tokens"]) / float(pt["requests"]))
        max_tokens = int(per_req or pt.get("max_tokens") or wl.get("max_tokens") or 128)
        repeats = max(1, int(pt.get("repeats") or 1))
        requests = int(int(pt.get("requests") or conc) / repeats)
        head = f"{cid} {wname}"
        composed = cell_config(cfg, wl, context=ctx, concurrency=conc, max_tokens=max_tokens, requests=requests,
                               repeats=repeats)
        common: dict[str, Any] = {
            "hardware": got["hardware"], "model": got["model"], "spec": spec, "box": box,
            "eager": got["eager"], "file": path.name, "source": f"{path.name}: {land.doc.get('command') or ''}",
            "context": ctx, "concurrency": conc, "max_tokens": max_tokens, "requests": requests,
            "workload": wname, "max_running": got["max_running"], "config": cid, "composed": composed,
            **state_of(pt, _round_values(land, pt, "load_avg"), (land.doc.get("machine") or {}).get("cores"))}
        if pt.get("output_tok_s"):
            runs = tuple(float(v) for v in pt.get("output_tok_s_runs") or ())
            out.append(Point(label=f"{head} ctx{ctx} C{conc} tok/s", kind="output_tok_s",
                             measured=float(pt["output_tok_s"]), runs=runs, repeats=len(runs) or repeats, **common))
        ttfts = _round_values(land, pt, "ttft_ms_p50") or ((float(pt["ttft_ms_p50"]),) if pt.get("ttft_ms_p50") else ())
        if ttfts:  # the median request's wait for its first token, the median over the rounds
            out.append(Point(label=f"{head} ctx{ctx} C{conc} TTFT", kind="ttft_ms",
                             measured=float(statistics.median(ttfts)), runs=ttfts if len(ttfts) > 1 else (),
                             repeats=len(ttfts), **common))
        if pt.get("accept_len") and spec["algorithm"] not in (None, "none"):
            runs = tuple(float(v) for v in pt.get("accept_len_runs") or ())
            out.append(Point(label=f"{head} ctx{ctx} C{conc} accept len", kind="accept_len",
                             measured=float(pt["accept_len"]), runs=runs, repeats=len(runs) or repeats,
                             per_draft=got["per_draft"], **common))
    return out


def load(paths: Iterable[Path]) -> Loaded:
    """Points from every real, successful result file (or recorded landscape) under ``paths``.

    Every file is read through :mod:`sweep.io.readback` (regular, bounded, strict JSON) and checked
    as what it claims to be (a result file: :func:`sweep.record.result.check_document`; a
    landscape: :func:`sweep.sim.landscape.check_document`); one that is not lands in ``bad``
    with the reason, the others are used. Files that are fine but hold no real measurement
    (simulated, failed, not a result file) land in ``skipped``."""
    from sweep.errors import ConfigError
    from sweep.io.readback import parse_json
    from sweep.record.result import check_document
    from sweep.sim.landscape import LandscapeError, is_landscape

    loaded = Loaded([], [], [])
    for path in _files(paths):
        try:
            raw = read_bytes(path)
        except BadFile as exc:
            loaded.bad.append(exc)
            continue
        if is_landscape(path, raw[:4096]):
            try:
                points = landscape_points(path)
            except (LandscapeError, ConfigError, Invalid) as exc:
                loaded.bad.append(BadFile(path, str(exc).removeprefix("error: ")))
                continue
            if not points:
                loaded.skipped.append((path, "no measured figures"))
                continue
            loaded.points.extend(points)
            loaded.files.append((path, hashlib.sha256(raw).hexdigest()))
            continue
        try:
            doc = parse_json(raw, path)
        except BadFile as exc:
            loaded.bad.append(exc)
            continue
        if not isinstance(doc, dict) or "cells" not in doc or "config" not in doc:
            loaded.skipped.append((path, "not a result file (no cells/config)"))
            continue
        try:
            check_document(doc)
            _check_coding(doc)
        except Invalid as exc:
            loaded.bad.append(BadFile(path, f"not a result file: {exc}"))
            continue
        if doc.get("simulated") is not False:
            loaded.skipped.append((path, "simulated: the twin is fitted to real boxes only"))
            continue
        if doc.get("status") != "ok":
            loaded.skipped.append((path, f"status {doc.get('status')!r}"))
            continue
        try:
            points = _points(doc, path.name)
        except Invalid as exc:
            loaded.bad.append(BadFile(path, str(exc)))
            continue
        if not points:
            loaded.skipped.append((path, "no measured figures"))
            continue
        loaded.points.extend(points)
        loaded.files.append((path, hashlib.sha256(raw).hexdigest()))
    return loaded


def _check_coding(doc: Mapping[str, Any]) -> None:
    """The coding problems' figures a point is made of: numbers where numbers are read."""
    coding = doc.get("coding") or {}
    for i, prob in enumerate(coding.get("problems") or []):
        if not isinstance(prob, dict):
            raise Invalid(f"coding.problems[{i}]", "is not an object")
        for key in ("tok_s", "completion_tokens", "prompt_tokens"):
            number(f"coding.problems[{i}].{key}", prob.get(key))


def predict_point(point: Point, cal: Mapping[str, float]) -> float:
    """The twin's value of a measured figure with these constants (its workload's, where fitted)."""
    from sweep.sim.cells import cell
    from sweep.sim.constants import for_workload
    from sweep.sim.perf import box_of

    values = for_workload(cal, point.workload or "default")
    if point.kind == "stream_tok_s":
        return cell(box_of(point.hardware, point.model), values, point.spec, context=point.context,
                    concurrency=1, max_tokens=point.max_tokens, requests=1,
                    disable_cuda_graph=point.eager)["per_stream_tok_s"]
    out = cell(box_of(point.hardware, point.model), values, point.spec, context=point.context,
               concurrency=point.concurrency, max_tokens=point.max_tokens, requests=point.requests,
               disable_cuda_graph=point.eager, max_running=point.max_running)
    return out[CELL_KEY[point.kind](point)]


# Which figure of a predicted cell (sweep.sim.cells.cell) a kind of point is.
CELL_KEY = {"output_tok_s": lambda p: "tok_s", "ttft_ms": lambda p: "ttft_ms",
            "accept_len": lambda p: "accept_len_drafted" if p.per_draft else "accept_len"}
