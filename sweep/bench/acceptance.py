"""Speculative acceptance, read where each server says it reports it.

Why declarations instead of a code path per engine: every engine reports
acceptance somewhere else and in other units. SGLang puts verify steps on each
response (``meta_info.spec_verify_ct``), a gauge on ``/metrics``
(``sglang:spec_accept_length``) and ``Decode batch ... accept len: X`` lines in
its log; llama.cpp puts drafted and accepted draft tokens on the last chunk
(``timings.draft_n`` / ``draft_n_accepted``), cumulative counters on ``/metrics``
(``llamacpp:spec_decode_*_total``) and one ``draft acceptance = ... mean len =
...`` line per request in its log; vLLM has counters only. Each server group
declares these places under ``server.acceptance`` (``request``, ``metrics``,
``log``) and the three readers here serve all of them, so a new engine or a
renamed field is a YAML edit.

Definitions (docs/ARCHITECTURE.md, "Accept length"): **accept length is the
tokens one target verify step yields, the bonus token included** --
``1 + accepted / verify steps``; the prefill's first token comes before any
draft and is neither a verify step nor one of its tokens (SGLang's ``Decode
batch ... accept len``, vLLM's and llama.cpp's "mean acceptance length" count
the same way).

* requests: ``accept_len = (tokens - 1) / verify steps`` per request, summed
  over requests. Steps are read (``verify_steps``) or, where only accepted
  draft tokens are reported, derived as ``tokens - 1 - accepted``: every verify
  step emits exactly one token of its own besides the draft tokens it accepted.
  ``accept_rate = accepted / drafted``.
* metrics: counters are differences over the trial window (before/after),
  gauges the value at its end; without an ``accept_len`` gauge it is
  ``1 + accepted / drafts`` (per drafting step: llama.cpp's and vLLM's "mean
  acceptance length"), without an ``accept_rate`` gauge ``accepted / drafted``.
* log: each declared field is averaged over the matching lines of the window,
  the per-step fields listed under ``weighted`` weighted by the declared
  ``weight`` field (SGLang's ``#running-req``: a line of a batch of 64 stands
  for 64 verifies), fields listed under ``sum`` are summed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sweep.bench import reported

if TYPE_CHECKING:
    from sweep.bench.request import RequestResult

# --------------------------------------------------------------------------- declarations


def declared(server_name: str) -> dict[str, Any]:
    """The ``acceptance`` block of a shipped server group (``conf/server/<name>.yaml``)."""
    from sweep.compose.shipped import option

    return dict(option("server", server_name).get("acceptance") or {})


# --------------------------------------------------------------------------- per request


@dataclass(frozen=True, slots=True)
class Counts:
    """One request's (or a sum of requests') speculative counters."""

    tokens: int
    steps: int
    drafted: int | None = None
    accepted: int | None = None
    requests: int = 1  # the prefill's first token of each is no verify step's

    @property
    def accept_len(self) -> float | None:
        return accept_len_of(self.tokens - self.requests, self.steps)

    @property
    def accept_rate(self) -> float | None:
        if not self.drafted or self.accepted is None:
            return None
        return round(self.accepted / self.drafted, 4)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "verify_steps": self.steps, "drafted": self.drafted,
                "accepted": self.accepted, "requests": self.requests, "accept_len": self.accept_len,
                "accept_rate": self.accept_rate}


def accept_len_of(tokens: float, steps: float) -> float | None:
    """Tokens the verify steps yielded per verify step (the one rounding every reader uses)."""
    return round(tokens / steps, 4) if steps else None


def _dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(obj, Mapping):
            obj = obj.get(part)
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def _count(obj: Mapping[str, Any], key: str | None, path: str = "") -> int | None:
    """A declared counter of the stream's fields, checked (``reported.BadReport`` names it)."""
    if not key:
        return None
    return reported.count(f"{path}.{key}" if path else key, obj.get(key))


