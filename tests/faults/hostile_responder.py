"""TEST DOUBLE: an OpenAI-compatible server whose every answer is hostile code.

Started by the normal local launcher in place of SGLang
(``server.executable=[python, hostile_responder.py]``), it ignores SGLang's
flags except ``--host``/``--port``, answers the readiness and stats
endpoints a trial touches, and streams, for every chat completion, one
```python block: the code in ``$HOSTILE_CODE_FILE`` (read per request).
A text completion (``/v1/completions``, the matrix's endpoint) streams a few
words; usage is reported, so the matrix part of the trial is measured normally.
Stdlib only, so it needs nothing of the project.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _arg(name: str, default: str) -> str:
    argv = sys.argv
    return argv[argv.index(name) + 1] if name in argv[:-1] else default


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path in ("/health", "/health_generate"):
            self._send(200, b"{}")
        elif self.path == "/metrics":
            self._send(200, b"", "text/plain")
        elif self.path in ("/get_server_info", "/server_info", "/v1/models"):
            self._send(200, b'{"version": "hostile-responder"}')
        else:
            self._send(404, b"{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/v1/completions" and body.get("stream"):
            text = "hostile responder words "
            first: dict = {"index": 0, "text": text, "finish_reason": None}
            last: dict = {"index": 0, "text": "", "finish_reason": "stop"}
        elif self.path == "/v1/chat/completions":
            with open(os.environ["HOSTILE_CODE_FILE"], encoding="utf-8") as fh:
                text = "```python\n" + fh.read() + "\n```\n"
            first = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
            last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        else:
            self._send(200, b"{}")
            return
        n = min(max(1, len(text) // 4), int(body.get("max_tokens") or 1 << 30))  # a server stops at max_tokens
        events = [{"choices": [first]}, {"choices": [last]},
                  {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": n,
                                            "total_tokens": 10 + n}}]
        if not body.get("stream"):
            self._send(200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                     "finish_reason": "stop"}],
                                        "usage": events[-1]["usage"]}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for ev in events:
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


if __name__ == "__main__":
    server = ThreadingHTTPServer((_arg("--host", "127.0.0.1"), int(_arg("--port", "30000"))), Handler)
    print("hostile responder ready", flush=True)
    server.serve_forever()
