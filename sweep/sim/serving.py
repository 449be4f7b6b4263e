"""The generation endpoints (/v1/chat/completions, /v1/completions, /generate) and /v1/tokenize.

Shapes follow sglang 0.5.23 (``entrypoints/openai/protocol.py``, its
``sse_utils.build_sse_content`` and ``tokenizer_manager`` meta_info). Two
deliberate extensions, both ignored by SGLang's pydantic models: streamed
chat/completions with ``return_meta_info`` carry ``meta_info`` on the
finish chunk's choice (0.5.23 refuses that combination; DDTree fork builds
and the harness use it), and /v1/completions honours ``return_meta_info``.

Streaming is the sim's hot path: every chunk is a prebuilt byte prefix +
the JSON-escaped text + a prebuilt suffix, and all chunks a request has
pending are written with one ASGI send.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from typing import Any, AsyncIterator, Callable

from sweep.sim import text as textgen
from sweep.sim import tokens
from sweep.sim.engine import Request

try:  # orjson is ~5x faster at escaping a string; json is the fallback
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

DONE = b"data: [DONE]\n\n"


class BadRequest(Exception):
    """A request SGLang would refuse with 400 (message as SGLang words it)."""


def error_body(message: str, code: int = 400, kind: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


def _max_tokens(body: dict[str, Any], prompt_tokens: int, context_length: int, *keys: str) -> int:
    value = None
    for k in keys:
        if body.get(k) is not None:
            value = body[k]
            break
    if value is None:
        value = max(1, context_length - prompt_tokens)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadRequest("max_tokens must be positive")
    if prompt_tokens + value > context_length:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of {context_length} tokens. "
            f"You requested a total of {prompt_tokens + value} tokens: {prompt_tokens} tokens from the input "
            f"messages and {value} tokens for the completion. Please reduce the number of tokens in the "
            "input messages or the completion to fit within the limit.")
    return value


def parse_request(kind: str, body: dict[str, Any], *, seed: int, context_length: int,
                  wrong_answer_rate: float) -> tuple[Request, dict[str, Any]]:
    """Validate a generation request and turn it into an engine Request + options."""
    prompt: Any
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        prompt = "\n".join(tokens.content_text(m.get("content")) for m in messages if isinstance(m, dict))
        prompt_tokens = tokens.chat_prompt_tokens(m for m in messages if isinstance(m, dict))
        canon = prompt
        max_tokens = _max_tokens(body, prompt_tokens, context_length, "max_completion_tokens", "max_tokens")
        ignore_eos = bool(body.get("ignore_eos", False))
        opts = body
    elif kind == "completion":
        prompt, prompt_tokens, canon = completion_prompt(body.get("prompt"))
        max_tokens = _max_tokens(body, prompt_tokens, context_length, "max_tokens")
        ignore_eos = bool(body.get("ignore_eos", False))
        opts = body
    else:  # native /generate
        prompt = body.get("text")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        if prompt is None and body.get("input_ids") is not None:
            ids = body["input_ids"]
            prompt = canon = tokens.ids_text(ids)
            prompt_tokens = len(ids)
        elif isinstance(prompt, str):
            n, canon = tokens.count_and_canonical(prompt)
            prompt_tokens = max(1, n)
        else:
            raise BadRequest("Either text or input_ids should be provided.")
        sp = body.get("sampling_params") or {}
        max_tokens = _max_tokens(sp, prompt_tokens, context_length, "max_new_tokens")
        ignore_eos = bool(sp.get("ignore_eos", False))
        opts = body
    if int(body.get("n") or 1) != 1:
        raise BadRequest("The simulator supports n=1 only")
    ans = textgen.answer(prompt, max_tokens=max_tokens, ignore_eos=ignore_eos, seed=seed,
                         wrong_answer_rate=wrong_answer_rate)
    rid = uuid.uuid4().hex
    # Acceptance draws are seeded by what was asked, not by arrival: deterministic for a seed,
    # and the same for a prompt sent as text or as its token ids.
    draw_seed = zlib.crc32(f"{seed}:{max_tokens}:{canon}".encode())
    req = Request(rid=rid, pieces=ans.pieces, finish_reason=ans.finish_reason,
                  prompt_tokens=prompt_tokens, seed=draw_seed)
    return req, opts


def completion_prompt(prompt: Any) -> tuple[str, int, str]:
    """(text that seeds the answer, prompt tokens, canonical form) of a /v1/completions prompt.

    SGLang takes a string, a list of token ids (counted as given: no special
    tokens are added), or a batch of either; the sim serves one prompt per
    request, so a batch must hold exactly one.
    """
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if tokens.is_token_ids(prompt):
        text = tokens.ids_text(prompt)
        return text, len(prompt), text
    if isinstance(prompt, str):
        n, canon = tokens.count_and_canonical(prompt)
        return prompt, max(1, n), canon
    raise BadRequest("prompt must be a string or a list of token ids (the simulator serves one prompt "
                     "per request)")


def tokenize(body: dict[str, Any], max_model_len: int) -> dict[str, Any]:
    """SGLang's /v1/tokenize (and /tokenize): the sim's own token ids and count.

    ``prompt`` (a string or a list of strings) or ``messages`` (counted with
    the chat template overhead, as a chat completion would be), exactly one.
    """
    prompt, messages = body.get("prompt"), body.get("messages")
    if (prompt is None) == (messages is None):
        raise BadRequest("Exactly one of 'prompt' or 'messages' must be provided.")
    if messages is not None:
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages must be a list of message objects")
        n = tokens.chat_prompt_tokens(messages)
        text = "\n".join(tokens.content_text(m.get("content")) for m in messages)
        ids = tokens.encode(text)
        ids = (ids + [0] * n)[:n]  # the template's marker tokens, counted as the chat path does
        return {"tokens": ids, "count": n, "max_model_len": max_model_len}
    if isinstance(prompt, str):
        ids = tokens.encode(prompt)
        return {"tokens": ids, "count": len(ids), "max_model_len": max_model_len}
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        many = [tokens.encode(p) for p in prompt]
        return {"tokens": many, "count": [len(i) for i in many], "max_model_len": max_model_len}
    raise BadRequest(f"Invalid prompt type: {type(prompt)}. Expected str or List[str].")


def finish_reason(req: Request) -> dict[str, Any]:
    if req.finish_reason == "stop":
        return {"type": "stop", "matched": textgen.EOS_TOKEN_ID}
    return {"type": "length", "length": req.completion_tokens}


def meta_info(req: Request, width: int, spec_on: bool) -> dict[str, Any]:
    """SGLang's meta_info for a finished request (tokenizer_manager's keys)."""
    mi: dict[str, Any] = {
        "id": req.rid, "finish_reason": finish_reason(req), "prompt_tokens": req.prompt_tokens,
        "weight_version": "default", "num_retractions": 0, "reasoning_tokens": 0,
        "completion_tokens": req.completion_tokens, "cached_tokens": 0,
        "e2e_latency": max(0.0, (req.finish_time or time.time()) - req.created),
    }
    if spec_on and req.verify_ct > 0:
        proposed = req.verify_ct * max(1, width - 1)
        mi.update({
            "spec_accept_rate": req.correct_drafts / proposed,
            "spec_accept_length": req.completion_tokens / req.verify_ct,
            "spec_num_correct_drafts": req.correct_drafts,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": req.verify_ct,
            "spec_correct_drafts_histogram": list(req.histogram),
        })
    return mi


def usage(req: Request) -> dict[str, Any]:
    return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens, "prompt_tokens_details": None, "reasoning_tokens": 0,
            "completion_tokens_details": None}


def spec_details(mi: dict[str, Any]) -> dict[str, Any]:
    keys = ("spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts",
            "spec_verify_ct", "spec_correct_drafts_histogram")
    return {k: mi[k] for k in keys if k in mi}


def token_ids(pieces: list[str]) -> list[int]:
    return [zlib.crc32(p.encode()) % 163840 for p in pieces]


async def _drain(req: Request) -> AsyncIterator[list[tuple[int, int]]]:
    """Yield the engine's pending piece ranges for ``req`` until it finishes."""
    while True:
        await req.event.wait()
        req.event.clear()
        chunks, req.chunks = req.chunks, []
        if chunks:
            yield chunks
        if req.finished or req.aborted:
            return


