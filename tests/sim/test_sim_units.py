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


_RUN_ALL = """
import contextlib, io, json, sys
failed = {}
for name, program in json.load(sys.stdin).items():
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(program, name, "exec"), {"__name__": "__main__"})
    except BaseException as exc:
        failed[name] = repr(exc)[:300]
    else:
        if "ALL TESTS PASSED" not in out.getvalue():
            failed[name] = "no ALL TESTS PASSED"
print(json.dumps(failed))
"""


def test_answers_pass_the_hidden_tests_at_every_coding_workloads_cap() -> None:
    """Each shipped workload with a coding eval: the sim's answers, cut at its
    coding_max_tokens, keep their code whole (the cap cuts the prose after it)."""
    import json

    from sweep.bench import coding
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    programs: dict[str, str] = {}
    workloads = []
    for path in sorted((Path(__file__).resolve().parents[2] / "conf" / "workload").glob("*.yaml")):
        # an SLO: workload=max_load searches against one
        wl = from_omegaconf(compose([f"workload={path.stem}", "objective.slo.tpot_ms=50"])).workload
        if wl.coding == "off":
            continue
        workloads.append(path.stem)
        for prob in coding.problems_for(wl):
            ans = text.answer(prob.prompt, max_tokens=wl.coding_max_tokens, ignore_eos=False, seed=0)
            programs[f"{path.stem}:{prob.name}"] = coding.program_for(prob, "".join(ans.pieces))
    assert {"seed", "smoke", "coding"} <= set(workloads) and len(programs) >= 50
    run = subprocess.run([sys.executable, "-c", _RUN_ALL], input=json.dumps(programs), capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == {}


def test_five_answers_are_code_then_prose_of_the_declared_length() -> None:
    from sweep.bench import coding

    lengths = text.answer_lengths()
    assert [lengths[text.five_problem(p.prompt) or ""].problem for p in coding.five_problems()] == \
        [p.name for p in coding.five_problems()]
    for prob in coding.five_problems():
        code = text.code_answer(prob.prompt) or ""
        full = text.answer(prob.prompt, max_tokens=4096, ignore_eos=False, seed=3)
        said = "".join(full.pieces)
        assert len(full.pieces) == lengths[text.five_problem(prob.prompt) or ""].tokens > tokens.count(code)
        assert full.finish_reason == "stop" and tokens.pieces(said) == full.pieces
        assert said.startswith(code + "\n\n") and said.endswith(".") and "```" not in said[len(code):]
        cut = text.answer(prob.prompt, max_tokens=tokens.count(code), ignore_eos=False, seed=3)
        assert "".join(cut.pieces) == code and cut.finish_reason == "length"
        wrong = text.answer(prob.prompt, max_tokens=4096, ignore_eos=False, seed=3, wrong_answer_rate=1.0)
        assert len(wrong.pieces) == len(full.pieces) and not "".join(wrong.pieces).startswith(code)


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
