"""A copy whose identity fields contradict its own launch is no copy: named and left out of pooling.

Copies pool by their config id (:mod:`sweep.score.configs`): what ran -- the launch's argv and
environment -- and what was measured. The name, the family and the budget a report shows come
from the recorded ``config`` beside it. A result.json edited (or forged) so that the two disagree --
its ``config.spec.budget`` says 4 while its argv ran ``--speculative-ddtree-budget 8`` -- pooled
with the b8 copies and, as their newest, made b8's cells appear as a b4 config; one whose
``trial.config_id`` is not the id its content hashes to claims to be a config it is not. Here:

* :func:`contradiction` says why a document contradicts itself (None: it does not):
  ``trial.config_id`` against :func:`sweep.score.configs.config_id` of the content; and the spec's
  knobs against the launch -- the shipped render template of its spec group for its server's
  flavor (``conf/spec/<group>.yaml``, ``render.<flavor>``), resolved against the recorded config,
  must give the values the argv and env hold, for every entry the template derives from a knob
  (``${spec.budget}``) and the launch has; entries the template spells literally, and a flag on one
  side only (a user's template may drop one or add it by hand), are left to the user;
* :func:`consistent` keeps the documents that do not contradict themselves and names each one
  left out (``skipped <source>: <why>``, or a command's :class:`sweep.io.readback.Skipped`).

A spec group the project does not ship, a document without argv (written before argv was kept, or
by a test's hand) or a template that does not resolve against an old config cannot be judged and
is kept: only a contradiction found is one.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any, Callable, Mapping, Sequence, TypeVar

from sweep.record.result import TrialResult

T = TypeVar("T")
_CACHE: dict[int, tuple[TrialResult, str | None]] = {}
_EXPECTED: dict[str, dict[str, Any] | None] = {}


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def _derived(value: Any) -> bool:
    """The template's value comes from a knob (an interpolation somewhere in it)."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, Mapping):
        return any(_derived(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_derived(v) for v in value)
    return False


def _expected(doc: TrialResult) -> dict[str, Any] | None:
    """``{"args": {flag: value}, "env": {name: value}}``: the entries the shipped template of the doc's
    spec group derives from knobs, resolved against its recorded config (None: nothing to judge by)."""
    cfg = doc.config if isinstance(doc.config, Mapping) else {}
    spec, server = _section(cfg, "spec"), _section(cfg, "server")
    flavor = server.get("flavor") or server.get("name")
    group = (doc.trial.choices or {}).get("spec") or spec.get("algorithm")
    if not isinstance(flavor, str) or not isinstance(group, str) or not group:
        return None
    key = hashlib.sha256(json.dumps([flavor, group, cfg], sort_keys=True, default=str).encode()).hexdigest()
    if key in _EXPECTED:
        return _EXPECTED[key]
    _EXPECTED[key] = out = _resolve(cfg, group, flavor)
    return out


def _resolve(cfg: Mapping[str, Any], group: str, flavor: str) -> dict[str, Any] | None:
    from sweep.compose import shipped

    render = shipped.option("spec", group).get("render")
    template = render.get(flavor) if isinstance(render, Mapping) else None
    if not isinstance(template, Mapping):
        return None
    derived = {part: {k: v for k, v in (template.get(part) or {}).items() if _derived(v)}
               for part in ("args", "env") if isinstance(template.get(part) or {}, Mapping)}
    if not any(derived.values()):
        return None
    from omegaconf import OmegaConf

    from sweep.compose import resolvers

    resolvers.register()
    try:
        node = OmegaConf.create({**{k: v for k, v in cfg.items() if k != "spec"},
                                 "spec": {**_section(cfg, "spec"), "render": None}, "_expected": derived})
    except Exception:  # noqa: BLE001 - a config OmegaConf does not take: not judged
        return None
    out: dict[str, Any] = {}
    for part, entries in derived.items():
        out[part] = {}
        for name in entries:
            got = _value(node, ["_expected", part, name])
            if got is not _UNKNOWN:
                out[part][name] = got
    return out if any(out.values()) else None


class _Unknown:
    """A template entry that does not resolve against an old config (a knob it did not have yet)."""


_UNKNOWN: Any = _Unknown()


def _value(node: Any, path: list[str]) -> Any:
    """The resolved value at ``path``; a mapping resolved key by key, the keys that do not resolve
    left out and marked (``_partial``: compared as far as they go); :data:`_UNKNOWN` when nothing does."""
    from omegaconf import DictConfig, OmegaConf

    sub = node
    for key in path:
        sub = sub._get_node(key)
    try:
        if isinstance(sub, DictConfig):
            return OmegaConf.to_container(sub, resolve=True)
        return sub._dereference_node()._value()
    except Exception:  # noqa: BLE001 - resolved key by key below
        pass
    if not isinstance(sub, DictConfig):
        return _UNKNOWN
    parts = {str(k): _value(node, [*path, str(k)]) for k in sub.keys()}
    known = {k: v for k, v in parts.items() if v is not _UNKNOWN}
    return {**known, _PARTIAL: True} if known else _UNKNOWN


_PARTIAL = "\x00partial"


def _words_at(argv: Sequence[str], flag: str) -> list[str] | None:
    """The words after ``flag`` in argv up to the next flag (None: the flag is not there)."""
    for i, word in enumerate(argv):
        if word == flag:
            out = []
            for w in argv[i + 1:]:
                if w.startswith("--"):
                    break
                out.append(w)
            return out
        if word.startswith(flag + "="):
            return [word.split("=", 1)[1]]
    return None


def _same(value: Any, expected: list[str], got: list[str]) -> bool:
    if expected == got:
        return True
    if len(got) == 1 and isinstance(value, Mapping):  # a JSON argument (vLLM's --speculative-config)
        try:
            ran = json.loads(got[0])
        except ValueError:
            return False
        if not isinstance(ran, dict):
            return False
        if value.get(_PARTIAL):  # an old config that lacks a knob: the keys it has must agree
            want = json.loads(expected[0]) if expected else {}
            return all(ran.get(k) == v for k, v in want.items())
        return bool(json.loads(expected[0]) == ran) if expected else False
    return False


def _launch_contradiction(doc: TrialResult) -> str | None:
    argv = [str(a) for a in doc.argv or []]
    if not argv:
        return None
    expected = _expected(doc)
    if not expected:
        return None
    from sweep import secrets
    from sweep.compose.render import flags

    for flag, value in (expected.get("args") or {}).items():
        shown = {k: v for k, v in value.items() if k != _PARTIAL} if isinstance(value, Mapping) else value
        words = flags({flag: shown})
        got = _words_at(argv, flag)
        # a flag on one side only is not judged: a user's template may drop a flag, or add it by hand
        if not words or got is None or secrets.MASK in got or secrets.MASK in words[1:]:
            continue
        if not _same(value, words[1:], got):
            return (f"the config's spec renders {' '.join(words)[:120]}, but its launch ran "
                    f"{flag} {' '.join(got)[:120]}")
    env = doc.env or {}
    for name, value in (expected.get("env") or {}).items():
        if value is None or name not in env or env[name] == secrets.MASK:
            continue
        want = "1" if value is True else "0" if value is False else str(value)
        if str(env[name]) != want:
            return f"the config's spec renders {name}={want}, but its launch ran {name}={env[name]}"
    return None


def contradiction(doc: TrialResult) -> str | None:
    """Why ``doc``'s identity fields contradict its own launch or id (None: they do not)."""
    hit = _CACHE.get(id(doc))
    if hit is not None and hit[0] is doc:
        return hit[1]
    from sweep.score.configs import config_id

    why = None
    recorded = doc.trial.config_id
    if recorded:
        own = config_id(doc)
        if recorded != own:
            why = f"trial.config_id {recorded} is not the id its content hashes to ({own})"
    if why is None:
        why = _launch_contradiction(doc)
    if len(_CACHE) > 100_000:
        _CACHE.clear()
    _CACHE[id(doc)] = (doc, why)  # the doc is kept with it: its id is not reused while cached
    return why


def consistent(items: Sequence[T], doc_of: Callable[[T], TrialResult], source_of: Callable[[T], Any],
               on_bad: Callable[[Any, Exception], None] | None = None) -> list[T]:
    """The items whose document does not contradict itself; each other one named in one line
    (``on_bad(source, error)``: a command's :class:`sweep.io.readback.Skipped`; else on stderr)."""
    from sweep.io.readback import BadFile

    kept = []
    for item in items:
        why = contradiction(doc_of(item))
        if why is None:
            kept.append(item)
            continue
        bad = BadFile(str(source_of(item)), f"a copy that contradicts itself, left out: {why}")
        if on_bad is not None:
            on_bad(source_of(item), bad)
        else:
            from sweep import secrets

            print(secrets.mask_text(bad.line()), file=sys.stderr, flush=True)
    return kept
