"""Errors that carry a one-line, user-facing message.

A :class:`ConfigError` always names the full config key and what is
allowed, so the CLI can print it as one line and exit 2 before anything
starts.
"""

from __future__ import annotations

EXIT_CONFIG = 2


class ConfigError(ValueError):
    """A wrong key or value in the composed config."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message

    def one_line(self) -> str:
        return f"error: {self.key}: {self.message}".replace("\n", " ")
