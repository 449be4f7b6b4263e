"""TEST DOUBLE: a stand-in inference server that fails at the protocol level, on purpose.

Started by the normal local launcher in place of SGLang, with the server
group's YAML overrides (``server.executable=[python, tests/faults/stand_in.py]``,
``+server.extra_env.STAND_IN_MODE=<mode>``); it takes the rendered SGLang
flags and uses ``--host``/``--port`` only. Readiness, server info, /metrics
and /flush_cache answer like a healthy server (``hostile_responder.Handler``);
every completion -- chat (the coding eval) or text (``/v1/completions``, the
matrix's default endpoint) -- misbehaves the way ``STAND_IN_MODE`` says:

* ``ok``           a well-formed stream with usage (its "answers" fail the coding
                   tests: wrong answers, not protocol errors);
* ``http_500``     HTTP 500 with an OpenAI-style error body;
* ``broken_sse``   a 200 event stream whose events are not JSON;
* ``disconnect``   two good chunks, then the connection is cut mid-stream;
* ``stall``        a 200 with headers, then nothing, ever (the client's timeout);
* ``fail_every_N`` every Nth chat request gets the 500, the others ``ok``;
* ``usage_negative`` / ``usage_absurd`` / ``usage_inf`` / ``usage_string`` / ``running_down``:
                   a well-formed stream whose usage reports -4 tokens, 10^30 tokens,
                   1e400 (JSON's way to overflow a float), "4", or running counts that go down;
* ``metrics_negative`` answers every request ``ok`` and reports ``sglang:spec_accept_length -2.5``;
* ``usage_fewer`` / ``usage_twice`` / ``running_short``: counts that disagree with the stream or with
                   each other: 64 events of text reported as 3 tokens, two usage blocks (4, then 3),
                   running counts ending at 4 under a final 9;
* ``usage_raw``    a well-formed stream whose usage block is ``$STAND_IN_USAGE`` verbatim (any JSON
                   text: a float count, a list, null, prompt tokens past the context ...);
* ``no_usage``     a well-formed stream that never reports usage;
* ``endless_event`` a 200 event stream whose first event never ends (bytes, no blank line, forever);
* ``body_raw``     a 200 event stream whose body is ``$STAND_IN_BODY`` verbatim (``\\n`` for newlines);
* ``info_raw`` / ``metrics_raw``: answers every request ``ok``; ``/get_server_info`` answers
                   ``$STAND_IN_INFO``, ``/metrics`` answers ``$STAND_IN_METRICS`` (verbatim);
* ``code``         the chosen "model code" of ``$HOSTILE_CODE_FILE`` (hostile_responder).

Stdlib only (plus its sibling ``hostile_responder.py``), so it needs nothing of the project.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer

from hostile_responder import Handler, _arg

MODE = os.environ.get("STAND_IN_MODE", "ok")
_counter = itertools.count(1)
_lock = threading.Lock()


def _event(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def _chunk(text: str, chat: bool, finish: str | None = None) -> dict:
    choice = {"index": 0, "delta": {"content": text} if text else {}} if chat else {"index": 0, "text": text}
    return {"choices": [{**choice, "finish_reason": finish}]}


def _good(chat: bool) -> list[bytes]:
    """A well-formed stream in the endpoint's chunk format, with usage."""
    first = ({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]} if chat
             else _chunk("", chat=False))
    return [_event(first), _event(_chunk("stand-in ", chat)), _event(_chunk("answer ", chat)),
            _event(_chunk("", chat, finish="stop")),
            _event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}}),
            b"data: [DONE]\n\n"]


COMPLETIONS = ("/v1/chat/completions", "/v1/completions")


USAGE = {"usage_negative": b"-4", "usage_absurd": b"1" + b"0" * 30, "usage_inf": b"1e400", "usage_string": b'"4"'}


