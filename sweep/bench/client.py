"""One streamed chat completion, measured the way an inference engineer trusts.

Why this shape:

* Tokens come from the server's ``usage`` (``stream_options.include_usage``),
  never from counting chunks: with speculative decoding one chunk carries
  several tokens (a DDTree step emits ~4.5). A server that sends no usage
  makes the request an error of kind ``no_usage`` rather than a guess.
* Timing is per chunk *arrival* (one network read): TTFT is the arrival of
  the first content, ITL the gaps between later arrivals that carry
  content, and TPOT = (e2e - ttft) / (completion_tokens - 1), which stays
  honest when chunks carry several tokens.
* SGLang's ``meta_info`` (``return_meta_info``) gives ``spec_verify_ct``,
  so accept length = completion_tokens / spec_verify_ct per request.
* Every way a request can go wrong (unreachable, 4xx/5xx, a body that is not
  JSON, a malformed SSE event, a disconnect mid-stream, a timeout) becomes an
  error *kind* on the record, never an exception: failed requests must be
  counted and shown, not silently skew or abort a cell.

The API key travels only in the Authorization header of the client; no
record, detail string or log line ever contains it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from sweep import secrets
from sweep.bench.sse import Stream, as_int, loads

if TYPE_CHECKING:
    import httpx

CHAT_PATH = "/v1/chat/completions"
MAX_ERROR_BODY = 2048
MAX_PLAIN_BODY = 4 * 1024 * 1024

# Error kinds (plus ``http_<status>``), documented in one place.
ERROR_KINDS = {
    "connect": "endpoint unreachable (connection refused / DNS / connect timeout)",
    "timeout": "no complete answer within the request timeout",
    "disconnect": "connection closed before the stream finished",
    "bad_sse": "an SSE event whose data is not valid JSON",
    "bad_json": "a non-streaming body that is not JSON",
    "not_streamed": "a JSON body where an SSE stream was expected",
    "server_error": "the server reported an error object",
    "no_usage": "stream finished without a usage block (token count unknown)",
    "http_error": "another HTTP transport error",
    "exception": "an unexpected client-side error",
}


@dataclass(slots=True)
class RequestResult:
    """What one request did. ``ok`` is False exactly when ``error`` is set."""

    ok: bool = False
    error: str | None = None
    detail: str | None = None
    status: int | None = None
    started: float = 0.0              # time.perf_counter() at send
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)   # gaps between content arrivals
    chunks: int = 0                   # SSE events with content (not tokens!)
    completion_tokens: int | None = None   # from usage
    prompt_tokens: int | None = None       # from usage
    spec_verify_ct: int | None = None      # from meta_info
    meta_completion_tokens: int | None = None
    finish_reason: str | None = None
    text: str = ""

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first: (e2e - ttft) / (tokens - 1)."""
        if not self.ok or self.e2e_s is None or self.ttft_s is None:
            return None
        n = self.completion_tokens or 0
        if n < 2:
            return None
        return max(0.0, self.e2e_s - self.ttft_s) / (n - 1)

    @property
    def stream_tok_s(self) -> float | None:
        """Decode speed one user sees: completion_tokens / (e2e - ttft).

        Prefill wait is excluded (TTFT reports it); when the whole answer
        arrived in the first chunk, falls back to completion_tokens / e2e.
        """
        if not self.ok or not self.completion_tokens or self.e2e_s is None:
            return None
        decode = self.e2e_s - (self.ttft_s or 0.0)
        if decode <= 1e-6:
            decode = self.e2e_s
        return self.completion_tokens / decode if decode > 0 else None

    @property
    def accept_len(self) -> float | None:
        """completion_tokens / spec_verify_ct from meta_info (None without spec)."""
        if not self.spec_verify_ct:
            return None
        n = self.meta_completion_tokens or self.completion_tokens
        return n / self.spec_verify_ct if n else None

    def fail(self, kind: str, detail: str | None = None) -> "RequestResult":
        self.ok = False
        self.error = kind
        self.detail = (detail or "")[:300] or None
        return self


def build_payload(model: str, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                  ignore_eos: bool = False, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chat request body: streaming with usage, plus the server's extras.

    ``extra`` comes from ``server.request_extras`` in YAML: which field asks
    for speculative counters differs by server and version (SGLang 0.5.23
    refuses ``return_meta_info`` on a stream and streams
    ``sglext.spec_tokens_details`` for ``return_spec_tokens_details``).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True  # SGLang/vLLM extension: always produce max_tokens
    if extra:
        body.update(extra)
    return body


def _ssl_context() -> Any:
    """One TLS context for every client (building one per client costs ~60 ms)."""
    global _SSL
    if _SSL is None:
        import httpx

        _SSL = httpx.create_ssl_context(trust_env=False)
    return _SSL


_SSL: Any = None


def make_client(base_url: str, *, concurrency: int = 1, api_key: str | None = None,
                timeout_s: float = 600.0) -> "httpx.AsyncClient":
    """An AsyncClient whose keep-alive pool holds ``concurrency`` connections.

    A smaller pool would queue requests inside the client and show up as
    server TTFT; a larger one is pointless in a closed loop. For many
    connections prefer :func:`make_clients`.
    """
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=max(1, concurrency),
                          max_keepalive_connections=max(1, concurrency))
    timeout = httpx.Timeout(connect=min(10.0, timeout_s), read=timeout_s, write=timeout_s, pool=None)
    # trust_env=False: an HTTP(S)_PROXY meant for the internet must not carry benchmark traffic.
    return httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=timeout,
                             trust_env=False, verify=_ssl_context())


