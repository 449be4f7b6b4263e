"""The simulator over real HTTP: readiness, shapes (validated by SGLang's own
pydantic models), streaming token accounting, spec counters, logs, metrics."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for sglang_compat

from sweep.sim import tokens  # noqa: E402

ACCEPT_LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, #running-req: \d+, #token: \d+, "
    r"token usage: \d+\.\d\d, accept len: (\d+\.\d\d), accept rate: \d+\.\d\d, cuda graph: (True|False), "
    r"gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+, $", re.M)

CHAT = {"model": "kimi-k2.6", "messages": [{"role": "user", "content": "Explain prefix caching."}]}


def protocol() -> Any:
    """SGLang's OpenAI protocol module (skips only when sglang is not installed)."""
    import sglang_compat

    sglang_compat.require_sglang()
    return sglang_compat.protocol()


def sse_events(text: str) -> list[Any]:
    events = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def stream_chat(base: str, body: dict[str, Any]) -> list[Any]:
    with httpx.Client(timeout=60, trust_env=False) as c:
        r = c.post(base + "/v1/chat/completions", json={**CHAT, "stream": True, **body})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        return sse_events(r.text)


def test_health_503_while_loading_then_200(sim_server) -> None:
    sim = sim_server(load_seconds=1.5, wait=False)
    codes: set[int] = set()
    deadline = time.monotonic() + 20
    with httpx.Client(timeout=2, trust_env=False) as c:
        while time.monotonic() < deadline:
            try:
                codes.add(c.get(sim.base_url + "/health_generate").status_code)
                if 503 in codes:
                    gen = c.post(sim.base_url + "/v1/chat/completions", json={**CHAT, "max_tokens": 4})
                    assert gen.status_code == 503
                    break
            except httpx.TransportError:
                time.sleep(0.02)
        sim.wait_ready(20)
        assert c.get(sim.base_url + "/health").status_code == 200
        assert c.get(sim.base_url + "/health_generate").status_code == 200
    assert 503 in codes
    log = sim.log_text()
    assert "Load weight end." in log and "The server is fired up and ready to roll!" in log


