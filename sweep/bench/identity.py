"""The greedy-identity pass: the same few prompts, greedy, one at a time, answers kept.

Why: speculative decoding is lossless -- under greedy decoding a server that
drafts must return exactly the text it returns without drafting. A fork whose
verify step is wrong (a tree mask off by one, a stale KV entry) keeps its
throughput and loses its answers, and a throughput search would reward it.
So every trial whose workload asks for it (``workload.identity.prompts`` > 0)
sends a fixed set of prompts (namespace ``identity``: deterministic per
``workload.seed``, sized with the server's own token count, never salted), at
temperature 0, sequentially (no batch-mates whose presence could change the
numerics), and keeps the answers' text. :mod:`sweep.score.identity` compares
them with the answers of the autoregressive baseline result (the one the
speedup is measured against); the fraction of identical answers is the
trial's ``greedy_identical``, a constraint a search can demand.

The pass runs before the trial's acceptance window opens, so its requests
count in no throughput or acceptance figure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from sweep.bench.client import build_payload, make_admin_client, make_client, path_for, stream_request
from sweep.bench.sizing import PromptMaker

if TYPE_CHECKING:
    from sweep.compose.config import Workload

NAMESPACE = "identity"


@dataclass(frozen=True, slots=True)
class Answer:
    """One identity prompt's greedy answer (the prompt by its hash: answers are compared by it)."""

    prompt_sha: str
    text: str
    completion_tokens: int | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_sha": self.prompt_sha, "text": self.text, "completion_tokens": self.completion_tokens,
                "error": self.error}


def prompt_sha(prompt: Any) -> str:
    text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def arun_identity(base_url: str, workload: "Workload", model_name: str, *, api_key: str | None = None,
                        endpoint: str = "completions", tokenize: Mapping[str, Any] | None = None,
                        vocab_size: int | None = None,
                        request_extras: Mapping[str, Any] | None = None) -> list[Answer]:
    spec = workload.identity
    n = int(spec.get("prompts") or 0)
    if n <= 0:
        return []
    context = int(spec.get("context") or workload.contexts[0])
    max_tokens = int(spec.get("max_tokens") or workload.max_tokens)
    async with make_admin_client(base_url, api_key=api_key, timeout_s=min(30.0, workload.request_timeout_s)) as admin:
        maker = PromptMaker.for_server(admin, workload, endpoint=endpoint, model=model_name, tokenize=tokenize,
                                       vocab_size=vocab_size, namespace=NAMESPACE)
        prompts = await maker.make(context, n)
    out: list[Answer] = []
    async with make_client(base_url, api_key=api_key, timeout_s=workload.request_timeout_s) as conn:
        for prompt in prompts:
            body = build_payload(model_name, prompt, max_tokens=max_tokens, temperature=0.0,
                                 ignore_eos=workload.ignore_eos, extra=request_extras, endpoint=endpoint)
            rec = await stream_request(conn, body, path=path_for(endpoint), timeout_s=workload.request_timeout_s,
                                       keep_text=True)
            out.append(Answer(prompt_sha(prompt), rec.text if rec.ok else "", rec.completion_tokens,
                              None if rec.ok else (rec.detail or rec.error or "failed")))
    return out


def run_identity(base_url: str, workload: "Workload", model_name: str, **options: Any) -> list[Answer]:
    """The pass from sync code (see :func:`arun_identity` for the options)."""
    from sweep.bench.aio import run_sync

    return run_sync(lambda: arun_identity(base_url, workload, model_name, **options))