async def stream_openai(kind: str, req: Request, opts: dict[str, Any], *, model: str, width: int,
                        spec_on: bool) -> AsyncIterator[bytes]:
    """SSE bytes of a streamed chat/completions response."""
    created = str(int(time.time())).encode()
    head = b'data: {"id":"' + req.rid.encode() + b'","object":"'
    head += (b"chat.completion.chunk" if kind == "chat" else b"text_completion")
    head += b'","created":' + created + b',"model":' + _dumps(model) + b',"choices":[{"index":0,'
    if kind == "chat":
        pre = head + b'"delta":{"reasoning_content":null,"content":'
        open_ = b'},"logprobs":null,"finish_reason":null,"matched_stop":null}]'
        suf = open_ + b'}\n\n'
        yield head + b'"delta":{"reasoning_content":null,"role":"assistant","content":""},' \
            b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'
    else:
        pre = head + b'"text":'
        open_ = b',"logprobs":null,"finish_reason":null,"matched_stop":null}]'
        suf = open_ + b',"usage":null}\n\n'
    so = opts.get("stream_options") or {}
    include_usage = bool(so.get("include_usage"))
    continuous = bool(so.get("continuous_usage_stats"))
    pieces = req.pieces
    async for chunks in _drain(req):
        if continuous:
            out = []
            for s, e in chunks:
                u = {"prompt_tokens": req.prompt_tokens, "completion_tokens": e,
                     "total_tokens": req.prompt_tokens + e}
                out.append(pre + _dumps("".join(pieces[s:e])) + open_ + b',"usage":'
                           + _dumps(u) + b"}\n\n")
            yield b"".join(out)
        else:
            yield b"".join([pre + _dumps("".join(pieces[s:e])) + suf for s, e in chunks])
    if req.aborted:
        return
    fr = finish_reason(req)
    matched = fr.get("matched")
    mi = meta_info(req, width, spec_on)
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat":
        choice["delta"] = {"reasoning_content": None}
    else:
        choice["text"] = ""
    choice.update({"logprobs": None, "finish_reason": fr["type"], "matched_stop": matched})
    if opts.get("return_meta_info"):
        choice["meta_info"] = mi
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    base = {"id": req.rid, "object": obj, "created": int(created), "model": model}
    yield b"data: " + _dumps({**base, "choices": [choice]}) + b"\n\n"
    if opts.get("return_spec_tokens_details") and spec_on and "spec_verify_ct" in mi:
        yield b"data: " + _dumps({**base, "choices": [], "usage": None,
                                  "sglext": {"spec_tokens_details": spec_details(mi)}}) + b"\n\n"
    if include_usage:
        yield b"data: " + _dumps({**base, "choices": [], "usage": usage(req)}) + b"\n\n"
    yield DONE