def _bad_usage(good: list[bytes], mode: str, chat: bool) -> list[bytes]:
    """``good`` with its usage block's completion_tokens replaced by a raw JSON number (or running counts)."""
    if mode == "running_down":
        def running(text: str, ct: int) -> bytes:
            return _event({**_chunk(text, chat), "usage": {"prompt_tokens": 10, "completion_tokens": ct}})
        return [good[0], running("stand-in ", 3), running("answer ", 1), *good[3:]]
    if mode == "no_usage":
        return [*good[:4], good[-1]]
    if mode == "usage_fewer":  # 64 events of text, 3 tokens by usage (was 2,304 tok/s and ok)
        return [good[0], *(_event(_chunk("x ", chat)) for _ in range(64)), good[3],
                _event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}), good[-1]]
    if mode == "usage_twice":  # two usage blocks of one answer that disagree
        return [*good[:4], _event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4}}),
                _event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}), good[-1]]
    if mode == "running_short":  # running usage that ends short of the final count
        def counted(text: str, ct: int) -> bytes:
            return _event({**_chunk(text, chat), "usage": {"prompt_tokens": 10, "completion_tokens": ct}})
        return [good[0], counted("stand-in ", 2), counted("answer ", 4), *good[3:4],
                _event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 9}}), good[-1]]
    if mode == "usage_raw":
        usage = b'data: {"choices": [], "usage": ' + os.environ.get("STAND_IN_USAGE", "null").encode() + b"}\n\n"
        return [*good[:4], usage, good[-1]]
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": ' + USAGE[mode] + b"}}\n\n"
    return [*good[:4], usage, good[-1]]


class StandIn(Handler):
    def do_GET(self) -> None:
        if self.path == "/metrics" and MODE == "metrics_negative":
            self._send(200, b"sglang:spec_accept_length -2.5\n", "text/plain")
            return
        if self.path == "/metrics" and MODE == "metrics_raw":
            self._send(200, os.environ.get("STAND_IN_METRICS", "").encode(), "text/plain")
            return
        if self.path in ("/get_server_info", "/server_info") and MODE == "info_raw":
            self._send(200, os.environ.get("STAND_IN_INFO", "{}").encode())
            return
        super().do_GET()

    def do_POST(self) -> None:
        if self.path not in COMPLETIONS or MODE == "code":
            super().do_POST()
            return
        good = _good(chat=self.path == COMPLETIONS[0])
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _lock:
            n = next(_counter)
        mode = MODE
        if mode.startswith("fail_every_"):
            mode = "http_500" if n % int(mode.rsplit("_", 1)[1]) == 0 else "ok"
        if mode == "http_500":
            self._send(500, json.dumps({"error": {"message": f"stand-in: internal error on request {n}",
                                                  "type": "InternalServerError", "code": 500}}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if mode in ("ok", "metrics_negative", "metrics_raw", "info_raw"):
            self.wfile.write(b"".join(good))
        elif mode in USAGE or mode in ("running_down", "usage_raw", "no_usage", "usage_fewer", "usage_twice",
                                       "running_short"):
            self.wfile.write(b"".join(_bad_usage(good, mode, chat=self.path == COMPLETIONS[0])))
        elif mode == "endless_event":  # one event that never ends: bytes without a blank line, forever
            self.wfile.write(b'data: {"choices": [{"index": 0, "text": "')
            while True:
                self.wfile.write(b"x" * 65536)
        elif mode == "body_raw":
            self.wfile.write(os.environ.get("STAND_IN_BODY", "").replace("\\n", "\n").encode())
        elif mode == "broken_sse":
            self.wfile.write(good[0] + b'data: {"choices": [{"delta": {"content": "tru\n\n' + good[-1])
        elif mode == "disconnect":
            self.wfile.write(b"".join(good[:3]))
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # cut mid-stream: no finish, no [DONE]
        elif mode == "stall":
            self.wfile.flush()
            while True:  # a server that took the request and never answers
                time.sleep(3600)
        else:
            raise SystemExit(f"stand-in: unknown STAND_IN_MODE {MODE!r}")


if __name__ == "__main__":
    server = ThreadingHTTPServer((_arg("--host", "127.0.0.1"), int(_arg("--port", "30000"))), StandIn)
    server.daemon_threads = True
    print(f"stand-in server ready (mode {MODE}, pid {os.getpid()})", flush=True)
    sys.stdout.flush()
    server.serve_forever()
