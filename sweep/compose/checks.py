"""A check every text value of the config goes through: no line breaks, no NUL.

The type and bounds of each key live in one table (:mod:`sweep.compose.bounds`);
this is the one rule shared with the places that check text outside it
(``server.extra_env`` values, ``launcher.hosts`` entries).
"""

from __future__ import annotations


from sweep.errors import ConfigError


def no_control_chars(key: str, value: str) -> None:
    if "\n" in value or "\r" in value or "\x00" in value:
        raise ConfigError(key, "must not contain newlines or NUL characters")
