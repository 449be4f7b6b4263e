"""The HTML deployment section at 1400 px, measured in Chromium, on the recorded landscapes.

Issue 38: the deployment table clipped its right-hand columns (every tied config's full name in one
unbroken cell: 5,700 px), had tall rows, and printed ``--dir SWEEP_DIR``. The page is made by the
report from the two recorded landscapes of this repository (llama.cpp and vLLM on this CPU, names
like ``cpu-ngram-b16-ngram_n_match=8-threads=1-cpu-ctx64.256-c1.2.4-mt64``); Chromium, driven over
the DevTools pipe (``tests/_support/cdp.py``), is asked for each table's widths and row heights.
Needs Debian's ``chromium``.
"""

from __future__ import annotations

import html as html_lib
import re
import shutil
from pathlib import Path

import pytest

from _support.cdp import Page
from sweep.report import html
from sweep.sim import landscape

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
LANDSCAPES = Path(__file__).resolve().parents[2] / "benchmarks" / "measured" / "landscapes"

MEASURE = """(() => {
  const line = parseFloat(getComputedStyle(document.body).lineHeight);
  return {page: document.documentElement.scrollWidth, line: line,
          tables: [...document.querySelectorAll('#deployment .tablewrap')].map(box => ({
            scroll: box.scrollWidth, client: box.clientWidth,
            rows: [...box.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height)}))};
})()"""


def test_the_deployment_tables_fit_1400_px_with_short_rows_and_the_real_path(tmp_path: Path) -> None:
    docs, sources = [], []
    for path in sorted(LANDSCAPES.glob("*.json")):
        for source, doc in landscape.trial_docs(landscape.load(path)):
            docs.append(doc)
            sources.append(source)
    page_file = tmp_path / "report.html"
    page_file.write_text(html.render(docs, title="landscapes", sources=sources))
    text = page_file.read_text()

    with Page(CHROMIUM, tmp_path / "profile", 1400, 1000) as page:
        page.goto(page_file.as_uri())
        got = page.wait_for(f"document.readyState === 'complete' && {MEASURE}", 30)
        shot = page.screenshot(tmp_path / "deployment-1400.png")
    print(f"screenshot: {shot}")
    assert got and got["tables"], "no deployment table"
    assert got["page"] <= 1400, f"the page scrolls sideways: {got['page']} px"
    wide = [t for t in got["tables"] if t["scroll"] > t["client"]]
    assert not wide, f"deployment tables wider than their box at 1400 px: {wide}"
    tall = max(h for t in got["tables"] for h in t["rows"])
    assert tall <= 3.5 * got["line"] + 12, f"a row {tall:.0f} px tall (line {got['line']} px)"

    section = text.split('<section id="deployment"', 1)[1].split("</section>", 1)[0]
    assert f"python -m sweep.schedule --dir {LANDSCAPES}" in html_lib.unescape(section)
    assert "SWEEP_DIR" not in text
    # shortened names keep the full name as the tooltip; no cell prints one whole
    from sweep.score.configs import names

    full = set(names(docs).values())  # each config's one name, as the report's rows carry it
    titles = {html_lib.unescape(t) for t in re.findall(r'<span class="nm" title="([^"]+)"', section)}
    assert titles and titles <= full, titles - full
    cells = re.findall(r'<td class="names">(.*?)</td>', section)
    assert cells and not any(re.sub(r"<[^>]+>", "", html_lib.unescape(c)).strip("≈ ") in full for c in cells)
