"""A tiny real HTTP server for the launcher tests (not a test module).

Named for what it is: a stand-in for SGLang's *lifecycle* only (startup
delay, 503 while loading, health endpoints, child processes, crash output),
started as a real process by the real launcher. The real simulator is
tested in test_sim_launch.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def spawn_tree(ignore_term: bool) -> None:
    """Child that spawns a grandchild; both sleep (and maybe ignore SIGTERM and SIGINT)."""
    code = (
        "import os, signal, subprocess, sys, time\n"
        f"ign = {ignore_term!r}\n"
        "if ign: signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "g = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time, sys; ign = ' + repr(ign) + '\\n"
        "if ign: signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
        "sys.stdout.write(\"grandchild pid %d\\\\n\" % __import__(\"os\").getpid()); sys.stdout.flush(); time.sleep(600)'])\n"
        "sys.stdout.write('child pid %d\\n' % os.getpid()); sys.stdout.flush()  # one write: no interleaving\n"
        "time.sleep(600)\n"
    )
    subprocess.Popen([sys.executable, "-c", code])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ready-after", type=float, default=0.0)
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--no-health-generate", action="store_true")
    p.add_argument("--unhealthy-if-exists", default=None)
    p.add_argument("--spawn-tree", action="store_true")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--api-key", default=None)
    p.add_argument("--term-waits", action="store_true",
                   help="like uvicorn with open connections: SIGTERM waits, a SIGINT quits")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    print(f"toy server starting argv={sys.argv[1:]} pid={os.getpid()}", flush=True)
    if args.ignore_term:  # only SIGKILL ends it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.term_waits:
        signal.signal(signal.SIGTERM, lambda *_: print("Waiting for connections to close.", flush=True))
        signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    if args.spawn_tree:
        spawn_tree(args.ignore_term)
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *a: object) -> None:
            print("toy request", fmt % a, flush=True)

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                if self.path == "/health_generate" and args.no_health_generate:
                    return self._send(404, {"detail": "Not Found"})
                if args.unhealthy_if_exists and os.path.exists(args.unhealthy_if_exists):
                    return self._send(503, {"status": "unhealthy"})
                loading = args.never_ready or time.monotonic() - started < args.ready_after
                return self._send(503 if loading else 200, {})
            if self.path == "/get_server_info":
                return self._send(200, {"version": "toy-1.0", "api_key": args.api_key,
                                        "tag": args.tag, "pid": os.getpid()})
            return self._send(404, {"detail": "Not Found"})

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"toy server listening on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
