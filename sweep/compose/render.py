"""Render a trial's server launch (argv + environment) from its config.

No server flag is spelled here: every flag comes from the YAML
(``server.args``, ``spec.render.<flavor>``, ``server.sim_args``,
``server.extra_args``). The conventions for a flag's value are:

* ``null`` or ``false`` -> the flag is dropped;
* ``true`` -> a bare flag (``--trust-remote-code``);
* a mapping -> one JSON argument (vLLM's ``--speculative-config``);
* a list -> the flag followed by each item;
* anything else -> the flag followed by ``str(value)``.

The fingerprint hashes executable, argv and env: two trials with the same
fingerprint can share one running server.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from sweep.config import TrialConfig

MASK = "***"


@dataclass(frozen=True, slots=True)
class Launch:
    """What to start: a program, its arguments and its extra environment."""

    executable: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    secrets: frozenset[str] = field(default_factory=frozenset)

    @property
    def argv(self) -> list[str]:
        return [*self.executable, *self.args]

    @property
    def fingerprint(self) -> str:
        blob = json.dumps({"argv": self.argv, "env": dict(sorted(self.env.items()))},
                          sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def redact(self, text: str) -> str:
        """Replace every secret value in ``text`` by ***."""
        for s in sorted(self.secrets, key=len, reverse=True):
            if s:
                text = text.replace(s, MASK)
        return text

    def shell_line(self, *, redact: bool = True) -> str:
        """One shell line: ``env K=V ... EXECUTABLE ARGS...``, every word quoted.

        ``bash -c "<line>"`` starts the server (unless a secret was masked).
        """
        words = [f"{k}={v}" for k, v in sorted(self.env.items())]
        words = [*(["env"] if words else []), *words, *self.argv]
        line = " ".join(shlex.quote(w) for w in words)
        return self.redact(line) if redact else line

    def to_dict(self) -> dict[str, Any]:
        return {"argv": [self.redact(a) for a in self.argv],
                "env": {k: self.redact(v) for k, v in self.env.items()},
                "fingerprint": self.fingerprint, "shell": self.shell_line()}


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
        return {str(k): _jsonable(v) for k, v in value.items()}
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


def _secrets(args: Iterable[str], secret_flags: Iterable[str], extra: Iterable[Any]) -> frozenset[str]:
    args = list(args)
    secret_flags = set(secret_flags)
    found = {args[i + 1] for i, a in enumerate(args[:-1]) if a in secret_flags}
    found |= {str(x) for x in extra if x}
    return frozenset(found)


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
    secrets = _secrets(args, server.secret_flags, [server.api_key])
    return Launch(executable=tuple(server.executable), args=tuple(args), env=env, secrets=secrets)
