"""Every cell sends the context it is labelled with: the mean usage.prompt_tokens the
server reported for a cell's requests is within 2% of the cell's context, for
every prompt source, both endpoints, and with or without a tokenize route."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sweep.bench.matrix import run_matrix, server_options
from sweep.compose.config import from_omegaconf
from sweep.compose.cmdline import compose

CONTEXTS = (60, 1024, 4096)
SIM = ("server.sim.time_scale=0",)


def cells_for(sim, *overrides: str, options: dict | None = None, concurrency: tuple[int, ...] = (1, 4)):
    tc = from_omegaconf(compose(["server=sim", "workload=smoke", *overrides]))
    wl = dataclasses.replace(tc.workload, contexts=CONTEXTS, concurrency=concurrency, max_tokens=8,
                             warmup_requests=1)
    opts = {**server_options(tc), **(options or {})}
    return run_matrix(sim.base_url, wl, tc.model.served_name, progress=False, **opts)


def assert_sizes(cells, sizing: str, tolerance: float = 0.02) -> None:
    for cell in cells:
        assert cell.errors == 0, cell.error_kinds
        assert cell.prompt_sizing == sizing
        mean = cell.prompt_tokens_mean
        assert mean is not None and abs(mean - cell.context) <= tolerance * cell.context, (cell.context, mean)
        assert all(r.prompt_tokens for r in cell.results)


def test_text_prompts_sized_with_the_tokenize_route(sim_server) -> None:
    sim = sim_server(*SIM)
    cells = cells_for(sim)
    assert_sizes(cells, "tokenize")
    # the route makes every prompt exact or within a token, not only the mean
    assert all(abs(r.prompt_tokens - c.context) <= 1 for c in cells for r in c.results)


def test_text_prompts_sized_with_probes_when_there_is_no_route(sim_server) -> None:
    sim = sim_server(*SIM)
    assert_sizes(cells_for(sim, options={"tokenize": None}, concurrency=(2,)), "probe")


def test_chat_endpoint_counts_the_template(sim_server) -> None:
    sim = sim_server(*SIM)
    assert_sizes(cells_for(sim, "server.endpoint=chat", concurrency=(2,)), "tokenize")
    no_messages = {"path": "/v1/tokenize", "field": "prompt", "batch": True, "messages": False, "extra": {}}
    assert_sizes(cells_for(sim, "server.endpoint=chat", options={"tokenize": no_messages}, concurrency=(2,)),
                 "tokenize")


def test_dataset_prompts_are_cut_or_repeated_to_the_context(sim_server, tmp_path: Path) -> None:
    data = tmp_path / "sharegpt.jsonl"
    rows = [{"conversations": [{"from": "human", "value": f"Question {i}: why is the sky blue at noon?"},
                               {"from": "gpt", "value": "Rayleigh scattering."}]} for i in range(5)]
    rows.append({"prompt": "Summarise the history of the transistor. " * 400})
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n\n")
    sim = sim_server(*SIM)
    cells = cells_for(sim, "workload.prompt_source=dataset", f"workload.dataset_path={data}", concurrency=(2,))
    assert_sizes(cells, "tokenize")


def test_random_ids_are_exact(sim_server) -> None:
    sim = sim_server(*SIM)
    cells = cells_for(sim, "workload.prompt_source=random_ids", concurrency=(2,))
    assert_sizes(cells, "exact", tolerance=0.0)


@pytest.mark.contract
def test_random_ids_are_bench_servings_random_ids() -> None:
    """Same seed and vocabulary size, the same prompts as SGLang's bench_serving random-ids."""
    import random
    import sys

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sglang_compat

    from sweep.bench.prompts import random_ids

    sglang_compat.require_sglang()
    sglang_compat.bench_serving_module()
    from sglang.benchmark.datasets.random import sample_random_requests

    class Vocab:  # what sample_random_requests asks of a tokenizer when it returns ids
        vocab_size = 16000

        def num_special_tokens_to_add(self) -> int:
            return 0

    for seed in (0, 7, 1234):
        np.random.seed(seed)
        random.seed(seed)
        rows = sample_random_requests(50, 8, 5, 1.0, Vocab(), "", random_sample=False, return_text=False)
        assert [r.prompt for r in rows] == random_ids(5, 50, Vocab.vocab_size, seed=seed)
