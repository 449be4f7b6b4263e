"""One config, one id, one name (sweep/score/configs.py), through the real compose -> render path.

Each case is composed with Hydra as ``python -m sweep`` composes it and rendered by the real renderer
(the argv and environment a trial records); the id and the name are then read off the document the
trial would write. What must hold: a knob that reaches the launch, or a measured difference, makes
another config with another name; plumbing (the port, the simulator's noise seed) and a knob the
engine never sees do not; the same config reached two ways has one id and one name.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from sweep.compose.cmdline import compose
from sweep.compose.config import from_omegaconf
from sweep.compose.render import render
from sweep.record.result import Cell, TrialInfo, TrialResult
from sweep.score import configs


@lru_cache(maxsize=None)
def doc(*overrides: str) -> TrialResult:
    full = compose(list(overrides), hydra_config=True)
    choices = {k: str(v) for k, v in full.hydra.runtime.choices.items() if k in configs.GROUPS}
    cfg = from_omegaconf(compose(list(overrides)))
    launch = render(cfg)
    d = TrialResult(status="ok", simulated=cfg.simulated,
                    trial=TrialInfo(name="?", hardware=cfg.hardware.name, spec=cfg.spec.algorithm, choices=choices),
                    argv=list(launch.argv), env=dict(launch.env), config=dict(cfg.raw))
    d.trial.name = configs.name_of(d)
    d.trial.config_id = configs.config_id(d)
    return d


def name(*o: str) -> str:
    return doc(*o).trial.name


def cid(*o: str) -> str:
    return str(doc(*o).trial.config_id)


def test_a_default_given_again_is_the_same_config() -> None:
    assert name("workload=smoke") == name("workload=smoke", "workload.max_tokens=64") == \
        "b300-ddtree-b8-t4-w2048-smoke"
    assert cid("workload=smoke") == cid("workload=smoke", "workload.max_tokens=64")


def test_every_knob_that_reaches_the_launch_is_in_the_name() -> None:
    assert name("workload=smoke", "spec.block=2") == "b300-ddtree-b8-t4-w2048-blk2-smoke"
    assert cid("workload=smoke", "spec.block=2") != cid("workload=smoke")
    assert name("workload=smoke", "spec.budget=16", "server.disable_cuda_graph=true") == \
        "b300-ddtree-b16-t4-w2048-nocg-smoke"
    # the n-gram configs at budget 4: three lookup windows, three names and ids
    names = {name("server=vllm", "spec=ngram", f"spec.ngram_n_max={a}", f"spec.ngram_n_min={b}")
             for a, b in ((4, 2), (2, 1), (6, 3))}
    assert names == {"cpu-ngram-b4-edit", "cpu-ngram-b4-max2-min1-edit", "cpu-ngram-b4-max6-min3-edit"}
    assert len({cid("server=vllm", "spec=ngram", f"spec.ngram_n_max={a}", f"spec.ngram_n_min={b}")
                for a, b in ((4, 2), (2, 1), (6, 3))}) == 3


def test_every_measured_difference_is_in_the_name() -> None:
    assert name("workload=smoke", "workload.max_tokens=32") == "b300-ddtree-b8-t4-w2048-smoke-mt32"
    assert name("workload=smoke", "workload.contexts=[60,1024]", "workload.concurrency=[1,8]") == \
        "b300-ddtree-b8-t4-w2048-smoke-ctx60.1024-c1.8"
    assert name("workload=smoke", "objective.slo.tpot_ms=50") == "b300-ddtree-b8-t4-w2048-smoke-slo-tpot50"
    assert len({cid("workload=smoke"), cid("workload=smoke", "workload.max_tokens=32"),
                cid("workload=smoke", "objective.slo.tpot_ms=50"), cid("workload=prose")}) == 4


def test_plumbing_and_what_the_engine_never_sees_make_no_other_config() -> None:
    base = cid("workload=smoke")
    assert cid("workload=smoke", "server.port=31000") == base
    assert cid("workload=smoke", "server.sim.seed=3") == base            # the sim's noise draw
    assert cid("workload=smoke", "server.sim.load_seconds=150") == base
    assert cid("workload=smoke", "workload.min_requests=8", "workload.seed=5", "workload.repeats=3") == base
    # llama.cpp's n-gram type is a llama.cpp flag: vLLM renders nothing of it
    assert name("server=vllm", "spec=ngram", "spec.ngram_type=ngram-simple") == name("server=vllm", "spec=ngram")
    assert cid("server=vllm", "spec=ngram", "spec.ngram_type=ngram-simple") == cid("server=vllm", "spec=ngram")
    assert name("server=llamacpp", "spec=ngram", "spec.ngram_type=ngram-simple").endswith("ngram_type=ngram-simple-edit")


def test_the_cache_policy_is_part_of_what_is_measured() -> None:
    assert cid("workload=smoke", "workload.flush_cache=false") != cid("workload=smoke")
    assert name("workload=smoke", "workload.flush_cache=false") == "b300-ddtree-b8-t4-w2048-smoke-noflush"
    assert cid("server=vllm", "server.prefix_caching=true") != cid("server=vllm")


def test_two_configs_never_share_a_name() -> None:
    """Knobs that do not tell two configs apart (another engine build: the same YAML, another binary)
    get the id's first digits appended; one config keeps one name."""
    a = doc("server=vllm", "spec=ngram")
    b = TrialResult.from_dict(a.to_dict())
    b.config["server"] = {**b.config["server"], "install": {**b.config["server"]["install"], "version": "0.33.0"}}
    b.trial.config_id = configs.config_id(b)
    assert b.trial.config_id != a.trial.config_id and b.trial.name == a.trial.name
    named = configs.names([a, b, a])
    assert len(set(named.values())) == 2
    assert all(n.startswith("cpu-ngram-b4-edit#") for n in named.values())
    assert configs.names([a]) == {a.trial.config_id: "cpu-ngram-b4-edit"}


def test_copies_pool_cell_by_cell_with_their_spread_as_the_interval() -> None:
    def copy(tok_s: float, cache: str = "flushed", when: str = "2026-12-01T00:00") -> TrialResult:
        d = TrialResult.from_dict(doc("workload=smoke").to_dict())
        d.trial.finished = when
        d.cells = [Cell(context=60, concurrency=2, requests=4, errors=0, output_tok_s=tok_s, cache=cache,
                        completion_tokens=256, duration_s=1.0, ttft_ms_p50=30.0)]
        return d

    [pooled] = configs.pool([copy(400.0, when="1"), copy(410.0, when="2"), copy(420.0, when="3")])
    assert pooled.n == 3 and pooled.doc is not None
    [cell] = pooled.doc.cells
    assert cell.repeats == 3 and cell.output_tok_s == pytest.approx(410.0)
    assert cell.output_tok_s_runs == [400.0, 410.0, 420.0]
    assert cell.output_tok_s_ci is not None and cell.output_tok_s_ci[0] < 410 < cell.output_tok_s_ci[1]
    assert cell.requests == 12 and pooled.doc.metrics.tok_s_lowc == pytest.approx(410.0)
    # a copy whose cell met another cache state is not a repeat of it: the newest state is kept
    [mixed] = configs.pool([copy(900.0, cache="warm", when="1"), copy(400.0, when="2"), copy(420.0, when="3")])
    assert mixed.doc is not None and mixed.doc.cells[0].repeats == 2
    assert mixed.doc.cells[0].output_tok_s == pytest.approx(410.0)
