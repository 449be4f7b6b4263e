"""YAML from users is input: its alias expansion is bounded before anything builds it.

A "billion laughs" file (``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]`` nine
levels deep) is a few hundred bytes that expand into 10^9 nodes: PyYAML
builds shared objects cheaply, but OmegaConf (Hydra's configs) copies every
alias, so composing such a config ran for minutes and took gigabytes. Here
the file is *composed* -- PyYAML's node graph, where an alias is one shared
node -- and the size it would expand to is counted over that graph (each
node once, memoized), which costs the file's size, not the expansion's. A
file past :data:`MAX_NODES` (or with an alias inside itself) is refused in
one line naming the file.

Called for every config file Hydra reads from a directory -- the files a user
brings with ``--config-dir``/``--config-path`` (:func:`guard_hydra_files`,
installed by :mod:`sweep.compose.config_source` before anything composes) --
and for the YAML files the project reads from users (calibrations: :func:`safe_load`).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from sweep.errors import ConfigError

MAX_NODES = 1_000_000   # expanded scalars + collections: far beyond any real config (ours: ~2,000)
MAX_BYTES = 16 * 1024 * 1024  # one config file


def expanded_size(text: str, where: str) -> int:
    """How many nodes ``text`` expands to with every alias copied; ConfigError past the bound."""
    import yaml

    try:
        roots = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(where, f"not valid YAML{at}: {problem}") from None
    memo: dict[int, int] = {}
    total = 0
    for root in roots:
        if root is not None:
            total += _size(root, memo, set(), where)
            if total > MAX_NODES:
                raise _bomb(where)
    return total


def _bomb(where: str) -> ConfigError:
    return ConfigError(where, f"YAML aliases expand to more than {MAX_NODES:,} nodes (an alias bomb?); "
                       "refused before building it")


def _size(node: Any, memo: dict[int, int], active: set[int], where: str) -> int:
    """Expanded size of ``node``, iteratively (a deep file must not hit the recursion limit)."""
    import yaml

    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        cur, done = stack.pop()
        key = id(cur)
        if key in memo:
            continue
        if isinstance(cur, yaml.ScalarNode):
            memo[key] = 1
            continue
        children = [c for pair in cur.value for c in pair] if isinstance(cur, yaml.MappingNode) else \
            list(cur.value)
        if done:
            active.discard(key)
            size = 1 + sum(memo[id(c)] for c in children)
            if size > MAX_NODES:
                raise _bomb(where)
            memo[key] = size
            continue
        if key in active:
            raise ConfigError(where, "a YAML alias refers to the node that contains it (endless)")
        active.add(key)
        stack.append((cur, True))
        for child in children:
            if id(child) not in memo:
                if id(child) in active:
                    raise ConfigError(where, "a YAML alias refers to the node that contains it (endless)")
                stack.append((child, False))
    return memo[id(node)]


def check_file(path: Path, where: str | None = None) -> None:
    """One YAML file: readable, not huge, aliases bounded (ConfigError naming the file)."""
    name = where or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(name, f"a config file of {size:,} bytes (more than {MAX_BYTES:,}) is refused")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(name, "not a UTF-8 text file") from None
    except OSError as exc:
        raise ConfigError(name, f"cannot read: {exc.strerror or exc}") from None
    try:
        expanded_size(text, name)
        leading_zeros(text, name)
        _constructed(text, name)
    except RecursionError:
        raise ConfigError(name, "nested too deeply to load") from None


LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")


def ambiguous_number(token: str) -> str | None:
    """Why a plain number with a leading zero is refused (None: it is not one). YAML reads ``017``
    as octal 15 and ``09`` as the string "09"; Hydra's command line reads both as 17 and 9: the same
    text meaning two numbers is refused wherever a number is read (config files, overrides)."""
    if not LEADING_ZERO.match(token):
        return None
    digits = token.lstrip("+-").replace("_", "")
    sign = "-" if token.startswith("-") else ""
    yaml_reads = (f"octal {sign}{int(digits, 8)}" if set(digits) <= set("01234567")
                  else f"the string {token!r}")
    return (f"{token} has a leading zero: a config file reads it as {yaml_reads}, the command line as "
            f"{sign}{int(digits)}; write {sign}{int(digits)} (or quote it, '{token}', for a string)")


def leading_zeros(text: str, where: str) -> None:
    """A plain (unquoted) number with a leading zero in a YAML file: ConfigError naming its line."""
    import yaml

    try:
        nodes = [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    except yaml.YAMLError:
        return  # expanded_size named it
    seen: set[int] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            why = ambiguous_number(node.value) if node.style is None else None
            if why:
                raise ConfigError(where, f"line {node.start_mark.line + 1}: {why}")
        elif isinstance(node, yaml.MappingNode):
            stack.extend(c for pair in node.value for c in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _constructed(text: str, where: str) -> None:
    """Build the file as Hydra will (OmegaConf's loader), so a tag it cannot build
    (``!!python/object``) or a key given twice is named with its line, not met inside Hydra."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        OmegaConf.create(text) if text.strip() else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(where, f"not a config Hydra can load{at}: {problem}") from None
    except (OmegaConfBaseException, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(where, f"not a config Hydra can load: {first}") from None


@lru_cache(maxsize=1024)
def _checked(path: str, size: int, mtime_ns: int) -> None:
    check_file(Path(path))


def guard_hydra_files() -> None:
    """Bound every YAML file Hydra loads from a directory (``file://``: the user's configs), in this process.

    Exactly the files a composition reads -- the primary config and the group
    options its defaults pick -- checked once per version of the file, before
    OmegaConf builds them; the configs shipped in the package are not user input.
    """
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    original = FileConfigSource.load_config
    if getattr(original, "_specsweep_guard", False):
        return

    def load_config(self: Any, config_path: str) -> Any:
        full = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        try:
            st = os.stat(full)
        except OSError:
            st = None
        if st is not None:
            _checked(full, st.st_size, st.st_mtime_ns)
        return original(self, config_path)

    load_config._specsweep_guard = True  # type: ignore[attr-defined]
    FileConfigSource.load_config = load_config  # type: ignore[method-assign]


def safe_load(text: str, where: str) -> Any:
    """``yaml.safe_load`` of a user's file, after its expansion was bounded."""
    import yaml

    expanded_size(text, where)
    return yaml.safe_load(text)
