"""The sim's token counting as a client sees it: /v1/tokenize (validated by SGLang's
own pydantic models), token-id prompts on /v1/completions, and a tokenizer.json
loaded with --sim-tokenizer, against which a streamed chunk retokenizes to the
tokens the server counted for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for sglang_compat


def protocol() -> Any:
    import sglang_compat

    sglang_compat.require_sglang()
    return sglang_compat.protocol()


def events(text: str) -> list[Any]:
    return [json.loads(b[6:]) for b in text.split("\n\n") if b.startswith("data: {")]


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word-level tokenizer.json trained on the stdlib (the cross-check's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from crosscheck_bench_serving import make_tokenizer

    directory, _ = make_tokenizer(tmp_path_factory.mktemp("tok"), vocab_size=4000)
    return directory / "tokenizer.json"


def test_tokenize_route_matches_usage_and_sglang_models(sim_server) -> None:
    proto = protocol()
    sim = sim_server("server.sim.time_scale=0")
    text = "Speculative decoding verifies a draft tree of tokens in one forward pass."
    with httpx.Client(base_url=sim.base_url, timeout=30, trust_env=False) as c:
        one = c.post("/v1/tokenize", json={"model": "m", "prompt": text}).json()
        proto.TokenizeResponse.model_validate(one)
        assert one["count"] == len(one["tokens"]) > 5
        many = c.post("/tokenize", json={"prompt": [text, text + " More."]}).json()
        proto.TokenizeResponse.model_validate(many)
        assert many["count"][0] == one["count"] < many["count"][1]
        comp = c.post("/v1/completions", json={"model": "m", "prompt": text, "max_tokens": 3}).json()
        assert comp["usage"]["prompt_tokens"] == one["count"]
        msgs = [{"role": "user", "content": text}]
        chat_count = c.post("/v1/tokenize", json={"messages": msgs}).json()["count"]
        chat = c.post("/v1/chat/completions", json={"model": "m", "messages": msgs, "max_tokens": 3}).json()
        assert chat["usage"]["prompt_tokens"] == chat_count > one["count"]  # the template counts
        ids = list(range(100, 357))
        by_ids = c.post("/v1/completions", json={"model": "m", "prompt": ids, "max_tokens": 3}).json()
        assert by_ids["usage"]["prompt_tokens"] == len(ids)
        stream = c.post("/v1/completions", json={
            "model": "m", "prompt": ids, "max_tokens": 40, "ignore_eos": True, "stream": True,
            "return_spec_tokens_details": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
        evs = events(stream.text)
        for e in evs:  # what the harness sends by default: SGLang's completion chunk shapes
            proto.CompletionStreamResponse.model_validate(e)
        running = [e["usage"]["completion_tokens"] for e in evs if e["choices"] and e["choices"][0]["text"]]
        assert running == sorted(running) and running[-1] == 40 and evs[-1]["usage"]["prompt_tokens"] == len(ids)
        bad = c.post("/v1/tokenize", json={"prompt": text, "messages": msgs})
        assert bad.status_code == 400 and proto.ErrorResponse.model_validate(bad.json()).code == 400


def test_a_tokenizer_file_is_what_the_sim_counts_with(sim_server, word_tokenizer: Path) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(word_tokenizer))
    sim = sim_server("server.sim.time_scale=0", f"server.sim.tokenizer={word_tokenizer}")
    text = "def read(self, size=-1):\n    return self._buffer[:size]  # the standard library"
    with httpx.Client(base_url=sim.base_url, timeout=30, trust_env=False) as c:
        got = c.post("/v1/tokenize", json={"prompt": text}).json()
        assert got["tokens"] == tok.encode(text).ids
        # decode -> encode keeps token ids (word level): text and ids are one prompt
        ids = list(range(40, 240))
        as_text = c.post("/v1/tokenize", json={"prompt": tok.decode(ids)}).json()
        assert as_text["tokens"] == ids
        stream = c.post("/v1/completions", json={
            "model": "m", "prompt": ids, "max_tokens": 120, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    evs = events(stream.text)
    content = [e for e in evs if e["choices"] and e["choices"][0]["text"]]
    running = [e["usage"]["completion_tokens"] for e in content]
    for prev, e, now in zip([0] + running, content, running):
        # each chunk's text retokenizes to the tokens the server said it carried
        assert len(tok.encode(e["choices"][0]["text"]).ids) == now - prev
    whole = "".join(e["choices"][0]["text"] for e in content)
    assert len(tok.encode(whole).ids) == running[-1] == 120


def test_unreadable_tokenizer_file_is_a_startup_error(sim_server, tmp_path: Path, word_tokenizer: Path) -> None:
    import os
    import shutil
    import subprocess

    from sweep.errors import ConfigError
    from sweep.sim.launch import render_overrides

    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    # the config check refuses it before any server starts (issue 24) ...
    with pytest.raises(ConfigError, match=r"^server\.sim\.tokenizer: .*is not a Hugging Face tokenizer\.json"):
        sim_server(f"server.sim.tokenizer={bad}", wait=False)
    # ... and the simulator itself still does, started with a file that went bad after the check
    later = tmp_path / "later.json"
    shutil.copy(word_tokenizer, later)
    argv, env, _ = render_overrides(["server=sim", "server.port=1", f"server.sim.tokenizer={later}"])
    later.write_text("{not json")
    proc = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--sim-tokenizer" in proc.stdout + proc.stderr
