"""The greedy-identity pass of a trial and its verdict against the baseline's answers.

The pass (:mod:`sweep.bench.identity`) runs before the trial's window opens, its
answers go into ``result.identity``; at the end they are compared with the
answers stored in the baseline result the speedup is measured against
(:mod:`sweep.score.identity`). docs/ARCHITECTURE.md, "Greedy identity".
"""

from __future__ import annotations

from pathlib import Path

from sweep.compose.config import TrialConfig
from sweep.record.result import TrialResult


def run_pass(cfg: TrialConfig, doc: TrialResult, path: Path, base_url: str) -> None:
    """Greedy answers to the workload's fixed identity prompts (workload.identity), kept in the result."""
    spec = cfg.workload.identity
    if not int(spec.get("prompts") or 0):
        return
    from sweep.bench.identity import run_identity
    from sweep.bench.matrix import server_options
    from sweep.record.result import Identity

    opts = server_options(cfg)
    answers = run_identity(base_url, cfg.workload, cfg.model.served_name, api_key=cfg.server.api_key,
                           endpoint=opts["endpoint"], tokenize=opts["tokenize"], vocab_size=opts["vocab_size"],
                           request_extras=opts["request_extras"])
    doc.identity = Identity(prompts=len(answers), context=spec.get("context") or cfg.workload.contexts[0],
                            max_tokens=spec.get("max_tokens") or cfg.workload.max_tokens,
                            answers=[a.to_dict() for a in answers])
    doc.write(path)


def compare_with(doc: TrialResult, bpath: Path | None, bdoc: TrialResult | None) -> None:
    """The trial's greedy answers against the baseline's (a baseline is its own reference: 1.0)."""
    from sweep.score.identity import compare

    mine = doc.identity
    if mine is None or not mine.answers:
        return
    if bdoc is None:  # spec=none: the reference itself
        mine.baseline, mine.compared, mine.identical = "self", len(mine.answers), len(mine.answers)
        mine.greedy_identical, mine.prefix_match = 1.0, 1.0
    else:
        theirs = bdoc.identity.answers if bdoc.identity is not None else []
        got = compare(mine.answers, theirs)
        mine.baseline = str(bpath) if got["compared"] else None
        mine.compared, mine.identical = got["compared"], got["identical"]
        mine.greedy_identical, mine.prefix_match = got["greedy_identical"], got["prefix_match"]
    doc.metrics.greedy_identical = mine.greedy_identical
