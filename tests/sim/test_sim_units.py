"""Pure parts of the sim: flags vs SGLang's parser, argv of every hardware x spec,
the tokenizer, and the answers (checked against the harness's hidden tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweep.sim import cli, text, tokens
from sweep.sim.launch import render_overrides

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for sglang_compat

HARDWARE = ("b300", "h200", "pro6000_tp8", "pro6000_ep4", "pro6000_ep8")
SPECS = (("spec=none",), ("spec=ddtree",), ("spec=dflash",), ("spec=eagle3", "model.draft_paths.eagle3=/d"),
         ("spec=ddtree", "spec.budget=16", "server.disable_cuda_graph=true"))


@pytest.mark.parametrize("hardware", HARDWARE)
def test_sim_parses_every_rendered_argv(hardware: str) -> None:
    for spec in SPECS:
        argv, env, _ = render_overrides(["server=sim", f"hardware={hardware}", *spec])
        assert argv[1:3] == ["-m", "sweep.sim"]
        args = cli.parse(argv[3:], env)
        assert args.tp_size == 8 and args.hardware["name"] == hardware
        algo = args.spec["algorithm"]
        assert algo == spec[0].split("=")[1] or (algo == "eagle3" and "eagle3" in spec[0])
        if algo == "ddtree":
            assert args.spec["topk"] == 4 and args.spec["budget"] in (8, 16) and args.spec["window"] == 2048


def test_declared_flags_exist_in_sglang() -> None:
    import sglang_compat

    sglang_compat.require_sglang()
    upstream = sglang_compat.parser_flag_names()
    missing = []
    for item in cli.declarations()["sglang"]:
        if item.get("fork"):
            assert item["name"] not in upstream, f"{item['name']} is upstream now: drop fork: true"
            continue
        legacy = set(item.get("legacy_aliases", []))
        missing += [n for n in [item["name"], *item.get("aliases", [])] if n not in upstream and n not in legacy]
    assert not missing, f"declared in sweep/sim/flags.yaml but unknown to sglang: {missing}"


def test_help_lists_declared_flags() -> None:
    out = subprocess.run([sys.executable, "-m", "sweep.sim", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for item in cli.declarations()["sglang"] + cli.declarations()["sim"]:
        assert item["name"] in out.stdout


def test_tokenizer_is_lossless_and_consistent() -> None:
    sample = "Hello world, 12345 tokens!\n\n    def f(x: int) -> int:\n        return x ** 2\n"
    ps = tokens.pieces(sample)
    assert "".join(ps) == sample and tokens.count(sample) == len(ps)
    assert 2.5 <= len(sample) / len(ps) <= 4.5
    assert tokens.chat_prompt_tokens([{"role": "user", "content": "hi"}]) == tokens.count("hi") + 7


def test_answers_pass_the_harness_hidden_tests() -> None:
    coding = pytest.importorskip("sweep.bench.coding")
    problems = coding.five_problems() + coding.humaneval_problems(20)
    for prob in problems:
        ans = text.answer(prob.prompt, max_tokens=1024, ignore_eos=False, seed=0)
        assert ans.finish_reason == "stop", prob.name
        program = coding.program_for(prob, "".join(ans.pieces))
        run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
        assert "ALL TESTS PASSED" in run.stdout, (prob.name, run.stderr[-500:])


def test_answers_are_deterministic_per_seed_and_sized() -> None:
    a = text.answer("Tell me about caches.", max_tokens=200, ignore_eos=False, seed=1)
    b = text.answer("Tell me about caches.", max_tokens=200, ignore_eos=False, seed=1)
    c = text.answer("Tell me about caches.", max_tokens=200, ignore_eos=False, seed=2)
    assert a == b and a.pieces != c.pieces and len(a.pieces) == 200 and a.finish_reason == "length"
    sig = "def fibonacci(n: int) -> int:"
    short = text.answer(sig, max_tokens=20, ignore_eos=False, seed=0)
    forced = text.answer(sig, max_tokens=600, ignore_eos=True, seed=0)
    assert short.finish_reason == "length" and len(short.pieces) == 20
    assert forced.finish_reason == "length" and len(forced.pieces) == 600
    # a stdlib excerpt that merely defines functions is not a coding-eval problem
    assert text.code_answer("def add(x, y):\n    return x + y\n") is None
