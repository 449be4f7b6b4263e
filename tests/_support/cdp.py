"""Headless Chromium driven over the DevTools protocol on a pipe: a page's layout measured in the page.

Why: ``--dump-dom`` gives a page's DOM but not where things are drawn. MLflow's runs table renders
columns beyond its viewport too (AG Grid's buffer), so "in the DOM" is not "on screen"; the test asks
the browser for bounding boxes instead. ``--remote-debugging-pipe`` needs no port and no client
package: JSON messages ending in NUL on the child's fds 3 (in) and 4 (out).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


class Page:
    """One tab of a headless Chromium at ``width`` x ``height`` CSS pixels; ``evaluate`` returns a
    JavaScript expression's value (promises awaited)."""

    def __init__(self, chromium: str, profile: Path, width: int = 1400, height: int = 900) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our messages, its fd 4 writes the answers
            read, write = os.dup(to_child_r), os.dup(from_child_w)  # above 4: neither dup2 clobbers the other
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "--remote-debugging-pipe",
             "about:blank"],
            pass_fds=(3, 4, to_child_r, from_child_w), preexec_fn=wire,  # 3, 4 kept after wire()
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self._call("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _call(self, method: str, params: dict[str, Any], session: bool = False) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_child, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def goto(self, url: str) -> None:
        self._call("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression: str) -> Any:
        got = self._call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                              "returnByValue": True}, session=True)
        if "exceptionDetails" in got:
            raise RuntimeError(got["exceptionDetails"].get("text"))
        return got["result"].get("value")

    def wait_for(self, condition: str, timeout_s: float = 60.0) -> Any:
        """The value of JavaScript ``condition`` once it is truthy (polled in the page), else None."""
        return self.evaluate(f"""new Promise(done => {{
            const end = Date.now() + {timeout_s * 1000:.0f};
            const poll = () => {{ let v = null; try {{ v = ({condition}); }} catch (e) {{}}
                if (v || Date.now() > end) done(v || null); else setTimeout(poll, 250); }};
            poll(); }})""")

    def screenshot(self, path: Path) -> Path:
        import base64

        data = self._call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._call("Browser.close", {})
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
