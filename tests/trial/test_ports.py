"""The server port when the user did not set one: the configured one, else the next free one.

Real parts: the real simulator started by the real local launcher, real sockets
holding ports. The configured port is set on the composed config (as a user's
own config file or server group would), not as a ``server.port=`` override:
an override means "this port", which keeps failing ``port_in_use`` when taken.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from _support import free_port

FAST = ["workload=smoke", "workload.coding=off", "server.sim.load_seconds=0.2", "mlflow.enabled=false"]


@pytest.fixture
def held() -> Iterator[int]:
    """A port something else listens on for the test's duration."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture
def launchers_stopped() -> Iterator[None]:
    yield
    import launchers

    launchers.stop_all(force=True)


def _composed(port: int, *overrides: str):
    from omegaconf import OmegaConf, open_dict

    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    node = compose([*FAST, *overrides])
    with open_dict(node):
        OmegaConf.update(node, "server.port", port, merge=False)  # configured, not overridden
    return node, from_omegaconf(node)


def test_explicit_means_the_override_names_server_port() -> None:
    from sweep.trial.port import explicit

    for given in (["server.port=31000"], ["+server.port=1"], ["++server.port=2"], ["a=1", "server.port = 3"]):
        assert explicit(given), given
    for not_given in ([], ["server=sim"], ["server.portal=1"], ["launcher.port=22"], ["server.sim.port=1"]):
        assert not explicit(not_given), not_given


def test_a_taken_port_moves_to_the_next_free_one_and_the_grid_still_reuses_its_server(
        held: int, tmp_path: Path, launchers_stopped: None) -> None:
    from sweep.trial.context import TrialContext
    from sweep.trial.port import place
    from sweep.trial.run import run_trial

    docs = []
    fingerprints = set()
    for n, max_tokens in enumerate((32, 48)):  # a workload-only grid: the server must stay
        node, cfg = _composed(held, f"workload.max_tokens={max_tokens}")
        cfg, launch, ports = place(node, cfg, [f"workload.max_tokens={max_tokens}"])
        assert ports is not None and cfg.server.port != held and cfg.server.configured_port == held
        ctx = TrialContext(job_dir=tmp_path / str(n), sweep_dir=tmp_path, job_num=n)
        ret = run_trial(cfg, launch, ctx=ctx, ports=ports)
        assert ret["status"] == "ok", ret.get("failure_message")
        from sweep.record.result import TrialResult

        docs.append(TrialResult.load(tmp_path / str(n) / "result.json"))
        fingerprints.add(launch.fingerprint)
    first, second = docs
    assert first.server.base_url == second.server.base_url != f"http://127.0.0.1:{held}"
    assert first.server.configured_port == second.server.configured_port == held
    assert (first.server.reused, second.server.reused) == (False, True)
    # the fingerprint is the server as configured: the same as on the port it could not have
    from sweep.compose.render import render

    assert fingerprints == {render(_composed(held, "workload.max_tokens=32")[1]).fingerprint}
    assert first.fingerprint == second.fingerprint == fingerprints.pop()
    assert f"--port {first.server.base_url.rsplit(':', 1)[1]}" in first.command


def test_a_port_taken_after_it_was_chosen_is_tried_again_on_the_next(
        held: int, tmp_path: Path, launchers_stopped: None) -> None:
    """The race a real server has (it binds only after loading): the chosen port is taken by the
    time the server starts; the trial tries the next free port instead of failing."""
    from sweep.trial.context import TrialContext
    from sweep.trial.port import Ports
    from sweep.trial.run import run_trial
    from sweep.compose.render import render

    configured = free_port()
    node, cfg0 = _composed(configured)
    ports = Ports(node, cfg0, render(cfg0).fingerprint)
    cfg, launch = ports.at(held)  # what an earlier pick chose, taken since
    ret = run_trial(cfg, launch, ctx=TrialContext(job_dir=tmp_path), ports=ports)
    assert ret["status"] == "ok", ret.get("failure_message")
    from sweep.record.result import TrialResult

    doc = TrialResult.load(tmp_path / "result.json")
    port = int(doc.server.base_url.rsplit(":", 1)[1])
    assert port not in (held, configured) and doc.server.configured_port == configured
    assert f"--port {port}" in doc.command and doc.fingerprint == ports.identity


def test_a_port_the_user_set_stays_and_fails_port_in_use(held: int, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "sweep", *FAST, f"server.port={held}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 1, out.stderr[-2000:]
    import json

    [path] = (tmp_path / "outputs").rglob("result.json")
    doc = json.loads(path.read_text())
    assert doc["failure"]["reason"] == "port_in_use"
    assert doc["server"]["base_url"] == f"http://127.0.0.1:{held}" and doc["server"]["configured_port"] is None
    assert "next free port" not in out.stderr
