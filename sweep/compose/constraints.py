"""Rules between config values, declared in YAML: a tiny expression language, never ``eval``.

Two kinds of declarations use it, each written once beside the values it is about:

* ``spec.constraints`` (``conf/spec/*.yaml``): which combinations of a spec's knobs
  exist at all, e.g. ``["topk <= budget", "window >= block"]``. The config check
  (:func:`check_spec_constraints`, called by ``sweep.compose.config.build``) and the
  Optuna sweeper's valid-only search space read the same list.
* ``hardware.quirks.rules`` (``conf/hardware/*.yaml``): a box's known failures, each
  with the condition that triggers it (``when``) and the documented workaround
  (override lines). The sweeper's ``hydra.sweeper.quirks`` policy applies them.

The language (the whole of it): numbers, ``'strings'``, ``true``/``false``/``null``,
names, ``+ - * / %``, comparisons ``< <= > >= == !=`` (chained like Python's),
``and``/``or``/``not``, parentheses. A bare name (``budget``) is a key of the node
that declares the rule (``spec.budget`` for a spec constraint); a dotted name
(``hardware.quirks.cuda_graph_max_budget``) is absolute from the config's root.

``null`` means "not set": arithmetic or a comparison with it is *unknown*, and
``and``/``or``/``not`` follow three-valued (Kleene) logic. A constraint holds
unless it is definitely false (a rule about a knob the spec leaves unset does not
apply); a quirk fires only when its condition is definitely true.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from sweep.errors import ConfigError

Lookup = Callable[[str], Any]  # absolute dotted name -> value (KeyError: no such key)

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+\.\d*|\.\d+|\d+)
  | (?P<str>'[^'\\]*'|"[^"\\]*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op><=|>=|==|!=|[<>()+\-*/%])
)""", re.X)
_KEYWORDS = {"and", "or", "not", "true", "false", "null"}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": operator.mod}


class ExpressionError(ValueError):
    """A rule that does not parse, or names a key that does not exist."""


# ----------------------------------------------------------------------------- the tree
@dataclass(frozen=True)
class _Node:
    kind: str                      # const | name | neg | arith | cmp | and | or | not
    value: Any = None              # const value, name, operator(s)
    args: tuple["_Node", ...] = ()


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"unexpected {text[pos:].strip()[:12]!r} at position {pos}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


MAX_DEPTH = 64          # parentheses, not and unary minus nested in one rule
MAX_NUMBER = 10 ** 18   # an operand or a result of arithmetic: far beyond any config value


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"nested more than {MAX_DEPTH} deep")

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ExpressionError(f"expected {value or 'a value'}, got "
                                  f"{'the end' if tok is None else repr(tok[1])}")
        self.i += 1
        return tok

    def at(self, *values: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] in values and tok[0] in ("op", "name")

    def parse(self) -> _Node:
        node = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def or_(self) -> _Node:
        node = self.and_()
        while self.at("or"):
            self.take()
            node = _Node("or", args=(node, self.and_()))
        return node

    def and_(self) -> _Node:
        node = self.not_()
        while self.at("and"):
            self.take()
            node = _Node("and", args=(node, self.not_()))
        return node

    def not_(self) -> _Node:
        if self.at("not"):
            self.take()
            self._deeper()
            node = _Node("not", args=(self.not_(),))
            self.depth -= 1
            return node
        return self.cmp()

    def cmp(self) -> _Node:
        first = self.sum_()
        ops, rest = [], []
        while self.at(*_COMPARE):
            ops.append(self.take()[1])
            rest.append(self.sum_())
        return _Node("cmp", tuple(ops), (first, *rest)) if ops else first

    def sum_(self) -> _Node:
        node = self.prod()
        while self.at("+", "-"):
            node = _Node("arith", self.take()[1], (node, self.prod()))
        return node

    def prod(self) -> _Node:
        node = self.unary()
        while self.at("*", "/", "%"):
            node = _Node("arith", self.take()[1], (node, self.unary()))
        return node

    def unary(self) -> _Node:
        if self.at("-"):
            self.take()
            self._deeper()
            node = _Node("neg", args=(self.unary(),))
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> _Node:
        kind, text = self.take()
        if kind == "num":
            if len(text) > 30:
                raise ExpressionError(f"a number of {len(text)} digits (at most 30)")
            return _Node("const", float(text) if "." in text else int(text))
        if kind == "str":
            return _Node("const", text[1:-1])
        if kind == "op" and text == "(":
            self._deeper()
            node = self.or_()
            self.take(")")
            self.depth -= 1
            return node
        if kind == "name" and text in ("true", "false", "null"):
            return _Node("const", {"true": True, "false": False, "null": None}[text])
        if kind == "name" and text not in _KEYWORDS:
            return _Node("name", text)
        raise ExpressionError(f"unexpected {text!r}")