class RequestReader:
    """Reads one request's counters from the raw fields its stream carried."""

    def __init__(self, decl: Mapping[str, Any] | None) -> None:
        decl = decl or {}
        self.paths = tuple(str(x) for x in decl.get("paths") or ())
        self.tokens = decl.get("tokens")
        self.verify_steps = decl.get("verify_steps")
        self.drafted = decl.get("drafted")
        self.accepted = decl.get("accepted")

    def read(self, extras: Mapping[str, Any] | None, usage_tokens: int | None = None) -> Counts | None:
        """Counts from ``extras`` (first declared path that has them); None without spec."""
        if not extras:
            return None
        for path in self.paths:
            obj = _dig(extras, path)
            if not isinstance(obj, Mapping):
                continue
            tokens = _count(obj, self.tokens, path)
            tokens = usage_tokens if tokens is None else tokens
            steps = _count(obj, self.verify_steps, path)
            accepted = _count(obj, self.accepted, path)
            drafted = _count(obj, self.drafted, path)
            if accepted is not None and drafted is not None and accepted > drafted:
                raise reported.BadReport(f"{path}.{self.accepted}", f"{accepted} accepted of {drafted} drafted")
            if steps is None and accepted is not None and tokens is not None:
                if accepted > max(0, tokens - 1):
                    raise reported.BadReport(f"{path}.{self.accepted}", f"{accepted} accepted of {tokens} tokens")
                steps = tokens - 1 - accepted
            if tokens is None or not steps:
                continue
            return Counts(tokens=tokens, steps=steps, drafted=drafted, accepted=accepted)
        return None


def spec_sums(records: Iterable["RequestResult"]) -> tuple[int, int]:
    """(tokens the verify steps yielded, verify steps) over successful records that carry spec
    counters: each request's tokens but its first (the prefill's)."""
    tokens = steps = 0
    for r in records:
        if r.ok and r.spec_verify_ct:
            tokens += max(0, (r.meta_completion_tokens or r.completion_tokens or 0) - 1)
            steps += r.spec_verify_ct
    return tokens, steps


def apply(cells: Iterable[Any], reader: RequestReader) -> Counts | None:
    """Fill each record's counters from its stream's fields and refresh the cells' accept_len.

    Returns the sum over every counted request (None when none carried counters).
    """
    total: Counts | None = None
    for cell in cells:
        for r in cell.results:
            try:
                got = reader.read(r.extras, r.completion_tokens) if r.ok else None
            except reported.BadReport as bad:  # a failed request, counted by bench_errors
                r.fail(reported.KIND, str(bad))
                cell.errors += 1
                cell.error_kinds[reported.KIND] = cell.error_kinds.get(reported.KIND, 0) + 1
                continue
            if got is None:
                continue
            r.spec_verify_ct, r.meta_completion_tokens = got.steps, got.tokens
            total = got if total is None else _add(total, got)
        cell.spec_tokens, cell.spec_verify_ct = spec_sums(cell.results)
        if cell.spec_verify_ct:  # else keep what the cell's /metrics window said (vLLM: counters only)
            cell.accept_len = accept_len_of(cell.spec_tokens, cell.spec_verify_ct)
    return total


