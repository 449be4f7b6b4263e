"""The simulator's command line, built from ``flags.yaml``.

The project rule is that no server flag string lives in Python: the flags
SGLang accepts (and the simulator's own ``--sim-*`` options) are declared
once, with type, default and help, in ``sweep/sim/flags.yaml``. An
undeclared flag fails the way SGLang's argparse fails (usage + error on
stderr, exit status 2), which the launcher classifies as ``bad_flag``.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

FLAGS_FILE = Path(__file__).with_name("flags.yaml")
PROG = "launch_server.py"  # what SGLang's usage line says

_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "json": json.loads}


@lru_cache(maxsize=1)
def declarations() -> dict[str, Any]:
    """The parsed flags.yaml (cached: it is read once per process)."""
    with FLAGS_FILE.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def build_parser() -> argparse.ArgumentParser:
    """An argparse parser with every declared SGLang and --sim-* flag."""
    decl = declarations()
    parser = argparse.ArgumentParser(prog=PROG, description="SGLang stand-in (specsweep simulator)")
    for group_name in ("sglang", "sim"):
        group = parser.add_argument_group(group_name)
        for item in decl[group_name]:
            names = [item["name"], *item.get("aliases", [])]
            kwargs: dict[str, Any] = {"help": item.get("help", ""), "default": item.get("default")}
            if item.get("dest"):
                kwargs["dest"] = item["dest"]
            if item.get("required"):
                kwargs["required"] = True
            kind = item.get("type", "str")
            if kind == "bool":
                kwargs["action"] = "store_true"
                kwargs["default"] = bool(item.get("default", False))
            else:
                kwargs["type"] = _TYPES[kind]
                if item.get("choices"):
                    kwargs["choices"] = item["choices"]
            group.add_argument(*names, **kwargs)
    return parser


@dataclass(frozen=True, slots=True)
class SimArgs:
    """Everything the simulator needs from its argv and environment."""

    ns: argparse.Namespace
    hardware: Mapping[str, Any]
    model: Mapping[str, Any]
    spec: Mapping[str, Any]
    served_model_name: str
    model_path: str
    argv: tuple[str, ...] = field(default_factory=tuple)

    def __getattr__(self, name: str) -> Any:  # convenience: args.port, args.tp_size ...
        return getattr(self.ns, name)


def spec_from(ns: argparse.Namespace, env: Mapping[str, str], model: Mapping[str, Any]) -> dict[str, Any]:
    """The spec dict (algorithm/budget/topk/window/block) the rendered flags describe.

    DDTree: budget from the fork's budget flag, topk from its env knob;
    DFlash: linear, verify width = block; EAGLE-3: tree of num_draft_tokens.
    """
    algo = (ns.speculative_algorithm or "none").lower()
    draft = (model.get("arch") or {}).get("draft") or {}
    block_default = int(draft.get("block_size") or 8)
    topk_env = declarations()["env"]["ddtree_topk"]
    window = ns.speculative_draft_window_size
    if algo == "none":
        return {"algorithm": "none", "budget": None, "topk": None, "window": None, "block": None}
    if algo == "ddtree":
        budget = ns.speculative_ddtree_budget or ns.speculative_num_draft_tokens or 8
        topk = int(env.get(topk_env) or ns.speculative_eagle_topk or 4)
        block = int(ns.speculative_num_draft_tokens or block_default) if ns.speculative_ddtree_budget \
            else block_default  # the drafter's block (DFlash's flag) beside the fork's budget
        return {"algorithm": "ddtree", "budget": int(budget), "topk": max(1, min(topk, int(budget))),
                "window": window, "block": block}
    if algo == "dflash":
        block = int(ns.speculative_num_draft_tokens or block_default)
        return {"algorithm": "dflash", "budget": block, "topk": 1, "window": window, "block": block}
    # EAGLE / EAGLE3 / NEXTN / others: an autoregressive draft tree.
    steps = int(ns.speculative_num_steps or 3)
    topk = int(ns.speculative_eagle_topk or 1)
    budget = int(ns.speculative_num_draft_tokens or (steps + 1))
    return {"algorithm": algo, "budget": budget, "topk": topk, "window": window,
            "block": steps, "num_steps": steps}


def parse(argv: Sequence[str], env: Mapping[str, str] | None = None) -> SimArgs:
    """Parse argv (exits 2 with an argparse error on an unknown flag, like SGLang)."""
    env = os.environ if env is None else env
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    # SGLang 0.5.23 folds the deprecated boolean and the decode backend into one setting;
    # so does the simulator: an eager decode either way (its CUDA-graph quirk is in decode capture).
    ns.disable_cuda_graph = bool(ns.disable_cuda_graph or ns.cuda_graph_backend_decode == "disabled")
    hardware = dict(ns.sim_hardware or {})
    model = dict(ns.sim_model or {})
    model_path = ns.model_path
    served = ns.served_model_name or model_path
    spec = spec_from(ns, env, model)
    if ns.sim_per_load is not None and spec["algorithm"] != "none":
        spec["per_load"] = _per_load(ns.sim_per_load, parser)
    return SimArgs(ns=ns, hardware=hardware, model=model, spec=spec,
                   served_model_name=served, model_path=model_path, argv=tuple(argv))


def _per_load(value: Any, parser: argparse.ArgumentParser) -> list[list[int]]:
    """--sim-per-load checked by the key's own rule (spec.per_load); a bad one is argparse's error, exit 2."""
    from sweep.compose.bounds import check
    from sweep.errors import ConfigError

    try:
        bands = check("spec.per_load", value)
    except ConfigError as exc:
        parser.error(f"argument --sim-per-load: {exc.message}")
    return [list(b) for b in bands]
