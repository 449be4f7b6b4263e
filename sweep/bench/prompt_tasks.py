"""Prompts whose answers reuse them (``edit``) and prompts whose answers do not (``prose``).

Why both: speculation without a draft model (n-gram / prompt lookup,
suffix decoding) drafts the continuation of an earlier occurrence of the
last few tokens, so it wins where the answer repeats the prompt and costs a
little where it does not. A landscape that only ever sent one kind of prompt
would say speculation always wins (or never does); these two sources put the
winners and the losers side by side with the same sizes and the same model.

Both are real text present on every machine, no download: the running
interpreter's standard library (as :mod:`sweep.bench.prompts`).

* ``edit`` -- a slice of standard-library source followed by a task whose
  answer rewrites or quotes it: remove the comments, rename for clarity,
  quote it and summarise it. The answer opens a code block (or a quote), so
  even a small model starts copying.
* ``prose`` -- a slice of the English prose of the standard library's
  docstrings (paragraphs of words, doctest and code lines dropped), followed by
  a request for a new paragraph on another subject: the answer is new text.

Each prompt is a :class:`~sweep.bench.prompts.Draft` with a ``tail`` (the
task, after the material), so :mod:`sweep.bench.sizing` still cuts the
material to the context the server counts; every prompt keeps its own hex tag
first (no shared prefix between prompts).
"""

from __future__ import annotations

import ast
import re

from sweep.bench.prompts import MIN_CORPUS_CHARS, Draft, PromptFactory, _corpus, _slice, _source_at

EDIT_TASKS = (
    ("# {source}, as given:\n```python\n", "\n```\n\nThe same code with every comment and docstring removed "
     "(all other lines unchanged):\n```python\n"),
    ("# {source}, as given:\n```python\n", "\n```\n\nThe same code, refactored: clearer local variable names "
     "and type hints, behaviour unchanged:\n```python\n"),
    ("Excerpt of {source}:\n```python\n", "\n```\n\nQuote the excerpt above exactly, then summarise it in one "
     "sentence.\n\nQuote:\n```python\n"),
)
PROSE_SUBJECTS = ("the history of bread", "how bridges carry weight", "why the sky is blue",
                  "caring for a garden in winter", "the life of honey bees", "learning a second language",
                  "how tides work", "the first railways", "keeping bees in a city", "how glass is made")
PROSE_HEAD = "Notes from the Python documentation ({source}):\n\n"
PROSE_TAIL = ("\n\nThe notes end here. Now write a new, original paragraph about {subject}, "
              "in plain English.\n\nParagraph:\n")
_WORDY = re.compile(r"[A-Za-z]{2,}")


class EditPrompts(PromptFactory):
    """Standard-library code and a task whose answer rewrites or quotes it."""

    def draft(self, max_chars: int) -> Draft:
        text, starts = _corpus(self.seed, max(MIN_CORPUS_CHARS, 2 * max_chars))
        tag = self._tag()
        offset = self._line_start(text)
        head, tail = EDIT_TASKS[self._rng.randrange(len(EDIT_TASKS))]
        return Draft(f"{tag} " + head.format(source=_source_at(starts, offset)),
                     _slice(text, offset, max_chars), tail)


class ProsePrompts(PromptFactory):
    """Standard-library docstring prose and a request for a new paragraph on another subject."""

    def draft(self, max_chars: int) -> Draft:
        text, starts = _prose_corpus(self.seed)
        tag = self._tag()
        offset = self._rng.randrange(len(text))
        para = text.find("\n\n", offset)  # start at a paragraph
        offset = para + 2 if 0 <= para < len(text) - 2 else 0
        subject = PROSE_SUBJECTS[self._rng.randrange(len(PROSE_SUBJECTS))]
        return Draft(f"{tag} " + PROSE_HEAD.format(source=_source_at(starts, offset)),
                     _slice(text, offset, max_chars), PROSE_TAIL.format(subject=subject))


def _prose_paragraphs(source: str) -> list[str]:
    """The prose paragraphs of a module's docstrings (code, doctests and lists left out)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        for para in (doc or "").split("\n\n"):
            raw = para.splitlines()
            if any(ln[:1].isspace() for ln in raw):  # an indented block: code, a table, a list
                continue
            lines = [ln.strip() for ln in raw]
            if not lines or any(ln.startswith((">>>", "...", "$", "-", "*", ":")) for ln in lines):
                continue
            flat = " ".join(lines).replace("::", ":")
            words = _WORDY.findall(flat)
            if len(words) >= 12 and sum(len(w) for w in words) >= 0.7 * len(flat.replace(" ", "")):
                out.append(flat)
    return out


def prose_text(source: str) -> str:
    """A module's docstring prose as paragraphs (the text prose prompts are cut from)."""
    paras = _prose_paragraphs(source)
    return "\n\n".join(paras) + "\n\n" if paras else ""


def _prose_corpus(seed: int, min_chars: int = 400_000) -> tuple[str, tuple[tuple[int, str], ...]]:
    """Docstring prose of the standard library, paragraphs joined (deterministic per seed)."""
    return _corpus(seed, min_chars, prose_text)
