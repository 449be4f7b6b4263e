"""launchers.get_launcher / stop_all: one launcher per name per process, nothing left behind."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import pytest
from launcher_helpers import free_port, make_server, pid_gone, settings, toy_launch

import launchers
from launchers import registry
from launchers.local import LocalLauncher


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    saved = dict(registry._launchers)
    registry._launchers.clear()
    try:
        yield
    finally:
        launchers.stop_all(force=True)
        registry._launchers.clear()
        registry._launchers.update(saved)


def test_one_instance_per_name_settings_follow_the_job() -> None:
    a = launchers.get_launcher(settings())
    b = launchers.get_launcher(settings(ready_timeout_s=42))
    assert a is b and isinstance(a, LocalLauncher)
    assert a.settings.ready_timeout_s == 42


def test_reuse_across_jobs_then_stop_all(tmp_path: Path) -> None:
    port = free_port()
    first = launchers.get_launcher(settings()).ensure(toy_launch(port), make_server(port), tmp_path / "0")
    again = launchers.get_launcher(settings()).ensure(toy_launch(port), make_server(port), tmp_path / "1")
    assert again.reused and again.pid == first.pid
    launchers.stop_all()
    assert pid_gone(first.pid)
    assert not launchers.get_launcher(settings()).alive()


def test_keep_server_is_left_running_unless_forced(tmp_path: Path) -> None:
    port = free_port()
    lau = launchers.get_launcher(settings(keep_server=True))
    handle = lau.ensure(toy_launch(port), make_server(port), tmp_path)
    launchers.stop_all()
    assert lau.alive()
    launchers.stop_all(force=True)
    assert pid_gone(handle.pid)


def test_unknown_launcher_name() -> None:
    """Refused where the settings are read (the key table: one line, the key, the allowed names);
    settings built around that check still cannot reach a launcher that does not exist."""
    with pytest.raises(ValueError, match=r"^launcher\.name: must be one of local, ssh, slurm, got 'carrier-pigeon'$"):
        settings(name="carrier-pigeon")
    with pytest.raises(ValueError, match=r"launcher\.name: unknown launcher 'carrier-pigeon' \(allowed: local, ssh, slurm\)"):
        launchers.get_launcher(dataclasses.replace(settings(), name="carrier-pigeon"))
