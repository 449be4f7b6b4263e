"""Every key a composed config can hold has a rule in the key table (issue 32).

The table (``sweep/compose/keys.py``: ``RULES``) was written before the SLO, the max-load search,
the SLURM options and the engines' install blocks; keys added since were composed and run
unchecked. This test composes every option of every config group (each server with each spec, each
launcher) and walks every key of the result: each must have a rule (its own or a ``*`` pattern's),
or sit under a subtree ``keys.FREE_FORM`` declares with what checks it instead. A key added to a
YAML file without a row in the table -- ``spec.per_load`` tomorrow -- fails here until it gets
one; the bad-input fuzz (tests/faults/test_key_fuzz.py) then draws values for it by its kind.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterator

from sweep.compose import bounds
from sweep.compose.keys import FREE_FORM, RULES

CONF = Path(__file__).resolve().parents[2] / "conf"


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def contexts() -> list[list[str]]:
    """Every option of every group, specs with every server (an engine's specs need it)."""
    out: list[list[str]] = [[]]
    for group in ("hardware", "model", "workload", "launcher"):
        out += [[f"{group}={o}"] for o in _options(group)]
    for server in _options("server"):
        out += [[f"server={server}"]] + [[f"server={server}", f"spec={s}"] for s in _options("spec")]
    return out


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...]) -> Any:
    from omegaconf import OmegaConf

    from sweep.compose import cmdline

    return OmegaConf.to_container(cmdline.compose(list(overrides)), resolve=False)


def leaves(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key of a composed tree a rule must cover (not descending into FREE_FORM subtrees)."""
    if not isinstance(node, dict):
        return
    for k, v in node.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if key in FREE_FORM:
            continue
        rule = bounds.rule_for(key)
        if isinstance(v, dict) and (rule is None or rule.kind == "mapping"):
            if rule is None and not v:
                yield key
            yield from leaves(v, key)
        elif rule is None:
            yield key


def test_every_composed_key_has_a_rule() -> None:
    missing: dict[str, str] = {}
    for ctx in contexts():
        try:
            tree = _composed(tuple(ctx))
        except Exception:  # noqa: BLE001 - a combination Hydra cannot compose has no keys to cover
            continue
        for key in leaves(tree):
            missing.setdefault(key, " ".join(ctx) or "(defaults)")
    assert not missing, "keys without a rule in sweep/compose/keys.py (add one, or a FREE_FORM line):\n" + \
        "\n".join(f"  {k}  (composed with {ctx})" for k, ctx in sorted(missing.items()))


def test_free_form_subtrees_say_what_checks_them() -> None:
    for key, why in FREE_FORM.items():
        assert why.strip(), key
        assert bounds.rule_for(key) is not None, f"{key}: a free-form subtree still needs the rule of its root"


def test_a_new_key_without_a_rule_fails_this_test() -> None:
    """The test's own check: a spec with a key nobody declared (spec.by_batch) is found."""
    tree = {"spec": {"algorithm": "ddtree", "budget": 8, "by_batch": {"1": 8, "64": 2}},
            "server": {"args": {"--anything": 1}}}
    assert sorted(leaves(tree)) == ["spec.by_batch.1", "spec.by_batch.64"]


def test_every_rule_with_a_pattern_resolves() -> None:
    for key in RULES:
        if "*" in key:
            concrete = key.replace("*", "x")
            assert bounds.rule_key_of(concrete) == key, key
