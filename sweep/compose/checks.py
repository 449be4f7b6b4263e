"""Value checks for the typed config: each failure is one ConfigError.

Every check takes the node, its dotted path and the key, so the message
names the full key (``spec.budget``) and the allowed range or values.
"""

from __future__ import annotations

from typing import Any, Mapping

from sweep.errors import ConfigError


def get(node: Mapping[str, Any], path: str, key: str) -> Any:
    if key not in node:
        raise ConfigError(f"{path}.{key}", "is missing")
    return node[key]


def int_(node: Mapping[str, Any], path: str, key: str, *, lo: int | None = None,
         hi: int | None = None, optional: bool = False, what: str = "") -> int | None:
    full = f"{path}.{key}"
    value = node.get(key)
    if value is None:
        if optional:
            return None
        raise ConfigError(full, "is required (an integer)")
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise ConfigError(full, f"must be an integer, got {value!r}")
    range_check(full, value, lo, hi, what)
    return value


def range_check(full: str, value: float, lo: float | None, hi: float | None, what: str) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        lo_s = "" if lo is None else f"{lo}"
        hi_s = "" if hi is None else f"{hi}"
        rng = f">= {lo_s}" if hi is None else (f"<= {hi_s}" if lo is None else f"in [{lo_s}, {hi_s}]")
        suffix = f" ({what})" if what else ""
        raise ConfigError(full, f"must be {rng}{suffix}, got {value}")


def float_(node: Mapping[str, Any], path: str, key: str, *, lo: float | None = None,
           optional: bool = False) -> float | None:
    full = f"{path}.{key}"
    value = node.get(key)
    if value is None:
        if optional:
            return None
        raise ConfigError(full, "is required (a number)")
    if isinstance(value, bool):
        raise ConfigError(full, f"must be a number, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ConfigError(full, f"must be a number, got {value!r}") from None
    range_check(full, f, lo, None, "")
    return f


def bool_(node: Mapping[str, Any], path: str, key: str) -> bool:
    value = node.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{path}.{key}", f"must be true or false, got {value!r}")
    return value


def int_list(node: Mapping[str, Any], path: str, key: str, *, lo: int, hi: int | None = None,
              what: str = "") -> tuple[int, ...]:
    full = f"{path}.{key}"
    value = node.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(full, f"must be a non-empty list of integers, got {value!r}")
    out = []
    for i, item in enumerate(value):
        out.append(int_({key: item}, path, key, lo=lo, hi=hi, what=what))
        del i
    return tuple(int(x) for x in out)  # type: ignore[arg-type]


def str_tuple(value: Any, full: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, (list, tuple)):
        raise ConfigError(full, f"must be a list of strings, got {value!r}")
    return tuple(str(v) for v in value)


def no_control_chars(key: str, value: str) -> None:
    if "\n" in value or "\r" in value or "\x00" in value:
        raise ConfigError(key, "must not contain newlines or NUL characters")