def test_streamed_chat_meta_info_usage_and_chunks(sim_server) -> None:
    sim = sim_server("server.sim.time_scale=0")
    events = stream_chat(sim.base_url, {"max_tokens": 300, "ignore_eos": True, "return_meta_info": True,
                                        "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if e["choices"] and e["choices"][0]["delta"].get("content")]
    usage = [e["usage"] for e in events[:-1] if e.get("usage")]
    assert len(usage) == 1 and usage[0]["completion_tokens"] == 300
    # tokens per chunk, counted with the sim's tokenizer, add up to usage; spec sends several per chunk
    counts = [tokens.count(e["choices"][0]["delta"]["content"]) for e in chunks]
    assert sum(counts) == usage[0]["completion_tokens"]
    assert max(counts) > 1 and len(chunks) < 300 / 2
    finish = [e for e in events[:-1] if e["choices"] and e["choices"][0].get("finish_reason")]
    assert finish[-1]["choices"][0]["finish_reason"] == "length"
    meta = finish[-1]["choices"][0]["meta_info"]
    assert meta["completion_tokens"] == 300 and meta["spec_verify_ct"] > 0
    assert meta["spec_accept_length"] == pytest.approx(300 / meta["spec_verify_ct"])
    assert len(chunks) == meta["spec_verify_ct"] + 1  # prefill's first token + one chunk per verify step


def test_coding_prompt_stops_naturally(sim_server) -> None:
    sim = sim_server("server.sim.time_scale=0")
    prompt = "Write a Python function with exactly this signature:\n\ndef gcd(a: int, b: int) -> int:\n"
    events = stream_chat(sim.base_url, {"messages": [{"role": "user", "content": prompt}], "max_tokens": 1024,
                                        "stream_options": {"include_usage": True}})
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e["choices"])
    fin = [e["choices"][0] for e in events[:-1] if e["choices"] and e["choices"][0].get("finish_reason")]
    assert fin[-1]["finish_reason"] == "stop" and fin[-1]["matched_stop"] is not None
    assert "```python\ndef gcd(a: int, b: int) -> int:" in text
    namespace: dict[str, Any] = {}
    exec(text.split("```python\n")[1].split("```")[0], namespace)  # noqa: S102 - our own answer
    assert [namespace["gcd"](a, b) for a, b in [(0, 0), (-12, 18), (17, 5)]] == [0, 6, 1]


def test_responses_validate_against_sglang_protocol(sim_server) -> None:
    proto = protocol()
    sim = sim_server("server.sim.time_scale=0")
    base = sim.base_url
    events = stream_chat(base, {"max_tokens": 40, "ignore_eos": True, "return_spec_tokens_details": True,
                                "stream_options": {"include_usage": True}})
    for e in events[:-1]:
        proto.ChatCompletionStreamResponse.model_validate(e)
    ext = [e for e in events[:-1] if e.get("sglext")]
    assert ext and ext[0]["sglext"]["spec_tokens_details"]["spec_verify_ct"] > 0
    with httpx.Client(timeout=60, trust_env=False) as c:
        chat = c.post(base + "/v1/chat/completions", json={**CHAT, "max_tokens": 30, "return_meta_info": True})
        parsed = proto.ChatCompletionResponse.model_validate(chat.json())
        assert parsed.usage.completion_tokens == 30 and parsed.choices[0].meta_info["spec_verify_ct"] > 0
        comp = c.post(base + "/v1/completions", json={"model": "m", "prompt": "Once upon", "max_tokens": 12})
        assert proto.CompletionResponse.model_validate(comp.json()).usage.completion_tokens == 12
        s = c.post(base + "/v1/completions", json={"model": "m", "prompt": "Hi", "max_tokens": 9, "stream": True,
                                                   "stream_options": {"include_usage": True}})
        cev = sse_events(s.text)
        for e in cev[:-1]:
            proto.CompletionStreamResponse.model_validate(e)
        assert cev[-2]["usage"]["completion_tokens"] == 9
        cont = sse_events(c.post(base + "/v1/chat/completions", json={
            **CHAT, "max_tokens": 15, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}).text)
        running = [e["usage"]["completion_tokens"] for e in cont[:-1] if e["choices"] and e.get("usage")]
        for e in cont[:-1]:
            proto.ChatCompletionStreamResponse.model_validate(e)
        assert running == sorted(running) and running[-1] == 15
        models = proto.ModelList.model_validate(c.get(base + "/v1/models").json())
        assert models.data[0].id == "kimi-k2.6"
        bad = c.post(base + "/v1/chat/completions", json={**CHAT, "max_tokens": 0})
        assert bad.status_code == 400 and proto.ErrorResponse.model_validate(bad.json()).code == 400


def test_native_generate_info_flush_and_metrics(sim_server) -> None:
    sim = sim_server("server.sim.time_scale=0", "server.decode_log_interval=2")
    with httpx.Client(timeout=60, trust_env=False) as c:
        base = sim.base_url
        gen = c.post(base + "/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 25,
                                                                                    "ignore_eos": True}}).json()
        assert gen["meta_info"]["completion_tokens"] == 25 and len(gen["output_ids"]) == 25
        assert gen["meta_info"]["finish_reason"] == {"type": "length", "length": 25}
        streamed = sse_events(c.post(base + "/generate", json={"text": "Hi", "stream": True, "sampling_params": {
            "max_new_tokens": 20, "ignore_eos": True}}).text)
        assert streamed[-1] == "[DONE]" and streamed[-2]["meta_info"]["completion_tokens"] == 20
        info = c.get(base + "/get_server_info").json()
        assert info["tp_size"] == 8 and info["speculative_algorithm"] == "DDTREE" and info["simulated"] is True
        assert c.get(base + "/server_info").json()["version"]
        assert c.get(base + "/get_model_info").json()["model_path"] == "moonshotai/Kimi-K2.6"
        assert c.post(base + "/flush_cache").status_code == 200
        text = c.get(base + "/metrics").text
    gauges = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(sglang:[a-z_]+)\{[^}]*\} (\S+)$", text, re.M)}
    for name in ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:gen_throughput",
                 "sglang:num_running_reqs", "sglang:token_usage", "sglang:generation_tokens_total"):
        assert name in gauges, name
    assert gauges["sglang:spec_accept_length"] > 1.0 and gauges["sglang:generation_tokens_total"] >= 45
    lines = ACCEPT_LINE.findall(sim.log_text())
    assert lines and all(1.0 <= float(v) <= 9.0 for v, _ in lines)


