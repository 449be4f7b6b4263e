"""The one table of key types and bounds (sweep/compose/keys.py) covers every key a group ships."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from _support import ROOT
from omegaconf import OmegaConf

from sweep.compose import bounds, cmdline
from sweep.errors import ConfigError

GROUPS = ("hardware", "spec", "model", "server", "launcher", "workload")


def _leaves(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix


def _covered(key: str) -> bool:
    """A rule for the key, for its parent's children (``x.*``), or a free-form mapping above it."""
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        rule = bounds.RULES.get(head)
        if rule is not None:
            return i == len(parts) or rule.kind == "mapping"
        if i == len(parts) and bounds.RULES.get(".".join(parts[:i - 1]) + ".*") is not None:
            return True
    return False


def test_every_shipped_key_has_its_rule() -> None:
    missing = set()
    for group in GROUPS:
        for option in sorted((ROOT / "conf" / group).glob("*.yaml")):
            cfg = OmegaConf.to_container(cmdline.compose([f"{group}={option.stem}"]), resolve=False)
            missing |= {k for k in _leaves(cfg) if not _covered(k)}
    assert not missing, f"keys without a rule in sweep/compose/bounds.py: {sorted(missing)}"


def test_every_shipped_option_passes_its_rules() -> None:
    import sweep.compose.resolvers  # noqa: F401  (${sweep.*})

    from omegaconf.errors import InterpolationKeyError

    for group in GROUPS:
        for option in sorted((ROOT / "conf" / group).glob("*.yaml")):
            try:
                cfg = OmegaConf.to_container(cmdline.compose([f"{group}={option.stem}"]), resolve=True)
            except InterpolationKeyError:  # a llama.cpp option: needs the llama.cpp groups
                cfg = OmegaConf.to_container(cmdline.compose(["server=llamacpp", f"{group}={option.stem}"]),
                                             resolve=True)
            assert isinstance(cfg, dict)
            bounds.check_config(cfg)


def test_the_docs_table_is_generated_from_the_rules() -> None:
    assert (ROOT / "docs" / "config-keys.md").read_text() == bounds.markdown(), \
        "regenerate: python -c 'from sweep.compose.bounds import markdown; print(markdown(), end=\"\")' " \
        "> docs/config-keys.md"


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "gpu-b300.example.com",
                                  "0.0.0.0", "box1."])
def test_hosts_that_are_hosts(host: str) -> None:
    assert bounds.check("server.host", host) == host


@pytest.mark.parametrize("host", ["not a host", "-box", "box-", "a..b", "x" * 64, "box;id", "$(id)",
                                  "box/../x", "", "ä.example"])
def test_hosts_that_are_not(host: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.host"):
        bounds.check("server.host", host)


@pytest.mark.parametrize("unit, ok", [
    ("sglang-sweep.service", True), ("sglang-sweep", True), ("sglang@k26.service", True),
    ("../../X", False), ("evil$(id);x.service", False), ("-x.service", False), (".service", False),
    ("a/b.service", False), ("a b.service", False), ("x" * 250 + ".service", False),
])
def test_systemd_unit_names(unit: str, ok: bool) -> None:
    if ok:
        assert bounds.check("launcher.unit", unit) == unit
    else:
        with pytest.raises(ConfigError, match=r"launcher\.unit: must be a systemd unit name"):
            bounds.check("launcher.unit", unit)


def test_search_space_values_use_the_same_rules() -> None:
    from sweep.compose.search_space import check_values, space_of

    space = space_of({"spec.budget": "choice(4, 8)"}, ["spec.topk=range(1,5)", "spec.window=interval(512,4096)"])
    assert space == {"spec.budget": [4, 8], "spec.topk": [1, 2, 3, 4], "spec.window": [512.0, 4096.0]}
    check_values(space)
    with pytest.raises(ConfigError, match=r"spec\.budget: must be in \[1, 1024\].*got -1 \(a value of its search space\)"):
        check_values(space_of({"spec.budget": "choice(4,-1)"}, []))
    with pytest.raises(ConfigError, match=r"workload\.ignore_eos: must be true or false"):
        check_values(space_of({}, ["workload.ignore_eos=choice(true,maybe)"]))


def test_unit_dir_and_workdir_are_paths_on_the_box(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"launcher\.unit_dir: must be an absolute path without '\.\.'"):
        bounds.check("launcher.unit_dir", "/etc/systemd/../../tmp")
    with pytest.raises(ConfigError, match=r"launcher\.workdir: must be an absolute path or ~/<dir>"):
        bounds.check("launcher.workdir", "relative/dir")
    with pytest.raises(ConfigError, match=r"launcher\.state_dir: must not contain newlines"):
        bounds.check("launcher.state_dir", f"{tmp_path}/a\nb")


def test_the_optuna_sweeper_refuses_a_bad_space_before_the_study() -> None:
    """The sweeper's own call (for apps without the command-line check): it raises, the boundary prints."""
    from hydra_plugins.specsweep_optuna_sweeper import _impl, _space

    _impl._refuse_bad_values(_space.parse({"spec.budget": "choice(4, 8)"}, ["spec.window=interval(512, 4096)"]))
    with pytest.raises(ConfigError) as info:
        _impl._refuse_bad_values(_space.parse({"spec.budget": "choice(4, -1)"}, []))
    assert info.value.exit_code == 2
    assert info.value.one_line() == ("error: spec.budget: must be in [1, 1024] (draft tokens per step), "
                                     "got -1 (a value of its search space)")
