"""The simulator's one tokenizer approximation.

Real BPE vocabularies average ~4 characters per English/code token. The sim
needs a deterministic, fast stand-in that every count agrees with: prompt
tokens, completion tokens, and the pieces it streams. A piece is an optional
leading space plus up to 4 letters, or up to 3 digits, or one other symbol,
or a run of other whitespace (newline + indentation). Concatenating the
pieces gives back the text exactly, so streamed text is lossless and
``usage.completion_tokens`` equals the pieces actually streamed.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

PIECE = re.compile(r" ?[A-Za-z]{1,4}| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+?(?=\S| ?[A-Za-z\d])|\s+")
# Chat template overhead per message (role markers) and per conversation.
PER_MESSAGE = 4
PER_CONVERSATION = 3


def pieces(text: str) -> list[str]:
    """Split text into token pieces (lossless: ''.join(pieces(t)) == t)."""
    return PIECE.findall(text)


def count(text: str) -> int:
    """Number of tokens of ``text`` under the sim's tokenizer."""
    return sum(1 for _ in PIECE.finditer(text))


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
