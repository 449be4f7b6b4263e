"""Greedy identity: does a speculative trial answer exactly as its autoregressive baseline did?

The trial's greedy answers (:mod:`sweep.bench.identity`) are compared with
the ones stored in the baseline result -- the same ``spec=none`` result the
speedup is measured against (:func:`sweep.score.speedup.find`: same box,
model, engine, matrix and prompts) -- prompt by prompt (by the prompt's hash,
so a baseline run with other prompts compares nothing rather than wrongly).

* ``greedy_identical``: identical answers / answers compared (None when no
  baseline answers match this trial's prompts; 1.0 for a baseline itself);
* ``prefix_match``: the mean share of the baseline's answer that the trial
  reproduced before the first differing character -- how far off a
  non-identical answer is (floating-point near-ties flip a late token; a broken
  verify step diverges at once).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def compare(answers: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{compared, identical, greedy_identical, prefix_match}`` of answers vs the baseline's."""
    ref = {a.get("prompt_sha"): a for a in baseline if not a.get("error")}
    pairs = [(a, ref[a.get("prompt_sha")]) for a in answers if a.get("prompt_sha") in ref]
    if not pairs:
        return {"compared": 0, "identical": 0, "greedy_identical": None, "prefix_match": None}
    identical = 0
    shares = []
    for mine, theirs in pairs:
        a, b = str(mine.get("text") or ""), str(theirs.get("text") or "")
        if mine.get("error"):
            shares.append(0.0)
            continue
        identical += a == b
        shares.append(1.0 if a == b else _common_prefix(a, b) / max(1, len(b)))
    return {"compared": len(pairs), "identical": identical,
            "greedy_identical": round(identical / len(pairs), 4),
            "prefix_match": round(sum(shares) / len(shares), 4)}