def _add(a: Counts, b: Counts) -> Counts:
    def plus(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    return Counts(tokens=a.tokens + b.tokens, steps=a.steps + b.steps,
                  drafted=plus(a.drafted, b.drafted), accepted=plus(a.accepted, b.accepted),
                  requests=a.requests + b.requests)


# --------------------------------------------------------------------------- the log


def _num(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    try:
        v = float(match.group("v"))
    except (ValueError, IndexError):
        return None
    return v if math.isfinite(v) else None


class LogReader:
    """Aggregates the declared fields over the log lines that match ``line``."""

    def __init__(self, decl: Mapping[str, Any] | None) -> None:
        decl = decl or {}
        self.line = re.compile(str(decl["line"])) if decl.get("line") else None
        self.fields = {str(k): re.compile(str(v)) for k, v in (decl.get("fields") or {}).items()}
        self.summed = frozenset(str(x) for x in decl.get("sum") or ())
        self.weight = str(decl["weight"]) if decl.get("weight") else None
        self.weighted = frozenset(str(x) for x in decl.get("weighted") or ())
        self.synthetic = re.compile(str(decl["synthetic"])) if decl.get("synthetic") else None
        # one line per finished request (llama.cpp's print_timings), written after its response
        self.per_request = bool(decl.get("per_request"))

    def read(self, text: str) -> dict[str, Any] | None:
        """``{field: mean (or sum), ..., samples}``; None when no line carried a field."""
        if self.line is None or not self.fields:
            return None
        values: dict[str, list[tuple[float, float]]] = {k: [] for k in self.fields}
        samples = 0
        for line in text.splitlines():
            m = self.line.search(line)
            if not m:
                continue
            rest = line[m.start():]
            got = {k: _num(p.search(rest)) for k, p in self.fields.items()}
            if all(v is None for k, v in got.items() if k != self.weight):
                continue  # a truncated or unrelated line
            samples += 1
            w = got.get(self.weight) if self.weight else None
            w = w if w is not None and w > 0 else 1.0
            for k, v in got.items():
                if v is not None:
                    values[k].append((v, w))
        if not samples:
            return None
        out: dict[str, Any] = {}
        for k, xs in values.items():
            if not xs:
                out[k] = None
            elif k in self.summed:
                total = float(sum(v for v, _ in xs))
                out[k] = int(total) if total.is_integer() else round(total, 4)
            elif k == self.weight:
                continue  # only a weight
            elif k in self.weighted:
                out[k] = round(sum(v * w for v, w in xs) / sum(w for _, w in xs), 4)
            else:
                out[k] = round(sum(v for v, _ in xs) / len(xs), 4)
        out["samples"] = samples
        return out

    def synthetic_rates(self, text: str) -> dict[str, Any] | None:
        """What the server says it resolved for synthetic acceptance (last startup line)."""
        if self.synthetic is None:
            return None
        found = None
        for m in self.synthetic.finditer(text):
            found = m
        if found is None:
            return None
        groups = found.groupdict()
        out: dict[str, Any] = {}
        if groups.get("rates") is not None:
            out["rates"] = [float(x) for x in groups["rates"].split(",") if x.strip()]
        if groups.get("mean_len") is not None:
            out["mean_len"] = float(groups["mean_len"])
        if groups.get("n_max") is not None:
            out["n_max"] = int(groups["n_max"])
        return out


# --------------------------------------------------------------------------- /metrics


class MetricsReader:
    """Acceptance from /metrics: counters over a window, gauges at its end."""

    def __init__(self, decl: Mapping[str, Any] | None) -> None:
        decl = decl or {}
        self.counters = {str(k): str(v) for k, v in (decl.get("counters") or {}).items()}
        self.gauges = {str(k): str(v) for k, v in (decl.get("gauges") or {}).items()}
        pos = decl.get("per_position") or {}
        self.per_position = str(pos["name"]) if pos.get("name") else None
        self.split = {self.per_position: str(pos.get("label") or "position")} if self.per_position else {}

    @property
    def prefixes(self) -> tuple[str, ...]:
        """Metric-name prefixes to keep when parsing /metrics (``sglang:``, ``llamacpp:``...)."""
        names = [*self.counters.values(), *self.gauges.values(), *self.split]
        return tuple(sorted({n.split(":", 1)[0] + ":" for n in names if ":" in n}))

    def read(self, window: Mapping[str, float]) -> dict[str, Any]:
        """From parsed metrics (pass a ``serverstats.metrics_delta`` for a window)."""
        out: dict[str, Any] = {k: _metric(window, name) for k, name in self.counters.items()}
        out.update({k: window.get(name) for k, name in self.gauges.items()})
        drafts, drafted, accepted = out.get("drafts"), out.get("drafted"), out.get("accepted")
        if out.get("accept_len") is None and drafts:
            out["accept_len"] = 1.0 + (accepted or 0.0) / drafts
        if out.get("accept_rate") is None and drafted:
            out["accept_rate"] = (accepted or 0.0) / drafted
        for key in ("accept_len", "accept_rate"):
            out[key] = None if out.get(key) is None else round(out[key], 4)
        return out

    def positions(self, before: Mapping[str, float], after: Mapping[str, float],
                  drafts: float | None) -> list[float] | None:
        """Per draft position: accepted in the window / drafting steps (unconditional rates)."""
        if not self.per_position or not drafts:
            return None
        prefix = self.per_position + "|"
        keys = sorted((k for k in after if k.startswith(prefix)), key=lambda k: int(k[len(prefix):] or 0))
        return [round((after[k] - before.get(k, 0.0)) / drafts, 4) for k in keys] or None


def _metric(metrics: Mapping[str, float], name: str) -> float | None:
    """A counter by its declared name (``_total`` optional: exporters differ)."""
    if name in metrics:
        return metrics[name]
    base = name.removesuffix("_total")
    for candidate in (base, base + "_total"):
        if candidate in metrics:
            return metrics[candidate]
    return None


@dataclass(frozen=True)
class Readers:
    """The three readers of one server group's ``acceptance`` block."""

    request: RequestReader
    metrics: MetricsReader
    log: LogReader

    @classmethod
    def of(cls, decl: Mapping[str, Any] | None) -> "Readers":
        decl = decl or {}
        return cls(RequestReader(decl.get("request")), MetricsReader(decl.get("metrics")),
                   LogReader(decl.get("log")))
