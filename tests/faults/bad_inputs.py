"""Bad command lines, one or more for every key (not a test module).

Shared by ``tests/faults/test_bad_input.py`` and ``benchmarks/fault_matrix.py``.
The cases are generated from the key table itself (``sweep.compose.keys.RULES``:
a wrong type, a value past each bound, a bad boolean or enum, a path or a
name that would escape, a shell-ish injection -- per the key's kind), each
in a context where the key exists (``launcher=ssh`` for the SSH keys,
``server=llamacpp`` for llama.cpp's, ``+key=`` for keys no shipped group
sets), plus the issue's own examples and odd shapes of the override grammar.
What is expected of each: exit status 2, one line ``error: <key>...`` on
stderr, no traceback, nothing started.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sweep.compose import bounds

CONTEXTS: list[list[str]] = [
    [], ["launcher=ssh", "launcher.host=box"], ["launcher=slurm"], ["server=llamacpp"],
    ["server=llamacpp", "spec=llamacpp_ngram"], ["server=llamacpp", "spec=llamacpp_draft"], ["server=vllm"],
]


@dataclass(frozen=True)
class BadInput:
    args: tuple[str, ...]
    key: str  # the key the one line must name (its prefix: `workload.concurrency[0]` names it)
    why: str

    @property
    def label(self) -> str:
        return " ".join(self.args)

    def argv(self, *first: str) -> list[str]:
        """The command line with ``first`` overrides before the case's own (which win over them)."""
        flags = [a for a in self.args if a.startswith("-") and "=" not in a]
        return [*flags, *first, *(a for a in self.args if a not in flags)]


# The issue's examples (section 5) and grammar oddities, with the key each must name.
ISSUE: list[BadInput] = [
    BadInput(("objective.metric=foo",), "objective.metric", "bad enum"),
    BadInput(("launcher.keep_server=maybe",), "launcher.keep_server", "non-boolean"),
    BadInput(("mlflow.enabled=maybe",), "mlflow.enabled", "non-boolean"),
    BadInput(("workload.ignore_eos=maybe",), "workload.ignore_eos", "non-boolean"),
    BadInput(("workload.flush_cache=maybe",), "workload.flush_cache", "non-boolean"),
    BadInput(("model.trust_remote_code=no",), "model.trust_remote_code", "non-boolean"),
    BadInput(("server.host=not a host",), "server.host", "host syntax"),
    BadInput(("workload.concurrency=[100000000]",), "workload.concurrency", "upper bound"),
    BadInput(("workload.requests_per_cell=1000000000",), "workload.requests_per_cell", "upper bound"),
    BadInput(("spec.budget=1000000",), "spec.budget", "upper bound"),
    BadInput(("=5",), "overrides", "grammar"),
    BadInput(("hardware.memory_gb=abc",), "hardware.memory_gb", "wrong type"),
    BadInput(("-m", "hydra/sweeper=optuna", "spec.budget=choice(4,-1)"), "spec.budget", "search space"),
    BadInput(("-m", "hydra/sweeper=optuna", "hydra.sweeper.params={spec.topk: 'choice(1,2000)'}"),
             "spec.topk", "search space"),
    BadInput(("-m", "hydra/sweeper=optuna", "spec=choice(ddtree,nope)"), "spec", "search space"),
    BadInput(("launcher=ssh", "launcher.host=box", "launcher.unit=../../X"), "launcher.unit", "path escape"),
    BadInput(("launcher=ssh", "launcher.host=box", "launcher.unit=evil$(id);x.service"), "launcher.unit",
             "unit-name grammar"),
    BadInput(("launcher=ssh", "launcher.host=box", "launcher.unit='evil$(id);x.service'"), "launcher.unit",
             "unit-name grammar"),
    BadInput(("dry_run=maybe",), "dry_run", "non-boolean"),
    BadInput(("-m", "spec.budget=8,0"), "spec.budget", "a grid job"),
    BadInput(("hardware.name=../../etc/x",), "hardware.name", "path escape"),
    BadInput(("launcher=ssh", "launcher.host='-oProxyCommand=id'"), "launcher.host", "option injection"),
    BadInput(("launcher=ssh", "launcher.host=box", "launcher.unit_dir=/etc/../tmp"), "launcher.unit_dir",
             "path escape"),
    BadInput(("launcher=ssh", "launcher.host=box", "launcher.workdir=relative"), "launcher.workdir", "path"),
    BadInput(("launcher.hosts=[{server_port: 0}]",), "launcher.hosts", "pool entry"),
    BadInput(("launcher.hosts=[{reap_grace_s: maybe}]",), "launcher.hosts", "pool entry"),
    BadInput(("launcher=slurm", "launcher.sbatch.partiton=gpu"), "launcher.sbatch.partiton",
             "unknown sbatch option"),
    BadInput(("launcher=slurm", "launcher.sbatch.time=1", "launcher.signal_s=120"), "launcher.signal_s",
             "across keys"),
    BadInput(("launcher=slurm", "launcher.hosts=[{server_port: 31001}]"), "launcher.hosts",
             "no pool on slurm"),
    BadInput(("spec=nope",), "spec", "unknown option"),
    BadInput(("spec.bugdet=8",), "spec.bugdet", "unknown key"),
    BadInput(("spec.budget=8,",), "spec.budget", "grammar"),
    BadInput(("spec.budget=[",), "spec.budget", "grammar"),
    BadInput(("workload.contexts=[60]", "workload.max_tokens=262144"), "workload.contexts", "across keys"),
    BadInput(("spec.topk=16",), "spec.topk", "across keys"),
    BadInput(("-m", "spec.budget=glob(*)"), "spec.budget", "glob over a value"),
    BadInput(("-m", "hardware=glob(zz*)"), "hardware", "glob matching nothing"),
    BadInput(("-m", "hardware=glob(pro6000_*)", "spec.budget=0"), "spec.budget", "a grid job (glob)"),
    BadInput(("-m", "hydra.run.dir=a,b"), "hydra.run.dir", "a sweep of Hydra's settings"),
    BadInput(("-m", "hydra/sweeper=basic,optuna"), "hydra/sweeper", "a sweep of Hydra's settings"),
    BadInput(("-m", "--cfg=job"), "--multirun", "exclusive flags"),
    BadInput(("--run", "--multirun"), "--run", "exclusive flags"),
]


