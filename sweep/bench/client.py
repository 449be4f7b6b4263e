"""One streamed completion (or chat completion), measured the way peers define it.

Why this shape:

* Tokens come from the server's ``usage`` (``stream_options.include_usage``),
  never from counting chunks: with speculative decoding one chunk carries
  several tokens (a DDTree step emits ~4.5). A server that sends no usage
  makes the request an error of kind ``no_usage`` rather than a guess.
* The clock starts when the request's bytes are handed to the transport
  (:mod:`sweep.bench.transport`: one write, JSON encoded beforehand), or at
  the scheduled arrival for open-loop traffic. Every SSE event with content
  is timestamped at the network read that carried it.
* TTFT = first content event; e2e = the ``[DONE]`` event (SGLang's
  bench_serving: the last line read); TPOT = (e2e - ttft) /
  (completion_tokens - 1), as SGLang's and vLLM's benchmarks define it.
  Two inter-token figures, named apart (docs/ARCHITECTURE.md):
  ``step_s`` = the gap between consecutive content events (one verify step
  with speculative decoding; what vLLM's ``bench serve`` calls ITL) and
  ``itl_s`` = per token, each gap spread over the tokens its event carries
  (SGLang's bench_serving). Tokens per event come from running usage
  (``continuous_usage_stats``) when the server sends it, else the request's
  tokens after the first are split evenly over its events.
* SGLang's speculative counters (``meta_info`` / ``sglext``) give
  ``spec_verify_ct``, so accept length = (completion_tokens - 1) / spec_verify_ct
  (sweep/bench/acceptance.py: per verify step, the prefill's first token out).
* Every way a request can go wrong (unreachable, 4xx/5xx, a body that is not
  JSON, a malformed SSE event, a disconnect mid-stream, a timeout) becomes an
  error *kind* on the record, never an exception: failed requests must be
  counted and shown, not silently skew or abort a cell.

The API key travels only in the Authorization header; no record, detail
string or log line ever contains it.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Mapping, Sequence

from sweep import secrets
from sweep.bench import reported
from sweep.bench.request import ERROR_KINDS, RequestResult  # noqa: F401 - re-exported: the client's records
from sweep.bench.sse import Stream, loads
from sweep.bench.transport import HttpConnection, TransportError

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
MAX_ERROR_BODY = 2048
MAX_PLAIN_BODY = 4 * 1024 * 1024

try:  # orjson encodes a long prompt ~10x faster than json
    import orjson as _orjson

    def encode_json(obj: Any) -> bytes:
        return _orjson.dumps(obj)
except ImportError:  # pragma: no cover - depends on the environment
    import json as _json

    def encode_json(obj: Any) -> bytes:
        return _json.dumps(obj, separators=(",", ":")).encode()

def path_for(endpoint: str) -> str:
    """The URL path of ``server.endpoint`` (completions | chat)."""
    return CHAT_PATH if endpoint == "chat" else COMPLETIONS_PATH


def build_payload(model: str, prompt: str | Sequence[int], *, max_tokens: int, temperature: float = 0.0,
                  ignore_eos: bool = False, extra: Mapping[str, Any] | None = None,
                  endpoint: str = "chat", stream: bool = True,
                  continuous_usage: bool = False) -> dict[str, Any]:
    """The request body: streaming with usage, plus the server's extras.

    ``endpoint`` chat sends ``messages`` (the server applies its chat
    template); completions sends ``prompt`` as given: text, or a list of
    token ids (counted by the server exactly as sent). ``extra`` comes from
    ``server.request_extras`` in YAML: which field asks for speculative
    counters differs by server and version (SGLang 0.5.23 refuses
    ``return_meta_info`` on a stream and streams
    ``sglext.spec_tokens_details`` for ``return_spec_tokens_details``).
    ``continuous_usage`` asks for running usage on every chunk.
    """
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else list(prompt)
    body.update({"max_tokens": max_tokens, "temperature": temperature, "stream": stream})
    if stream:
        body["stream_options"] = {"include_usage": True}
        if continuous_usage:
            body["stream_options"]["continuous_usage_stats"] = True
    if ignore_eos:
        body["ignore_eos"] = True  # SGLang/vLLM extension: always produce max_tokens
    if extra:
        body.update(extra)
    return body


def make_client(base_url: str, *, concurrency: int = 1, api_key: str | None = None,
                timeout_s: float = 600.0) -> HttpConnection:
    """One keep-alive connection for streamed requests (``concurrency`` is 1 per connection:
    use :func:`make_clients` for more). Usable as ``async with``."""
    return HttpConnection(base_url, api_key=api_key, connect_timeout=min(10.0, timeout_s))


def make_clients(base_url: str, n: int, *, api_key: str | None = None,
                 timeout_s: float = 600.0) -> list[HttpConnection]:
    """``n`` connections: one per in-flight slot of a closed loop."""
    return [make_client(base_url, api_key=api_key, timeout_s=timeout_s) for _ in range(max(1, n))]


def make_admin_client(base_url: str, *, api_key: str | None = None, timeout_s: float = 30.0) -> "Any":
    """An httpx client for the small requests around a cell (flush, tokenize, probes)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # trust_env=False: an HTTP(S)_PROXY meant for the internet must not carry benchmark traffic.
    from sweep.io.bounded_http import AsyncBoundedTransport

    # the transport carries verify (a client's own verify is not used with a transport given)
    return httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, trust_env=False,
                             timeout=httpx.Timeout(timeout_s),
                             transport=AsyncBoundedTransport(verify=_ssl_verify(), total_s=2 * timeout_s))


