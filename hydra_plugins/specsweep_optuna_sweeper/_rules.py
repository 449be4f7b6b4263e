"""Which points of the search space exist and run: the app's declared rules, before any restart.

Two declarations of the app's config, read here and nowhere else in the plugin
(their language: ``sweep/compose/constraints.py``):

* ``spec.constraints`` -- combinations of knobs that do not exist (``topk <= budget``).
  The app's config check enforces the same list, so a point that breaks one would
  only ever be a ``config_error`` trial: it is not part of the space.
* ``hardware.quirks.rules`` -- a box's known failures (b300: a draft tree above
  budget 8 crashes at CUDA-graph capture) with the documented workaround. What the
  sweeper does with them is ``hydra.sweeper.quirks``:

  ========== ==============================================================================
  avoid      (default) a point the box is known to crash on is not part of the space
  workaround the point is run with the workaround's overrides (e.g.
             ``server.disable_cuda_graph=true``): a distinct config, recorded as such
  ignore     the rules are not consulted: the point runs and crashes, and the sampler
             learns it from the failure (the behaviour before quirks were declared)
  ========== ==============================================================================

A point's config is the app's config composed the way its job would be
(``ConfigSource``: Hydra composes once per combination of group choices; the
searched values are then set on a copy), so a rule sees exactly what the job
would see, interpolations included.
"""

from __future__ import annotations

import copy
import itertools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from sweep.compose.constraints import (Expression, ExpressionError, Quirk, quirk_rules,
                                       spec_constraints, violated)
from sweep.compose.keys import SWEEPER_QUIRKS
from sweep.errors import ConfigError

from ._space import SearchSpace, decode

log = logging.getLogger(__name__)

QUIRK_MODES = SWEEPER_QUIRKS  # the key table's hydra.sweeper.quirks
Compose = Callable[[list[str]], DictConfig]  # override lines -> the job's composed config
_MISSING = object()


class ConfigSource:
    """The composed app config of a point of the space, without running its job."""

    def __init__(self, compose: Compose, space: SearchSpace, groups: Collection[str]) -> None:
        self._compose = compose
        self.space = space
        self.groups = set(groups)  # config group names (hydra.runtime.choices)
        self._bases: dict[tuple[str, ...], DictConfig] = {}

    def _is_group(self, name: str) -> bool:
        return name.split("@")[0] in self.groups

    def view(self, params: Mapping[str, Any], extra: Sequence[str] = ()) -> DictConfig:
        """The config the job of ``params`` would compose (+ ``extra`` override lines)."""
        group_lines = tuple(self.space.overrides({k: v for k, v in params.items() if self._is_group(k)})
                            [len(self.space.fixed):])
        base = self._bases.get(group_lines)
        if base is None:
            composed = self._compose(list(self.space.fixed.values()) + list(group_lines))
            base = OmegaConf.create({k: composed[k] for k in composed if k != "hydra"})
            self._bases[group_lines] = base
        cfg = copy.deepcopy(base)
        OmegaConf.set_struct(cfg, False)
        for name, value in params.items():
            if not self._is_group(name):
                OmegaConf.update(cfg, name.lstrip("+"), decode(name, value), force_add=True)
        for line in extra:
            o = OverridesParser.create().parse_overrides([line])[0]
            OmegaConf.update(cfg, o.key_or_group, o.value(), force_add=True)
        return cfg

    def plain(self, params: Mapping[str, Any], extra: Sequence[str] = ()) -> dict[str, Any]:
        """The same, resolved to plain containers (what the twin's ``predict`` takes)."""
        import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})

        out = OmegaConf.to_container(self.view(params, extra), resolve=True)
        assert isinstance(out, dict)
        return {str(k): v for k, v in out.items()}


