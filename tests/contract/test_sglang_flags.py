"""Every SGLang launch the project renders is accepted by SGLang's real parser.

For each hardware option x spec option (conf/hardware/*.yaml x
conf/spec/*.yaml), with server=sglang and with server=sim, the launch is
rendered through the project itself (compose -> from_omegaconf -> render)
and checked against SGLang's own argparse parser (sglang pinned in
tests/sglang_compat.py):

(a) every flag emitted is an option string of that parser, compared by FULL
    name: argparse accepts unambiguous prefixes, so parse_args alone would
    let ``--speculative-draft-window`` through;
(b) parse_args on the argv minus the fork-only flags (tests/contract/
    fork_only.yaml, the one list of DDTree-fork flags) succeeds, and the
    parsed values are the ones rendered (tp_size, speculative_algorithm, ...).

The simulator's argv must pass the same check once its ``--sim-*`` flags are
dropped: it accepts SGLang's flags, so it must not invent SGLang-looking ones.

(The rule that no flag is spelled in Python is tests/contract/test_flags_in_yaml.py,
which needs no sglang.)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import pytest
import yaml

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import sglang_compat  # noqa: E402

pytestmark = pytest.mark.contract

FORK_ONLY_FILE = Path(__file__).with_name("fork_only.yaml")
SIM_PREFIX = "--sim-"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


# GPU boxes and the specs that have an SGLang form (hardware=cpu and spec=llamacpp_*
# are llama.cpp's: tests/contract/test_llamacpp_flags.py).
HARDWARE = sorted(p.stem for p in (ROOT / "conf" / "hardware").glob("*.yaml")
                  if _yaml(p).get("num_gpus", 1) > 0)
SPECS = sorted(p.stem for p in (ROOT / "conf" / "spec").glob("*.yaml")
               if "sglang" in (_yaml(p).get("render") or {}))
# model.draft_paths.eagle3 is null in conf/model (no public EAGLE-3 head for
# the model) and it has no EAGLE-1 head; a real server launch needs a path, so
# give one. (spec=mtp and spec=dspark draft from the target checkpoint: no path.)
DRAFT_OVERRIDES = ["model.draft_paths.eagle3=/models/eagle3", "+model.draft_paths.eagle=/models/eagle"]

# Which parsed destination carries which spec field, per spec option.
# (--speculative-ddtree-budget is fork-only: checked on the argv instead.)
SPEC_DESTS: dict[str, dict[str, str]] = {
    "ddtree": {"speculative_draft_window_size": "window"},
    "dflash": {"speculative_num_draft_tokens": "block", "speculative_draft_window_size": "window"},
    "eagle3": {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "topk",
               "speculative_num_draft_tokens": "budget"},
    "eagle": {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "topk",
              "speculative_num_draft_tokens": "budget"},
    "mtp": {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "topk",
            "speculative_num_draft_tokens": "budget"},
    "dspark": {"speculative_num_draft_tokens": "block", "speculative_eagle_topk": "topk"},
    "ngram": {"speculative_num_draft_tokens": "budget"},
    "none": {},
}


# --------------------------------------------------------------------------- checker


@lru_cache(maxsize=1)
def fork_only() -> dict[str, Any]:
    data = yaml.safe_load(FORK_ONLY_FILE.read_text())
    return {"flags": list(data.get("flags") or []),
            "values": {k: list(v) for k, v in (data.get("values") or {}).items()},
            "env": list(data.get("env") or [])}


def flag_groups(args: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``[(flag, [values...]), ...]``: each ``--flag`` with the words after it
    up to the next ``--flag`` (``--flag=value`` is split)."""
    groups: list[tuple[str, list[str]]] = []
    for word in args:
        if word.startswith("--") and word != "--":
            name, eq, value = word.partition("=")
            groups.append((name, [value] if eq else []))
        elif groups:
            groups[-1][1].append(word)
        else:
            groups.append(("", [word]))  # a positional before any flag
    return groups