def _ssl_verify() -> Any:
    from sweep.bench.transport import _ssl_context

    return _ssl_context()


async def stream_request(conn: HttpConnection, payload: dict[str, Any] | bytes, *, path: str = CHAT_PATH,
                         timeout_s: float = 600.0, keep_text: bool = True,
                         started: float | None = None) -> RequestResult:
    """Send one streaming request and measure it; never raises (except cancellation).

    ``payload`` may be pre-encoded JSON bytes (the matrix encodes before its
    window). ``started`` (a ``time.perf_counter()`` value) lets an open-loop
    caller measure TTFT and e2e from the request's scheduled arrival rather
    than from when a connection became free (no coordinated omission).
    """
    body = payload if isinstance(payload, bytes) else encode_json(payload)
    request = conn.encode("POST", path, body)
    rec = RequestResult(started=time.perf_counter() if started is None else started)
    st = Stream(rec)
    limit = _max_tokens(body)
    try:
        async with asyncio.timeout(timeout_s):
            try:
                await _run(conn, request, rec, st, started is None)
            except TransportError as exc:
                if not exc.unanswered or rec.retries:
                    raise
                # The server closed a kept-alive connection before any byte of an answer:
                # the request never reached it (llama-server closes the connection after
                # every streamed response although it advertises Keep-Alive, so reusing
                # one races its close). Sent once more, on a new connection, and counted.
                rec.retries += 1
                st = Stream(rec)
                await _run(conn, request, rec, st, started is None)
    except TimeoutError:
        rec.fail("timeout", f"no complete answer within {timeout_s:g} s")
    except TransportError as exc:
        rec.fail(exc.kind, str(exc))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a record, never a traceback
        rec.fail("exception", f"{type(exc).__name__}: {exc}")
    else:
        if rec.error is None:
            try:
                _finish(rec, st, keep_text, limit)
            except Exception as exc:  # noqa: BLE001 - what a server sent must never end the trial
                rec.fail(reported.KIND, f"{type(exc).__name__}: {exc}"[:300])
    if rec.e2e_s is None:
        rec.e2e_s = time.perf_counter() - rec.started
    if not keep_text:
        rec.text = ""
    if rec.detail:  # a server that echoes the key in an error body must not leak it into results
        key = conn.headers.get("authorization", "").partition(" ")[2]
        if key:
            rec.detail = secrets.mask_text(rec.detail, {key})
    return rec


async def stream_chat(conn: HttpConnection, payload: dict[str, Any] | bytes, *, timeout_s: float = 600.0,
                      keep_text: bool = True, path: str = CHAT_PATH,
                      started: float | None = None) -> RequestResult:
    """:func:`stream_request` on the chat endpoint (the coding eval's)."""
    return await stream_request(conn, payload, path=path, timeout_s=timeout_s, keep_text=keep_text,
                                started=started)


