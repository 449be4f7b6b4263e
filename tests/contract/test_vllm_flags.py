"""Every launch our YAML renders for server=vllm is accepted by vLLM's own parser and config classes.

For each spec with a vLLM form (conf/spec/*.yaml with ``render.vllm``), with
the server's defaults and with its optional knobs set, the launch is rendered
through the project (compose -> from_omegaconf -> render) and handed to
tests/contract/vllm_probe.py, run by the interpreter of the vLLM venv
(``python -m sweep.engines vllm``; vLLM never enters the project's
environment). There vLLM's OpenAI server parser parses the argv and its engine
arguments build the whole configuration -- ``SpeculativeConfig`` included,
whose pydantic model forbids unknown keys -- so a flag, a JSON key or a value
vLLM 0.32 does not know fails here, in CI, instead of at a server's start.

Checked per launch: (a) every rendered flag is an option string of the parser,
by its full name (argparse takes unambiguous prefixes); (b) parsing and
``create_engine_config()`` succeed; (c) the values vLLM holds are the ones the
config asked for (model, served name, context, eager mode, dtype, port, and
every ``--speculative-config`` key). The checker itself must fail on an
unknown flag, an unknown JSON key and a bad speculative value.

Per-load speculation (``spec.per_load``, every spec with a vLLM form): the table
rendered as ``num_speculative_tokens_per_batch_size`` is held by vLLM as given,
and the dense batch size -> K lookup its scheduler builds from it at start (the
call that validates the table, ``validate_and_normalize_dynamic_sd_schedule``)
gives every batch size up to ``max_num_seqs`` the budget the simulator's twin
gives it (:func:`sweep.compose.per_load.budget_at`); a table vLLM refuses (not
starting at 1) is refused by the checker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import vllm_env  # noqa: E402

pytestmark = pytest.mark.contract
PROBE = Path(__file__).with_name("vllm_probe.py")

SPECS = sorted(p.stem for p in (ROOT / "conf" / "spec").glob("*.yaml")
               if "vllm" in (yaml.safe_load(p.read_text()).get("render") or {})
               or p.stem == "llamacpp_ngram")  # the alias renders spec=ngram's vLLM form
# eagle3 / dflash need a draft head; SmolLM2 has none. Stand-ins (named as such): SmolLM2 itself for
# EAGLE-3, and for DFlash a config-only folder in the shape of a DFlash head (architecture
# DFlashDraftModel, dflash_config) with SmolLM2's sizes -- vLLM reads configs only here, no weight.


@lru_cache(maxsize=1)
def heads() -> tuple[str, ...]:
    import atexit
    import shutil
    import tempfile

    model = Path(vllm_env.require()["model"])
    folder = Path(tempfile.mkdtemp(prefix="dflash-standin-"))
    atexit.register(shutil.rmtree, folder, True)
    config = json.loads((model / "config.json").read_text())
    config.update({"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
                   "block_size": 8, "dflash_config": {"target_layer_ids": [1, 14, 27], "mask_token_id": 0},
                   "rope_theta": (config.pop("rope_parameters", None) or {}).get("rope_theta", 10000.0)})
    (folder / "config.json").write_text(json.dumps(config))
    return ("model.draft_paths.eagle3=${model.path}", "+model.draft_paths.eagle=${model.path}",
            f"model.draft_paths.dflash={folder}")
KNOBS = {
    "ngram": ["spec.budget=6", "spec.ngram_n_max=5", "spec.ngram_n_min=1"],
    "llamacpp_ngram": ["spec.budget=3"],
    "draft": ["spec.budget=2"],
    "suffix": ["spec.budget=8", "spec.suffix_max_tree_depth=16", "spec.suffix_max_spec_factor=2.0",
               "spec.suffix_min_token_prob=0.2", "spec.suffix_max_cached_requests=100"],
    "eagle3": ["spec.budget=4"],
    "synth": ["spec.synth_len=null", "spec.synth_rates=[0.9,0.5,0.25,0.1]"],
    "dflash": ["spec.block=4"],
    "eagle": ["spec.num_steps=2", "spec.budget=3"],
    "mtp": ["spec.num_steps=2", "spec.budget=3"],
    "dspark": ["spec.block=4"],
    "none": ["server.max_running_requests=8", "server.max_num_batched_tokens=4096", "server.api_key=sk-x",
             "hardware.cpu.eager=false", "hardware.cpu.dtype=bfloat16", "hardware.cpu.kv_cache_gib=1",
             "server.seed=7"],
}
# A per-load table per spec (spec.budget = its largest budget), with a gap (3) and a tail (past 8).
TABLE = [[1, 1, 4], [2, 2, 2], [4, 8, 1], [9, 16, 0]]
PER_LOAD = {spec: ["spec.budget=4", f"spec.per_load={TABLE}".replace(" ", "")]
            for spec in ("ngram", "llamacpp_ngram", "draft", "suffix", "eagle3", "synth")}
PER_LOAD["dflash"] = ["spec.block=4", f"spec.per_load={TABLE}".replace(" ", "")]
PER_LOAD["none"] = []  # refused (spec=none drafts nothing): tests/compose
# Their vLLM forms carry no per-batch-size table: refused in one line (tests/compose/test_per_load.py).
PER_LOAD.update(eagle=[], mtp=[], dspark=[])
# The speculative-config keys of our YAML -> the SpeculativeConfig attribute vLLM keeps them in.
SPEC_KEYS = {"method": "method", "model": "model", "num_speculative_tokens": "num_speculative_tokens",
             "prompt_lookup_max": "prompt_lookup_max", "prompt_lookup_min": "prompt_lookup_min",
             "suffix_decoding_max_tree_depth": "suffix_decoding_max_tree_depth",
             "suffix_decoding_max_spec_factor": "suffix_decoding_max_spec_factor",
             "suffix_decoding_min_token_prob": "suffix_decoding_min_token_prob",
             "suffix_decoding_max_cached_requests": "suffix_decoding_max_cached_requests",
             "rejection_sample_method": "rejection_sample_method",
             "synthetic_acceptance_rates": "synthetic_acceptance_rates",
             "num_speculative_tokens_per_batch_size": "num_speculative_tokens_per_batch_size",
             "enable_adaptive_verification": "enable_adaptive_verification"}
VARIANTS = ("defaults", "knobs", "per_load")
# Launches whose engine configuration the CPU build of vLLM here cannot finish, for a reason that is
# not ours -- named, and checked to be exactly that reason (so the flags, the parse and every
# --speculative-config key, which pydantic validates before these checks run, still passed):
# - dspark: its drafter runs on Model Runner V2 only, which needs Triton (GPU boxes);
# - mtp: vLLM drafts with the target's own MTP layer, and the stand-in target (SmolLM2) has none.
CONFIG_LIMITS = {"dspark": "Model Runner V1 does not support: dspark speculative decoding",
                 "mtp": "Unsupported speculative method: 'mtp'"}


def overrides_of(spec: str, variant: str) -> list[str]:
    return {"defaults": [], "knobs": KNOBS[spec], "per_load": PER_LOAD[spec]}[variant]


def rendered(spec: str, *extra: str):
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    # spec=synth is GPU-only (its declared constraint): parsed as a GPU box would render it
    gpu = ["hardware.num_gpus=1", "hardware.memory_gb=80"] if spec == "synth" else []
    cfg = from_omegaconf(compose(["server=vllm", f"spec={spec}", *heads(), *gpu, *extra]))
    return cfg, render(cfg)


def cases() -> list[tuple[str, str]]:
    return [(spec, v) for spec in SPECS for v in VARIANTS if v != "per_load" or PER_LOAD[spec]]


@lru_cache(maxsize=1)
def probed() -> dict[tuple[str, str], dict]:
    """Every case through vLLM at once (one interpreter start: importing vLLM takes a while)."""
    python = vllm_env.require()["server"]
    launches = {case: rendered(case[0], *overrides_of(*case))[1] for case in cases()}
    return dict(zip(launches, run_probe([{"argv": list(la.args), "env": dict(la.env)}
                                          for la in launches.values()], python)))


def run_probe(items: list[dict], python: Path) -> list[dict]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(items))
        proc = subprocess.run([str(python), "-I", str(PROBE), str(src), str(dst)], capture_output=True,
                              text=True, timeout=900, cwd=tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(dst.read_text())


def _flags(args) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def test_every_spec_of_ours_is_covered():
    assert set(SPECS) == {"ngram", "llamacpp_ngram", "draft", "suffix", "synth", "eagle3", "dflash", "none",
                          "eagle", "mtp", "dspark"}
    assert set(KNOBS) == set(SPECS) == set(PER_LOAD)


@pytest.mark.parametrize("spec,variant", cases(), ids=[f"{s}-{v}" for s, v in cases()])
def test_rendered_launch_passes_vllms_parser_and_config(spec: str, variant: str):
    cfg, launch = rendered(spec, *overrides_of(spec, variant))
    assert list(launch.executable[-2:]) == ["-m", "vllm.entrypoints.openai.api_server"]
    got = probed()[(spec, variant)]
    unknown = sorted(set(_flags(launch.args)) - set(got["options"]))
    assert not unknown, f"not vLLM options (full names): {unknown}"
    assert got["parse_error"] is None, got["parse_error"]
    if spec in CONFIG_LIMITS:
        assert CONFIG_LIMITS[spec] in (got.get("config_error_full") or ""), got.get("config_error_full")
        return
    assert got["config_error"] is None, got.get("config_error_full")
    parsed = got["parsed"]
    assert parsed["model"] == cfg.model.path
    assert parsed["served_model_name"] in (cfg.model.served_name, [cfg.model.served_name])
    assert parsed["max_model_len"] == cfg.model.context_length
    assert parsed["enforce_eager"] is cfg.server.disable_cuda_graph
    assert parsed["dtype"] == cfg.raw["hardware"]["cpu"]["dtype"]
    assert parsed["port"] == cfg.server.port and parsed["seed"] == cfg.raw["server"]["seed"]
    want = (cfg.spec.render.get("vllm") or {}).get("args", {}).get("--speculative-config")
    if want is None:
        assert parsed["speculative"] is None
        return
    for key, value in want.items():
        if key == "synthetic_acceptance_length":  # vLLM resolves a length into per-position rates
            if value is not None:
                rates = parsed["speculative"]["synthetic_acceptance_rates"]
                assert len(rates) == want["num_speculative_tokens"] and 1 + sum(rates) == pytest.approx(value)
            continue
        if value is None:  # not rendered (sweep/compose/render.py): vLLM keeps its default
            assert f'"{key}"' not in launch.args[launch.args.index("--speculative-config") + 1]
            continue
        assert parsed["speculative"][SPEC_KEYS[key]] == value, (key, parsed["speculative"])
    if variant == "per_load":
        from sweep.compose.per_load import budget_at

        assert parsed["speculative"]["num_speculative_tokens"] == max(k for _, _, k in TABLE)
        lookup = got["per_batch_size"]  # vLLM's scheduler's own dense lookup, index = batch size
        assert len(lookup) > 16 and lookup[1:17] == [4, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
        assert all(lookup[b] == budget_at(TABLE, b) for b in range(1, len(lookup))), lookup
    else:
        assert "per_batch_size" not in got


def test_the_checker_really_rejects():
    """An unknown flag, an unknown --speculative-config key and a bad value are each refused."""
    python = vllm_env.require()["server"]
    _, launch = rendered("ngram")
    args = list(launch.args)
    i = args.index("--speculative-config")
    spec = json.loads(args[i + 1])
    bad_key = [*args[:i + 1], json.dumps({**spec, "prompt_lookup_maximum": 4}), *args[i + 2:]]
    bad_value = [*args[:i + 1], json.dumps({**spec, "prompt_lookup_min": 5, "prompt_lookup_max": 2}), *args[i + 2:]]
    bad_table = [*args[:i + 1], json.dumps({**spec, "num_speculative_tokens_per_batch_size": [[2, 4, 2]]}),
                 *args[i + 2:]]
    # a spec whose configuration stops at a CPU limit (CONFIG_LIMITS) still has its keys checked first
    _, limited = rendered("dspark")
    largs = list(limited.args)
    j = largs.index("--speculative-config")
    bad_limited = [*largs[:j + 1], json.dumps({**json.loads(largs[j + 1]), "adaptive_verification": True}),
                   *largs[j + 2:]]
    flag, key, value, table, lim = run_probe([{"argv": [*args, "--no-such-flag"], "env": {}},
                                              {"argv": bad_key, "env": {}}, {"argv": bad_value, "env": {}},
                                              {"argv": bad_table, "env": {}}, {"argv": bad_limited, "env": {}}],
                                             python)
    assert "adaptive_verification" in (lim.get("config_error_full") or "") \
        and CONFIG_LIMITS["dspark"] not in lim["config_error_full"], lim
    assert "--no-such-flag" in (flag["parse_error"] or ""), flag
    assert key["parse_error"] is None and "prompt_lookup_maximum" in (key.get("config_error_full") or ""), key
    assert "prompt_lookup_min" in (value.get("config_error_full") or ""), value
    assert "must start at 1" in (table.get("config_error_full") or ""), table