@dataclass
class Report:
    unknown: list[str] = field(default_factory=list)        # not an upstream option string
    bad_values: list[str] = field(default_factory=list)     # value upstream does not know
    parse_error: str | None = None
    mismatches: list[str] = field(default_factory=list)     # parsed value != rendered value
    deprecated: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)        # fork-only / --sim-* flags
    upstream_argv: list[str] = field(default_factory=list)
    namespace: argparse.Namespace | None = None

    warnings: list[str] = field(default_factory=list)       # what SGLang's parser logged

    @property
    def ok(self) -> bool:
        return not (self.unknown or self.bad_values or self.parse_error or self.mismatches
                    or self.deprecated or self.warnings)

    def explain(self) -> str:
        parts = []
        if self.unknown:
            parts.append(f"flags unknown to sglang {sglang_compat.installed_version()}: {self.unknown} "
                         f"(fork-only flags belong in {FORK_ONLY_FILE.relative_to(ROOT)})")
        if self.bad_values:
            parts.append(f"values upstream does not know: {self.bad_values}")
        if self.parse_error:
            parts.append(f"parse_args failed: {self.parse_error}")
        if self.mismatches:
            parts.append(f"parsed values differ from rendered ones: {self.mismatches}")
        if self.deprecated:
            parts.append(f"deprecated in sglang {sglang_compat.installed_version()}: {self.deprecated} "
                         "(render the current flag in the YAML)")
        if self.warnings:
            parts.append(f"sglang's parser warned: {self.warnings}")
        return "; ".join(parts) + f"\nupstream argv: {self.upstream_argv}"


def _expected(action: argparse.Action, values: list[str]) -> tuple[bool, Any]:
    """What argparse should store for these rendered words (checked?, value)."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                           argparse._StoreConstAction)):
        return True, action.const
    if type(action) is argparse._StoreAction and action.nargs is None and len(values) == 1:
        conv = action.type or str
        return True, conv(values[0])
    if type(action) is argparse._StoreAction and action.nargs in ("+", "*"):
        conv = action.type or str
        return True, [conv(v) for v in values]
    return False, None


def check_upstream(args: Sequence[str], *, drop_prefixes: Sequence[str] = ()) -> Report:
    """Check rendered server args (no executable) against SGLang's parser."""
    fork = fork_only()
    known = sglang_compat.parser_flag_names()
    rep = Report()
    kept: list[tuple[str, list[str]]] = []
    for name, values in flag_groups(args):
        if name in fork["flags"] or any(name.startswith(p) for p in drop_prefixes):
            rep.dropped.append(name)
            continue
        if name not in known:
            rep.unknown.append(name or f"positional {values!r}")
            continue
        action = sglang_compat.parser_action(name)
        if type(action).__name__.startswith("Deprecated"):
            rep.deprecated.append(name)
        if name == "--speculative-algorithm":
            for v in values:
                if not (sglang_compat.builtin_speculative_algorithm(v)
                        or v in fork["values"].get(name, [])):
                    rep.bad_values.append(f"{name} {v}")
        kept.append((name, values))
    rep.upstream_argv = [w for name, values in kept for w in (name, *values)]
    if rep.unknown:
        return rep
    try:
        ns, rep.warnings = sglang_compat.parse_logged(rep.upstream_argv)
    except sglang_compat.ParseError as exc:
        rep.parse_error = str(exc)
        return rep
    rep.namespace = ns
    for name, values in kept:
        action = sglang_compat.parser_action(name)
        checked, want = _expected(action, values)
        if checked and getattr(ns, action.dest) != want:
            rep.mismatches.append(f"{name} {values} -> {action.dest}={getattr(ns, action.dest)!r}, "
                                  f"expected {want!r}")
    return rep


# --------------------------------------------------------------------------- rendering


@lru_cache(maxsize=None)
def rendered(server: str, hardware: str, spec: str, extra: tuple[str, ...] = ()):
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    cfg = from_omegaconf(compose([f"server={server}", f"hardware={hardware}", f"spec={spec}",
                                  *DRAFT_OVERRIDES, *extra]))
    return cfg, render(cfg)


def assert_upstream_ok(args: Sequence[str], *, drop_prefixes: Sequence[str] = ()) -> Report:
    """Accepted, as rendered, with no deprecated flag and no warning from SGLang's parser."""
    rep = check_upstream(args, drop_prefixes=drop_prefixes)
    assert rep.ok, rep.explain()
    return rep


def assert_values(cfg, rep: Report, args: Sequence[str]) -> None:
    """The parsed namespace carries the trial's own values."""
    ns = rep.namespace
    assert ns is not None
    hw, model, server, spec = cfg.hardware, cfg.model, cfg.server, cfg.spec
    want = {
        "model_path": model.path, "served_model_name": model.served_name,
        "context_length": model.context_length, "trust_remote_code": model.trust_remote_code,
        "tp_size": hw.tp, "ep_size": hw.ep, "dp_size": hw.dp,
        "host": server.host, "port": server.port,
        "enable_metrics": server.enable_metrics, "skip_server_warmup": server.skip_server_warmup,
    }
    if spec.algorithm == "none":
        want["speculative_algorithm"] = None
        want["speculative_draft_model_path"] = None
    else:
        want["speculative_algorithm"] = (spec.render["sglang"]["args"].get("--speculative-algorithm")
                                         or spec.algorithm.upper())
        want["speculative_draft_model_path"] = model.draft_paths[spec.draft_family] if spec.draft_family else None
    for dest, spec_field in SPEC_DESTS[spec.algorithm].items():
        want[dest] = getattr(spec, spec_field)
    got = {k: getattr(ns, k) for k in want}
    assert got == want
    if spec.algorithm == "ddtree":
        # Fork-only: not parsed upstream, so check the rendered words.
        words = list(args)
        i = words.index("--speculative-ddtree-budget")
        assert words[i + 1] == str(spec.budget)
        assert "--speculative-ddtree-budget" in rep.dropped


