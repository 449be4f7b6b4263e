"""Per-load speculation on the real vLLM (CPU): a table from YAML switches the draft length by load.

``spec.per_load`` renders as ``num_speculative_tokens_per_batch_size`` inside
``--speculative-config``, and vLLM's scheduler picks the budget per step from the number of
requests it schedules. Two trials at concurrency 2, the same edit prompts: the table
``[[1,256,4]]`` (4 at every batch size: static budget 4) drafts at nearly every step;
``[[1,1,4],[2,256,0]]`` drafts only while one request runs alone (the cell's edges, the
warm-up), so vLLM's own /metrics counters over the trial count far fewer drafts. Both answer
the greedy prompts as the autoregressive baseline would (lossless at every budget, 0 included).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import explain, results

pytestmark = pytest.mark.slow

COMMON = ("spec=ngram", "spec.budget=4", "workload.concurrency=[2]", "workload.min_requests=4",
          "workload.max_tokens=48")


@pytest.mark.timeout(2400)
def test_a_per_load_table_switches_the_draft_length_by_load(vllm_cli, tmp_path: Path):
    drafts = {}
    for label, table in (("static", "[[1,256,4]]"), ("dynamic", "[[1,1,4],[2,256,0]]")):
        proc = vllm_cli(*COMMON, f"spec.per_load={table}", f"hydra.run.dir={tmp_path}/{label}", timeout=1200)
        assert proc.returncode == 0, explain(proc)
        [doc] = results(tmp_path / label)
        assert doc["status"] == "ok", doc["failure"]
        args = doc["argv"]
        conf = args[args.index("--speculative-config") + 1]
        assert '"num_speculative_tokens":4' in conf
        assert f'"num_speculative_tokens_per_batch_size":{table}' in conf
        assert "-dyn" in doc["trial"]["name"]
        win = doc["acceptance"]["metrics"] or {}
        drafts[label] = int(win.get("drafts") or 0)
        assert win.get("drafted", 0) <= 4 * drafts[label]
        tokens = sum(c["completion_tokens"] for c in doc["cells"])
        assert tokens == 4 * 48
    # static 4 at batch 2: ~ one draft per step of the pair; the table's 0 there: only the lone moments
    assert drafts["static"] > 20 and drafts["dynamic"] < 0.5 * drafts["static"], drafts
