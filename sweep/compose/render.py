"""Render a trial's server launch (argv + environment) from its config.

No server flag is spelled here: every flag comes from the YAML
(``server.args``, ``spec.render.<flavor>``, ``server.sim_args``,
``server.extra_args``). The conventions for a flag's value are:

* ``null`` or ``false`` -> the flag is dropped;
* ``true`` -> a bare flag (``--trust-remote-code``);
* a mapping -> one JSON argument (vLLM's ``--speculative-config``); a key whose value is
  ``null`` is left out of it, as a flag is (the engine's default: an unset knob such as
  ``spec.per_load`` adds nothing to the launch, so the config stays the one it was);
* a list -> the flag followed by each item;
* anything else -> the flag followed by ``str(value)``.

The fingerprint hashes executable, argv and env: two trials with the same
fingerprint can share one running server. Which values are secrets (masked
wherever the launch is shown) is :mod:`sweep.secrets`' decision.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from sweep import secrets
from sweep.compose.config import TrialConfig
from sweep.launch import BoxNeeds, Launch

__all__ = ["Launch", "flags", "render"]


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def flags(mapping: Mapping[str, Any]) -> list[str]:
    """Turn an ordered ``{flag: value}`` mapping into argv words."""
    out: list[str] = []
    for flag, value in mapping.items():
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, Mapping):
            out += [flag, json.dumps(_jsonable(value), separators=(",", ":"), sort_keys=False)]
        elif isinstance(value, (list, tuple)):
            out += [flag, *(_scalar(v) for v in value)]
        else:
            out += [flag, _scalar(value)]
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _env(*mappings: Mapping[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for m in mappings:
        for k, v in m.items():
            if v is None:
                continue
            env[str(k)] = "1" if v is True else "0" if v is False else _scalar(v)
    return env


def box_needs(cfg: TrialConfig) -> BoxNeeds:
    """What the box must offer for this trial (the launcher's pre-flight checks)."""
    family = cfg.spec.draft_family
    draft = cfg.model.draft_paths.get(family) if family else None
    return BoxNeeds(simulated=cfg.server.simulated, hardware=cfg.hardware.name,
                    num_gpus=cfg.hardware.num_gpus, arch=cfg.hardware.arch,
                    model_path=cfg.model.path,
                    draft=(f"model.draft_paths.{family}", str(draft)) if draft else None)


def render(cfg: TrialConfig) -> Launch:
    """The launch for a trial: executable, argv and env, from YAML alone."""
    server, spec = cfg.server, cfg.spec
    spec_render = spec.render.get(server.flavor) or {}
    args = [
        *flags(server.args),
        *flags(spec_render.get("args") or {}),
        *flags(server.sim_args),
        *server.extra_args,
    ]
    env = _env(server.env, spec_render.get("env") or {}, server.extra_env)
    found = secrets.argv_secrets(args, server.secret_flags) | secrets.env_secrets(env)
    if server.api_key:
        found.add(server.api_key)
    return Launch(executable=tuple(server.executable), args=tuple(args), env=env,
                  secrets=frozenset(found), box=box_needs(cfg))
