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
                 "Tok/s per user vs tok/s per GPU", "Accept length vs budget", "Speedup over the baseline vs budget",
                 "tok/s vs concurrency, context 1024", "No speedup: this group has no spec=none baseline"):
        assert text in dom, text

    control = tmp_path / "control.html"
    control.write_text(page.read_text().replace(
        "<main>", '<main><img src="http://127.0.0.1:9/x.png"><script>console.error("x")</script>', 1))
    _, refused = _chromium(control, tmp_path, tmp_path / "control.png")
    assert len(refused) >= 2, "the console check must see what the page's policy refuses"


# What the browser measures on the page at 1400 px (a script added to a copy of the report, whose own
# policy allows none): the page's and each table box's scroll widths, and every chart label that
# leaves its chart's frame.
MEASURE = """<script>
const out = {page: document.documentElement.scrollWidth, viewport: window.innerWidth, tables: [], outside: []};
for (const box of document.querySelectorAll('.tablewrap')) {
  const t = box.querySelector('table');
  out.tables.push({head: (t.querySelector('th') || {}).textContent || '', scroll: box.scrollWidth,
                   client: box.clientWidth, rows: t.querySelectorAll('tbody tr').length});
}
for (const svg of document.querySelectorAll('svg')) {
  const s = svg.getBoundingClientRect();
  for (const text of svg.querySelectorAll('text')) {
    const b = text.getBoundingClientRect();  // on the page, transforms (a rotated axis label) applied
    if (b.width && (b.left < s.left - 0.5 || b.top < s.top - 0.5 || b.right > s.right + 0.5 || b.bottom > s.bottom + 0.5))
      out.outside.push([svg.getAttribute('aria-label'), text.textContent]);
  }
}
const pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _measured(page: Path, tmp: Path) -> dict:
    probe = tmp / "measure.html"
    html = page.read_text()
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)  # the copy runs our script
    probe.write_text(html.replace("</body>", MEASURE + "</body>"))
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp / 'chromium-profile'}", "--window-size=1400,1000",
                          "--hide-scrollbars", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=180, cwd=tmp)
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', out.stdout, flags=re.S)
    assert found, out.stdout[-2000:]
    import html as html_lib
    import json

    return json.loads(html_lib.unescape(found.group(1)))


def _chart_titles(html: str, i: int) -> list[str]:
    """Titles of the charts drawn for group ``i``: its own section and its part of the deployment
    section (from its "Group i:" heading there to the next heading of that level)."""
    own = html.split(f'<section id="group-{i}"', 1)[1].split("</section>", 1)[0]
    deployment = html.split('<section id="deployment"', 1)[1].split("</section>", 1)[0] \
        if '<section id="deployment"' in html else ""
    found = re.search(rf"<h2[^>]*>Group {i}:(.*?)(?=<h2|$)", deployment, flags=re.S)
    return re.findall(r'<svg [^>]*aria-label="([^"]*)"', own + (found.group(1) if found else ""))


def _what(title: str) -> str:
    """What a chart shows, whatever its title says: tok/s against load per context, the user-vs-box
    front, or the title itself."""
    if (ctx := re.search(r"context (\d+)", title)) and "tok/s" in title.lower():
        return f"tok/s against load, context {ctx.group(1)}"
    if re.search(r"per[- ](stream|user)", title, flags=re.I):
        return "tok/s per user against the box's"
    return title


def test_the_report_fits_1400_px_and_draws_each_chart_once(tmp_path: Path) -> None:
    """Issue 33: at 1400 px the ranking tables fit (TPOT and startup were cut off), each chart is drawn
    once per group (the deployment section repeated the per-context charts), one colour per config on
    the whole page, every chart label inside its frame. Screenshots: report-1400-*.png."""
    from report_docs import crowded_sweep
    from test_schedule import write

    root = crowded_sweep(tmp_path / "results")
    for job, budget in enumerate(("none", 8, 4, 16)):  # a deployment group with crossovers
        write(root / "multirun" / "deploy", job, budget, 0.8 if budget == 16 else 1.0)
    page = tmp_path / "report.html"
    assert report.main(["--dir", str(root), "--format", "html", "-o", str(page)]) == 0
    html = page.read_text()

    got = _measured(page, tmp_path)
    assert got["viewport"] == 1400
    assert got["page"] <= 1400, f"the page scrolls sideways: {got['page']} px"
    ranking = [t for t in got["tables"] if t["head"] == "#"]  # each group's ranking (its first column: #)
    assert len(ranking) == 5 and all(t["rows"] for t in ranking), got["tables"]
    wide = [t for t in got["tables"] if t["scroll"] > t["client"]]
    assert not wide, f"tables wider than their box at 1400 px: {wide}"
    assert got["outside"] == [], f"chart labels outside their frame: {got['outside']}"

    for i in range(1, 6):
        shows = [_what(t) for t in _chart_titles(html, i)]
        assert shows and len(shows) == len(set(shows)), (i, sorted(shows))
    chips = re.findall(r'<span><i style="background:(#[0-9a-f]{6})"></i>([^<]+)</span>', html)
    colours: dict[str, set[str]] = {}
    for colour, name in chips:
        colours.setdefault(name, set()).add(colour)
    assert len(colours) >= 8 and all(len(c) == 1 for c in colours.values()), \
        {n: c for n, c in colours.items() if len(c) > 1}
    assert "max load" in html.split('<section id="group-4"', 1)[1].split("</thead>", 1)[0]  # the objective's column

    for height in (1000, 9000):  # the first screen, and the page
        shot = tmp_path / f"report-1400-{height}.png"
        out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size=1400,{height}",
                              "--hide-scrollbars", "--virtual-time-budget=5000", f"--screenshot={shot}",
                              page.as_uri()], capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert out.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", out.stderr[-2000:]
        print(f"screenshot: {shot}")
