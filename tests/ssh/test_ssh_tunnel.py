"""Readiness and benchmark traffic through an SSH port forward."""

from __future__ import annotations

import httpx


def test_port_forward_carries_readiness_and_streaming(ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial("server.sim.load_seconds=1.0")  # polls meet refused channels first
    lau = make_launcher(ssh_cfg(port_forward=True))
    handle = lau.ensure(launch, cfg.server, tmp_path / "job")
    assert handle.info["remote"]["tunnel"] is True
    assert not handle.base_url.endswith(f":{cfg.server.port}")
    with httpx.Client(base_url=handle.base_url, timeout=30) as client:
        assert client.get("/health").status_code == 200
        body = {"model": cfg.model.served_name, "stream": True, "max_tokens": 128,
                "messages": [{"role": "user", "content": "write gcd in python"}]}
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            events = [line for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1].strip() == "data: [DONE]" and len(events) > 3
    url = handle.base_url
    lau.stop()
    try:
        httpx.get(url + "/health", timeout=2)
        raise AssertionError("the forward outlived stop()")
    except httpx.HTTPError:
        pass


def test_unreachable_port_switches_to_a_forward(ssh_cfg, trial, make_launcher, tmp_path) -> None:
    """The server listens on an address the controller does not dial (127.0.0.2 here, a
    firewalled NIC on a real box): listening remotely + refused directly -> tunnel."""
    cfg, launch = trial("server.host=127.0.0.2", "server.sim.load_seconds=0.5")
    lau = make_launcher(ssh_cfg())
    handle = lau.ensure(launch, cfg.server, tmp_path / "job")
    assert handle.info["remote"]["tunnel"] is True
    assert httpx.get(handle.base_url + "/health", timeout=5).status_code == 200
