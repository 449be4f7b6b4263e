"""Server-sent events of an OpenAI-style (chat) completion stream, parsed incrementally.

Kept apart from the transport (:mod:`sweep.bench.transport`) because this
is the per-chunk hot path: at concurrency 128 against a fast server it runs
tens of thousands of times a second, so it does as little as it can --
split complete events off a byte buffer, decode each JSON once, and note,
for every event with content (``delta.content`` of a chat chunk, ``text``
of a completion chunk), the arrival time of the network read that carried
it and the running ``usage.completion_tokens`` if the server sends one
(one read may hold several events, and one event several tokens).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from sweep.bench.request import RequestResult

try:  # optional: ~5x faster JSON decoding of the many small SSE events
    import orjson as _orjson

    loads: Callable[[bytes], Any] = _orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    loads = json.loads


# One SSE event: a chunk is a few hundred bytes, a final event with logprobs or meta a few MiB at most.
MAX_EVENT_BYTES = 16 * 1024 * 1024


def meta_of(event: dict[str, Any]) -> dict[str, Any] | None:
    """SGLang puts meta_info on the chunk, on the choice, or under ``sglext``."""
    meta = event.get("meta_info")
    if isinstance(meta, dict):
        return meta
    choices = event.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        meta = choices[0].get("meta_info")
        if isinstance(meta, dict):
            return meta
    ext = event.get("sglext")
    if isinstance(ext, dict):  # newer SGLang: sglext.meta_info / sglext.spec_tokens_details
        for meta in (ext.get("meta_info"), ext.get("spec_tokens_details"), ext):
            if isinstance(meta, dict) and ("spec_verify_ct" in meta or "completion_tokens" in meta):
                return meta
    return None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


class Stream:
    """Incremental state of one SSE stream (kept out of the hot loop's locals)."""

    __slots__ = ("rec", "parts", "usage", "meta", "extras", "done", "finish", "buf", "err", "seen", "finals",
                 "last_running")

    def __init__(self, rec: "RequestResult") -> None:
        self.rec = rec
        self.parts: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.finals: list[Any] = []            # completion_tokens of each usage block without choices
        self.last_running: Any = None          # the last running count of a chunk with choices
        self.meta: dict[str, Any] | None = None
        # raw fields of the non-content events (timings, meta_info, sglext...), for
        # the acceptance readers declared in server YAML (sweep.bench.acceptance)
        self.extras: dict[str, Any] = {}
        self.done = False
        self.finish: str | None = None
        self.buf = b""
        self.err: str | None = None
        self.seen = False

    def data(self, piece: bytes, now: float) -> None:
        """One network read of the body (the transport's sink)."""
        self.seen = True
        if self.done or self.err:
            return  # the rest of the body is drained, not parsed
        buf = self.buf + piece if self.buf else piece
        if buf.find(b"\r") >= 0:  # CRLF line ends (find is cheaper than `in` here)
            buf = buf.replace(b"\r\n", b"\n")
        self.buf, self.err = self.feed(buf, now)
        if len(self.buf) > MAX_EVENT_BYTES and not self.err:  # one event without end: the connection is closed
            from sweep.bench.transport import TransportError

            self.buf = b""
            raise TransportError("bad_sse", f"an event longer than {MAX_EVENT_BYTES >> 20} MiB (no blank line ends it)")
        if self.done:
            self.rec.e2e_s = now - self.rec.started

    def _other(self, data: bytes) -> str | None:
        """An event whose data is not a JSON object: [DONE], or malformed."""
        if data.strip() == b"[DONE]":
            self.done = True
            return None
        try:
            loads(data)
        except ValueError:
            return "bad_sse"
        return "bad_sse"  # valid JSON, but not an object

    def _rare(self, ev: dict[str, Any]) -> str | None:
        """Errors, usage and meta_info: the events that are not plain content."""
        if ev.get("error") or ev.get("object") == "error":
            err = ev.get("error") or ev
            msg = err.get("message") if isinstance(err, dict) else err
            self.rec.detail = str(msg)[:300]
            return "server_error"
        usage = ev.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
            if not ev.get("choices"):  # a final usage block: a second one must say the same
                self.finals.append(usage.get("completion_tokens"))
        keep_extras(self.extras, ev)
        meta = meta_of(ev)
        if meta is not None:  # merged: later events may carry only part of the counters
            self.meta = {**self.meta, **meta} if self.meta else meta
        return None

    def feed(self, buf: bytes, now: float) -> tuple[bytes, str | None]:
        """Consume the complete events in ``buf`` (one network read's worth).

        Returns the incomplete rest and an error kind (or None). Every event
        is fully JSON-decoded, so a malformed one is always caught; the
        common content chunk takes the shortest path through here.
        """
        *blocks, rest = buf.split(b"\n\n")
        if not blocks:
            return buf, None
        parts = self.parts
        times = self.rec.chunk_t
        running = self.rec.chunk_tokens
        n = 0
        err = None
        for block in blocks:
            if block[:6] == b"data: " and block.find(b"\n") < 0:
                data = block[6:]
            else:
                got = event_data(block)
                if got is None:
                    continue  # a comment or a field we do not use
                data = got
            if data[:1] != b"{":
                err = self._other(data)
                if err or self.done:
                    break
                continue
            try:
                ev = loads(data)
                usage = ev.get("usage")
                choices = ev.get("choices")
                if usage:  # running usage rides on every chunk: kept here, not in the rare path
                    self.usage = usage
                    if choices:
                        self.last_running = usage.get("completion_tokens")
                if ((usage and not choices) or "error" in ev or "meta_info" in ev or "sglext" in ev
                        or "timings" in ev or "object" not in ev):
                    err = self._rare(ev)
                    if err:
                        break
                if choices:
                    ch = choices[0]
                    delta = ch.get("delta")
                    content = (delta.get("content") or delta.get("reasoning_content")) if delta else ch.get("text")
                    if content:
                        if content.__class__ is not str:
                            raise TypeError("content is not text")
                        parts.append(content)
                        times.append(now)
                        if usage:
                            ct = usage.get("completion_tokens")
                            if ct.__class__ is int:
                                running.append(ct)
                        n += 1
                    fr = ch.get("finish_reason")
                    if fr:
                        if fr.__class__ is not str:
                            raise TypeError("finish_reason is not text")
                        self.finish = fr
                    if "meta_info" in ch:  # SGLang: on the finish chunk's choice
                        self._rare({"meta_info": ch["meta_info"]})
            except ValueError:
                err = "bad_sse"
                break
            except (AttributeError, KeyError, IndexError, TypeError):  # JSON, but not a chunk's shape
                err = "bad_sse"
                break
        if n:
            rec = self.rec
            rec.chunks += n
            if rec.ttft_s is None:
                rec.ttft_s = times[0] - rec.started
        return (b"" if err or self.done else rest), err


def keep_extras(extras: dict[str, Any], ev: dict[str, Any]) -> None:
    """Merge an event's fields other than ``choices`` into ``extras`` (mappings one level deep:
    a later event may carry only part of a server's counters)."""
    for k, v in ev.items():
        if k == "choices":
            continue
        old = extras.get(k)
        extras[k] = {**old, **v} if isinstance(old, dict) and isinstance(v, dict) else v


def event_data(block: bytes) -> bytes | None:
    """The data of one SSE event block (None for comments / events without data)."""
    if block.startswith(b"data:") and b"\n" not in block:  # the common case
        return block[5:].strip()
    lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            lines.append(line[5:].lstrip(b" "))
    return b"\n".join(lines).strip() if lines else None