GRID = [(hw, sp) for hw in HARDWARE for sp in SPECS]


@pytest.fixture(scope="module", autouse=True)
def _sglang():
    sglang_compat.require_sglang()


def test_grid_is_complete():
    assert len(HARDWARE) >= 5 and set(SPECS) >= {"none", "dflash", "ddtree", "eagle3"}
    assert set(SPECS) == set(SPEC_DESTS), "add the new spec's parsed destinations to SPEC_DESTS"


@pytest.mark.parametrize("hardware,spec", GRID)
def test_sglang_launch_matches_upstream_parser(hardware, spec):
    cfg, launch = rendered("sglang", hardware, spec)
    assert list(launch.executable[-2:]) == ["-m", "sglang.launch_server"]
    rep = assert_upstream_ok(launch.args)
    assert not rep.deprecated, f"rendered by default but deprecated upstream: {rep.deprecated}"
    assert set(rep.dropped) <= set(fork_only()["flags"])
    assert_values(cfg, rep, launch.args)


@pytest.mark.parametrize("hardware,spec", GRID)
def test_sim_launch_matches_upstream_parser(hardware, spec):
    cfg, launch = rendered("sim", hardware, spec)
    assert cfg.server.simulated
    assert all(k.startswith(SIM_PREFIX) for k in cfg.server.sim_args), \
        "server.sim_args may only hold --sim-* flags (the rest must be SGLang's)"
    rep = assert_upstream_ok(launch.args, drop_prefixes=[SIM_PREFIX])
    assert not rep.deprecated
    assert_values(cfg, rep, launch.args)
    # The simulator is handed every SGLang flag the real server would get.
    _, real = rendered("sglang", hardware, spec)
    sim_flags = {n for n, _ in flag_groups(launch.args) if not n.startswith(SIM_PREFIX)}
    assert sim_flags == {n for n, _ in flag_groups(real.args)}


def test_optional_server_flags_match_upstream_parser():
    """Flags that are off by default: memory, batching, cuda graphs, api key."""
    cfg, launch = rendered("sglang", "b300", "ddtree", (
        "server.mem_fraction_static=0.85", "server.max_running_requests=64",
        "server.disable_cuda_graph=true", "server.skip_server_warmup=false",
        "server.api_key=sk-test"))
    rep = assert_upstream_ok(launch.args)  # no deprecated flag, no parser warning
    ns = rep.namespace
    assert (ns.mem_fraction_static, ns.max_running_requests, ns.api_key) == (0.85, 64, "sk-test")
    assert ns.skip_server_warmup is False
    # server.disable_cuda_graph=true is 0.5.23's current spelling, both phases eager
    # (its --disable-cuda-graph is deprecated in favour of these)
    assert (ns.cuda_graph_backend_decode, ns.cuda_graph_backend_prefill) == ("disabled", "disabled")
    _, default = rendered("sglang", "b300", "ddtree")
    assert check_upstream(default.args).namespace.cuda_graph_backend_decode is None


def test_checker_reports_deprecated_flags_and_parser_warnings():
    """A deprecated spelling fails the contract, by its action and by what the parser logs."""
    _, launch = rendered("sglang", "b300", "ddtree", ("server.extra_args=[--disable-cuda-graph]",))
    rep = check_upstream(launch.args)
    assert rep.deprecated == ["--disable-cuda-graph"] and not rep.ok
    assert any("--disable-cuda-graph" in w and "deprecated" in w for w in rep.warnings), rep.warnings
    with pytest.raises(AssertionError, match="deprecated"):
        assert_upstream_ok(launch.args)


# --------------------------------------------------------------------------- the checker can fail


