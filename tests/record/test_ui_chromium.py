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
from sweep.record._mlflow_experiment import ui_url
from sweep.record.tracking import UI_VIEW_KEY

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(url: str, tmp: Path, screenshot: Path, budget_ms: int) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'chromium-profile'}", "--window-size=2560,1080",  # MLflow 3.17 opens its Assistant panel beside the table
           f"--virtual-time-budget={budget_ms}", f"--screenshot={screenshot}", "--dump-dom", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_mlflow_ui_lists_the_trials(http_sweep: dict, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    mlflow_server = http_sweep["url"]
    exp_id = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name(http_sweep["experiment"]).experiment_id

    # the address python -m sweep prints: the trials' view, in the classic (model training) UI
    url = ui_url(mlflow_server, exp_id)
    assert url == f"{mlflow_server}/#/experiments/{exp_id}/runs?viewStateShareKey={UI_VIEW_KEY}" \
                  "&workflowType=machine_learning"
    screenshot = tmp_path / "mlflow-ui.png"
    names = [f"b300-ddtree-b{b}-t4-w2048" for b in (8, 16, 32)]
    for budget_ms in (20000, 45000):  # a slow CI box gets a second, longer look
        dom = _chromium(url, tmp_path, screenshot, budget_ms)
        if all(n in dom for n in names):
            break
    missing = [n for n in names if n not in dom]
    assert not missing, f"the MLflow UI did not list {missing}; screenshot: {screenshot}"
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    # the runs table with the view's short columns, not the GenAI overview
    for column in (">low-load tok/s<", ">TTFT ms p50<", ">speedup<"):  # the figures' labels (score/names.py)
        assert column in dom, f"no {column} column; screenshot: {screenshot}"
    assert "Detect Issues" not in dom
    print(f"screenshot: {screenshot}")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_a_runs_charts_open_with_throughput_then_ttft_then_tpot(http_sweep: dict, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    mlflow_server = http_sweep["url"]
    client = MlflowClient(tracking_uri=mlflow_server)
    exp_id = client.get_experiment_by_name(http_sweep["experiment"]).experiment_id
    ok = next(r for r in http_sweep["run_ids"] if client.get_run(r).info.status == "FINISHED")
    url = ui_url(mlflow_server, exp_id, ok).replace("?", "/model-metrics?", 1)
    screenshot = tmp_path / "mlflow-run-charts.png"
    sections = ["1 tok_s", "2 ttft_ms", "3 tpot_ms", "Model metrics"]
    for budget_ms in (30000, 60000):
        dom = _chromium(url, tmp_path, screenshot, budget_ms)
        if all(s in dom for s in sections):
            break
    # the numbered sections first, in order; the headline figures' own section after them
    where = [dom.find(s) for s in sections[:3]] + [dom.rfind(sections[3])]
    assert -1 not in where and where == sorted(where), (dict(zip(sections, where)), str(screenshot))