def test_log_lines_without_spec_have_no_accept_len(sim_server) -> None:
    sim = sim_server("spec=none", "server.sim.time_scale=0", "server.decode_log_interval=5")
    with httpx.Client(timeout=60, trust_env=False) as c:
        r = c.post(sim.base_url + "/v1/chat/completions", json={**CHAT, "max_tokens": 20, "return_meta_info": True})
    assert "spec_verify_ct" not in r.json()["choices"][0]["meta_info"]
    log = sim.log_text()
    assert "Decode batch, #running-req: 1," in log and "accept len" not in log


def test_api_key_guards_everything_but_health(sim_server) -> None:
    sim = sim_server("server.api_key=sk-test-1", "server.sim.time_scale=0")
    with httpx.Client(timeout=30, trust_env=False) as c:
        assert c.get(sim.base_url + "/health").status_code == 200
        assert c.get(sim.base_url + "/v1/models").status_code == 401
        ok = c.get(sim.base_url + "/v1/models", headers={"Authorization": "Bearer sk-test-1"})
        assert ok.status_code == 200
    assert "sk-test-1" not in sim.log_text()


def test_client_disconnect_aborts_the_request(sim_server) -> None:
    sim = sim_server("server.sim.time_scale=1")
    with httpx.Client(timeout=30, trust_env=False) as c:
        with c.stream("POST", sim.base_url + "/v1/chat/completions",
                      json={**CHAT, "stream": True, "max_tokens": 20000, "ignore_eos": True}) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i > 6:
                    break
        deadline = time.monotonic() + 5
        running = None
        while time.monotonic() < deadline:
            m = re.search(r"^sglang:num_running_reqs\{[^}]*\} (\S+)$", c.get(sim.base_url + "/metrics").text, re.M)
            running = float(m.group(1)) if m else None
            if running == 0.0:
                break
            time.sleep(0.1)
    assert running == 0.0


def test_sigterm_ends_the_sim_even_when_its_streams_lost_their_clients(sim_server: Any) -> None:
    """Clients SIGKILLed mid-stream, then SIGTERM: the sim exits within its grace
    (sweep.sim.server.SHUTDOWN_GRACE_S), as SGLang does -- it used to wait forever."""
    import os
    import signal
    import subprocess

    from sweep.sim.server import SHUTDOWN_GRACE_S

    sim = sim_server("hardware=pro6000_ep8")
    client = ("import httpx, sys\n"
              "with httpx.stream('POST', sys.argv[1] + '/v1/completions', timeout=60, json={'model': "
              "'kimi-k2.6', 'prompt': 'hi ' * 900, 'max_tokens': 4000, 'stream': True}) as r:\n"
              "    for line in r.iter_lines():\n        print(line[:20], flush=True)\n")
    clients = [subprocess.Popen([sys.executable, "-c", client, sim.base_url], stdout=subprocess.PIPE)
               for _ in range(4)]
    for c in clients:
        assert c.stdout is not None and c.stdout.readline()  # streaming
    for c in clients:
        c.kill()
        c.wait()
    t0 = time.monotonic()
    os.kill(sim.proc.pid, signal.SIGTERM)
    try:
        sim.proc.wait(timeout=SHUTDOWN_GRACE_S + 20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sim was still running {SHUTDOWN_GRACE_S + 20:.0f} s after SIGTERM:\n"
                    + sim.log_text()[-1500:])
    assert time.monotonic() - t0 < SHUTDOWN_GRACE_S + 20
