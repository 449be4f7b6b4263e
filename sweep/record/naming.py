"""Names a person can tell apart: sweep parent runs, and what ``--sweep-id`` accepts.

Why: a sweep's parent run was named by the bare time of its directory
(``01-43-41``), so the MLflow UI listed identical names. A sweep is named by
what it sweeps (the grid's overrides or the study's name) and when it started.
A trial's name is its config's (:func:`sweep.score.configs.name_of`: every knob
off its group's defaults, from the config alone, however it was launched).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from sweep.record.result import TrialResult

MAX_NAME = 200


def _listed(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def group_name(doc: TrialResult) -> str:
    """``smoke · b300/tp8 sglang · ctx 60,4096 x c 1,2,4,8, 512 tok · kimi_k2 · low-load tok/s``: a
    group of comparable runs as MLflow's runs list names it (``Group: ...``, cut after about 20
    characters at 1400 px). The report's label (:func:`sweep.score.configs.group_label`) leads with
    the box, so two groups of one box both read ``Group: b300 (tp...``; here what most often tells
    groups apart comes first -- the workload, then the box with its layout and the engine -- and
    the rest follows for the hover and the wide screen."""
    from sweep.score.names import label
    from sweep.score.objective import metric_name, objective_of

    hw, wl = doc.config_section("hardware"), doc.config_section("workload")
    layout = "".join(f"/{k}{hw[k]}" for k in ("tp", "ep", "dp") if hw.get(k) not in (None, 1))
    engine = doc.config_section("server").get("name") or ("sim" if doc.simulated else "")
    box = f"{hw.get('name') or doc.trial.hardware or '?'}{layout}" + (f" {engine}" if engine else "")
    matrix = (f"ctx {_listed(wl.get('contexts'))} x c {_listed(wl.get('concurrency'))}, "
              f"{wl.get('max_tokens')} tok")
    parts = [str(wl.get("name") or "?"), box, matrix, str(doc.config_section("model").get("name") or "?"),
             label(metric_name(objective_of(doc)))]
    return " · ".join(parts) + (" · simulated" if doc.simulated and engine != "sim" else "")

def sweep_overrides(overrides: Sequence[str]) -> list[str]:
    """The keys of the overrides that sweep (Hydra's own parser decides)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    except HydraException:
        return []
    return [o.key_or_group for o in parsed if o.is_sweep_override()]


# overrides that say where results go or how to reach the server, not what is measured
_PLUMBING = ("hydra.", "hydra/", "mlflow.", "server.port=", "results.", "resume.")


def sweep_name(overrides: Sequence[str], study_name: str | None = None,
               when: dt.datetime | None = None) -> str:
    """``grid spec.budget=8,16,32 workload=smoke · 2026-12-01 01:43:41`` or
    ``study b300-ddtree-smoke-tok_s_lowc · 2026-12-01 01:43:41``."""
    stamp = (when or dt.datetime.now()).strftime("%Y-%m-%d %H:%M:%S")
    if study_name:
        what = f"study {study_name}"
    else:
        shown = [o for o in overrides if not o.lstrip("+~").startswith(_PLUMBING)]
        swept = set(sweep_overrides(shown))
        # what is swept first (a long name is cut at the end), then what is fixed
        shown.sort(key=lambda o: o.lstrip("+~").split("=", 1)[0] not in swept)
        what = "grid " + " ".join(shown) if shown else "sweep"
    if len(what) > MAX_NAME - 25:
        what = what[:MAX_NAME - 28] + "..."
    return f"{what} · {stamp}"


def sweep_id_forms(sweep_id: str | None) -> set[str]:
    """The ways a person may write a sweep's id: ``2026-12-01/01-43-41``, ``01-43-41``,
    ``2026-12-01 01-43-41``, ``2026-12-01 01:43:41``, ``01:43:41``."""
    if not sweep_id:
        return set()
    sid = str(sweep_id).strip("/")
    date, _, time = sid.rpartition("/")
    forms = {sid, time, time.replace("-", ":")}
    if date:
        forms |= {f"{date} {time}", f"{date} {time.replace('-', ':')}"}
    return {f.lower() for f in forms if f}


def matches_sweep(given: str, sweep_id: str | None, parent: Mapping[str, Any] | None = None) -> bool:
    """Whether ``--sweep-id given`` names this sweep: its id in any form above, or its
    parent run's name or id (``mlflow_parent.json`` or the run itself)."""
    want = given.strip().lower()
    if want in sweep_id_forms(sweep_id):
        return True
    parent = parent or {}
    return any(want == str(parent.get(k) or "").strip().lower() for k in ("name", "run_id") if parent.get(k))
