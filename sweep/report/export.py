"""The comparison as CSV, JSON or Markdown (``python -m sweep.report --format csv|json|md``).

CSV: one row per trial, every field of :mod:`sweep.report.records`, full
precision (for a spreadsheet or pandas). JSON: the groups, each with its
label, best trial and rows, and each row's full name, config id, marker (``★``/``≈``), n and cells
(p50/p90/p99 included).
Markdown: one table per group, rounded, for an issue or a chat message.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Sequence

from sweep.report.compare import Group
from sweep.report.records import FIELDS, marker, objective_columns, record, records
from sweep.score.names import LABELS, interval_text, rounded, speedup


def to_csv(groups: Sequence[Group]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(FIELDS), lineterminator="\n")
    writer.writeheader()
    for rec in records(groups):
        writer.writerow({k: "" if v is None else v for k, v in rec.items()})
    return buf.getvalue()


def to_json(groups: Sequence[Group], title: str) -> str:
    doc: dict[str, Any] = {"title": title, "groups": []}
    for g in groups:
        best = g.best
        doc["groups"].append({
            "label": g.label, "hardware": g.hardware_label, "model": g.model_label,
            "workload": g.workload_label, "objective": g.objective_name, "simulated": g.simulated,
            "headline": g.headline_label, "objective_columns": [name for name, _ in objective_columns(g)],
            "best": best.name if best is not None else None,
            "leader": g.leader.name if g.leader is not None else None, "verdict": g.verdict,
            "tied_within_noise": [c.key.name for c in g.ties.tied] if g.ties is not None else [],
            "noise": g.noise_line,
            "rows": [{**(rec := record(g, r)), "config_id": r.config_id, "marker": marker(g, r),
                      "n": rec["repeats"] or r.copies, "accept_per_position": _per_position(r.doc),
                      "cells": [c.to_dict() for c in r.doc.cells]} for r in g.rows]})
    return json.dumps(doc, indent=2, default=str) + "\n"


MD_COLUMNS = (  # (header, record key, digits): headers are the figures' labels (sweep/score/names.py)
    ("#", "rank", 0), ("trial", "trial", 0), ("status", "status", 0),
    (LABELS["speedup_vs_baseline"], "speedup_vs_baseline", 3), (LABELS["tok_s_peak"], "tok_s_peak", 4),
    (LABELS["accept_len"], "accept_len", 3), (LABELS["accept_rate"], "accept_rate", 3),
    (LABELS["greedy_identical"], "greedy_identical", 3), (LABELS["coding_pass_rate"], "coding_pass_rate", 3),
    ("TTFT ms p50/p90/p99", "ttft", 3), ("TPOT ms p50/p90/p99", "tpot", 3), (LABELS["usd_per_mtok"], "usd_per_mtok", 3),
)


def _per_position(doc: Any) -> list[float] | None:
    """Accepted per draft position over the trial (/metrics), for the JSON export."""
    window = doc.acceptance.metrics if doc.acceptance is not None else None
    return list(window.per_position) if window is not None and window.per_position else None


def _cell(rec: dict[str, Any], key: str, digits: int) -> str:
    if key in ("ttft", "tpot"):
        return " / ".join(_text(rec[f"{key}_ms_p{q}"], digits) for q in (50, 90, 99))
    if key == "status":
        reason = rec["failure_reason"]
        return str(rec["status"]) + (f": {reason}" if reason and reason != rec["status"] else "")
    if key == "speedup_vs_baseline" and rec[key] is not None:
        return speedup(float(rec[key]))
    return _text(rec[key], digits)


def _text(value: Any, digits: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{rounded(value, digits):,}"
    return str(value).replace("|", "\\|")


def headline_text(rec: dict[str, Any]) -> str:
    if rec["tok_s_lowc"] is None:
        return "-"
    text = f"{rounded(rec['tok_s_lowc'], 4):,}"
    if rec["tok_s_lowc_ci_low"] is not None:
        text += interval_text(float(rec["tok_s_lowc"]), rec["tok_s_lowc_ci_low"], rec["tok_s_lowc_ci_high"],
                              lambda x: f"{rounded(x, 2):,}")
    return text


def to_markdown(groups: Sequence[Group], title: str) -> str:
    lines = [f"# {title}", ""]
    for g in groups:
        best = g.best
        lines += [f"## {g.label}", ""]
        if best is not None:
            lines += [f"Best feasible: **{best.name}** ({g.headline_label} "
                      f"{headline_text(record(g, best))}); {g.noise_line}", ""]
        elif g.leader is not None:
            lines += [f"No best yet: **{g.leader.name}** leads ({g.headline_label} "
                      f"{headline_text(record(g, g.leader))}); {g.noise_line}", ""]
        extra = objective_columns(g)  # the objective's own figure (max load, goodput ...) when not shown
        headers = [h for h, _, _ in MD_COLUMNS[:3]] + [name for name, _ in extra] + [g.headline_label] \
            + [h for h, _, _ in MD_COLUMNS[3:]]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join("---:" if i not in (1, 2) else "---" for i in range(len(headers))) + "|")
        for r in g.rows:
            rec = record(g, r)
            cells = [_cell(rec, k, d) for _, k, d in MD_COLUMNS]
            cells[3:3] = [*(_text(rec[key], 4) for _, key in extra), headline_text(rec)]
            if r is best:
                cells[1] = f"**{cells[1]}**"
            elif r.tied_with_best:
                cells[0] = f"≈ {cells[0]}"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Best feasible: status ok, meets the objective's constraints (coding pass rate, errors, "
                 "TTFT SLO). ≈: tied with the best within noise (95% intervals overlap). "
                 "Speedup: low-load tok/s over the spec=none baseline of the same group.")
    return "\n".join(lines) + "\n"
