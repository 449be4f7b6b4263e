"""Prompts of exactly the asked context, as the server counts tokens.

Why: a client-side rule of thumb (4 characters per token) was 1.29x off on
real text, so a "context 1024" cell sent ~1,322 tokens. Here the server is
asked:

* :class:`TokenizeCounter` -- the server's tokenize route (declared in the
  server YAML, ``server.tokenize``: SGLang and the simulator
  ``/v1/tokenize``, vLLM and llama.cpp ``/tokenize``), for the endpoint
  the matrix uses (a chat is counted with its template: by the route when
  it takes ``messages``, else content + the template overhead measured
  once with a one-token probe request);
* :class:`ProbeCounter` -- no route: one-token generation probes, whose
  ``usage.prompt_tokens`` is the count.

:func:`fit` then cuts each :class:`~sweep.bench.prompts.Draft` to the
length the counter says matches the target (a secant search inside a
shrinking bracket, a few batched rounds). With a tokenize route every
prompt is exact or within a token; with probes, each probe carries another
tag than the prompt it measures (a prompt the server prefilled could be
served from its prefix cache), so a prompt may be a token or two off.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from sweep.bench.prompts import CHARS_PER_TOKEN, TAG_CHARS, Draft, PromptFactory

if TYPE_CHECKING:
    import httpx

Counter = Callable[[list[str]], Awaitable[list[int]]]
ROUNDS = 12
PARALLEL = 16   # tokenize calls in flight when the route takes one text at a time


class SizingError(RuntimeError):
    """The server could not count tokens (the cell fails with this message)."""


class TokenizeCounter:
    """Counts with the server's tokenize route (``server.tokenize`` in YAML)."""

    def __init__(self, client: "httpx.AsyncClient", route: Mapping[str, Any], *, endpoint: str,
                 model: str, probe: "ProbeCounter | None" = None) -> None:
        self.client, self.route, self.endpoint, self.model = client, route, endpoint, model
        self.probe = probe
        self._template: int | None = None

    async def __call__(self, texts: list[str]) -> list[int]:
        if self.endpoint == "chat" and self.route.get("messages"):
            return await self._each([{"messages": [{"role": "user", "content": t}]} for t in texts])
        counts = await self._texts(texts)
        if self.endpoint == "chat":
            counts = [c + await self.template_overhead() for c in counts]
        return counts

    async def template_overhead(self) -> int:
        """Tokens the chat template adds: a one-token chat probe's usage minus the content count."""
        if self._template is None:
            if self.probe is None:
                raise SizingError("a chat endpoint without a messages-aware tokenize route needs a probe")
            text = "Count these words."
            (content,) = await self._texts([text])
            (total,) = await self.probe([text])
            self._template = max(0, total - content)
        return self._template

    async def _texts(self, texts: list[str]) -> list[int]:
        field, extra = self.route.get("field", "prompt"), dict(self.route.get("extra") or {})
        if self.route.get("batch") and len(texts) > 1:
            got = await self._post({"model": self.model, field: texts, **extra})
            counts = _counts(got, len(texts))
            if counts is not None:
                return counts
        return await self._each([{field: t, **extra} for t in texts])

    async def _each(self, bodies: list[dict[str, Any]]) -> list[int]:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(body: dict[str, Any]) -> int:
            async with gate:
                counts = _counts(await self._post({"model": self.model, **body}), 1)
            if counts is None:
                raise SizingError(f"{self.route['path']} answered without a token count")
            return counts[0]

        return await _all(one(b) for b in bodies)

    async def _post(self, body: dict[str, Any]) -> Any:
        import httpx

        try:
            resp = await self.client.post(self.route["path"], json=body)
        except httpx.HTTPError as exc:
            raise SizingError(f"{self.route['path']}: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 400:
            raise SizingError(f"{self.route['path']} answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            return resp.json()
        except ValueError:
            raise SizingError(f"{self.route['path']} answered a body that is not JSON") from None


async def _all(coros: Any) -> list[int]:
    """Every result, in order; the first failure cancels the rest (no stray requests)."""
    tasks: list[asyncio.Task[int]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coros]
    except* SizingError as errors:
        raise errors.exceptions[0] from None
    return [t.result() for t in tasks]


def _counts(obj: Any, n: int) -> list[int] | None:
    """Counts from a tokenize answer: ``count`` (int or list), else len(``tokens``)."""
    if not isinstance(obj, dict):
        return None
    count = obj.get("count")
    if isinstance(count, int) and n == 1:
        return [count]
    if isinstance(count, list) and len(count) == n and all(isinstance(c, int) for c in count):
        return list(count)
    tokens = obj.get("tokens")
    if isinstance(tokens, list):
        if n == 1 and all(not isinstance(t, list) for t in tokens):
            return [len(tokens)]
        if len(tokens) == n and all(isinstance(t, list) for t in tokens):
            return [len(t) for t in tokens]
    return None


class ProbeCounter:
    """Counts with one-token generation requests (``usage.prompt_tokens``)."""

    def __init__(self, client: "httpx.AsyncClient", *, endpoint: str, model: str,
                 extra: Mapping[str, Any] | None = None) -> None:
        self.client, self.endpoint, self.model = client, endpoint, model
        self.extra = dict(extra or {})

    async def __call__(self, texts: list[str]) -> list[int]:
        import httpx

        from sweep.bench.client import build_payload, path_for

        gate = asyncio.Semaphore(4)

        async def one(text: str) -> int:
            body = build_payload(self.model, text, max_tokens=1, endpoint=self.endpoint, stream=False)
            async with gate:
                try:
                    resp = await self.client.post(path_for(self.endpoint), json=body)
                except httpx.HTTPError as exc:
                    raise SizingError(f"a probe request failed: {type(exc).__name__}: {exc}") from None
            try:
                n = resp.json()["usage"]["prompt_tokens"]
            except (ValueError, KeyError, TypeError):
                raise SizingError(f"a probe request answered HTTP {resp.status_code} without "
                                  f"usage.prompt_tokens: {resp.text[:200]}") from None
            return int(n)

        return await _all(one(t) for t in texts)


async def fit(drafts: Sequence[Draft], target: int, count: Counter,
              chars_per_token: float = CHARS_PER_TOKEN) -> tuple[list[str], list[int]]:
    """Cut every draft to ``target`` tokens by ``count``; returns (prompts, their counts).

    Per draft: a bracket [lo, hi] of body lengths known to give fewer /
    more tokens than the target, and secant steps inside it; all drafts
    still off target are counted together each round.
    """
    n = len(drafts)
    if n == 0:
        return [], []
    lengths = [max(0, min(d.max_chars, int(target * chars_per_token) - d.fixed_chars)) for d in drafts]
    lo: list[tuple[int, int] | None] = [None] * n    # (length, count) with count < target
    hi: list[tuple[int, int] | None] = [None] * n    # (length, count) with count > target
    best: list[tuple[int, int] | None] = [None] * n  # (|count - target|, length)
    counts = [0] * n
    counted = [-1] * n   # the body length each count belongs to
    prev: list[tuple[int, int] | None] = [None] * n   # the previous (length, count): a secant
    todo = list(range(n))
    for _ in range(ROUNDS):
        got = await count([drafts[i].render(lengths[i]) for i in todo])
        nxt = []
        for i, c in zip(todo, got):
            counts[i], counted[i] = c, lengths[i]
            err = abs(c - target)
            if best[i] is None or err < best[i][0]:  # type: ignore[index]
                best[i] = (err, lengths[i])
            if c == target:
                continue
            if c < target:
                lo[i] = (lengths[i], c) if lo[i] is None or lengths[i] > lo[i][0] else lo[i]  # type: ignore[index]
            else:
                hi[i] = (lengths[i], c) if hi[i] is None or lengths[i] < hi[i][0] else hi[i]  # type: ignore[index]
            guess = _next_length(lengths[i], c, target, lo[i], hi[i], drafts[i].max_chars, prev[i])
            prev[i] = (lengths[i], c)
            if guess is None:
                continue
            lengths[i] = guess
            nxt.append(i)
        todo = nxt
        if not todo:
            break
    final = [b[1] for b in best]  # type: ignore[index]
    changed = [i for i in range(n) if final[i] != counted[i]]
    if changed:  # a better earlier length is kept: count it again
        got = await count([drafts[i].render(final[i]) for i in changed])
        for i, c in zip(changed, got):
            counts[i] = c
    return [d.render(length) for d, length in zip(drafts, final)], counts


def _next_length(length: int, c: int, target: int, lo: tuple[int, int] | None,
                 hi: tuple[int, int] | None, max_chars: int,
                 prev: tuple[int, int] | None = None) -> int | None:
    """The next body length to try, or None when no length in between is left.

    Characters per token from the last two counts (a secant: the head's
    tokens cancel out), else from this one.
    """
    if prev is not None and prev[1] != c and prev[0] != length:
        per_token = max(0.5, (length - prev[0]) / (c - prev[1]))
    else:
        per_token = max(1.0, length / max(1, c))
    guess = length + round((target - c) * per_token)
    if lo is not None and hi is not None:
        if hi[0] - lo[0] <= 1:
            return None
        span = hi[1] - lo[1]
        if span > 3:  # interpolate while far; bisect near the end (no one-sided creeping)
            guess = lo[0] + round((target - lo[1]) * (hi[0] - lo[0]) / span)
        else:
            guess = (lo[0] + hi[0]) // 2
        guess = min(hi[0] - 1, max(lo[0] + 1, guess))
    guess = max(0, min(max_chars, guess))
    return None if guess == length else guess


async def prompts_for(factory: PromptFactory, target: int, n: int, counter: Counter, *,
                      exact: bool) -> tuple[list[str], list[int]]:
    """``n`` prompts of ``target`` tokens, each fitted with ``counter``.

    ``exact=False`` marks a counter that runs generation requests (probes):
    a prompt the server has prefilled could be served from its prefix cache
    when it is sent for real, so each probe carries another tag of the same
    length in place of the prompt's own (every prompt begins with its tag, so
    no probe shares a prefix with a measured prompt; the count may differ by
    a token where the two tags tokenize differently).
    """
    max_chars = int(target * CHARS_PER_TOKEN * 4) + 4096
    drafts = [factory.draft(max_chars) for _ in range(n)]
    if exact:
        return await fit(drafts, target, counter)

    async def probe_count(texts: list[str]) -> list[int]:
        return await counter([_probe_tag(t) + t[TAG_CHARS:] for t in texts])

    return await fit(drafts, target, probe_count)



def _probe_tag(text: str) -> str:
    import hashlib

    return hashlib.sha256(b"probe/" + text[:TAG_CHARS].encode()).hexdigest()[:TAG_CHARS]


class PromptMaker:
    """The prompts of a run: ``workload.prompt_source`` sized by the server's count."""

    def __init__(self, source: str, *, seed: int, namespace: str, counter: Counter | None,
                 exact: bool, dataset_path: str | None = None, vocab_size: int | None = None) -> None:
        self.source, self.seed, self.counter, self.exact = source, seed, counter, exact
        self.dataset_path, self.vocab_size = dataset_path, vocab_size
        self.namespace = namespace
        self.sizing = "exact" if source == "random_ids" else ("tokenize" if exact else "probe")
        self.error: str | None = None
        self.renew(namespace)

    @classmethod
    def for_server(cls, admin: "httpx.AsyncClient", workload: Any, *, endpoint: str, model: str,
                   tokenize: Mapping[str, Any] | None, vocab_size: int | None,
                   namespace: str) -> "PromptMaker":
        """Count with ``tokenize`` (the server YAML's route) when there is one, else with probes."""
        probe = ProbeCounter(admin, endpoint=endpoint, model=model)
        counter: Counter = TokenizeCounter(admin, tokenize, endpoint=endpoint, model=model,
                                           probe=probe) if tokenize else probe
        return cls(workload.prompt_source, seed=workload.seed, namespace=namespace, counter=counter,
                   exact=bool(tokenize), dataset_path=workload.dataset_path, vocab_size=vocab_size)

    def renew(self, namespace: str) -> None:
        """Start a fresh namespace (prompts that never appeared before)."""
        from sweep.bench.prompt_tasks import EditPrompts, ProsePrompts
        from sweep.bench.prompts import DatasetPrompts

        self.namespace = namespace
        self._ids_drawn = 0
        if self.source == "dataset":
            assert self.dataset_path is not None
            self.factory: PromptFactory = DatasetPrompts(self.dataset_path, self.seed, namespace)
        else:
            kinds: dict[str, type[PromptFactory]] = {"edit": EditPrompts, "prose": ProsePrompts}
            self.factory = kinds.get(self.source, PromptFactory)(self.seed, namespace)

    async def make(self, context: int, n: int) -> list[Any]:
        """``n`` prompts of ``context`` tokens (strings, or token-id lists for random_ids)."""
        if n <= 0:
            return []
        if self.source == "random_ids":
            from sweep.bench.prompts import random_ids

            # Draw k of a run uses seed + k (draw 0 = bench_serving's prompts for this seed);
            # a salted namespace (no working /flush_cache) shifts every seed.
            salt = 0 if self.namespace == "matrix" else zlib.crc32(self.namespace.encode())
            seed = (self.seed + salt + self._ids_drawn) % 2**32
            self._ids_drawn += 1
            return random_ids(n, context, self.vocab_size or 32000, seed=seed)
        if self.counter is not None and self.error is None:
            try:
                texts, _ = await prompts_for(self.factory, context, n, self.counter, exact=self.exact)
                return texts
            except SizingError as exc:  # this server cannot count: say so, measure anyway
                self.error, self.sizing = str(exc), "approx"
        self.sizing = "approx"
        return [self.factory.make(context) for _ in range(n)]
