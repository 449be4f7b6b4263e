"""The one reader of ``dynamic-<engine>.yaml``: a file read back is input, and it only names configs.

``python -m sweep.verify_dynamic`` runs what an export describes, so the export was a way to make
it run anything: a ``server.executable=[/bin/sh,-c,...]`` in a table's overrides started that
command, a statics key ``/../../x_statics`` became a sweep dir outside ``--dir``, a FIFO named
``dynamic-vllm.yaml`` hung it and an unsorted, overlapping or negative table was found only after
servers had measured the statics. Here, before anything runs:

* the file is read by :mod:`sweep.io.readback` (a regular file of bounded size: never a FIFO, a
  device or ``/dev/zero``) and parsed by :func:`sweep.compose.yaml_guard.safe_load` (an alias bomb
  is refused before it is built);
* every table is checked as data (:func:`checked_tables`): the engine one that renders
  ``spec.per_load``; the context and the loads whole numbers in the key table's ranges, the loads
  sorted and distinct; the table by ``spec.per_load``'s own rule (sorted, not overlapping, from 1,
  budgets in [0, the key's limit]) and every budget it uses one the family measured; the statics'
  budgets whole numbers (so no name from the file becomes a path);
* a table contributes **identity knobs only** (:func:`identity_overrides`): the spec group and its
  keys (not ``spec.render``, which maps knobs onto the launch), the box and the model (group
  options), and how the family was measured (the workload group and its keys, not a dataset path,
  not the sandbox; not the loads, which the verification sets). Launch plumbing (executables,
  environment, setup, the launcher, hosts, ports, output paths) comes from the user's command line
  and config: a table's other lines are left out and named (:attr:`Checked.dropped`); an
  interpolation (``${oc.env:...}``) or a sweep (``a,b``) in a line the file gives is refused.

A bad file or table is one line, exit 2 (``--file: <path>: tables[0].context: ...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError

FORMAT = "specsweep.dynamic/1"  # what sweep.report.dynamic writes (compose sits below report: not imported)

MAX_BYTES = 16 * 1024 * 1024   # an export is ~10 kB a table
KEY = "--file"
ENGINES = ("vllm", "sim")      # sweep.report.dynamic_export.ENGINES: servers whose YAML renders spec.per_load
# group options a table may name (its box, its model, its speculation)
CHOICE_GROUPS = ("spec", "hardware", "model")
# spec keys that are no knob of the config's identity but how knobs reach the launch
SPEC_PLUMBING = ("spec.render", "spec.requires")
# workload keys the verification sets itself (the table's context and loads) or that name files
WORKLOAD_OWN = ("workload.contexts", "workload.concurrency", "workload.cells")
WORKLOAD_PLUMBING = ("workload.dataset_path", "workload.sandbox")
_OPTION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass
class Checked:
    """One table of the file as the verification uses it: typed, and only what may come from a file."""

    index: int
    workload: str
    context: int
    engine: str
    family: str
    loads: list[int]
    per_load: list[list[int]] | None
    overrides: list[str] | None            # the dynamic config's (identity only); None: rebuilt from a static
    statics: dict[int, dict[str, Any]]     # budget -> {name, overrides}
    baseline: dict[str, Any] | None
    workload_overrides: list[str]
    levels: list[dict[str, Any]]
    dropped: list[str] = field(default_factory=list)  # lines the file gave that are no identity knob

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "context": self.context, "engine": self.engine, "family": self.family,
                "per_load": self.per_load, "overrides": self.overrides, "statics": self.statics,
                "baseline": self.baseline, "workload_overrides": self.workload_overrides, "levels": self.levels}


def read(path: str | Path) -> dict[str, Any]:
    """The export's document, read by the one reader; ConfigError naming ``--file`` otherwise."""
    from sweep.compose import yaml_guard
    from sweep.io import readback

    try:
        text = readback.read_text(path, limit=MAX_BYTES)
    except readback.BadFile as exc:
        raise ConfigError(KEY, f"{path}: {exc.why}") from None
    try:
        doc = yaml_guard.safe_load(text, f"{path}")
    except ConfigError as exc:
        raise ConfigError(KEY, f"{path}: {exc.message}") from None
    except Exception as exc:  # noqa: BLE001 - a YAML error of any kind: not an export
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(KEY, f"{path}: cannot read it ({first[:200]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("tables"), list):
        raise ConfigError(KEY, f"{path}: not a {FORMAT} file")
    return doc


def _line_key(line: str) -> str:
    return line.lstrip("+~").split("=", 1)[0]


def _under(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _identity(line: str, workload: bool) -> bool:
    key = _line_key(line)
    if "=" not in line:
        return False
    if workload:
        return (key == "workload" or key.startswith("workload.")) and not _under(key, (*WORKLOAD_OWN,
                                                                                       *WORKLOAD_PLUMBING))
    if key in CHOICE_GROUPS:
        return True
    return key.startswith("spec.") and not _under(key, SPEC_PLUMBING)


def identity_overrides(lines: Any, where: str, *, workload: bool = False) -> tuple[list[str], list[str]]:
    """(the lines a table may contribute, the lines left out): :data:`CHOICE_GROUPS` options and
    ``spec.*`` knobs (``workload``: the workload group and its keys). ConfigError for a line that is
    no string, an interpolation, a sweep, or a group option that is no plain name."""
    from sweep.compose import cmdline
    from sweep.io import readback

    try:
        items = readback.items(where, lines)
    except readback.Invalid as exc:
        raise ConfigError(where, str(exc).split(": ", 1)[-1]) from None
    kept: list[str] = []
    dropped: list[str] = []
    for i, line in enumerate(items):
        if not isinstance(line, str) or not line or len(line) > 4096 or "\n" in line:
            raise ConfigError(f"{where}[{i}]", f"{readback.shown(line)} is not an override line")
        if line.lstrip("+~").split("=", 1)[0] == "server" and not workload:
            continue  # the engine: the table's own (checked below), set by the verification
        if not _identity(line, workload):
            dropped.append(line)
            continue
        key, _, value = line.partition("=")
        if "${" in value or "$\\{" in value:
            raise ConfigError(f"{where}[{i}]", f"{_line_key(line)}: an interpolation in a file read back is not "
                              "taken (give it on the command line)")
        if _line_key(line) in (*CHOICE_GROUPS, "workload") and not _OPTION.match(value):
            raise ConfigError(f"{where}[{i}]", f"{_line_key(line)}={value[:60]!r} is not an option name")
        if not cmdline.fixed_overrides([line]):
            raise ConfigError(f"{where}[{i}]", f"{_line_key(line)}: several values (a sweep) in a file read back "
                              "are not taken")
        kept.append(line)
    return kept, dropped


def _int(where: str, value: Any, lo: int, hi: float) -> int:
    from sweep.io import readback

    if isinstance(value, str) and re.fullmatch(r"\d{1,12}", value):
        value = int(value)  # a mapping key YAML kept as text
    try:
        out = readback.count(where, value, lo=lo, hi=hi, optional=False)
    except readback.Invalid as exc:
        raise ConfigError(where, str(exc).split(": ", 1)[-1]) from None
    assert out is not None
    return out


def _text(where: str, value: Any, *, optional: bool = True) -> str | None:
    from sweep.io import readback

    try:
        return readback.text(where, value, optional=optional, limit=1024)
    except readback.Invalid as exc:
        raise ConfigError(where, str(exc).split(": ", 1)[-1]) from None


def _member(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(where, "is not a mapping (name, overrides)")
    overrides, dropped = identity_overrides(value.get("overrides"), f"{where}.overrides")
    return {"name": _text(f"{where}.name", value.get("name")), "overrides": overrides, "_dropped": dropped}


def checked_table(t: Any, i: int, engine: str | None = None, *, family: bool = True) -> Checked:
    """One table of the file, checked (module doc); ConfigError naming ``tables[i].<field>``.
    ``family``: the table's budgets must be statics the file names (to run it; a report reads
    runs that were made, whatever the file says of the family)."""
    from sweep.compose.bounds import check
    from sweep.compose.keys import MAX_CONCURRENCY, MAX_CONTEXT, MAX_SPEC
    from sweep.io.readback import checked_name, Invalid

    at = f"tables[{i}]"
    if not isinstance(t, dict):
        raise ConfigError(at, "is not a mapping")
    eng = t.get("engine") if t.get("engine") is not None else (engine or "vllm")
    if eng not in ENGINES:
        raise ConfigError(f"{at}.engine", f"{str(eng)[:60]!r}: allowed: {', '.join(ENGINES)} (servers whose YAML "
                          "renders spec.per_load)")
    try:
        workload = checked_name(t.get("workload"), f"{at}.workload")
    except Invalid as exc:
        raise ConfigError(f"{at}.workload", str(exc).split(": ", 1)[-1]) from None
    context = _int(f"{at}.context", t.get("context"), 1, MAX_CONTEXT)
    levels = t.get("levels") or []
    if not isinstance(levels, list) or not all(isinstance(lv, dict) for lv in levels):
        raise ConfigError(f"{at}.levels", "is not a list of mappings")
    loads = [_int(f"{at}.levels[{j}].load", lv.get("load"), 1, MAX_CONCURRENCY) for j, lv in enumerate(levels)]
    for j in range(1, len(loads)):
        if loads[j] <= loads[j - 1]:
            raise ConfigError(f"{at}.levels[{j}].load", f"{loads[j]} after {loads[j - 1]}: the loads must be sorted "
                              "and distinct")
    statics_raw = t.get("statics") or {}
    if not isinstance(statics_raw, dict):
        raise ConfigError(f"{at}.statics", "is not a mapping of budget -> config")
    statics: dict[int, dict[str, Any]] = {}
    for k, m in statics_raw.items():
        budget = _int(f"{at}.statics key {str(k)[:40]!r}", k, 1, MAX_SPEC)
        if budget in statics:
            raise ConfigError(f"{at}.statics", f"budget {budget} is given twice")
        statics[budget] = _member(f"{at}.statics[{budget}]", m)
    baseline = _member(f"{at}.baseline", t["baseline"]) if t.get("baseline") is not None else None
    per_load = None
    if t.get("per_load"):
        try:
            per_load = [list(b) for b in check("spec.per_load", t["per_load"])]
        except ConfigError as exc:
            raise ConfigError(f"{at}.per_load", f"{exc.key}: {exc.message}") from None
        if not loads:
            raise ConfigError(f"{at}.levels", "no load: nothing to verify the table at")
    dropped: list[str] = []
    overrides = None
    if t.get("overrides") is not None:
        overrides, dropped = identity_overrides(t.get("overrides"), f"{at}.overrides")
    wl, wl_dropped = identity_overrides(t.get("workload_overrides"), f"{at}.workload_overrides", workload=True)
    for m in [*statics.values(), *([baseline] if baseline else [])]:
        dropped += m.pop("_dropped")
    out = Checked(index=i, workload=workload, context=context, engine=str(eng),
                  family=_text(f"{at}.family", t.get("family")) or "?", loads=loads, per_load=per_load,
                  overrides=overrides, statics=statics, baseline=baseline,
                  workload_overrides=wl, levels=[_level(lv) for lv in levels],
                  dropped=list(dict.fromkeys([*dropped, *[w for w in wl_dropped
                                                          if not _under(_line_key(w), WORKLOAD_OWN)]])))
    if per_load is not None and family:
        within_family(out, per_load, f"{at}.per_load")
    return out


def within_family(t: Checked, per_load: Sequence[Sequence[int]], key: str) -> None:
    """Every budget the table uses (above 0) is one of the family's measured statics."""
    family = sorted(t.statics)
    for j, (_, _, k) in enumerate(per_load):
        if k > 0 and k not in t.statics:
            raise ConfigError(f"{key}[{j}]", f"budget {k} is not one of the family's budgets "
                              f"({', '.join(map(str, family)) or 'none measured'}): nothing to compare it with")


def _level(lv: dict[str, Any]) -> dict[str, Any]:
    """What the verification reads of a level: its load and the tok/s measured per config name."""
    measured = lv.get("measured")
    clean = {str(k): float(v) for k, v in measured.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and 0 < v < 1e15} \
        if isinstance(measured, dict) else {}
    return {"load": int(lv["load"]), "measured": clean}


def checked_tables(doc: dict[str, Any], path: str | Path, *, family: bool = True) -> list[Checked]:
    """Every table of the document, checked; ConfigError ``--file: <path>: tables[i]...`` at the first bad one."""
    out = []
    for i, t in enumerate(doc["tables"]):
        try:
            out.append(checked_table(t, i, doc.get("engine") if isinstance(doc.get("engine"), str) else None,
                                     family=family))
        except ConfigError as exc:
            raise ConfigError(KEY, f"{path}: {exc.key}: {exc.message}") from None
    return out
