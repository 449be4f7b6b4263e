"""Unique prompts of a target token length: real text, a dataset, or token ids.

Why real text: a speculative decoder's acceptance depends on what it reads
and writes, so synthetic filler (repeated words, random tokens) makes
acceptance, and therefore throughput, unrepresentative. Python's own
standard-library source is real, varied text that is present on every
machine, so no data set has to be downloaded.

Why unique: a server with a prefix cache (SGLang's radix cache) answers a
repeated prefix without prefill, which inflates TTFT and throughput (users
of other tools report up to 86%). Every prompt therefore starts with its own
hex tag (derived from seed, namespace and a running counter) before any
shared text, so two prompts never share more than the chat template.

Length: a prompt is drafted here as ``head + body[:n]`` (a :class:`Draft`)
and :mod:`sweep.bench.sizing` picks ``n`` with the server's own token count,
so the prompt has the asked number of tokens as the server counts them.
Without a server, about four characters per token is the guess
(:meth:`PromptFactory.make`). The server's ``usage.prompt_tokens`` is the
figure that gets reported.

Sources (``workload.prompt_source``): ``text`` (standard-library source,
above), ``dataset`` (prompts of a JSONL file, each cut or repeated to the
length; ShareGPT's ``conversations``, ``messages``, ``prompt`` or ``text``
per line) and ``random_ids`` (random token ids below the vocabulary size,
as SGLang's bench_serving ``random-ids``: exact length by construction,
sent to the completions endpoint).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

CHARS_PER_TOKEN = 4.0
TAG_CHARS = 12  # every prompt starts with its own hex tag of this length
# Enough distinct text that slices of short prompts rarely overlap.
MIN_CORPUS_CHARS = 2_000_000

INSTRUCTION = ("Read this excerpt of the Python standard library ({source}) and explain "
               "what it does, step by step.\n\n")


def approx_tokens(text: str) -> int:
    """Client-side token estimate (~4 characters per token)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


@lru_cache(maxsize=1)
def _stdlib_files() -> tuple[Path, ...]:
    """Top-level ``.py`` files of the running interpreter's standard library."""
    root = Path(inspect.getsourcefile(inspect) or inspect.__file__).resolve().parent
    files = sorted(p for p in root.glob("*.py") if p.is_file())
    if not files:  # a zipped stdlib: fall back to this package's own sources
        files = sorted(Path(__file__).resolve().parent.glob("*.py"))
    return tuple(files)


@lru_cache(maxsize=8)
def _corpus(seed: int, min_chars: int, extract: Callable[[str], str] | None = None,
            ) -> tuple[str, tuple[tuple[int, str], ...]]:
    """Concatenated source text (deterministic per seed) and where each file starts.

    ``extract`` turns a file's source into the text kept from it (default: all
    of it; :mod:`sweep.bench.prompt_tasks` keeps the docstrings' prose); files
    shuffle by ``seed`` and by what is extracted, so each kind reads its own order.
    """
    files = list(_stdlib_files())
    random.Random(seed if extract is None else f"{extract.__name__}/{seed}").shuffle(files)
    parts: list[str] = []
    starts: list[tuple[int, str]] = []
    total = 0
    for i in range(len(files) * 64):  # cycle when one pass is not enough
        path = files[i % len(files)]
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        text = extract(text) if extract is not None else text
        if not text.strip():
            continue
        starts.append((total, path.name))
        parts.append(text)
        total += len(text)
        if total >= min_chars:
            break
    if not parts:
        raise RuntimeError("no standard-library source found to build prompts from")
    return "".join(parts), tuple(starts)


@dataclass(frozen=True, slots=True)
class Draft:
    """A prompt before its length is chosen: ``head + body[:n] + tail`` (the tail: a task
    that follows the material, :mod:`sweep.bench.prompt_tasks`)."""

    head: str
    body: str
    tail: str = ""

    def render(self, n: int) -> str:
        return self.head + self.body[:max(0, n)] + self.tail

    @property
    def fixed_chars(self) -> int:
        """Characters around the body (head and tail)."""
        return len(self.head) + len(self.tail)

    @property
    def max_chars(self) -> int:
        return len(self.body)


