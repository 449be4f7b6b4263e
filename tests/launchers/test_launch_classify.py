"""classify(): one realistic SGLang/vLLM log excerpt per failure reason."""

from __future__ import annotations

import pytest

from launchers.base import REASONS
from launchers.classify import HINTS, classify, hint, last_error, said, tail

PREAMBLE = """\
[2026-05-02 10:00:01] server_args=ServerArgs(model_path='/models/kimi-k2.6', tp_size=8, speculative_algorithm='DDTREE')
[2026-05-02 10:00:03] Ignore import error when loading sglang.srt.models.mllama4: No module named 'timm'
[2026-05-02 10:00:09 TP0] Load weight begin. avail mem=270.11 GB
[2026-05-02 10:02:31 TP0] Load weight end. type=KimiK2ForCausalLM, dtype=torch.bfloat16, avail mem=196.40 GB
[2026-05-02 10:02:32 TP0] KV Cache is allocated. #tokens: 1203000, K size: 30.1 GB, V size: 30.1 GB
[2026-05-02 10:02:33 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=130.2 GB
"""

EXCERPTS = {
    "cuda_graph": PREAMBLE + """\
[2026-05-02 10:02:40 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 390, in __init__
    self.capture()
RuntimeError: CUDA error: operation not permitted when stream is capturing
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

During handling of the above exception, another exception occurred:
Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing
Possible solutions:
1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)
2. set --cuda-graph-max-bs to a smaller value (e.g., 16)
4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)
[2026-05-02 10:02:41] Received sigquit from a child process. It usually means the child failed.
""",
    "oom": PREAMBLE.replace("Capture cuda graph begin", "Init torch distributed ends") + """\
[2026-05-02 10:02:35 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/mem_cache/memory_pool.py", line 512, in _create_buffers
    torch.zeros((self.size + self.page_size, self.head_num, self.head_dim), dtype=self.dtype)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 GiB. GPU 0 has a total capacity of 268.00 GiB of which 12.50 GiB is free.
""",
    "missing_module": PREAMBLE + """\
[2026-05-02 10:03:10] Start of warmup
Traceback (most recent call last):
  File "/sgl/python/sglang/srt/models/kimi_vl.py", line 77, in forward
    from flash_attn.cute import flash_attn_varlen_func
ModuleNotFoundError: No module named 'flash_attn.cute'
""",
    "python_headers": PREAMBLE + """\
/tmp/tmpa1b2c3/main.c:5:10: fatal error: Python.h: No such file or directory
    5 | #include <Python.h>
      |          ^~~~~~~~~~
compilation terminated.
Exception: Capture cuda graph failed: Command '['/usr/bin/gcc', '/tmp/tmpa1b2c3/main.c', '-O3', '-shared', '-fPIC']' returned non-zero exit status 1.
""",
    "bad_flag": """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
launch_server.py: error: unrecognized arguments: --enable-ep-moe
""",
    "port_in_use": PREAMBLE.replace("Capture cuda graph begin", "Capture cuda graph end") + """\
[2026-05-02 10:03:01] INFO:     Started server process [4242]
[2026-05-02 10:03:01] INFO:     Waiting for application startup.
[2026-05-02 10:03:01] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use
""",
}


@pytest.mark.parametrize("reason", sorted(EXCERPTS))
def test_each_reason_is_mined_from_a_real_looking_log(reason: str) -> None:
    assert reason in REASONS
    assert classify(EXCERPTS[reason]) == reason


# excerpts of real vLLM 0.32 (CPU) logs
VLLM_BAD_SPEC = """\
(APIServer pid=1) INFO 12-01 21:40:11 [utils.py:233] non-default args: {'model': '/m', 'speculative_config': {...}}
  File "/venv/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 1912, in create_speculative_config
    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig
prompt_lookup_maxx
  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=3, input_type=int]
    For further information visit https://errors.pydantic.dev/2.14/v/unexpected_keyword_argument
"""
VLLM_NO_MODEL = """\
  File "/venv/lib/python3.11/site-packages/huggingface_hub/utils/_validators.py", line 133, in validate_repo_id
    raise HFValidationError(
huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': \
'/nonexistent/model'. Use `repo_type` argument if needed.
"""


