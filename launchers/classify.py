"""Mine a server log for why the server failed to come up.

A failed trial is only useful if it says *why*: "budget 16 crashes CUDA-graph
capture on sm_103" and "the draft model does not fit" call for different
fixes (``server.disable_cuda_graph=true`` or a smaller budget vs. a lower
``--mem-fraction-static``). :func:`classify` maps a log to one reason of
:data:`launchers.base.REASONS`; the local and the SSH launcher both use it.

Rules are tried **in order, first match wins**, and the order is the point:

1. ``python_headers`` -- Triton JIT-compiles kernels lazily, often *during*
   CUDA-graph capture or warmup; a missing ``Python.h`` then surfaces inside
   a "Capture cuda graph failed" or import traceback. The header is the root
   cause (install ``python3.x-dev``), the wrapper is incidental.
2. ``missing_module`` -- same reasoning: imports happen lazily in warmup and
   capture (e.g. ``flash_attn.cute`` from a vision tower). Only the fatal
   forms count (``ModuleNotFoundError``, ``ImportError: No module named``,
   the interpreter's own ``python3: No module named x``): SGLang logs
   harmless "Ignore import error when loading ...: No module named ..."
   warnings for optional models at every start.
3. ``oom`` -- an out-of-memory *inside* graph capture ("Capture cuda graph
   failed: CUDA out of memory") is a memory problem whose fix is memory
   (``--mem-fraction-static``, ``--cuda-graph-max-bs``); calling it
   ``cuda_graph`` would make a sweep conclude "this budget is broken on this
   box", which is wrong.
4. ``cuda_graph`` -- capture failures proper (stream capture invalidated,
   operation not permitted while capturing, SGLang's "Capture cuda graph
   failed"). Normal progress lines ("Capture cuda graph begin/end", the
   ``cuda graph: True`` field of decode lines) must not match.
5. ``model_missing`` -- the weights are not where the config says: llama.cpp's
   ``failed to open GGUF file '...' (No such file or directory)``, or a path
   that transformers takes for a Hugging Face id that does not exist (offline:
   huggingface_hub's ``HFValidationError: Repo id must be in the form ...`` for
   a missing folder, as vLLM says it). The load error lines that follow it are
   consequences.
6. ``bad_flag`` -- the server's parser rejects the command line before anything
   else runs (argparse for SGLang / vLLM; llama.cpp's ``error: invalid
   argument: --x``, ``error while handling argument "--x": ...``, or a flag it
   removed), or rejects a speculative setting when it builds its context
   (vLLM: ``1 validation error for SpeculativeConfig`` and the key or value).
7. ``port_in_use`` -- bind failure of the HTTP server (uvicorn spells it in
   lower case, Python's socket error in mixed case; errno 98 on Linux;
   llama.cpp's cpp-httplib says ``couldn't bind HTTP server socket``).

Nothing matched: ``crashed`` if the process exited, otherwise ``unknown``
(the caller decides e.g. ``timeout`` for a server that never got ready).
"""

from __future__ import annotations

import re

# (reason, pattern); first match wins -- see the module docstring for why.
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("python_headers", re.compile(r"Python\.h: No such file or directory", re.I)),
    ("missing_module", re.compile(
        r"\bModuleNotFoundError\b"
        r"|\bImportError: No module named\b"
        r"|^\S*python[\d.]*: (?:No module named|Error while finding module specification)",
        re.M)),
    ("oom", re.compile(
        r"CUDA out of memory"
        r"|\bOutOfMemoryError\b"
        r"|\bNot enough memory\b"
        r"|CUDA error: out of memory"
        r"|cudaErrorMemoryAllocation"
        r"|CUBLAS_STATUS_ALLOC_FAILED",
        re.I)),
    ("cuda_graph", re.compile(
        r"Capture cuda graph failed"
        r"|cuda ?graph capture[^\n]{0,40}\b(?:failed|error)"
        r"|\b(?:failed|error)[^\n]{0,80}\bcuda ?graph capture"
        r"|cudaErrorStreamCapture\w*"
        r"|operation not permitted when stream is capturing"
        r"|operation failed due to a previous error during capture",
        re.I)),
    ("model_missing", re.compile(
        r"failed to open GGUF file '[^'\n]*' \(No such file or directory\)"
        r"|is not a local folder and is not a valid model identifier"
        r"|HFValidationError: Repo id must be in the form"
        r"|LocalEntryNotFoundError: "
        r"|OfflineModeIsEnabled")),
    ("bad_flag", re.compile(
        r"error: unrecognized arguments"
        r"|: error: argument "
        r"|\binvalid choice: "
        r"|: error: the following arguments are required"
        r"|\berror: invalid argument: "
        r"|\berror while handling argument \""
        r"|\bthe argument has been removed\b"
        r"|failed to initialize speculative decoding context"
        r"|\d+ validation errors? for \w*Config\b",
        re.I)),
    ("port_in_use", re.compile(
        r"address already in use"
        r"|\[Errno 98\]"
        r"|\bEADDRINUSE\b"
        r"|couldn't bind HTTP server socket",
        re.I)),
)