def lookup_of(cfg: DictConfig) -> Callable[[str], Any]:
    def get(name: str) -> Any:
        value = OmegaConf.select(cfg, name, default=_MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value

    return get


@dataclass(frozen=True)
class Verdict:
    """Whether a point runs, why not, and the workaround it runs with."""

    ok: bool
    why: str | None = None
    quirk: str | None = None                # the quirk a workaround was applied for
    workaround: tuple[str, ...] = ()        # override lines added to the job

    def attrs(self) -> dict[str, Any]:
        """Trial user attrs (best.yaml and the report read ``workaround``)."""
        return {"quirk": self.quirk, "workaround": list(self.workaround)} if self.workaround else {}


OK = Verdict(True)


class Rules:
    """``check(params)`` for every sampler, the loop, the grid and the pre-screen (cached)."""

    def __init__(self, source: ConfigSource, quirks: str = "avoid") -> None:
        if quirks not in QUIRK_MODES:
            raise ConfigError("hydra.sweeper.quirks", f"{quirks!r}; allowed: {', '.join(QUIRK_MODES)}")
        self.source = source
        self.mode = quirks
        self._cache: dict[tuple[tuple[str, str], ...], Verdict] = {}

    @staticmethod
    def _key(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((str(k), repr(v)) for k, v in params.items()))

    def check(self, params: Mapping[str, Any]) -> Verdict:
        key = self._key(params)
        verdict = self._cache.get(key)
        if verdict is None:
            try:
                verdict = self._check(params)
            except (ExpressionError, ConfigError) as exc:
                raise ConfigError("spec.constraints", f"a declared rule cannot be evaluated for "
                                  f"{' '.join(self.source.space.overrides(params))}: {exc}") from None
            self._cache[key] = verdict
        return verdict

    def valid(self, params: Mapping[str, Any]) -> bool:
        return self.check(params).ok

    def _broken(self, cfg: DictConfig) -> Expression | None:
        spec = cfg.get("spec")
        if not isinstance(spec, DictConfig):
            return None
        return violated(spec_constraints(OmegaConf.to_container(spec, resolve=True)), lookup_of(cfg))  # type: ignore[arg-type]

    def _firing(self, cfg: DictConfig) -> list[Quirk]:
        hardware = cfg.get("hardware")
        if self.mode == "ignore" or not isinstance(hardware, DictConfig):
            return []
        lookup = lookup_of(cfg)
        quirks = quirk_rules(OmegaConf.to_container(hardware, resolve=True))  # type: ignore[arg-type]
        return [q for q in quirks if q.when.evaluate(lookup) is True]

    def _check(self, params: Mapping[str, Any]) -> Verdict:
        cfg = self.source.view(params)
        rule = self._broken(cfg)
        if rule is not None:
            return Verdict(False, f"breaks spec.constraints '{rule.source}' ({rule.explain(lookup_of(cfg))})")
        firing = self._firing(cfg)
        if not firing:
            return OK
        q = firing[0]
        if self.mode == "avoid" or not q.workaround:
            hint = f"; hydra.sweeper.quirks=workaround runs it with {' '.join(q.workaround)}" \
                if q.workaround and self.mode == "avoid" else ""
            return Verdict(False, f"avoided: quirk {q.name} of hardware.quirks.rules would fail it "
                           f"({q.reason}){hint}")
        lines: list[str] = []
        names: list[str] = []
        for _ in range(4):  # each firing quirk's workaround, until none fires
            if not firing:
                break
            for q in firing:
                if not q.workaround:
                    return Verdict(False, f"avoided: quirk {q.name} ({q.reason}) has no workaround")
                names.append(q.name)
                lines.extend(w for w in q.workaround if w not in lines)
            cfg = self.source.view(params, lines)
            firing = self._firing(cfg)
        if firing:
            return Verdict(False, f"avoided: the workaround {' '.join(lines)} does not stop quirk "
                           f"{firing[0].name}")
        rule = self._broken(cfg)
        if rule is not None:
            return Verdict(False, f"with the workaround {' '.join(lines)} it breaks spec.constraints "
                           f"'{rule.source}'")
        return Verdict(True, quirk=",".join(dict.fromkeys(names)), workaround=tuple(lines))

    # -- the whole (discrete) space ---------------------------------------------------------
    def points(self) -> list[dict[str, Any]] | None:
        """Every point of a discrete space, in grid order (None: a continuous param)."""
        grid = self.source.space.grid()
        if grid is None:
            return None
        names = list(grid)
        return [dict(zip(names, combo)) for combo in itertools.product(*grid.values())]

    def valid_points(self) -> list[dict[str, Any]] | None:
        pts = self.points()
        return None if pts is None else [p for p in pts if self.valid(p)]

    def summary(self) -> str:
        """One line: how much of the space is left, and why the rest is not."""
        pts = self.points()
        if pts is None:
            return f"quirks={self.mode}; continuous space: rules are checked per proposal"
        verdicts = [self.check(p) for p in pts]
        ok = sum(1 for v in verdicts if v.ok)
        broken = sum(1 for v in verdicts if not v.ok and (v.why or "").startswith("breaks"))
        avoided = len(pts) - ok - broken
        worked = sum(1 for v in verdicts if v.ok and v.workaround)
        parts = [f"{ok} of {len(pts)} points run"]
        if broken:
            parts.append(f"{broken} break spec.constraints")
        if avoided:
            parts.append(f"{avoided} avoided (hardware quirks)")
        if worked:
            parts.append(f"{worked} with a quirk's workaround")
        return f"quirks={self.mode}: " + ", ".join(parts)