async def _run(conn: HttpConnection, request: bytes, rec: RequestResult, st: Stream, own_clock: bool) -> None:
    plain = bytearray()

    def on_head(status: int, headers: dict[str, str]) -> Any:
        rec.status = status
        if status < 400 and "text/event-stream" in headers.get("content-type", ""):
            return st.data
        cap = MAX_ERROR_BODY if status >= 400 else MAX_PLAIN_BODY

        def keep(piece: bytes, _now: float) -> None:
            if len(plain) < cap:
                plain.extend(piece[:cap - len(plain)])
        return keep

    def clock(t: float) -> None:
        if own_clock:
            rec.started = t

    await conn.send(request, on_head, clock)
    if rec.status is not None and rec.status >= 400:
        rec.fail(f"http_{rec.status}", _error_message(bytes(plain)))
    elif plain or not st.seen:
        body = bytes(plain)
        if not body.lstrip().startswith(b"data:"):
            _plain_body(rec, body)
        else:  # an SSE body without the SSE content type (some proxies relabel it)
            body = body.replace(b"\r\n", b"\n")
            st.data(body if body.endswith(b"\n\n") else body + b"\n\n", time.perf_counter())


_MAX_TOKENS = re.compile(rb'"max_tokens":\s*(\d{1,12})[,}\s]')


def _max_tokens(body: bytes) -> int | None:
    """The request's ``max_tokens`` (the key can only be the payload's: a string's quotes are escaped)."""
    m = _MAX_TOKENS.search(body)
    return int(m.group(1)) if m else None


def _finish(rec: RequestResult, st: Stream, keep_text: bool, max_tokens: int | None = None) -> None:
    err = st.err
    if keep_text or err:
        rec.text = "".join(st.parts)
    rec.finish_reason = st.finish
    rec.extras = st.extras or None
    try:  # what the server reports is data to validate (sweep/bench/reported.py)
        if st.meta:
            rec.spec_verify_ct = reported.count("meta_info.spec_verify_ct", st.meta.get("spec_verify_ct"))
            rec.meta_completion_tokens = reported.count("meta_info.completion_tokens",
                                                        st.meta.get("completion_tokens"))
        if st.usage:
            rec.completion_tokens, rec.prompt_tokens = reported.usage(st.usage, content_events=rec.chunks,
                                                                      max_tokens=max_tokens)
        if len(st.finals) > 1:
            reported.usage_blocks(st.finals)
        if rec.chunk_tokens or st.last_running is not None:
            reported.running(rec.chunk_tokens, rec.completion_tokens, last_chunk=st.last_running,
                             closed=bool(st.finals))
    except reported.BadReport as bad:
        rec.completion_tokens = rec.prompt_tokens = None
        rec.chunk_tokens = []
        rec.fail(reported.KIND, str(bad))
        return
    if err:
        rec.fail(err, rec.detail or f"malformed event after {rec.chunks} chunks")
        return
    if not st.done and st.finish is None:
        rec.fail("disconnect", f"stream ended after {rec.chunks} chunks without [DONE]")
        return
    if rec.completion_tokens is None:
        rec.fail("no_usage", "the server sent no usage block; tokens are not counted from chunks")
        return
    rec.ok = True
    rec.error = None


def _plain_body(rec: RequestResult, body: bytes) -> None:
    try:
        obj = loads(body) if body.strip() else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        snippet = body[:120].decode("utf-8", "replace")
        rec.fail("bad_json", f"expected an SSE stream, got {snippet!r}")
    elif "error" in obj or obj.get("object") == "error":
        rec.fail("server_error", _error_message(body))
    else:
        rec.fail("not_streamed", "expected an SSE stream, got a JSON body")


def _error_message(body: bytes) -> str:
    """A short message from an error body (OpenAI / SGLang / FastAPI shapes, or text)."""
    try:
        obj = loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)[:200]
        return str(obj.get("message") or obj.get("detail") or err)[:200]
    return str(obj)[:200]
