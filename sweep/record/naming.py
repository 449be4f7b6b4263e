"""Names a person can tell apart: trial runs, sweep parent runs, and what ``--sweep-id`` accepts.

Why: trials that differed only in their workload shared a name, and a sweep's
parent run was named by the bare time of its directory (``01-43-41``), so the
MLflow UI listed identical names. A trial is named by its box, algorithm and
knobs, its workload, and every other key that varies in its sweep (read from
the sweep's ``multirun.yaml``: grid overrides, the search space); a sweep by
what it sweeps (the grid's overrides or the study's name) and when it started.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from sweep.compose.config import TrialConfig

# Keys the base name already shows (or that never tell trials apart).
_IN_NAME = frozenset({"hardware", "hardware.name", "spec", "spec.algorithm", "spec.budget", "spec.topk",
                      "spec.window", "workload", "workload.name", "server.disable_cuda_graph"})
_NOT_A_KNOB = ("hydra", "optuna.")
_UNSAFE = re.compile(r"[^\w.=,+@%:-]+")
MAX_NAME = 200


def _key(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _value(raw: Mapping[str, Any], key: str) -> Any:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def trial_name(cfg: TrialConfig, varying: Iterable[str] = (), overrides: Sequence[str] = ()) -> str:
    """``b300-ddtree-b8-t4-w2048-seed``, plus ``max_tokens=64`` for each other key the sweep varies."""
    s = cfg.spec
    parts = [cfg.hardware.name, s.algorithm]
    for prefix, knob in (("b", s.budget), ("t", s.topk), ("w", s.window)):
        if knob is not None and s.algorithm != "none":
            parts.append(f"{prefix}{knob}")
    if cfg.server.disable_cuda_graph:
        parts.append("nocg")
    parts.append(cfg.workload.name)
    given = dict(_key(o) for o in overrides)
    for key in varying:
        if key in _IN_NAME or key.startswith(_NOT_A_KNOB):
            continue
        value: Any = given.get(key)
        if value is None:
            found = _value(cfg.raw, key)
            value = None if isinstance(found, Mapping) else found
        if value is not None:
            parts.append(f"{key.rsplit('.', 1)[-1].rsplit('/', 1)[-1]}={value}")
    return _UNSAFE.sub("_", "-".join(str(p) for p in parts))[:MAX_NAME]


def varying_keys(sweep_dir: Path | None) -> tuple[str, ...]:
    """Keys a sweep varies: its grid overrides (``a=1,2``, ``range``, ``choice``) and
    its search space (``hydra.sweeper.params``), from ``<sweep_dir>/multirun.yaml``."""
    if sweep_dir is None:
        return ()
    import yaml

    try:
        doc = yaml.safe_load((Path(sweep_dir) / "multirun.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return ()
    hydra = (doc or {}).get("hydra") or {}
    keys = list(sweep_overrides((hydra.get("overrides") or {}).get("task") or []))
    params = (hydra.get("sweeper") or {}).get("params") or {}
    keys += [str(k) for k in params] if isinstance(params, Mapping) else []
    return tuple(dict.fromkeys(keys))


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