def _lookup(tree: Any, key: str) -> bool:
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@functools.lru_cache(maxsize=None)
def _composed(i: int) -> Any:
    from omegaconf import OmegaConf

    from sweep.compose import cmdline

    return OmegaConf.to_container(cmdline.compose(CONTEXTS[i]), resolve=False)


def _where(key: str) -> tuple[list[str], str]:
    """(context overrides, the override's key: ``+key`` when no shipped group sets it).

    Hydra's keys: the sweeper's with the Optuna sweeper, the sweep's in a multirun."""
    if key.startswith("hydra.sweeper."):
        return ["-m", "hydra/sweeper=optuna"], key
    if key.startswith("hydra.sweep."):
        return ["-m"], key
    if key.startswith("hydra."):
        return [], key
    for i, context in enumerate(CONTEXTS):
        if _lookup(_composed(i), key):
            return context, key
    return [], f"+{key}"


def _child(key: str) -> str:
    """A concrete key for a pattern (``x.*``, ``x.*.y``): an existing child for each ``*`` if any."""
    if "*" not in key:
        return key
    parts = key.split(".")
    for i in range(len(CONTEXTS)):
        node: Any = _composed(i)
        out: list[str] = []
        for part in parts:
            if not isinstance(node, dict):
                break
            if part == "*":
                rest = parts[len(out) + 1:]
                names = [k for k, v in node.items() if not rest or (isinstance(v, dict) and rest[0] in v)] \
                    or [k for k, v in node.items() if not rest or isinstance(v, dict)]
                if not names:
                    break
                part = str(names[0])
            if part not in node and len(out) < len(parts) - 1:
                break
            out.append(part)
            node = node.get(part) if isinstance(node, dict) else None
        if len(out) == len(parts):
            return ".".join(out)
    return ".".join("specsweep_test" if p == "*" else p for p in parts)


