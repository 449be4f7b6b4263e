"""The printed MLflow links point at the UI that runs: its own host and port, not always 5000.

A real ``mlflow ui`` is started on a free port for a local store; the link for that store names
that port, a link for another store does not, and ``MLFLOW_UI_URL`` wins over both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _support import free_port
from sweep.record._mlflow_experiment import DEFAULT_UI, ui_url


@pytest.fixture
def ui(tmp_path: Path):  # noqa: ANN201
    port = free_port()
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow = str(Path(sys.executable).parent / "mlflow")
    proc = subprocess.Popen([mlflow, "ui", "--port", str(port), "--backend-store-uri", store],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # its command line is what is read: no need to wait for it to serve
        yield port, store
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_link_names_the_port_the_ui_listens_on(ui, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port, store = ui
    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    assert ui_url(store, "1", "abc").startswith(f"http://127.0.0.1:{port}/#/experiments/1/runs/abc")
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert ui_url(other, "1").startswith(DEFAULT_UI)  # no UI serves that store: mlflow ui's default
    monkeypatch.setenv("MLFLOW_UI_URL", "http://gpu-box.example.com:8080")
    assert ui_url(store, "1").startswith("http://gpu-box.example.com:8080/#/experiments/1")
    assert ui_url("http://tracking:5001", "1").startswith("http://tracking:5001/")  # a server is its own UI
    assert os.environ["MLFLOW_UI_URL"]
