"""Import SGLang's own argument parser and OpenAI protocol models on a CPU box.

The contract tests compare what the renderer emits with the real SGLang
release pinned for CI (see the install lines in the README / .ci/run):

    pip install --no-deps sglang==0.5.23
    + CPU torch and the light packages SGLang's parser modules import
      (msgspec, openai==2.8.0, orjson, psutil, pybase64, requests, pillow,
      starlette, pyzmq, packaging, pydantic, tqdm, ipython, aiohttp, numpy)

``import sglang`` cannot be used as is: ``sglang/__init__`` and
``sglang.srt.server_args`` pull in ``sglang.srt.utils.common``, which does
``import triton`` at module level. Triton is a GPU kernel compiler (a
~200 MB wheel) that the argument parser and the pydantic models never call.
So, only when triton is NOT installed, a stub module named ``triton`` is put
in ``sys.modules`` for the duration of the import and removed right after
(see :func:`_import_sglang`). If the real triton is installed it is used and
no stub is made.

Only ``pytest.skip`` when sglang itself is not installed; any other import
failure is an error, so CI cannot silently stop checking the contract.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import types
from functools import lru_cache

import pytest

# The SGLang release the contract tests were written against.
SGLANG_VERSION = "0.5.23"

SERVER_ARGS_MODULE = "sglang.srt.server_args"
PROTOCOL_MODULE = "sglang.srt.entrypoints.openai.protocol"
SPEC_INFO_MODULE = "sglang.srt.speculative.spec_info"

STUB_MARK = "__specsweep_stub__"


def sglang_installed() -> bool:
    return importlib.util.find_spec("sglang") is not None


def require_sglang() -> None:
    """Skip the calling test (or module) when sglang is not installed at all."""
    if not sglang_installed():
        pytest.skip(f"sglang is not installed (contract tests need `pip install --no-deps "
                    f"sglang=={SGLANG_VERSION}` plus CPU torch and light deps)")


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return None


def _triton_stub() -> types.ModuleType:
    # STUB for `triton` (the OpenAI Triton GPU kernel compiler).
    # Stands for: the `import triton` at the top of sglang/srt/utils/common.py,
    # which also does `setattr(triton, "next_power_of_2", ...)` at import time.
    # Why the parser does not need it: triton is only used inside kernel
    # helpers (@triton.jit, cached_triton_kernel, ...) that are called when a
    # model runs on a GPU; ServerArgs.add_cli_args and the pydantic protocol
    # models never touch it. A plain empty module satisfies both import-time
    # uses; any real use (triton.jit, triton.language, ...) raises
    # AttributeError instead of pretending to work.
    mod = types.ModuleType("triton")
    mod.__doc__ = "specsweep test stub for triton (see tests/sglang_compat.py)"
    setattr(mod, STUB_MARK, True)
    return mod


@lru_cache(maxsize=None)
def _import_sglang(name: str) -> types.ModuleType:
    """Import one sglang submodule, stubbing only what is missing and incidental."""
    require_sglang()
    stubbed: list[str] = []
    if "triton" not in sys.modules and importlib.util.find_spec("triton") is None:
        sys.modules["triton"] = _triton_stub()
        stubbed.append("triton")
    # sglang/__init__ points third-party JIT caches (TRITON_CACHE_DIR,
    # TORCHINDUCTOR_CACHE_DIR, ...) at its own dir with os.environ.setdefault;
    # we only inspect the parser, so undo that for the rest of the test run.
    env_before = dict(os.environ)
    try:
        _import_package_without_hf_patches()
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {name} from sglang {installed_version()} "
            f"(contract tests pin {SGLANG_VERSION}): {exc}. Install the light "
            "dependencies listed in tests/sglang_compat.py") from exc
    finally:
        for key in stubbed:
            # The stub must not outlive the import: torch and others probe
            # importlib.util.find_spec("triton"), which a spec-less stub breaks.
            if getattr(sys.modules.get(key), STUB_MARK, False):
                del sys.modules[key]
        for key in set(os.environ) - set(env_before):
            del os.environ[key]
        for key, value in env_before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def _import_package_without_hf_patches() -> None:
    """Import the top-level ``sglang`` package with ``transformers`` hidden.

    ``sglang/__init__`` patches transformers' model classes when transformers
    is importable, which imports ``transformers.models.llama`` -> torch
    dynamo -> ``triton.language`` (absent from the stub above). Neither the
    parser, the protocol models nor bench_serving need those patches (they
    are for loading models), and SGLang skips them itself when transformers
    is missing; so transformers is hidden only while the package's
    ``__init__`` runs, then importable again (bench_serving loads its
    tokenizer with it).
    """
    if "sglang" in sys.modules:
        return
    saved = sys.modules.get("transformers")
    sys.modules["transformers"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        importlib.import_module("sglang")
    finally:
        if saved is None:
            del sys.modules["transformers"]
        else:
            sys.modules["transformers"] = saved


BENCH_SERVING_MODULE = "sglang.benchmark.serving"
PD_UTILS_MODULE = "sglang.srt.disaggregation.utils"


def bench_serving_module() -> types.ModuleType:
    """SGLang's own benchmark client (``python -m sglang.bench_serving``) on a CPU box.

    Two incidental imports are kept out, the code that benchmarks is not:

    * transformers' ``AutoTokenizer`` is imported first, before the triton
      stub exists, so torch's import-time probe finds no triton (its
      ``torch._dynamo`` would otherwise read ``triton.language``);
    * ``sglang.srt.disaggregation.utils`` is replaced by a module holding
      only ``FAKE_BOOTSTRAP_HOST``: bench_serving imports nothing else from
      it (it is the bootstrap host of PD-disaggregated serving), while the
      real module pulls in torch.distributed, every model config and
      torchvision. The constant is read from the installed source, not
      copied here.
    """
    require_sglang()
    if BENCH_SERVING_MODULE in sys.modules:
        return sys.modules[BENCH_SERVING_MODULE]
    import transformers  # noqa: F401  (before the stub; see above)
    from transformers import AutoTokenizer  # noqa: F401

    _import_sglang("sglang.srt.disaggregation")
    if PD_UTILS_MODULE not in sys.modules:
        sys.modules[PD_UTILS_MODULE] = _pd_utils_stub()
    return _import_sglang(BENCH_SERVING_MODULE)


def _pd_utils_stub() -> types.ModuleType:
    # STUB for sglang.srt.disaggregation.utils (see bench_serving_module):
    # only FAKE_BOOTSTRAP_HOST, parsed from the installed file.
    import ast

    spec = importlib.util.find_spec(PD_UTILS_MODULE)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    mod = types.ModuleType(PD_UTILS_MODULE)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "FAKE_BOOTSTRAP_HOST"):
            mod.FAKE_BOOTSTRAP_HOST = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    if not hasattr(mod, "FAKE_BOOTSTRAP_HOST"):
        raise ImportError(f"{PD_UTILS_MODULE} defines no FAKE_BOOTSTRAP_HOST in sglang {installed_version()}")
    setattr(mod, STUB_MARK, True)
    return mod


def server_args_module() -> types.ModuleType:
    return _import_sglang(SERVER_ARGS_MODULE)


class ParseError(Exception):
    """SGLang's parser rejected an argv (argparse would print usage and exit 2)."""


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise ParseError(message)


