"""Dataclasses that read and write JSON documents without losing a byte of meaning.

Why not plain ``dataclasses.asdict``: result files outlive the code that
wrote them. A file from an older version may lack a key (it is recorded as
absent and left out again when written), a newer one may carry keys this
version does not know (kept in ``extra`` and written back after the known
ones). So ``Type.from_dict(d).to_dict() == d`` for every document, and hashes
of a document (MLflow's ``specsweep.result_id``) do not change by reading it.
Values are never coerced: an ``int`` stays an ``int``.

:func:`json_schema` derives the JSON Schema of a record type from the same
annotations (docs/result.schema.json is generated from it).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Mapping, TypeVar, Union

from sweep.io.readback import Invalid, shown

R = TypeVar("R", bound="Record")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(rec: type) -> dict[str, Any]:
    """A record type's resolved annotations, once per process (resolving them was most of the cost
    of reading a file)."""
    hints = _HINTS.get(rec)
    if hints is None:
        hints = _HINTS[rec] = typing.get_type_hints(rec)
    return hints


@dataclasses.dataclass(kw_only=True)
class Record:
    """Base of the typed documents: unknown keys kept, absent keys remembered."""

    # Keys every document of this type has had since schema 1 (the JSON Schema's "required").
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    absent: frozenset[str] = dataclasses.field(default_factory=frozenset, repr=False, compare=False)

    @classmethod
    def _fields(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.name not in ("extra", "absent")]

    @classmethod
    def from_dict(cls: type[R], doc: Mapping[str, Any]) -> R:
        hints = _hints(cls)
        known = {f.name for f in cls._fields()}
        values: dict[str, Any] = {}
        for f in cls._fields():
            if f.name in doc:
                values[f.name] = _parse(hints[f.name], doc[f.name])
        missing = frozenset(known - set(doc))
        for name in missing:
            f = next(x for x in cls._fields() if x.name == name)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                values[name] = None  # required by the type, absent from an old file
        return cls(**values, extra={k: v for k, v in doc.items() if k not in known}, absent=missing)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: _dump(getattr(self, f.name)) for f in self._fields() if f.name not in self.absent}
        out.update(self.extra)
        return out

    def get(self, name: str, default: Any = None) -> Any:
        """A field or extra key by name (for columns chosen by name, e.g. a metric)."""
        if name in {f.name for f in self._fields()}:
            value = getattr(self, name)
            return default if value is None else value
        return self.extra.get(name, default)


def _record_type(tp: Any) -> type[Record] | None:
    return tp if isinstance(tp, type) and issubclass(tp, Record) else None


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _parse(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if _is_union(tp):
        for arg in _args(tp):
            rec = _record_type(arg)
            if rec is not None and isinstance(value, Mapping):
                return rec.from_dict(value)
        return value
    rec = _record_type(tp)
    if rec is not None:
        return rec.from_dict(value) if isinstance(value, Mapping) else value
    if typing.get_origin(tp) is list and isinstance(value, list):
        (item,) = _args(tp) or (Any,)
        return [_parse(item, v) for v in value]
    return value


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------ validation

# Numbers a document holds are finite and, unless a range says otherwise, in [0, NUMBER_MAX]:
# counts, rates, latencies, tok/s. Intervals (``*_ci``) may dip below 0.
NUMBER_MAX = 1e15


def check(rec: type[Record], doc: Any, *, where: str = "",
          ranges: Mapping[str, tuple[float, float]] | None = None) -> None:
    """``doc`` holds what the annotations of ``rec`` say, every number finite and in range;
    :class:`~sweep.io.readback.Invalid` naming the first value that does not (``cells[2].context``).

    ``ranges``: ``"<Type>.<field>" -> (lo, hi)`` where the default [0, NUMBER_MAX] does not fit.
    Keys the type does not know are not checked (they are kept, not read)."""
    _check(rec, doc, where, ranges or {})


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _check(tp: Any, value: Any, where: str, ranges: Mapping[str, tuple[float, float]],
           bound: tuple[float, float] = (0.0, NUMBER_MAX)) -> None:
    if tp is Any:
        return
    if _is_union(tp):
        if value is None and type(None) in _args(tp):
            return
        options = [a for a in _args(tp) if a is not type(None)]
        if len(options) == 1:
            return _check(options[0], value, where, ranges, bound)
        errors = []
        for option in options:
            try:
                return _check(option, value, where, ranges, bound)
            except Invalid as exc:
                errors.append(exc)
        raise errors[0]
    rec = _record_type(tp)
    if rec is not None:
        if value is None:
            return  # a block an odd file has as null reads as an empty one (TrialResult.__post_init__)
        if not isinstance(value, Mapping):
            raise Invalid(where, f"{shown(value)} is not an object")
        for name in rec.REQUIRED:
            if value.get(name) is None and name not in ("schema",):
                raise Invalid(_join(where, name), "is missing")
        hints = _hints(rec)
        for f in rec._fields():
            if f.name in value:
                lo_hi = ranges.get(f"{rec.__name__}.{f.name}")
                if lo_hi is None:
                    lo_hi = (-NUMBER_MAX, NUMBER_MAX) if f.name.endswith("_ci") else (0.0, NUMBER_MAX)
                _check(hints[f.name], value[f.name], _join(where, f.name), ranges, lo_hi)
        return
    origin = typing.get_origin(tp)
    if origin is list:
        if not isinstance(value, list):
            raise Invalid(where, f"{shown(value)} is not a list")
        (item,) = _args(tp) or (Any,)
        for i, v in enumerate(value):
            _check(item, v, f"{where}[{i}]", ranges, bound)
        return
    if origin is dict:
        if not isinstance(value, Mapping):
            raise Invalid(where, f"{shown(value)} is not an object")
        _, item = _args(tp) or (str, Any)
        for k, v in value.items():
            _check(item, v, _join(where, str(k)), ranges, bound)
        return
    if origin is typing.Literal:
        if value not in _args(tp):
            raise Invalid(where, f"{shown(value)} is not one of {', '.join(map(str, _args(tp)))}")
        return
    if tp is bool:
        if not isinstance(value, bool):
            raise Invalid(where, f"{shown(value)} is not true or false")
        return
    if tp is str:
        if not isinstance(value, str):
            raise Invalid(where, f"{shown(value)} is not a string")
        return
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(where, f"{shown(value)} is not a number")
        if value != value or value in (float("inf"), float("-inf")):
            raise Invalid(where, f"{shown(value)} is not a finite number")
        if tp is int and isinstance(value, float) and not value.is_integer():
            raise Invalid(where, f"{shown(value)} is not a whole number")
        lo, hi = bound
        if value < lo or value > hi:
            raise Invalid(where, f"{shown(value)} is out of range [{lo:g}, {hi:g}]")
        return


# ------------------------------------------------------------------------------ JSON Schema


def json_schema(root: type[Record], *, title: str, schema_id: str, version: int) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``root`` and every record type it contains."""
    defs: dict[str, Any] = {}
    body = _object_schema(root, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": schema_id,
            "title": title, "description": (root.__doc__ or "").strip().splitlines()[0],
            "x-schema-version": version, **body, "$defs": dict(sorted(defs.items()))}