# ----------------------------------------------------------------------------- evaluation
def _kleene_and(a: Any, b: Any) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _kleene_or(a: Any, b: Any) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _truth(v: Any) -> bool | None:
    return None if v is None else bool(v)


@dataclass(frozen=True)
class Expression:
    """One parsed rule: ``base`` is the declaring node (``spec``) bare names resolve against."""

    source: str
    base: str
    tree: _Node

    @property
    def names(self) -> list[str]:
        """Absolute names the rule reads, in order of appearance."""
        out: list[str] = []

        def walk(n: _Node) -> None:
            if n.kind == "name":
                full = self.absolute(n.value)
                if full not in out:
                    out.append(full)
            for a in n.args:
                walk(a)

        walk(self.tree)
        return out

    def absolute(self, name: str) -> str:
        return name if "." in name or not self.base else f"{self.base}.{name}"

    def evaluate(self, lookup: Lookup) -> bool | None:
        """True, False, or None (unknown: a value it compares is null)."""
        return _truth(self._eval(self.tree, lookup))

    def _eval(self, n: _Node, lookup: Lookup) -> Any:
        if n.kind == "const":
            return n.value
        if n.kind == "name":
            try:
                return lookup(self.absolute(n.value))
            except KeyError:
                raise ExpressionError(f"{self.absolute(n.value)} is not a key of the config") from None
        if n.kind == "not":
            v = _truth(self._eval(n.args[0], lookup))
            return None if v is None else not v
        if n.kind in ("and", "or"):
            a = _truth(self._eval(n.args[0], lookup))
            b = _truth(self._eval(n.args[1], lookup))
            return _kleene_and(a, b) if n.kind == "and" else _kleene_or(a, b)
        vals = [self._eval(a, lookup) for a in n.args]
        if any(v is None for v in vals):
            return None
        try:
            if n.kind in ("neg", "arith"):  # numbers only: 'x' * 10**12 or '%999999999d' % 1 would fill memory
                for v in vals:
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v) > MAX_NUMBER:
                        raise TypeError(f"arithmetic takes numbers up to {MAX_NUMBER:.0e}, got {_show(v)[:40]!r}")
            if n.kind == "neg":
                return -vals[0]
            if n.kind == "arith":
                out = _ARITH[n.value](vals[0], vals[1])
                if abs(out) > MAX_NUMBER:
                    raise TypeError(f"{_show(vals[0])} {n.value} {_show(vals[1])} is past {MAX_NUMBER:.0e}")
                return out
            result = True
            for op, a, b in zip(n.value, vals, vals[1:]):
                result = result and _COMPARE[op](a, b)
            return result
        except (TypeError, ZeroDivisionError) as exc:
            raise ExpressionError(f"cannot evaluate {self.source!r} with "
                                  f"{', '.join(f'{k}={lookup(k)!r}' for k in self.names)}: {exc}") \
                from None

    def explain(self, lookup: Lookup) -> str:
        """The values the rule read, e.g. ``spec.topk=8, spec.budget=4``."""
        parts = []
        for name in self.names:
            try:
                parts.append(f"{name}={_show(lookup(name))}")
            except KeyError:
                parts.append(f"{name}=?")
        return ", ".join(parts)


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def parse(text: Any, *, base: str = "", where: str = "rule") -> Expression:
    """Parse one rule; a ConfigError naming ``where`` when it is not one."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(where, f"must be a rule such as 'topk <= budget', got {text!r}")
    try:
        return Expression(text.strip(), base, _Parser(text).parse())
    except (RecursionError, MemoryError):
        raise ConfigError(where, f"{text[:80]!r} is not a rule: too large to parse") from None
    except ExpressionError as exc:
        shown = repr(text) if len(text) <= 120 else repr(text[:117] + "...")
        raise ConfigError(where, f"{shown} is not a rule: {exc} (allowed: names, numbers, "
                          "'strings', true/false/null, + - * / %, < <= > >= == !=, and/or/not, "
                          "parentheses)") from None


def lookup_in(tree: Mapping[str, Any]) -> Lookup:
    """A lookup over a plain nested mapping (a resolved config)."""

    def get(name: str) -> Any:
        node: Any = tree
        for part in name.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise KeyError(name)
            node = node[part]
        return node

    return get


# ----------------------------------------------------------------------------- declarations
def spec_constraints(spec: Mapping[str, Any]) -> list[Expression]:
    """``spec.constraints`` parsed (each bare name is a key of the spec)."""
    raw = spec.get("constraints") or []
    if not isinstance(raw, (list, tuple)):
        raise ConfigError("spec.constraints", f"must be a list of rules such as 'topk <= budget', "
                          f"got {raw!r}")
    return [parse(r, base="spec", where=f"spec.constraints[{i}]") for i, r in enumerate(raw)]


def violated(rules: Sequence[Expression], lookup: Lookup) -> Expression | None:
    """The first rule that is definitely false (unknown ones hold)."""
    for rule in rules:
        if rule.evaluate(lookup) is False:
            return rule
    return None


def check_spec_constraints(cfg: Mapping[str, Any]) -> None:
    """The config check: a composed config that breaks ``spec.constraints`` is one ConfigError.

    The key named is the rule's first name, e.g. ``spec.topk: must be <= spec.budget=4
    (spec.constraints: 'topk <= budget'), got 8``.
    """
    lookup = lookup_in(cfg)
    rules = spec_constraints(cfg.get("spec") or {})
    rule = None
    for i, each in enumerate(rules):
        try:
            if each.evaluate(lookup) is False:
                rule = each
                break
        except ExpressionError as exc:
            raise ConfigError(f"spec.constraints[{i}]", str(exc)) from None
        except (MemoryError, RecursionError, OverflowError) as exc:  # named with its key, never "internal"
            raise ConfigError(f"spec.constraints[{i}]", f"{each.source[:80]!r} cannot be evaluated "
                              f"({type(exc).__name__})") from None
    if rule is None:
        return
    raise ConfigError(rule.names[0] if rule.names else "spec.constraints", describe(rule, lookup))


def describe(rule: Expression, lookup: Lookup) -> str:
    """Why a config breaks ``rule``, in the words of its first name where the rule allows."""
    t = rule.tree
    if t.kind == "cmp" and len(t.value) == 1 and t.args[0].kind == "name":
        rhs = t.args[1]
        if rhs.kind == "name":
            shown = f"{rule.absolute(rhs.value)}={_show(lookup(rule.absolute(rhs.value)))}"
        elif rhs.kind == "const":  # a plain bound: 'hardware.num_gpus >= 1'
            shown = _show(rhs.value)
        else:
            shown = rule.explain(lookup) or "the rule"
        got = _show(lookup(rule.absolute(t.args[0].value)))
        return f"must be {t.value[0]} {shown} (declared: {rule.base}.constraints '{rule.source}'), got {got}"
    return f"breaks the declared rule '{rule.source}' ({rule.explain(lookup)})"


# ----------------------------------------------------------------------------- quirks
@dataclass(frozen=True)
class Quirk:
    """A known failure of a box (``hardware.quirks.rules[i]``)."""

    name: str
    reason: str              # the failure reason it causes (launchers/classify.py keys)
    when: Expression
    workaround: tuple[str, ...]   # Hydra override lines that avoid it
    note: str = ""


def quirk_rules(hardware: Mapping[str, Any]) -> list[Quirk]:
    """``hardware.quirks.rules`` parsed; each entry is checked once, here."""
    quirks = hardware.get("quirks") or {}
    raw = quirks.get("rules") if isinstance(quirks, Mapping) else None
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ConfigError("hardware.quirks.rules", f"must be a list of {{name, reason, when, "
                          f"workaround}}, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        where = f"hardware.quirks.rules[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, f"must be a mapping {{name, reason, when, workaround}}, got {item!r}")
        name, reason = item.get("name"), item.get("reason")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ConfigError(f"{where}.name", f"must be a short identifier, got {name!r}")
        if not isinstance(reason, str) or not reason:
            raise ConfigError(f"{where}.reason", "must name the failure it causes (e.g. cuda_graph)")
        work = item.get("workaround") or []
        if isinstance(work, str):
            work = [work]
        if not isinstance(work, (list, tuple)) or not all(
                isinstance(w, str) and re.fullmatch(r"[A-Za-z_][\w.]*=\S.*", w) for w in work):
            raise ConfigError(f"{where}.workaround", "must be a list of override lines key=value "
                              f"(e.g. server.disable_cuda_graph=true), got {work!r}")
        out.append(Quirk(name=name, reason=reason,
                         when=parse(item.get("when"), base="hardware", where=f"{where}.when"),
                         workaround=tuple(work), note=str(item.get("note") or "")))
    return out
