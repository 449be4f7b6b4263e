"""vLLM's failures are failed trials with the right reason and vLLM's own words, as SGLang's are.

A speculative config vLLM refuses (its SpeculativeConfig's pydantic model) and a
model path that is not there, each with the real server: the trial fails
(result.json says why, quoting vLLM, with the log tail), exit status 1, and no
server is left behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import explain, results

pytestmark = pytest.mark.slow


def _failed(root: Path) -> dict:
    (doc,) = results(root)
    assert doc["status"] == "failed", doc
    return doc


@pytest.mark.timeout(900)
def test_refused_speculative_config_and_missing_model_are_classified(vllm_cli, tmp_path: Path):
    bad = '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_maxx":3}'
    proc = vllm_cli("spec=none", f"server.extra_args=[--speculative-config,'{bad}']",
                    f"hydra.run.dir={tmp_path}/spec", timeout=600)
    assert proc.returncode == 1, explain(proc)
    doc = _failed(tmp_path / "spec")
    assert doc["failure"]["reason"] == "bad_flag", doc["failure"]
    # vLLM's own words: the class that refused it and the key
    assert "validation error for SpeculativeConfig" in doc["failure"]["message"]
    assert "prompt_lookup_maxx" in doc["failure"]["message"]
    assert "prompt_lookup_maxx" in doc["failure"]["log_tail"]

    proc = vllm_cli("spec=none", f"model.paths.hf={tmp_path}/no-such-model", f"hydra.run.dir={tmp_path}/model",
                    timeout=600)
    assert proc.returncode == 1, explain(proc)
    doc = _failed(tmp_path / "model")
    assert doc["failure"]["reason"] == "model_missing", doc["failure"]
    assert f"{tmp_path}/no-such-model" in doc["failure"]["message"]
    assert "python -m sweep.engines" in doc["failure"]["message"]
