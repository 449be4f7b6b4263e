"""The simulator's tokenizer: one object every token count agrees with.

Prompt tokens, completion tokens, the pieces it streams and its
``/v1/tokenize`` answers all come from the same tokenizer, so a client that
sizes prompts with the server's tokenize route gets exactly the
``usage.prompt_tokens`` it will be billed.

Two kinds:

* the built-in approximation (default): real BPE vocabularies average ~4
  characters per English/code token, so a piece is an optional leading
  space plus up to 4 letters, or up to 3 digits, or one other symbol, or a
  run of other whitespace. Fast, deterministic, no file needed; its token
  ids are hashes of the pieces (it cannot detokenize).
* a Hugging Face ``tokenizer.json`` (``--sim-tokenizer PATH``, loaded with
  the ``tokenizers`` package): a client that holds the same file (SGLang's
  ``bench_serving`` retokenizes every streamed chunk with its own) counts
  exactly what the sim counted.

In both, pieces are lossless (``''.join(pieces(t)) == t``) and
``len(pieces(t)) == count(t)``, so ``usage.completion_tokens`` equals the
pieces actually streamed.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

PIECE = re.compile(r" ?[A-Za-z]{1,4}| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+?(?=\S| ?[A-Za-z\d])|\s+")
# Chat template overhead per message (role markers) and per conversation.
PER_MESSAGE = 4
PER_CONVERSATION = 3
VOCAB = 163840  # ids of the built-in tokenizer are hashes below this


class RegexTokenizer:
    """The built-in ~4-characters-per-token approximation."""

    name = "builtin"

    def pieces(self, text: str) -> list[str]:
        return PIECE.findall(text)

    def count(self, text: str) -> int:
        return sum(1 for _ in PIECE.finditer(text))

    def encode(self, text: str) -> list[int]:
        return [zlib.crc32(p.encode()) % VOCAB for p in PIECE.findall(text)]


class HFTokenizer:
    """A ``tokenizer.json`` loaded with the ``tokenizers`` package."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.name = str(path)
        self._tok = Tokenizer.from_file(str(path))

    def pieces(self, text: str) -> list[str]:
        """One piece per token, cut at each token's start offset (lossless).

        A piece is the text from a token's start to the next token's start,
        so whitespace the tokenizer skips rides on the token before it and
        every concatenation of consecutive pieces retokenizes like the text.
        """
        enc = self._tok.encode(text, add_special_tokens=False)
        starts = [s for s, _ in enc.offsets]
        if not starts:
            return [text] if text else []
        starts[0] = 0
        bounds = starts + [len(text)]
        return [text[bounds[i]:bounds[i + 1]] for i in range(len(starts))]

    def count(self, text: str) -> int:
        return len(self._tok.encode(text).ids)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)


_active: RegexTokenizer | HFTokenizer = RegexTokenizer()


def configure(path: str | Path | None) -> None:
    """Use the tokenizer.json at ``path`` (None: the built-in approximation)."""
    global _active
    _active = RegexTokenizer() if not path else HFTokenizer(path)


def active() -> RegexTokenizer | HFTokenizer:
    return _active


def pieces(text: str) -> list[str]:
    """Split text into token pieces (lossless: ''.join(pieces(t)) == t)."""
    return _active.pieces(text)


def count(text: str) -> int:
    """Number of tokens of ``text`` under the sim's tokenizer."""
    return _active.count(text)


def encode(text: str) -> list[int]:
    return _active.encode(text)


def content_text(content: Any) -> str:
    """The text of an OpenAI message content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def chat_prompt_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """Prompt tokens of a chat request: content tokens + template overhead."""
    total = PER_CONVERSATION
    for m in messages:
        total += PER_MESSAGE + count(content_text(m.get("content")))
    return total


def is_token_ids(value: Any) -> bool:
    """A non-empty list of ints (a prompt given as token ids)."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value)


def ids_text(ids: Sequence[int]) -> str:
    """A stable text stand-in for a token-id prompt (seeds the answer)."""
    return " ".join(map(str, ids))


def count_and_canonical(text: str) -> tuple[int, str]:
    """(tokens, identity) of a text prompt, tokenizing it once.

    The identity is its token ids under a tokenizer file (so a text and the
    ids it encodes to are one prompt, see :func:`ids_text`), else the text.
    """
    if isinstance(_active, HFTokenizer):
        ids = _active.encode(text)
        return len(ids), ids_text(ids)
    return _active.count(text), text
