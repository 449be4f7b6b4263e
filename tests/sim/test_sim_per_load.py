"""The simulator runs per-load speculation per decode step (``spec.per_load``), over real HTTP.

With ``[[1,1,8],[2,256,0]]`` a request decoding alone drafts 8 tokens a step (its verify steps
are far fewer than its tokens), while one that decodes beside another (batch 2: budget 0) is
decoded a token a step with no verify step at all -- the budget follows the batch size, as
vLLM's scheduler picks it.
"""

from __future__ import annotations

import re
import threading

import httpx

BODY = {"model": "kimi-k2.6", "prompt": "def f(x):\n    return x\n" * 20, "ignore_eos": True}


def verify_calls(c: httpx.Client, base: str) -> float:
    m = re.search(r"^sglang:spec_verify_calls_total\{[^}]*\} (\S+)$", c.get(base + "/metrics").text, re.M)
    assert m is not None
    return float(m.group(1))


def test_budget_follows_the_batch_size(sim_server) -> None:
    sim = sim_server("spec=ngram", "spec.budget=8", "spec.per_load=[[1,1,8],[2,256,0]]", "server.sim.noise=0",
                     "server.sim.time_scale=0.2")
    with httpx.Client(timeout=60, trust_env=False) as c:
        before = verify_calls(c, sim.base_url)
        alone = c.post(sim.base_url + "/v1/completions", json={**BODY, "max_tokens": 200})
        assert alone.status_code == 200, alone.text
        steps_alone = verify_calls(c, sim.base_url) - before
        assert 0 < steps_alone < 0.9 * 200, steps_alone  # 8 drafted a step, some accepted

        started = threading.Event()

        def long_one() -> None:
            with httpx.Client(timeout=60, trust_env=False) as c2:
                started.set()
                c2.post(sim.base_url + "/v1/completions", json={**BODY, "max_tokens": 2000})

        t = threading.Thread(target=long_one)
        t.start()
        started.wait(10)
        # once the long one runs, a short one decodes beside it: batch 2, budget 0, no verify step
        import time

        time.sleep(0.3)
        mid = verify_calls(c, sim.base_url)
        short = c.post(sim.base_url + "/v1/completions", json={**BODY, "max_tokens": 100})
        assert short.status_code == 200
        # drafting at batch 2 would verify both every step: ~2 x 100 / accept length (> 100) calls;
        # budget 0 leaves only the long one's steps alone just before and after the short one's window
        assert verify_calls(c, sim.base_url) - mid < 25
        t.join(60)
