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

from sweep.readback import BadFile, Invalid, checked_name, number, read_bytes
from sweep.sim.arch import as_served
from sweep.sim.constants import box_name, engine_hardware

CODING_PROMPT_TOKENS = 100  # the five-problem prompts, when a problem does not record its own
KINDS = ("output_tok_s", "accept_len", "stream_tok_s")


@dataclass(frozen=True)
class Point:
    """One measured figure and everything needed to predict it."""

    label: str
    kind: str                     # output_tok_s | accept_len | stream_tok_s (a coding problem)
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


@dataclass
class Loaded:
    points: list[Point]
    files: list[tuple[Path, str]]          # (path, sha256) of every file that gave points
    skipped: list[tuple[Path, str]]        # (path, why): not a real box's finished measurement
    bad: list[BadFile] = field(default_factory=list)  # files that are not what they claim (sweep/readback.py)


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
                "lookup_key": conf.get("prompt_lookup_min") if ngram else None, "draft_p_min": None}
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


def _points(doc: Mapping[str, Any], name: str) -> list[Point]:
    cfg = doc.get("config") or {}
    hardware, model, workload = cfg.get("hardware") or {}, cfg.get("model") or {}, cfg.get("workload") or {}
    hardware = engine_hardware(hardware, cfg.get("server"))
    model = as_served(model, cfg.get("server"))
    spec = spec_of(cfg)
    eager = bool((cfg.get("server") or {}).get("disable_cuda_graph"))
    max_tokens = int(workload.get("max_tokens") or 512)
    box = checked_name(box_name(hardware), "config.hardware (the box a calibration is written for)")
    head = f"{hardware.get('name')} {spec_label(spec)}" + (" eager" if eager else "")
    common: dict[str, Any] = {"hardware": hardware, "model": model, "spec": spec, "box": box, "eager": eager,
                              "file": name, "source": f"{name}: {doc.get('source') or ''}".strip(),
                              "workload": str(workload.get("name") or ""), "max_running": max_running_of(cfg)}
    out: list[Point] = []
    for cell in doc.get("cells") or []:
        ctx, conc = int(cell["context"]), int(cell["concurrency"])
        where: dict[str, Any] = {"context": ctx, "concurrency": conc, "max_tokens": max_tokens,
                 "requests": int(cell.get("requests") or conc)}
        if cell.get("output_tok_s"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} {max_tokens}tok tok/s", kind="output_tok_s",
                             measured=float(cell["output_tok_s"]), **where, **common))
        if cell.get("accept_len") and spec["algorithm"] not in (None, "none"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} accept len", kind="accept_len",
                             measured=float(cell["accept_len"]), **where, **common))
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


def landscape_points(path: Path) -> list[Point]:
    """Points of a recorded landscape (sweep/sim/landscape.py): each point's tok/s and accept length."""
    from sweep.sim.landscape import load as load_landscape

    land = load_landscape(path)
    out: list[Point] = []
    for pt in land.points:
        cid = str(pt.get("config"))
        comp = land.composed(cid)
        cfg = {**comp, "workload": {**((comp.get("workload") or {})), "name": pt.get("workload")}}
        hardware = engine_hardware(comp.get("hardware") or {}, comp.get("server") or {"name": land.engine})
        box = checked_name(box_name(hardware), f"configs {cid}: hardware (the box a calibration is written for)")
        model = as_served(comp.get("model") or {}, comp.get("server"))
        spec = spec_of(cfg)
        ctx, conc = int(pt["context"]), int(pt["concurrency"])
        max_tokens = int(pt.get("max_tokens") or (land.doc.get("workloads", {}).get(pt.get("workload")) or {})
                         .get("max_tokens") or 128)
        per_req = pt.get("completion_tokens") and pt.get("requests") and \
            round(float(pt["completion_tokens"]) / float(pt["requests"]))
        max_tokens = int(per_req or max_tokens)
        head = f"{cid} {pt.get('workload')}"
        common: dict[str, Any] = {
            "hardware": hardware, "model": model, "spec": spec, "box": box, "eager": False,
            "file": path.name, "source": f"{path.name}: {land.doc.get('command') or ''}", "context": ctx,
            "concurrency": conc, "max_tokens": max_tokens,
            "requests": int(int(pt.get("requests") or conc) / max(1, int(pt.get("repeats") or 1))),
            "workload": str(pt.get("workload") or ""), "max_running": max_running_of(comp), "config": cid}
        if pt.get("output_tok_s"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} tok/s", kind="output_tok_s",
                             measured=float(pt["output_tok_s"]),
                             runs=tuple(float(v) for v in pt.get("output_tok_s_runs") or ()), **common))
        if pt.get("accept_len") and spec["algorithm"] not in (None, "none"):
            out.append(Point(label=f"{head} ctx{ctx} C{conc} accept len", kind="accept_len",
                             measured=float(pt["accept_len"]),
                             runs=tuple(float(v) for v in pt.get("accept_len_runs") or ()), **common))
    return out


def load(paths: Iterable[Path]) -> Loaded:
    """Points from every real, successful result file (or recorded landscape) under ``paths``.

    Every file is read through :mod:`sweep.readback` (regular, bounded, strict JSON) and checked
    as what it claims to be (a result file: :func:`sweep.record.result.check_document`; a
    landscape: :func:`sweep.sim.landscape.check_document`); one that is not lands in ``bad``
    with the reason, the others are used. Files that are fine but hold no real measurement
    (simulated, failed, not a result file) land in ``skipped``."""
    from sweep.errors import ConfigError
    from sweep.readback import parse_json
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
    return out["accept_len"] if point.kind == "accept_len" else out["tok_s"]
