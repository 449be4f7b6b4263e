"""The rule language of spec.constraints / hardware.quirks.rules, and the config check that reads it."""

from __future__ import annotations

import pytest

from sweep.compose import cmdline
from sweep.compose.config import from_omegaconf
from sweep.compose.constraints import (check_spec_constraints, lookup_in, parse, quirk_rules,
                                       spec_constraints)
from sweep.errors import ConfigError

CFG = {"spec": {"algorithm": "ddtree", "budget": 4, "topk": 8, "window": 2048, "block": 8,
                "synth_len": None},
       "server": {"disable_cuda_graph": False}, "hardware": {"quirks": {"cuda_graph_max_budget": 8}}}


@pytest.mark.parametrize("rule, expected", [
    ("topk <= budget", False),
    ("budget < topk <= 8", True),              # chained like Python
    ("window >= block * 256", True),
    ("window % block == 0 and not server.disable_cuda_graph", True),
    ("algorithm == 'ddtree' or budget > 100", True),
    ("-budget + 2 * (topk - 1) == 10", True),
    ("synth_len <= budget + 1", None),         # null: unknown -> a constraint does not apply
    ("synth_len <= budget or topk > 1", True),  # Kleene: unknown or true = true
    ("synth_len <= budget and topk > 100", False),
    ("not synth_len", None),
    ("budget > hardware.quirks.cuda_graph_max_budget", False),
])
def test_rules_evaluate_with_three_valued_logic(rule: str, expected: bool | None) -> None:
    assert parse(rule, base="spec").evaluate(lookup_in(CFG)) is expected


@pytest.mark.parametrize("text", ["topk <=", "__import__('os')", "topk <= budget; rm", "a[0] > 1",
                                  "lambda: 1", "", "budget ** 2 > 1", "x.y( )"])
def test_anything_else_is_refused_not_evaluated(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text, base="spec", where="spec.constraints[0]")
    assert info.value.key == "spec.constraints[0]"


def test_an_unknown_name_is_named() -> None:
    with pytest.raises(ConfigError, match="spec.depth is not a key"):
        check_spec_constraints({**CFG, "spec": {**CFG["spec"], "topk": 1, "constraints": ["depth < 3"]}})


def test_the_config_check_reads_the_declaration() -> None:
    """One owner: the shipped spec declares the rule; compose enforces what it says."""
    cfg = from_omegaconf(cmdline.compose(["spec.budget=4", "spec.topk=4"]))
    assert [r.source for r in spec_constraints(cfg.raw["spec"])] == ["topk <= budget", "window >= block"]
    with pytest.raises(ConfigError) as info:
        from_omegaconf(cmdline.compose(["spec.budget=4", "spec.topk=8"]))
    assert info.value.key == "spec.topk"
    assert info.value.message.startswith("must be <= spec.budget=4 (declared: spec.constraints 'topk <= budget')")
    # a declaration changed on the command line is what is checked
    from_omegaconf(cmdline.compose(["spec.budget=4", "spec.topk=8", "spec.constraints=[]"]))


def test_b300_declares_its_cuda_graph_quirk() -> None:
    cfg = from_omegaconf(cmdline.compose(["hardware=b300"]))
    (quirk,) = quirk_rules(cfg.raw["hardware"])
    assert quirk.reason == "cuda_graph" and quirk.workaround == ("server.disable_cuda_graph=true",)
    raw = dict(cfg.raw)
    assert quirk.when.evaluate(lookup_in(raw)) is False  # budget 8: fine
    raw["spec"] = {**raw["spec"], "budget": 16}
    assert quirk.when.evaluate(lookup_in(raw)) is True
    raw["server"] = {**raw["server"], "disable_cuda_graph": True}
    assert quirk.when.evaluate(lookup_in(raw)) is False
    assert quirk_rules(from_omegaconf(cmdline.compose(["hardware=pro6000_ep4"])).raw["hardware"]) == []


def test_a_bad_quirk_declaration_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        from_omegaconf(cmdline.compose(["hardware.quirks.rules=[{name:x,reason:oom,when:'budget >',workaround:[]}]"]))
    assert info.value.key == "hardware.quirks.rules[0].when"