def make_clients(base_url: str, n: int, *, api_key: str | None = None,
                 timeout_s: float = 600.0) -> list["httpx.AsyncClient"]:
    """``n`` single-connection clients: together, a keep-alive pool of ``n``.

    Why not one client with ``n`` connections: httpcore's pool rescans all
    its connections (quadratically) whenever a request starts or ends, which
    at concurrency 128 costs more CPU than reading the streams. One
    connection per in-flight slot is the same pool without that cost.
    """
    return [make_client(base_url, concurrency=1, api_key=api_key, timeout_s=timeout_s)
            for _ in range(max(1, n))]


async def stream_chat(client: "httpx.AsyncClient", payload: dict[str, Any], *,
                      timeout_s: float = 600.0, keep_text: bool = True,
                      path: str = CHAT_PATH, started: float | None = None) -> RequestResult:
    """Send one streaming request and measure it; never raises (except cancellation).

    ``started`` (a ``time.perf_counter()`` value) lets an open-loop caller
    measure TTFT and e2e from the request's scheduled arrival rather than
    from when a connection became free (no coordinated omission).
    """
    import httpx

    rec = RequestResult(started=time.perf_counter() if started is None else started)
    try:
        async with asyncio.timeout(timeout_s):
            await _run(client, payload, rec, path, keep_text)
    except TimeoutError:
        rec.fail("timeout", f"no complete answer within {timeout_s:g} s")
    except httpx.TimeoutException as exc:
        rec.fail("connect" if isinstance(exc, httpx.ConnectTimeout) else "timeout", type(exc).__name__)
    except httpx.ConnectError as exc:
        rec.fail("connect", str(exc) or type(exc).__name__)
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError) as exc:
        rec.fail("disconnect", str(exc) or type(exc).__name__)
    except httpx.DecodingError as exc:
        rec.fail("bad_json", str(exc))
    except httpx.HTTPError as exc:
        rec.fail("http_error", f"{type(exc).__name__}: {exc}")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a record, never a traceback
        rec.fail("exception", f"{type(exc).__name__}: {exc}")
    if rec.e2e_s is None:
        rec.e2e_s = time.perf_counter() - rec.started
    if not keep_text:
        rec.text = ""
    if rec.detail:  # a server that echoes the key in an error body must not leak it into results
        key = client.headers.get("authorization", "").partition(" ")[2]
        if key:
            rec.detail = secrets.mask_text(rec.detail, {key})
    return rec


async def _run(client: "httpx.AsyncClient", payload: dict[str, Any], rec: RequestResult,
               path: str, keep_text: bool) -> None:
    async with client.stream("POST", path, json=payload) as resp:
        rec.status = resp.status_code
        if resp.status_code >= 400:
            body = await _read_capped(resp, MAX_ERROR_BODY)
            rec.fail(f"http_{resp.status_code}", _error_message(body))
            return
        ctype = resp.headers.get("content-type", "")
        st = Stream(rec)
        if "text/event-stream" not in ctype:
            body = await _read_capped(resp, MAX_PLAIN_BODY)
            if not body.lstrip().startswith(b"data:"):
                _plain_body(rec, body)
                return
            body = body.replace(b"\r\n", b"\n")
            _, err = st.feed(body if body.endswith(b"\n\n") else body + b"\n\n", time.perf_counter())
        else:
            err = None
            buf = b""
            async for piece in resp.aiter_bytes():
                if st.done:  # drain the end of the body so the connection stays pooled
                    continue
                now = time.perf_counter()
                buf = buf + piece if buf else piece
                if buf.find(b"\r") >= 0:  # CRLF line ends (find is cheaper than `in` here)
                    buf = buf.replace(b"\r\n", b"\n")
                buf, err = st.feed(buf, now)
                if err:
                    break
                if st.done:
                    rec.e2e_s = now - rec.started
            if not err and not st.done and buf.strip():
                _, err = st.feed(buf + b"\n\n", time.perf_counter())
    if rec.e2e_s is None:
        rec.e2e_s = time.perf_counter() - rec.started
    _finish(rec, st, err, keep_text)


def _finish(rec: RequestResult, st: Stream, err: str | None, keep_text: bool) -> None:
    if keep_text or err:
        rec.text = "".join(st.parts)
    rec.finish_reason = st.finish
    if st.meta:
        rec.spec_verify_ct = as_int(st.meta.get("spec_verify_ct"))
        rec.meta_completion_tokens = as_int(st.meta.get("completion_tokens"))
    if st.usage:
        rec.completion_tokens = as_int(st.usage.get("completion_tokens"))
        rec.prompt_tokens = as_int(st.usage.get("prompt_tokens"))
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


async def _read_capped(resp: "httpx.Response", cap: int) -> bytes:
    out = bytearray()
    async for piece in resp.aiter_bytes():
        out += piece
        if len(out) >= cap:
            break
    return bytes(out[:cap])


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
