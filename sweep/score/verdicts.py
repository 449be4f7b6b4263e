"""Result files -> the campaign model's measurements (:mod:`sweep.score.campaign`).

Why here: the schedule, the per-load export, the report's groups, verify_dynamic and decide
all judge from the same copies of the same configs; each of them handing the model its own
reading of "a round" would let them disagree. One function says what a block is and what a
measurement is:

* a **block** (a round) is where the measurement was interleaved: a recorded landscape's
  round (``trial.sweep_id`` ``<landscape>/round<r>``), a path segment ``round<r>`` (decide's
  and verify_dynamic's runs, ``.../round2/...``, with what comes before it), else the sweep the
  trial ran in (``trial.sweep_id``, else its sweep dir): the configs of one grid were measured
  side by side;
* a **measurement** is one repeat of a cell's output tok/s (``output_tok_s_runs``), keyed by
  its level ``(context, load)``.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePath
from typing import Any, Hashable, Iterable, Mapping, Sequence, TypeVar

from sweep.record.result import TrialResult
from sweep.score.campaign import MARGIN, Campaign, Obs
from sweep.score.metrics import load_of, ok_cells
from sweep.stats import standard_error

K = TypeVar("K", bound=Hashable)
_ROUND = re.compile(r"^round\d+$")


def block_of(doc: TrialResult, source: str = "") -> str:
    """The round a copy was measured in (module doc)."""
    sid = str(doc.trial.sweep_id or "")
    if "/round" in sid:
        return sid
    src = source.split("#", 1)[0]
    parts = PurePath(src).parts if src else ()
    for i, part in enumerate(parts):
        if _ROUND.match(part):
            return "/".join(parts[: i + 1])
    if sid:
        return sid
    if len(parts) >= 3:
        return "/".join(parts[:-2])  # <sweep dir>/<job>/result.json
    return src or "?"


def _runs(cell: Any) -> list[float]:
    """Each repeat's tok/s; a cell that kept only its mean and 95% interval over ``repeats`` gives
    values with that mean and that standard deviation (all the linear model reads of them)."""
    runs = cell.get("output_tok_s_runs")
    if isinstance(runs, list) and runs and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in runs):
        return [float(v) for v in runs]
    v = cell.output_tok_s
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return []
    n = int(cell.repeats or 1)
    se = standard_error(cell.output_tok_s_ci, n) if n >= 2 else None
    if se is None or not se > 0:
        return [float(v)]
    sd = se * math.sqrt(n)
    z = [i - (n - 1) / 2 for i in range(n)]
    scale = math.sqrt(sum(x * x for x in z) / (n - 1))
    values = [float(v) + sd * x / scale for x in z]
    return values if min(values) > 0 else [float(v)]


def observations(key: K, copies: Iterable[tuple[str, TrialResult]]) -> list[Obs[K, tuple[int, float]]]:
    """Every measurement of one config's copies: (context, load) levels, blocks by :func:`block_of`."""
    out: list[Obs[K, tuple[int, float]]] = []
    for source, doc in copies:
        if not doc.ok:
            continue
        block = block_of(doc, source)
        for c in ok_cells(doc.cells):
            if c.context is None:
                continue
            for v in _runs(c):
                out.append(Obs(key, (int(c.context), float(load_of(c))), block, v))
    return out


def cost_of(doc: TrialResult) -> tuple[float, float]:
    """Which config is cheaper when two are within the margin: the baseline, then the smallest
    draft budget (a config without a budget after those that have one)."""
    if doc.spec_value("algorithm") == "none":
        return (0.0, 0.0)
    b = doc.spec_value("budget")
    return (1.0, float(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else float("inf"))


def margin_of(doc: TrialResult) -> float:
    """The practical margin a trial's objective sets (``objective.margin``; 2% by default)."""
    m = doc.config_section("objective").get("margin")
    return float(m) if isinstance(m, (int, float)) and not isinstance(m, bool) and 0 <= m < 1 else MARGIN


def campaign(configs: Sequence[tuple[K, Sequence[tuple[str, TrialResult]], TrialResult]], *,
             prior: float | None = None, margin: float | None = None,
             alpha: float = 0.05) -> Campaign[K, tuple[int, float]]:
    """The campaign of one group: ``configs`` are (key, its copies with their sources, the
    document that stands for it)."""
    obs = [o for key, copies, _ in configs for o in observations(key, copies)]
    cost: Mapping[K, Any] = {key: cost_of(doc) for key, _, doc in configs}
    m = margin if margin is not None else (margin_of(configs[0][2]) if configs else MARGIN)
    return Campaign(obs, prior=prior, margin=m, alpha=alpha, cost=cost)