@pytest.mark.parametrize("text,reason", [
    # argparse variants
    ("launch_server.py: error: argument --tp-size: invalid int value: 'eight'", "bad_flag"),
    ("launch_server.py: error: argument --load-format: invalid choice: 'x' (choose from 'auto')", "bad_flag"),
    # the interpreter itself cannot find the server package
    ("/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' "
     "(ModuleNotFoundError: No module named 'sglang')", "missing_module"),
    ("/usr/bin/python3: No module named sglang", "missing_module"),
    # KV pool too small
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "oom"),
    # OOM raised inside graph capture is a memory problem, not a graph bug
    ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
    ("RuntimeError: CUDA error: cudaErrorStreamCaptureInvalidated: operation failed due to a "
     "previous error during capture", "cuda_graph"),
    ("OSError: [Errno 98] Address already in use", "port_in_use"),
    # vLLM 0.32: a --speculative-config key or value its SpeculativeConfig refuses, a model path that is not there
    (VLLM_BAD_SPEC, "bad_flag"),
    (VLLM_NO_MODEL, "model_missing"),
])
def test_variants(text: str, reason: str) -> None:
    assert classify(text) == reason


def test_healthy_progress_lines_are_not_failures() -> None:
    healthy = PREAMBLE + (
        "[2026-05-02 10:03:00 TP0] Capture cuda graph end. Time elapsed: 27.01 s. mem usage=3.1 GB\n"
        "[2026-05-02 10:04:00 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02, "
        "accept len: 4.48, accept rate: 0.87, cuda graph: True, gen throughput (token/s): 870.20\n")
    assert classify(healthy, exited=True) == "crashed"
    assert classify(healthy, exited=False) == "unknown"


def test_every_reason_has_a_hint() -> None:
    for reason in ("cuda_graph", "oom", "missing_module", "python_headers", "bad_flag",
                   "port_in_use", "timeout", "crashed", "unknown"):
        assert reason in HINTS and hint(reason)
    assert hint("no-such-reason") == HINTS["unknown"]


def test_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    assert tail(text, 3) == "line 97\nline 98\nline 99"
    assert tail("a\nb", 10) == "a\nb"
    assert tail(text, 0) == ""
    assert tail("", 5) == ""


def test_the_servers_own_words_are_kept() -> None:
    """A failed trial's message quotes the server: vLLM's key that SpeculativeConfig refused, the missing path."""
    assert said(VLLM_BAD_SPEC, "bad_flag") == ("pydantic_core._pydantic_core.ValidationError: 1 validation error for "
                                               "SpeculativeConfig prompt_lookup_maxx Unexpected keyword argument")
    assert "'/nonexistent/model'" in (said(VLLM_NO_MODEL, "model_missing") or "")
    assert said(EXCERPTS["bad_flag"], "bad_flag") == ("launch_server.py: error: unrecognized arguments: "
                                                      "--enable-ep-moe")
    assert said("all is well", "bad_flag") is None


def test_a_crash_quotes_its_last_error_line() -> None:
    log = """\
(Worker pid=7) ERROR 12-01 22:52:20 [multiproc_executor.py:1063] AssertionError: Synthetic acceptance not supported
(Worker pid=7) ERROR 12-01 22:52:20 [core.py:1] RuntimeError: Worker failed with error 'Synthetic acceptance \
not supported with CPU sampling', please check the stack trace above for the root cause
(APIServer pid=6) ERROR 12-01 22:52:20 [serving.py:500] vllm.v1.engine.exceptions.EngineDeadError: EngineCore \
encountered an issue. See stack trace (above) for the root cause.
"""
    assert last_error(log) == ("RuntimeError: Worker failed with error 'Synthetic acceptance not supported with CPU "
                               "sampling', please check the stack trace above for the root cause")
    assert last_error("INFO ready\nall good") is None