async def complete_openai(kind: str, req: Request, opts: dict[str, Any], *, model: str, width: int,
                          spec_on: bool) -> dict[str, Any]:
    """A non-streamed chat/completions response body."""
    async for _ in _drain(req):
        pass
    text = "".join(req.pieces[:req.completion_tokens])
    fr = finish_reason(req)
    mi = meta_info(req, width, spec_on)
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None}
    else:
        choice["text"] = text
    choice.update({"logprobs": None, "finish_reason": fr["type"], "matched_stop": fr.get("matched")})
    if opts.get("return_meta_info"):
        choice["meta_info"] = mi
    body: dict[str, Any] = {"id": req.rid, "object": "chat.completion" if kind == "chat" else "text_completion",
                            "created": int(req.created), "model": model, "choices": [choice],
                            "usage": usage(req), "metadata": None}
    if opts.get("return_spec_tokens_details") and "spec_verify_ct" in mi:
        body["sglext"] = {"spec_tokens_details": spec_details(mi)}
    return body


async def stream_generate(req: Request, *, width: int, spec_on: bool) -> AsyncIterator[bytes]:
    """Native /generate streaming: cumulative text per chunk, as SGLang sends it."""
    async for chunks in _drain(req):
        end = chunks[-1][1]
        out = {"text": "".join(req.pieces[:end]), "output_ids": token_ids(req.pieces[:end]),
               "meta_info": {**meta_info(req, width, spec_on), "completion_tokens": end,
                             "finish_reason": finish_reason(req) if req.finished else None}}
        yield b"data: " + _dumps(out) + b"\n\n"
    yield DONE


async def complete_generate(req: Request, *, width: int, spec_on: bool) -> dict[str, Any]:
    async for _ in _drain(req):
        pass
    done = req.pieces[:req.completion_tokens]
    return {"text": "".join(done), "output_ids": token_ids(done), "meta_info": meta_info(req, width, spec_on)}


Dumps = Callable[[Any], bytes]
dumps: Dumps = _dumps