class PromptFactory:
    """Makes prompts that are deterministic per ``seed`` and never repeat.

    One factory should serve a whole run (matrix and warmup alike): its
    counter makes every prompt it returns distinct, and ``namespace``
    (e.g. the cell) keeps separate factories with the same seed apart.
    """

    def __init__(self, seed: int = 0, namespace: str = "") -> None:
        self.seed = seed
        self.namespace = namespace
        self._counter = 0
        self._rng = random.Random(f"{seed}/{namespace}")

    def _tag(self) -> str:
        blob = f"{self.seed}/{self.namespace}/{self._counter}".encode()
        self._counter += 1
        return hashlib.sha256(blob).hexdigest()[:TAG_CHARS]

    def _line_start(self, text: str) -> int:
        """A random offset moved to the next line boundary: the excerpt reads like a real file."""
        offset = self._rng.randrange(len(text))
        nl = text.find("\n", offset)
        return nl + 1 if 0 <= nl < len(text) - 1 else 0

    def draft(self, max_chars: int) -> Draft:
        """A unique draft whose body can grow to ``max_chars`` characters."""
        text, starts = _corpus(self.seed, max(MIN_CORPUS_CHARS, 2 * max_chars))
        tag = self._tag()
        offset = self._line_start(text)
        source = _source_at(starts, offset)
        return Draft(f"{tag} " + INSTRUCTION.format(source=source), _slice(text, offset, max_chars))

    def make(self, target_tokens: int) -> str:
        """One prompt of about ``target_tokens`` tokens (at ~4 characters per token)."""
        want_chars = max(16, int(target_tokens * CHARS_PER_TOKEN))
        d = self.draft(want_chars)
        return d.render(want_chars - d.fixed_chars)

    def batch(self, target_tokens: int, n: int) -> list[str]:
        """``n`` distinct prompts of about ``target_tokens`` tokens each."""
        return [self.make(target_tokens) for _ in range(n)]


def _source_at(starts: tuple[tuple[int, str], ...], offset: int) -> str:
    name = starts[0][1]
    for start, fname in starts:
        if start > offset:
            break
        name = fname
    return name


def _slice(text: str, offset: int, length: int) -> str:
    """``length`` characters from ``offset``, wrapping around the corpus."""
    if length <= 0:
        return ""
    out: list[str] = []
    while length > 0:
        piece = text[offset: offset + length]
        out.append(piece)
        length -= len(piece)
        offset = 0
    return "".join(out)


def make_prompts(n: int, target_tokens: int, *, seed: int = 0, namespace: str = "") -> list[str]:
    """``n`` unique prompts of about ``target_tokens`` tokens (deterministic per seed)."""
    return PromptFactory(seed, namespace).batch(target_tokens, n)


class DatasetPrompts(PromptFactory):
    """Prompts from a JSONL file, in a seeded order, each behind its own unique tag."""

    def __init__(self, path: str, seed: int = 0, namespace: str = "") -> None:
        super().__init__(seed, namespace)
        self.rows = load_dataset(path)
        if not self.rows:
            raise ValueError(f"{path}: no prompts found (expected JSONL lines with conversations, "
                             "messages, prompt or text)")
        self._order = list(range(len(self.rows)))
        random.Random(f"{seed}/dataset").shuffle(self._order)

    def draft(self, max_chars: int) -> Draft:
        row = self.rows[self._order[self._counter % len(self._order)]]
        tag = self._tag()
        reps = max_chars // max(1, len(row) + 2) + 1
        return Draft(f"{tag} ", ("\n\n".join([row] * reps))[:max_chars])


def load_dataset(path: str) -> list[str]:
    """The first user turn of every JSONL line (ShareGPT ``conversations``, ``messages``,
    ``prompt`` or ``text``); blank and unreadable lines are skipped."""
    out: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            text = _first_prompt(obj)
            if text:
                out.append(text)
    return out


def _first_prompt(obj: Any) -> str | None:
    """One row's prompt: the definition ``workload.dataset_path`` was checked with before the trial."""
    from sweep.compose.input_files import first_prompt

    return first_prompt(obj)


def random_ids(n: int, length: int, vocab_size: int, *, seed: int = 0) -> list[list[int]]:
    """``n`` prompts of exactly ``length`` token ids below ``vocab_size``.

    The recipe of SGLang's bench_serving ``--dataset-name random-ids`` with
    ``--random-range-ratio 1`` (``sample_random_requests``): numpy's legacy
    generator seeded with ``seed``, one random offset per prompt, then
    consecutive ids ``(offset + i + j) % vocab_size``. Same seed and
    vocabulary size, same prompts -- so the harness and bench_serving can be
    compared on identical requests (benchmarks/crosscheck_bench_serving.py).
    Prompts differ from their first id, so none shares a prefix with another.
    """
    import numpy as np

    rs = np.random.RandomState(seed)
    offsets = rs.randint(0, vocab_size, size=n)
    return [[int((offsets[i] + i + j) % vocab_size) for j in range(length)] for i in range(n)]
