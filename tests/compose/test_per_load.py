"""Per-load speculation as config (``spec.per_load``): rendered from YAML, refused where an engine has
none, one more knob of the config's identity and name, and modelled by the simulator.

vLLM's own parser, config classes and the scheduler's lookup check the rendered table in
tests/contract/test_vllm_flags.py (the ``per_load`` cases); here the project's side.
"""

from __future__ import annotations

import json

import pytest

from sweep.compose import cmdline as preflight
from sweep.compose.config import from_omegaconf
from sweep.compose.render import render
from sweep.errors import ConfigError
from sweep.record.result import TrialInfo, TrialResult
from sweep.score import configs

TABLE = "[[1,1,8],[2,4,4],[5,256,0]]"


def build(*overrides: str):
    return from_omegaconf(preflight.compose(list(overrides)))


def spec_config(launch) -> dict:
    args = list(launch.args)
    return json.loads(args[args.index("--speculative-config") + 1])


def test_vllm_renders_the_table_inside_its_speculative_config() -> None:
    cfg = build("server=vllm", "spec=ngram", "spec.budget=8", f"spec.per_load={TABLE}")
    assert cfg.spec.per_load == ((1, 1, 8), (2, 4, 4), (5, 256, 0))
    conf = spec_config(render(cfg))
    assert conf["num_speculative_tokens"] == 8
    assert conf["num_speculative_tokens_per_batch_size"] == [[1, 1, 8], [2, 4, 4], [5, 256, 0]]


def test_a_static_config_renders_as_before() -> None:
    """No per-load table: the key is not in the JSON at all (a null in a JSON mapping is left out), so the
    launch -- and the config id of every result recorded before the key existed -- is unchanged."""
    conf = spec_config(render(build("server=vllm", "spec=ngram", "spec.budget=8")))
    assert conf == {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


@pytest.mark.parametrize("server,spec,reason", [
    ("llamacpp", "ngram", "llama-server drafts a fixed number of tokens per step"),
    ("sglang", "eagle3", "SGLang 0.5.23 takes no per-batch-size budget table"),
    ("sglang", "ngram", "--speculative-adaptive-config FILE"),
    # vLLM takes a table, but these specs' vLLM forms do not render one
    ("vllm", "eagle", "spec=eagle's vllm form renders no per-load table"),
    ("vllm", "mtp", "spec=mtp's vllm form renders no per-load table"),
    ("vllm", "dspark", "spec=dspark's vllm form renders no per-load table"),
])
def test_engines_without_it_refuse_in_one_line(server: str, spec: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(f"server={server}", f"spec={spec}", "spec.budget=8", f"spec.per_load={TABLE}")
    line = err.value.one_line()
    assert "\n" not in line and line.startswith("error: spec.per_load: ") and reason in line, line


@pytest.mark.parametrize("overrides,message", [
    (["spec.per_load=[[1,1,8]]"], "spec.budget: must be the largest budget of spec.per_load (8)"),
    (["spec=none", "spec.per_load=[[1,1,8]]"], "spec=none drafts nothing"),
    (["spec.per_load=[[2,4,4]]", "spec.budget=4"], "the first band must start at 1"),
    (["spec.per_load=[[1,4,4],[3,8,2]]"], "spec.per_load[1]: [3, 8] must start above the previous band's end 4"),
    (["spec.per_load=[[1,4,0]]"], "every budget is 0"),
    (["spec.per_load=[[1,4,2000]]"], "spec.per_load[0][2]: must be in [0, 1024]"),
    (["spec.per_load=[[1,4]]"], "spec.per_load[0]: must be [from, to, budget]"),
    (["spec.per_load=[[3,1,4]]"], "spec.per_load[0]: from 3 is above to 1"),
    (["spec.per_load=4"], "spec.per_load: must be a list of [from, to, budget] bands"),
])
def test_bad_tables_are_one_line_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build("server=vllm", "spec=ngram", *overrides)
    assert message in err.value.one_line(), err.value.one_line()


def doc(*overrides: str) -> TrialResult:
    cfg = build(*overrides)
    launch = render(cfg)
    return TrialResult(simulated=cfg.simulated, argv=list(launch.argv), env=dict(launch.env), config=dict(cfg.raw),
                       trial=TrialInfo(name="?", hardware=cfg.hardware.name, spec=cfg.spec.algorithm,
                                       choices={"server": "vllm", "spec": "ngram", "hardware": "cpu",
                                                "model": "smollm2", "workload": "edit"}))


def test_the_table_is_part_of_the_config_id_and_its_name() -> None:
    static = doc("server=vllm", "spec=ngram", "spec.budget=8")
    dyn = doc("server=vllm", "spec=ngram", "spec.budget=8", f"spec.per_load={TABLE}")
    other = doc("server=vllm", "spec=ngram", "spec.budget=8", "spec.per_load=[[1,1,8],[2,4,2],[5,256,0]]")
    assert len({configs.config_id(d) for d in (static, dyn, other)}) == 3
    assert configs.name_of(static) == "cpu-ngram-b8-edit"
    assert configs.name_of(dyn) == "cpu-ngram-b8-dyn1:8,2-4:4,5-256:0-edit"
    assert configs.name_of(other) == "cpu-ngram-b8-dyn1:8,2-4:2,5-256:0-edit"


def test_the_simulator_gets_it_as_its_own_flag_and_parses_it() -> None:
    from sweep.sim import cli

    launch = render(build("server=sim", "spec=ngram", "spec.budget=8", f"spec.per_load={TABLE}"))
    args = list(launch.args)
    assert args[args.index("--sim-per-load") + 1] == TABLE
    assert "--sim-per-load" not in render(build("server=sim", "spec=ngram")).args
    parsed = cli.parse(args)
    assert parsed.spec["per_load"] == [[1, 1, 8], [2, 4, 4], [5, 256, 0]]
    with pytest.raises(SystemExit) as out:
        cli.parse([*args[:args.index("--sim-per-load") + 1], "[[2,4,4]]", *args[args.index("--sim-per-load") + 2:]])
    assert out.value.code == 2


def test_budget_at_reads_bands_as_vllm_does() -> None:
    """Gaps carry the previous band's budget, past the last band the last budget (vLLM's dense lookup,
    checked against vLLM's own code in tests/contract/test_vllm_flags.py)."""
    from sweep.compose.per_load import budget_at

    table = [[1, 1, 8], [2, 2, 4], [4, 8, 1]]
    assert [budget_at(table, b) for b in range(1, 11)] == [8, 4, 4, 1, 1, 1, 1, 1, 1, 1]


def test_the_twin_predicts_each_load_with_its_budget() -> None:
    """A per-load config's predicted cell at concurrency C is the static config's with budget K(C)."""
    from sweep.sim.predict import predict_cells

    base = ["server=sim", "hardware=b300", "spec=ngram", "workload.concurrency=[1,2,8]", "workload.contexts=[1024]"]
    dyn = predict_cells(build(*base, "spec.budget=8", "spec.per_load=[[1,1,8],[2,4,2],[5,256,0]]"))
    static = {k: predict_cells(build(*base, f"spec.budget={k}")) for k in (8, 2)}
    none = predict_cells(build(*base[:2], "hardware=b300", "spec=none", *base[3:]))
    assert dyn[0]["output_tok_s"] == pytest.approx(static[8][0]["output_tok_s"])
    assert dyn[1]["output_tok_s"] == pytest.approx(static[2][1]["output_tok_s"])
    assert dyn[2]["output_tok_s"] == pytest.approx(none[2]["output_tok_s"]) and dyn[2]["accept_len"] is None
