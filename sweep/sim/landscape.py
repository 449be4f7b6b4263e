"""Recorded landscapes: a grid of real trials on one engine + box, in one file.

The shared format (``specsweep.landscape/1``; written by
``benchmarks/record_landscape.py`` for any engine) is what the twin is judged on:
``python -m sweep.calibrate`` fits a box from it, ``benchmarks/sim_fidelity.py --landscape FILE`` fits on part of it and
predicts the rest, and the search benchmark replays it with its measured noise.

A point is a result.json cell copied generically plus ``config`` and
``workload``; with several repeats, ``output_tok_s_runs`` holds the per-repeat
tok/s (the measured noise). Readers tolerate unknown keys, so the format grows
without code changes. Everything needed to predict a point must be in the file:
each config carries the composed ``hardware``/``model``/``spec`` nodes (under
``composed``) when the writer had them; else they are composed here from the
config's ``overrides`` and the file's ``engine`` and ``hardware``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

SCHEMA = "specsweep.landscape/1"
SIG = 4          # significant digits of floats in a written landscape
MAX_LATENCIES = 256

# What a landscape may hold, so reading one is bounded in memory and time. The recorded ones are
# 0.1-0.7 MB with 7 configs and 28 rounds; 500 rounds (20 configs x 5 workloads x 5 rounds) are
# 4 MB and schedule in ~15 s on a 2-core box. A file past these is refused in one line naming the
# bound, never read for minutes (a 49 MB landscape of 30,000 rounds kept the schedule busy past
# two minutes).
MAX_BYTES = 16 * 1024 * 1024
MAX_CONFIGS = 200
MAX_ROUNDS = 500          # ``runs``: one per config, workload and round (~20 ms each for the schedule)
MAX_POINTS = 2_000
MAX_CELLS = 1_000         # cells of one round (contexts x loads)
MAX_TOK_S = 1e7           # output tok/s no box serves (a B300 box: ~1e4-1e5); 1e308 gave [-inf-inf] intervals
_TOK_S = ("output_tok_s", "per_stream_tok_s", "goodput_tok_s")


class LandscapeError(ValueError):
    """A file that is not a landscape (one line, naming the file); ``why`` is the line without the
    file, for a command's ``skipped <path>: <why>`` (sweep/io/readback.py)."""

    def __init__(self, message: str, why: str | None = None) -> None:
        super().__init__(message)
        self.why = why or message.removeprefix("error: ")


@dataclass
class Landscape:
    path: Path
    doc: dict[str, Any]
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def engine(self) -> str:
        return str(self.doc.get("engine") or "?")

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def points(self) -> list[dict[str, Any]]:
        return list(self.doc.get("points") or [])

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.doc.get("trials") or [])

    def composed(self, config_id: str) -> dict[str, Any]:
        """hardware, model, spec (and server) nodes of a config, as the twin reads them."""
        cfg = self.configs.get(config_id)
        if cfg is None:
            raise LandscapeError(f"error: landscape {self.path}: point names unknown config {config_id!r}")
        if "_composed" not in cfg:
            try:
                cfg["_composed"] = dict(cfg.get("composed") or {}) or _compose(self, cfg)
                if not cfg["_composed"].get("server"):  # recorded before configs kept their server node
                    cfg["_composed"]["server"] = _compose(self, {"overrides": []})["server"]
            except Exception as exc:  # noqa: BLE001 - the file's override lines are input: named, one line
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                raise LandscapeError(f"error: landscape {self.path}: config {config_id!r} does not compose "
                                     f"here ({first})") from None
            machine_perf = (self.doc.get("machine") or {}).get("perf") or {}
            hw = dict(cfg["_composed"].get("hardware") or {})
            # the figures measured on the recording machine beat the YAML's, and a prediction of
            # this landscape runs on them (not on a calibration's: hardware.perf.figures)
            hw["perf"] = {**(hw.get("perf") or {}), **machine_perf, "figures": "config"}
            cfg["_composed"]["hardware"] = hw
        return cfg["_composed"]


def _compose(land: Landscape, cfg: Mapping[str, Any]) -> dict[str, Any]:
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    base = [f"server={land.engine}"]
    if land.doc.get("hardware"):
        base.append(f"hardware={land.doc['hardware']}")
    raw = dict(from_omegaconf(compose([*base, *list(cfg.get("overrides") or [])])).raw)
    return {k: raw.get(k) for k in ("hardware", "model", "spec", "server", "workload")}