def _object_schema(rec: type[Record], defs: dict[str, Any]) -> dict[str, Any]:
    hints = _hints(rec)
    props = {f.name: _schema(hints[f.name], defs) for f in rec._fields()}
    for f in rec._fields():
        if doc := f.metadata.get("doc"):
            props[f.name] = {"description": doc, **props[f.name]}
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": True}
    if rec.REQUIRED:
        out["required"] = list(rec.REQUIRED)
    return out


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any:
        return {}
    if _is_union(tp):
        options = [_schema(a, defs) for a in _args(tp)]
        return {"anyOf": options}
    rec = _record_type(tp)
    if rec is not None:
        if rec.__name__ not in defs:
            defs[rec.__name__] = {}  # placeholder against recursion
            defs[rec.__name__] = {"description": (rec.__doc__ or "").strip().splitlines()[0],
                                  **_object_schema(rec, defs)}
        return {"$ref": f"#/$defs/{rec.__name__}"}
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = _args(tp) or (Any,)
        return {"type": "array", "items": _schema(item, defs)}
    if origin is dict:
        _, value = _args(tp) or (str, Any)
        return {"type": "object", "additionalProperties": _schema(value, defs)}
    if origin is typing.Literal:
        return {"enum": list(_args(tp))}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema for {tp!r}")
