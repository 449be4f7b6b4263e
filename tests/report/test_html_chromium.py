"""The HTML report renders in a real browser: headless Chromium, offline, no console message.

Needs Debian's ``chromium`` (CI: ``apt-get install -y chromium``). The report is
written by the real command (``python -m sweep.report --format html``) from a
directory of typed result files with three groups, failures, an interrupted
and a pruned trial and repeated cells. Chromium loads the file, a screenshot
is saved (its path is printed), and the DOM it built is checked for every
section; Chromium's console log (``--enable-logging=stderr``) must be empty --
a control page with one external image and one script shows that this check
sees the Content-Security-Policy refusals it is there to catch.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_docs import mixed_sweep

from sweep.report import __main__ as report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
CONSOLE = re.compile(r":CONSOLE[:(]")


def _chromium(page: Path, tmp: Path, screenshot: Path) -> tuple[str, list[str]]:
    """(the DOM after loading, Chromium's console lines)."""
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp / 'chromium-profile'}", "--window-size=1320,4800",
            "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0"]
    shot = subprocess.run([*base, f"--screenshot={screenshot}", page.as_uri()], capture_output=True,
                          text=True, timeout=180, cwd=tmp)
    assert shot.returncode == 0, shot.stderr[-2000:]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180,
                         cwd=tmp)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for out in (shot, dom) for line in out.stderr.splitlines() if CONSOLE.search(line)]
    return dom.stdout, console


def test_the_html_report_renders_offline_without_console_messages(tmp_path: Path) -> None:
    root = mixed_sweep(tmp_path / "results")
    page = tmp_path / "report.html"
    assert report.main(["--dir", str(root), "--format", "html", "-o", str(page)]) == 0
    screenshot = tmp_path / "report.png"
    dom, console = _chromium(page, tmp_path, screenshot)
    print(f"screenshot: {screenshot}")
    assert console == [], console
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000  # a page, not a blank
    for section in ("group-1", "group-2", "group-3", "failures", "pruned"):
        assert f'id="{section}"' in dom, section
    assert dom.count("<svg") >= 10  # bars, tok/s per context, Pareto, accept and speedup vs budget
    for text in ("b300-ddtree-b8-t4-w2048-seed", "pro6000_tp8-ddtree-b8-t4-w2048-seed",
                 "b300-ddtree-b8-t4-w2048-smoke", "cuda_graph", "stopped by the pruner", "95% CI",
                 "Per-stream vs aggregate tok/s", "Accept length vs budget", "Speedup over the baseline vs budget",
                 "Aggregate tok/s, context 1024", "No speedup: this group has no spec=none baseline"):
        assert text in dom, text

    control = tmp_path / "control.html"
    control.write_text(page.read_text().replace(
        "<main>", '<main><img src="http://127.0.0.1:9/x.png"><script>console.error("x")</script>', 1))
    _, refused = _chromium(control, tmp_path, tmp_path / "control.png")
    assert len(refused) >= 2, "the console check must see what the page's policy refuses"