def _values(rule: bounds.Rule, full: bool) -> list[tuple[str, str]]:
    """(override value text, why) that the rule must refuse."""
    num = bounds._fmt
    kind = rule.kind
    if kind in ("int", "float"):
        out = [(num(rule.hi * 10 + 1), "above the upper bound")] if rule.hi is not None else []
        out += [("abc", "wrong type")]
        if rule.lo is not None and (full or not out):
            out.append((num(rule.lo - 1), "below the lower bound"))
        if rule.lo is not None and rule.lo_open:
            out.insert(0, (num(rule.lo), "at the open lower bound"))
        if kind == "int" and full:
            out.append(("1.5", "not an integer"))
        return out if full else out[:1]
    table: dict[str, list[tuple[str, str]]] = {
        "bool": [("maybe", "non-boolean"), ("no", "non-boolean"), ("1", "non-boolean")],
        "enum": [("bogus", "bad enum"), ("'$(reboot)'", "injection")],
        "name": [("'../../x'", "path escape"), ("'a b;id'", "injection")],
        "str": [("[a,b]", "wrong type"), ("{a: 1}", "wrong type")],
        "strs": [("{a: 1}", "wrong type")],
        "enums": [("[bogus]", "not one of the choices"), ("{a: 1}", "wrong type")],
        "paths": [("{a: 1}", "wrong type")],
        "path": [("[a,b]", "wrong type")],
        "host": [("'not a host'", "host syntax"), ("'$(id)'", "injection")],
        "ssh_host": [("'-oProxyCommand=id'", "option injection"), ("'a b'", "host syntax")],
        "user": [("'root;id'", "injection")],
        "gateway": [("'a b'", "hop syntax")],
        "unit": [("../../X", "path escape"), ("'evil$(id);x.service'", "injection")],
        "abspath": [("relative/dir", "not absolute"), ("/etc/../tmp", "path escape")],
        "remote_dir": [("relative", "not absolute")],
        "uri": [("'a b'", "spaces"), ("'notascheme://x'", "no MLflow store")],
        "url_path": [("health", "no leading /")],
        "cpus": [("'0-1;id'", "injection"), ("'1-'", "core-list syntax")],
        "url_paths": [("[health]", "no leading /")],
        "ints": [("[100000000000]", "above the upper bound"), ("[0]", "below the lower bound"), ("[abc]", "wrong type")],
        "floats": [("[2]", "above the upper bound"), ("abc", "wrong type")],
        "mapping": [("5", "wrong type")],
        "list": [("5", "wrong type")],
        "figure": [("-1", "negative"), ("'a b'", "wrong type")],
        "slurm_time": [("2h", "time syntax"), ("'1:2:3:4'", "time syntax")],
        "gres": [("'gpu 8'", "gres syntax"), ("'gpu:8;id'", "injection")],
        "slurm_mem": [("64GB", "memory syntax")],
        "slurm_constraint": [("'a b'", "spaces"), ("'x$(id)'", "injection")],
        "sbatch_args": [("['--x y']", "spaces"), ("[partition=gpu]", "not an option")],
        "lines": [("{a: 1}", "wrong type")],
        "file": [("/dev/zero", "special file"), ("/nonexistent/specsweep-x", "missing file"),
                 ("/etc/hostname", "not what it claims")],
        "outdir": [("/proc/specsweep-x", "pseudo filesystem"), ("/etc/hostname/x", "not a directory")],
        "subpath": [("../../x", "path escape"), ("/tmp/x", "absolute")],
        "storage": [("notaurl", "malformed URL"), ("sqlite:////proc/x/a.db", "unwritable"),
                    ("'postgresql+psycopg://u@127.0.0.1:1/db'", "unreachable")],
        "directions": [("sideways", "bad enum"), ("[maximize,up]", "bad enum")],
        "cells": [("[[512]]", "not a pair"), ("[[0,1]]", "below the lower bound"), ("5", "wrong type")],
        "per_load": [("[[2,4,4]]", "not starting at 1"), ("[[1,4,4],[3,8,2]]", "overlapping bands"),
                     ("[[1,8,-1]]", "negative budget"), ("5", "wrong type")],
    }
    values = table[kind]
    return values if full else values[:1]


def generated(full: bool = False) -> list[BadInput]:
    """Bad values for every key of the table (``full``: every bad class of its kind)."""
    out = []
    for rule_key, rule in bounds.RULES.items():
        key = _child(rule_key)
        context, target = _where(key)
        for value, why in _values(rule, full):
            out.append(BadInput((*context, f"{target}={value}"), key, why))
    return out


def cases(full: bool = False) -> list[BadInput]:
    return ISSUE + generated(full)