def server_args_parser() -> argparse.ArgumentParser:
    """A fresh parser built exactly as ``python -m sglang.launch_server`` builds it.

    (``prepare_server_args``: ``argparse.ArgumentParser`` +
    ``ServerArgs.add_cli_args``, which registers every dataclass field of
    the arg_groups plus the dynamic-choice and deprecated flags.)
    """
    mod = server_args_module()
    parser = _RaisingParser(prog="sglang serve")
    mod.ServerArgs.add_cli_args(parser)
    return parser


@lru_cache(maxsize=None)
def _option_actions() -> dict[str, argparse.Action]:
    parser = server_args_parser()
    return {opt: act for act in parser._actions for opt in act.option_strings}


def parser_flag_names() -> set[str]:
    """Every full option string SGLang's parser defines, aliases included."""
    return set(_option_actions())


def parser_action(flag: str) -> argparse.Action | None:
    """The argparse action behind one full option string (None if unknown)."""
    return _option_actions().get(flag)


def protocol() -> types.ModuleType:
    """``sglang.srt.entrypoints.openai.protocol`` (the OpenAI pydantic models)."""
    return _import_sglang(PROTOCOL_MODULE)


def builtin_speculative_algorithm(name: str) -> bool:
    """True if upstream SGLang knows this ``--speculative-algorithm`` value.

    argparse takes any string; the server resolves it later with
    ``SpeculativeAlgorithm.from_string`` (builtins, aliases such as NEXTN,
    and plugin registrations) and fails at start on anything else.
    """
    spec_info = _import_sglang(SPEC_INFO_MODULE)
    try:
        spec_info.SpeculativeAlgorithm.from_string(name)
    except (ValueError, KeyError):
        return False
    return True


def parse(argv: list[str]) -> argparse.Namespace:
    """``parse_args`` with SGLang's parser; raises :class:`ParseError` on a bad argv."""
    return server_args_parser().parse_args(argv)


def parse_logged(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``parse`` plus every warning SGLang's code logged while parsing (deprecated flags:
    ``DeprecatedStoreTrueAction`` logs, it does not raise). Colour codes are stripped."""
    import logging
    import re

    seen: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING and record.name.startswith("sglang"):
                seen.append(re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()))

    handler = _Collect(level=logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        return parse(argv), seen
    finally:
        root.removeHandler(handler)

