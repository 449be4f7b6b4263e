"""The vLLM venv and weights that `python -m sweep.engines vllm` installed (or skip; fail under CI)."""

from __future__ import annotations

from pathlib import Path

from _support import engine_env

REASON = engine_env.reason("vllm")


def installed() -> dict[str, Path] | None:
    """{server (the venv's python), model (the HF folder), gguf} when installed, else None."""
    return engine_env.installed("vllm")


def require() -> dict[str, Path]:
    return engine_env.require("vllm")