def load(path: Path | str) -> Landscape:
    """A recorded landscape, read and checked (:func:`check_document`) through the project's reader
    of files it wrote (:mod:`sweep.io.readback`); :class:`LandscapeError` naming the file and the first
    value that is wrong."""
    from sweep.io import readback

    path = Path(path)
    try:
        doc = readback.read_json(path, limit=MAX_BYTES, what="a landscape")
    except readback.BadFile as exc:
        raise LandscapeError(f"error: landscape {path}: {exc.why}", f"not read as a landscape: {exc.why}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise LandscapeError(f"error: landscape: {path} is not a landscape (schema {SCHEMA!r})")
    try:
        check_document(doc)
    except readback.Invalid as exc:
        raise LandscapeError(f"error: landscape {path}: {exc}", f"not a landscape: {exc}") from None
    land = Landscape(path, doc)
    for cfg in doc.get("configs") or []:
        land.configs[str(cfg["id"])] = dict(cfg)
    return land


def check_document(doc: Mapping[str, Any]) -> None:
    """What a landscape must hold to be read (types and ranges; :class:`sweep.io.readback.Invalid`):
    configs with an id, override lines and composed nodes that pass the key table; points and every
    round's cells that are result.json cells (:func:`sweep.record.result.check`) naming a known
    config, with their per-round figures; workloads, trials, rounds (``runs``) and the machine's
    figures of the right shapes. Bounded before anything is looked at item by item (configs, rounds,
    points, cells: :data:`MAX_ROUNDS` ...); tok/s past :data:`MAX_TOK_S` is no measurement; a round
    whose cells are another round's, to the last digit, is a copy (two runs never measure alike: a
    duplicated round has no spread and would decide every level it touches)."""
    from sweep.io import readback as rb
    from sweep.compose.bounds import check_recorded

    for key, bound in (("configs", MAX_CONFIGS), ("runs", MAX_ROUNDS), ("points", MAX_POINTS),
                       ("trials", MAX_ROUNDS)):
        n = len(rb.items(key, doc.get(key)))
        if n > bound:
            raise rb.Invalid(key, f"{n:,} entries, more than the {bound:,} a landscape holds (not read: "
                                  "split the recording)")
    for key in ("engine", "engine_version", "model", "hardware", "created", "command"):
        rb.text(key, doc.get(key), limit=100_000)
    machine = rb.mapping("machine", doc.get("machine"))
    perf = rb.mapping("machine.perf", machine.get("perf"))
    if perf:
        check_recorded({"hardware": {"perf": perf}}, where="machine")
    for name, wl in rb.mapping("workloads", doc.get("workloads")).items():
        check_recorded({"workload": rb.mapping(f"workloads.{name}", wl, optional=False)}, where=f"workloads.{name}")
    ids = set()
    for i, cfg in enumerate(rb.items("configs", doc.get("configs"))):
        where = f"configs[{i}]"
        cfg = rb.mapping(where, cfg, optional=False)
        cid = cfg.get("id")
        if isinstance(cid, bool) or not isinstance(cid, (str, int)):
            raise rb.Invalid(f"{where}.id", f"{rb.shown(cid)} is not a config id")
        ids.add(str(cid))
        for j, line in enumerate(rb.items(f"{where}.overrides", cfg.get("overrides"))):
            rb.text(f"{where}.overrides[{j}]", line, optional=False)
        composed = rb.mapping(f"{where}.composed", cfg.get("composed"))
        if composed:
            check_recorded(composed, where=f"{where}.composed")
    for i, trial in enumerate(rb.items("trials", doc.get("trials"))):
        trial = rb.mapping(f"trials[{i}]", trial, optional=False)
        rb.text(f"trials[{i}].status", trial.get("status"))
        rb.text(f"trials[{i}].config", None if trial.get("config") is None else str(trial.get("config")))
        rb.text(f"trials[{i}].workload", trial.get("workload"))
        rb.count(f"trials[{i}].rounds_ok", trial.get("rounds_ok"), hi=MAX_ROUNDS)
        _check_acceptance(f"trials[{i}].accept", trial.get("accept"))
    for i, pt in enumerate(rb.items("points", doc.get("points"))):
        _check_cell(f"points[{i}]", pt)
        if str(pt.get("config")) not in ids:
            raise rb.Invalid(f"points[{i}].config", f"{rb.shown(pt.get('config'))} names no config of the file")
        rb.text(f"points[{i}].workload", pt.get("workload"))
    seen: dict[str, int] = {}
    for i, run in enumerate(rb.items("runs", doc.get("runs"))):
        where = f"runs[{i}]"
        run = rb.mapping(where, run, optional=False)
        if str(run.get("config")) not in ids:
            raise rb.Invalid(f"{where}.config", f"{rb.shown(run.get('config'))} names no config of the file")
        for key in ("workload", "status", "name", "config_id", "started", "finished", "fingerprint"):
            rb.text(f"{where}.{key}", run.get(key))
        rb.count(f"{where}.round", run.get("round"), hi=MAX_ROUNDS)
        for key, hi in (("startup_s", 1e7), ("load_avg", 1e6), ("greedy_identical", 1.0)):
            rb.number(f"{where}.{key}", run.get(key), hi=hi)
        rb.count(f"{where}.greedy_compared", run.get("greedy_compared"))
        for j, arg in enumerate(rb.items(f"{where}.argv", run.get("argv"))):
            rb.text(f"{where}.argv[{j}]", arg, optional=False)
        for key in ("env", "choices"):
            for name, value in rb.mapping(f"{where}.{key}", run.get(key)).items():
                rb.text(f"{where}.{key}.{name}", value)
        failure = rb.mapping(f"{where}.failure", run.get("failure"))
        for key in ("reason", "message"):
            rb.text(f"{where}.failure.{key}", failure.get(key), limit=100_000)
        _check_acceptance(f"{where}.acceptance", run.get("acceptance"))
        cells = rb.items(f"{where}.cells", run.get("cells"))
        if len(cells) > MAX_CELLS:
            raise rb.Invalid(f"{where}.cells", f"{len(cells):,} cells, more than the {MAX_CELLS:,} a round holds")
        for j, cell in enumerate(cells):
            _check_cell(f"{where}.cells[{j}]", cell)
        if any(isinstance(c.get("output_tok_s"), (int, float)) for c in cells):
            import json

            key = json.dumps(cells, sort_keys=True)
            if key in seen:
                raise rb.Invalid(f"{where}.cells", f"the very cells of runs[{seen[key]}], to the last digit: a "
                                                   "copied round, not a measurement (it would have no spread)")
            seen[key] = i


def _check_cell(where: str, cell: Any) -> None:
    """A point or a round's cell: a result.json cell (:func:`sweep.record._model.check`), tok/s no box
    serves refused, its per-round figures (``<name>_runs``) numbers in the same ranges."""
    from sweep.io import readback as rb
    from sweep.record._model import check
    from sweep.record.result import Cell, cell_ranges

    ranges = {**cell_ranges(), **{f"Cell.{k}": (0.0, MAX_TOK_S) for k in _TOK_S}}
    check(Cell, cell, where=where, ranges=ranges)
    for key, value in cell.items():
        if key.endswith("_runs"):
            hi = MAX_TOK_S if key.removesuffix("_runs") in _TOK_S else 1e15
            for j, v in enumerate(rb.items(f"{where}.{key}", value)):
                rb.number(f"{where}.{key}[{j}]", v, hi=hi, optional=False)


def _check_acceptance(where: str, block: Any) -> None:
    """A round's (or an older file's trial's) acceptance counters: what the budgets' carry-over reads."""
    from sweep.io import readback as rb

    acc = rb.mapping(where, block)
    for key in ("drafts", "drafted", "accepted", "tokens", "accept_len"):
        rb.number(f"{where}.{key}", acc.get(key))
    rb.number(f"{where}.accept_rate", acc.get("accept_rate"), hi=1.0)
    for key, hi in (("per_position", 1.0), ("per_position_accepted", 1e15)):
        for j, v in enumerate(rb.items(f"{where}.{key}", acc.get(key))[:4096]):
            rb.number(f"{where}.{key}[{j}]", v, hi=hi, optional=False)
        if len(rb.items(f"{where}.{key}", acc.get(key))) > 4096:
            raise rb.Invalid(f"{where}.{key}", "more than 4,096 draft positions")


def is_landscape(path: Path, head: bytes | None = None) -> bool:
    """A JSON file whose schema is the landscape's (cheap check on the head of the file, or on
    ``head`` when the caller read it already). The head is read whatever the file's size, so a
    landscape too big to read is still one (and its reader names it)."""
    if head is None:
        from sweep.io import readback

        try:
            head = readback.read_head(path)
        except readback.BadFile:
            return False
    return SCHEMA.encode() in head


# --------------------------------------------------------------------------- writing


def write(path: Path, doc: Mapping[str, Any], *, argv: Sequence[str] = ()) -> Path:
    """A landscape to disk, secrets masked once where it leaves the process: by name (``api_key``
    anywhere in the tree, ``server.api_key=...`` in the recorded command), by URL password, and by
    value -- every secret of the recording's own command line ``argv`` and the environment. Written
    atomically (a reader never sees half a file; the recording rewrites it after every trial)."""
    from sweep import secrets
    from sweep.io.atomic import write_atomic

    red = secrets.redactor(secrets.collect_secrets([str(a) for a in argv]))
    return write_atomic(Path(path), secrets.mask_tree(dict(doc), red))


def round_floats(value: Any, sig: int = SIG) -> Any:
    """Floats to ``sig`` significant digits, recursively (files stay small and diffable)."""
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0.0:
            return value if math.isfinite(value) else None
        return float(f"{value:.{sig}g}")
    if isinstance(value, dict):
        return {k: round_floats(v, sig) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v, sig) for v in value]
    return value


