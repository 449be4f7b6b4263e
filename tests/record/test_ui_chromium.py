"""End to end: the MLflow UI (a real server) lists the trials, seen by headless Chromium.

Needs Debian's ``chromium`` (CI: ``apt-get install -y chromium``). The page is
the comparison view specsweep registers on its experiment
(``#/experiments/<id>/runs?viewStateShareKey=specsweep-trials``); a screenshot
is saved under the test's tmp dir.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sweep.record.tracking import UI_VIEW_KEY

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(url: str, tmp: Path, screenshot: Path, budget_ms: int) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'chromium-profile'}", "--window-size=1920,1080",
           f"--virtual-time-budget={budget_ms}", f"--screenshot={screenshot}", "--dump-dom", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_mlflow_ui_lists_the_trials(http_sweep: dict, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    mlflow_server = http_sweep["url"]
    exp_id = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name(http_sweep["experiment"]).experiment_id

    url = f"{mlflow_server}/#/experiments/{exp_id}/runs?viewStateShareKey={UI_VIEW_KEY}"
    screenshot = tmp_path / "mlflow-ui.png"
    names = [f"b300-ddtree-b{b}-t4-w2048" for b in (8, 16, 32)]
    for budget_ms in (20000, 45000):  # a slow CI box gets a second, longer look
        dom = _chromium(url, tmp_path, screenshot, budget_ms)
        if all(n in dom for n in names):
            break
    missing = [n for n in names if n not in dom]
    assert not missing, f"the MLflow UI did not list {missing}; screenshot: {screenshot}"
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