def test_checker_reports_unknown_flag_from_renderer():
    _, launch = rendered("sglang", "b300", "dflash", ("server.extra_args=[--no-such-flag]",))
    assert launch.args[-1] == "--no-such-flag"
    rep = check_upstream(launch.args)
    assert rep.unknown == ["--no-such-flag"] and not rep.ok
    with pytest.raises(AssertionError, match="--no-such-flag"):
        assert_upstream_ok(launch.args)


def test_checker_reports_unknown_flag_in_sim_argv():
    _, launch = rendered("sim", "h200", "none", ("server.extra_args=[--no-such-flag]",))
    assert check_upstream(launch.args, drop_prefixes=[SIM_PREFIX]).unknown == ["--no-such-flag"]


def test_checker_compares_full_names_not_prefixes():
    # argparse itself takes the prefix ...
    ns = sglang_compat.parse(["--model-path", "m", "--speculative-draft-window", "64"])
    assert ns.speculative_draft_window_size == 64
    # ... the contract check does not.
    _, launch = rendered("sglang", "h200", "dflash",
                         ("server.extra_args=[--speculative-draft-window,64]",))
    rep = check_upstream(launch.args)
    assert rep.unknown == ["--speculative-draft-window"]


def test_checker_reports_unknown_algorithm_value():
    rep = check_upstream(["--model-path", "m", "--speculative-algorithm", "DDTRE"])
    assert rep.bad_values == ["--speculative-algorithm DDTRE"] and not rep.ok
    assert check_upstream(["--model-path", "m", "--speculative-algorithm", "DDTREE"]).ok


def test_checker_reports_parse_errors():
    rep = check_upstream(["--model-path", "m", "--tp-size", "eight"])
    assert rep.parse_error and "--tp-size" in rep.parse_error
    # --model-path (alias --model) is the one required option of 0.5.23.
    rep = check_upstream(["--tp-size", "8"])
    assert rep.parse_error and "--model-path" in rep.parse_error


def test_checker_reports_dest_collisions():
    # Two spellings of one destination: the later one wins, the earlier
    # rendered value is silently lost.
    rep = check_upstream(["--model-path", "m", "--tp-size", "8", "--tensor-parallel-size", "4"])
    assert rep.mismatches and "tp_size" in rep.mismatches[0]


# --------------------------------------------------------------------------- fork-only list stays honest


def test_fork_only_list_is_really_unknown_upstream():
    fork = fork_only()
    assert fork["flags"], "fork_only.yaml lists no flags"
    known = sglang_compat.parser_flag_names()
    merged = [f for f in fork["flags"] if f in known]
    assert not merged, f"upstream sglang now has {merged}: remove them from {FORK_ONLY_FILE.name}"
    for flag, values in fork["values"].items():
        assert flag in known, f"{flag} (fork_only.yaml values) is not an upstream flag"
        if flag == "--speculative-algorithm":
            merged = [v for v in values if sglang_compat.builtin_speculative_algorithm(v)]
            assert not merged, f"upstream sglang now knows algorithm {merged}: update fork_only.yaml"
        # upstream accepts the value as a plain string
        for v in values:
            assert getattr(sglang_compat.parse(["--model-path", "m", flag, v]),
                           sglang_compat.parser_action(flag).dest) == v


def test_fork_only_flags_are_rendered_only_by_fork_specs():
    """Only spec=ddtree may emit fork-only flags, values or env."""
    fork = fork_only()
    for hw in HARDWARE[:1]:
        for sp in SPECS:
            _, launch = rendered("sglang", hw, sp)
            groups = flag_groups(launch.args)
            uses = ({n for n, _ in groups if n in fork["flags"]}
                    | {f"{n} {v}" for n, vs in groups for v in vs if v in fork["values"].get(n, [])}
                    | {k for k in launch.env if k in fork["env"]})
            assert bool(uses) == (sp == "ddtree"), (sp, uses)


# --------------------------------------------------------------------------- protocol models


def test_protocol_models_import_and_know_our_request_fields():
    pr = sglang_compat.protocol()
    chat = pr.ChatCompletionRequest
    # SGLang's request models ignore unknown fields (pydantic's default), so a
    # misspelt field would be dropped silently: check the names exist.
    for name in ("model", "messages", "max_tokens", "temperature", "stream", "stream_options",
                 "ignore_eos", "return_meta_info"):
        assert name in chat.model_fields, name
    req = chat(model="kimi-k2.6", messages=[{"role": "user", "content": "hi"}], max_tokens=8,
               temperature=0.0, stream=True, stream_options={"include_usage": True},
               ignore_eos=True, return_meta_info=True)
    assert req.return_meta_info is True and req.ignore_eos is True
    assert "ignore_eos" in pr.CompletionRequest.model_fields