# What to do about each reason: every failure says what, where, and what to do.
HINTS: dict[str, str] = {
    "cuda_graph": "CUDA-graph capture failed: set server.disable_cuda_graph=true "
                  "(slower) or use a smaller spec.budget",
    "oom": "out of GPU memory: lower server.mem_fraction_static or "
           "server.max_running_requests, or use a smaller spec.budget",
    "missing_module": "a Python module is missing in the server's environment: install it, "
                      "or set server.skip_server_warmup=true if only warmup imports it",
    "python_headers": "Triton cannot compile kernels without Python.h: install the "
                      "python3.x-dev package matching the server's Python",
    "model_missing": "the model is not there: check model.path and model.draft_paths "
                     "(for the CPU engines' weights run: python -m sweep.engines llamacpp|vllm)",
    "bad_flag": "the server rejected a flag or a speculative setting: check server.extra_args, the spec's "
                "knobs and its render mapping against this server version",
    "port_in_use": "another process holds the server port: stop it or set server.port",
    "timeout": "the server never became ready: raise launcher.ready_timeout_s or read the log",
    "crashed": "the server exited: read the log tail",
    "unknown": "read the server log",
}


def hint(reason: str) -> str:
    """One line telling the user what to do about ``reason``."""
    return HINTS.get(reason, HINTS["unknown"])


def classify(log_text: str, *, exited: bool = True) -> str:
    """The failure reason for a server log (one of ``launchers.base.REASONS``).

    ``exited`` says whether the server process is gone; with no matching
    signature that makes the difference between ``crashed`` and ``unknown``.
    """
    for reason, pattern in RULES:
        if pattern.search(log_text):
            return reason
    return "crashed" if exited else "unknown"


def said(log_text: str, reason: str) -> str | None:
    """The server's own words for ``reason``: the log line that matched (for a pydantic
    validation error, with the field and message lines that follow it), on one line."""
    pattern = dict(RULES).get(reason)
    m = pattern.search(log_text) if pattern is not None else None
    if m is None:
        return None
    start = log_text.rfind("\n", 0, m.start()) + 1
    lines = log_text[start:].splitlines()
    first = lines[0].strip() if lines else ""
    if re.search(r"validation errors? for", first):
        details = [ln.strip() for ln in lines[1:6] if ln.strip() and not ln.strip().startswith("For further")]
        first = " ".join([first, *details[:2]])
    first = re.sub(r"\s*\[type=[^\]]*\]", "", first)
    return first[:300] or None


_ERROR_LINE = re.compile(r"(?:^|\]\s|\s)((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): \S.*)$")


def last_error(log_text: str) -> str | None:
    """The last ``SomeError: message`` line of a log (a crash's own words), or None.

    Wrappers that only point elsewhere (vLLM's ``EngineDeadError: ... See stack
    trace (above)``) are passed over for the error they point at."""
    found = None
    for line in log_text.splitlines():
        m = _ERROR_LINE.search(line.rstrip())
        if m and "See stack trace" not in m.group(1) and "see root cause" not in m.group(1).lower():
            found = m.group(1)
    return found[:300] if found else None


def tail(text: str, n: int) -> str:
    """The last ``n`` lines of ``text`` (all of it when shorter; "" for n <= 0)."""
    if n <= 0 or not text:
        return ""
    lines = text.splitlines()
    return "\n".join(lines[-n:])
