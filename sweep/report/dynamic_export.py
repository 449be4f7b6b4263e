"""A derived per-load table made deployable: the overrides, the engine's own argument, the file.

For each table of :mod:`sweep.report.dynamic` the dynamic config is composed and rendered
exactly as a trial would be (``spec.budget`` = the table's largest budget, ``spec.per_load`` =
the table, on top of the family's own overrides, on ``server=<engine>``), so what is printed
is what would start: for vLLM the ``--speculative-config`` JSON with
``num_speculative_tokens_per_batch_size`` (the flag and its keys come from the YAML, found in
the rendered launch as the argument that carries the table). ``dynamic-<engine>.yaml``
(``specsweep.dynamic/1``) keeps, per table: the levels with their verdicts, the bands, the
notes (what was not measured, which levels were undecided), the overrides of the dynamic
config, of the static budgets it chose between and of the baseline, and how they were
measured -- what ``python -m sweep.verify_dynamic`` runs.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from sweep.compose.dynamic_read import FORMAT
from sweep.report.dynamic import Table, table_text
from sweep.report.dynamic import _overrides as family_overrides

ENGINES = ("vllm", "sim")  # servers whose YAML renders spec.per_load (the others refuse it)


def render_table(t: Table, engine: str, per_load: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """The dynamic config on ``server=engine``: ``overrides``, ``argument`` (the launch's flag and
    value that carry the table), ``error`` (one line, when it does not compose or render)."""
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render
    from sweep.errors import ConfigError

    table = [list(map(int, b)) for b in (per_load if per_load is not None else t.per_load)]
    overrides = [o for o in t.overrides(table) if not o.lstrip("+~").startswith("server=")]
    overrides = [f"server={engine}", *overrides]
    out: dict[str, Any] = {"overrides": overrides, "argument": None, "error": None}
    try:
        launch = render(from_omegaconf(compose(overrides)))
    except ConfigError as exc:
        out["error"] = exc.one_line()
        return out
    except Exception as exc:  # noqa: BLE001 - a group this checkout lacks (a user's own config dir)
        out["error"] = f"could not compose {' '.join(overrides)}: {str(exc).splitlines()[0] if str(exc) else exc}"
        return out
    args = list(launch.args)
    for flag, value in zip(args, args[1:]):
        if not flag.startswith("-") or value[:1] not in "[{":
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            continue
        if parsed == table or (isinstance(parsed, dict) and table in parsed.values()):
            out["argument"] = {"flag": flag, "value": parsed, "text": value}
            break
    return out


def _member(row: Any) -> dict[str, Any]:
    return {"name": row.name, "config_id": row.config_id, "overrides": family_overrides(row.doc)}


def table_dict(t: Table, engine: str, rendered: dict[str, Any]) -> dict[str, Any]:
    return {
        "hardware": t.hardware, "model": t.model, "workload": t.workload, "context": t.context,
        "family": t.family, "algorithm": t.algorithm, "measured_on": t.server, "simulated": t.simulated,
        "engine": engine, "noise": t.noise,
        "budgets": t.budgets,
        "levels": [c.to_dict() for c in t.choices],
        "per_load": t.per_load if t.usable else None,
        "notes": t.notes,
        "overrides": rendered["overrides"] if t.usable else None,
        "argument": ({"flag": rendered["argument"]["flag"], "value": rendered["argument"]["value"]}
                     if t.usable and rendered.get("argument") else None),
        "render_error": rendered.get("error") if t.usable else None,
        "statics": {int(k): _member(r) for k, r in t.statics.items()},
        "baseline": _member(t.baseline) if t.baseline is not None else None,
        "workload_overrides": t.workload_overrides(),
    }


def document(tables: Sequence[Table], engine: str, *, command: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``dynamic-<engine>.yaml`` and the rendered dynamic config of each table."""
    rendered = [render_table(t, engine) if t.usable else {"overrides": None, "argument": None, "error": None}
                for t in tables]
    doc = {"format": FORMAT, "command": command, "engine": engine,
           "tables": [table_dict(t, engine, r) for t, r in zip(tables, rendered)]}
    return doc, rendered


def _shell(word: str) -> str:
    import shlex

    return shlex.quote(word)


def text_lines(t: Table, engine: str, rendered: dict[str, Any]) -> list[str]:
    """What the terminal shows of one table: configs named as the schedule's tables name them
    (sweep/report/shortnames.py), the noise once in the verdicts' words; commands whole."""
    from sweep.report.shortnames import renamed, short_names

    rows = [*t.statics.values(), *([t.baseline] if t.baseline is not None else [])]
    shown = short_names([r.name for r in rows], ids=[r.config_id for r in rows])
    names = dict(zip((r.name for r in rows), shown.names))
    noise = t.noise if t.noise.startswith("noise") else f"noise: {t.noise}"
    lines = [f"per-load table: {t.title}" + (f" · {shown.note()}" if shown.common else ""),
             f"  budgets measured: {', '.join(f'b{b}' for b in t.budgets)}"
             + (", and the baseline (spec=none)" if t.baseline is not None else ", no baseline (spec=none)")
             + f"; {noise}"]
    for c in t.choices:
        lead = c.leader
        figure = f"{lead.tok_s:,.1f} tok/s" + (f" [{lead.ci[0]:,.1f}-{lead.ci[1]:,.1f}]" if lead and lead.ci else "") \
            if lead else "-"
        lines.append(f"  concurrency {c.load:>4}: budget {c.budget:<3} {c.state:<9} {figure}  {renamed(c.why, names)}")
    if not t.usable:
        lines.append("  no table: the autoregressive baseline wins or ties at every measured load (run spec=none)")
        return lines
    lines.append(f"  spec.per_load = num_speculative_tokens_per_batch_size: {table_text(t.per_load)}")
    arg = rendered.get("argument")
    if arg:
        lines.append(f"  {arg['flag']} {_shell(arg['text'])}")
    elif rendered.get("error"):
        lines.append(f"  ({engine} launch not rendered: {rendered['error']})")
    if t.server != engine:
        lines.append(f"  (derived from server={t.server} measurements; rendered for server={engine})")
    lines.append("  overrides (on the measurement's own command line): "
                 + " ".join(_shell(o) for o in rendered.get("overrides") or []))
    lines += [f"  note: {n}" for n in t.notes if not n.startswith("load ")]  # the levels' own: above
    return lines