def merge_runs(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One point from the same cell measured in several rounds (each a result.json cell).

    The first round's cell is copied generically (every key, so fields other
    branches add flow through); throughput figures become the mean over the
    rounds with the per-round values kept as ``<name>_runs``; counts are summed.
    """
    if not cells:
        raise ValueError("no cells to merge")
    out: dict[str, Any] = dict(cells[0])
    if isinstance(out.get("latencies"), list):
        out["latencies"] = out["latencies"][:MAX_LATENCIES]
    out["repeats"] = sum(int(c.get("repeats") or 1) for c in cells)
    for name in ("output_tok_s", "per_stream_tok_s", "accept_len"):
        values = [float(c[name]) for c in cells if isinstance(c.get(name), (int, float))]
        if not values:
            continue
        out[name] = statistics.fmean(values)
        out[f"{name}_runs"] = values
        if len(values) > 1:
            from sweep.stats import interval

            ci = interval(values)
            out[f"{name}_ci"] = [ci[0], ci[1]] if ci else None
    for name in ("requests", "errors", "completion_tokens"):
        values = [int(c[name]) for c in cells if isinstance(c.get(name), (int, float))]
        if values:
            out[name] = sum(values)
    if any(isinstance(c.get("box_state"), Mapping) for c in cells):  # busy when any round was
        from sweep.bench.boxstate import combine

        out["box_state"] = combine([c.get("box_state") if isinstance(c.get("box_state"), Mapping) else None
                                    for c in cells])
    return out


def run_sd(values: Iterable[float]) -> float | None:
    """Log-scale standard deviation of repeated measurements (None with fewer than two)."""
    vals = [math.log(v) for v in values if v and v > 0]
    return statistics.stdev(vals) if len(vals) > 1 else None


# --------------------------------------------------------------------------- as trials


_OBJECTIVE = {"metric": "tok_s_lowc", "context": None, "concurrency": None,
              "constraints": {"coding_pass_rate_min": 1.0, "max_errors": 0, "ttft_ms_p99_max": None,
                              "greedy_identical_min": None},
              "slo": {"ttft_ms": None, "tpot_ms": None, "itl_ms": None, "e2e_ms": None, "percentile": 90}}


def _spec_group(cfg: Mapping[str, Any]) -> str:
    for o in cfg.get("overrides") or []:
        key, _, value = str(o).partition("=")
        if key == "spec":
            return value
    return str(cfg.get("spec") or "none")


def box_spread(land: Landscape) -> tuple[float, int] | None:
    """The recording box's run-to-run spread: the median, over every cell measured in two or more
    rounds, of the relative standard deviation of one round's output tok/s (and how many cells).
    None: no cell has two rounds. The rounds are rotated and interleaved, so this is the noise one
    measurement on this box carries -- what ``hardware.spread`` declares, measured."""
    import statistics

    by: dict[tuple[str, str, Any, Any], list[float]] = {}
    for run in land.doc.get("runs") or []:
        if not isinstance(run, Mapping) or run.get("status") != "ok":
            continue
        for c in run.get("cells") or []:
            if isinstance(c, Mapping) and isinstance(c.get("output_tok_s"), (int, float)) and c["output_tok_s"] > 0:
                key = (str(run.get("config")), str(run.get("workload")), c.get("context"), c.get("concurrency"))
                by.setdefault(key, []).append(float(c["output_tok_s"]))
    cvs = [statistics.stdev(v) / statistics.fmean(v) for v in by.values() if len(v) > 1]
    return (statistics.median(cvs), len(cvs)) if cvs else None


def trial_docs(land: Landscape) -> list[tuple[str, Any]]:
    """The landscape as result documents, one per trial it ran (source, TrialResult): every round of
    every config and workload where the file keeps them (``runs``), else one per config and workload
    with the rounds merged (older files). What the schedule, the report and pooling read: the rounds of
    one config are its copies (sweep/score/configs.py)."""
    from sweep.record.result import Cell, TrialResult

    out: list[tuple[str, Any]] = []
    workloads = land.doc.get("workloads") or {}
    runs = land.doc.get("runs")
    entries: list[dict[str, Any]] = []
    # the box's spread measured over the rounds judges cells measured only once or twice (a
    # hardware.spread the recording declared itself wins)
    measured_spread = box_spread(land)
    if isinstance(runs, list) and runs:
        entries = [r for r in runs if isinstance(r, dict)]
    else:  # older files: the points, merged over the rounds, one document per config and workload
        by: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for p in land.points:
            by.setdefault((str(p.get("config")), str(p.get("workload"))), []).append(p)
        entries = [{"config": c, "workload": w, "round": 0, "status": "ok", "cells": cells}
                   for (c, w), cells in by.items()]
    for run in entries:
        cid, wname = str(run.get("config")), str(run.get("workload"))
        cfg = land.configs.get(cid)
        if cfg is None:
            continue
        composed = dict(land.composed(cid))
        wl: Mapping[str, Any] = workloads[wname] if isinstance(workloads.get(wname), Mapping) else {"name": wname}
        config = {**{k: composed.get(k) for k in ("hardware", "model", "spec", "server")},
                  "workload": dict(wl), "objective": _OBJECTIVE}
        hw_node = config.get("hardware")
        if measured_spread is not None and isinstance(hw_node, Mapping) and not hw_node.get("spread"):
            config["hardware"] = {**hw_node, "spread": round(measured_spread[0], 4)}
        keep = {f.name for f in Cell._fields()}
        cells = [Cell.from_dict({k: v for k, v in c.items() if k in keep or k.endswith("_runs")})
                 for c in run.get("cells") or [] if isinstance(c, Mapping)]
        spec: Mapping[str, Any] = composed["spec"] if isinstance(composed.get("spec"), Mapping) else {}
        hw: Mapping[str, Any] = composed["hardware"] if isinstance(composed.get("hardware"), Mapping) else {}
        failure: Mapping[str, Any] = run["failure"] if isinstance(run.get("failure"), Mapping) else {}
        status = "ok" if run.get("status") == "ok" and cells else "failed"
        choices: Mapping[str, Any] = run["choices"] if isinstance(run.get("choices"), Mapping) else {
            "server": land.engine, "hardware": str(hw.get("name") or "cpu"),
            "spec": _spec_group(cfg), "workload": wname}
        doc = TrialResult.from_dict({
            "schema": 1, "status": status, "simulated": False,
            "failure": {"reason": failure.get("reason") or "failed",
                        "message": failure.get("message") or ""} if status != "ok" else None,
            "trial": {"name": str(run.get("name") or "?"), "hardware": str(hw.get("name") or "cpu"),
                      "spec": str(spec.get("algorithm") or "?"), "choices": dict(choices),
                      "sweep_id": f"{land.name}/round{run.get('round')}", "started": run.get("started"),
                      # what ran it, on top of the recorder's own command line (not trial.overrides: a
                      # landscape's round is not run again from here, sweep/decide.py)
                      "landscape_overrides": [f"server={land.engine}", *[str(o) for o in cfg.get("overrides") or []],
                                              f"workload={wname}"],
                      "finished": run.get("finished") or f"round{int(run.get('round') or 0):04d}"},
            "argv": list(run.get("argv") or []), "env": dict(run.get("env") or {}),
            "cells": [c.to_dict() for c in cells], "config": config,
            **({"identity": {"greedy_identical": run["greedy_identical"], "compared": run.get("greedy_compared")}}
               if run.get("greedy_identical") is not None else {}),
        })
        out.append((f"{land.path}#{cid}/{wname}/round{run.get('round')}", doc))
    return out
