"""``python -m sweep.sim.predict`` judges its inputs as data (issue 39).

* ``--acceptance`` carries acceptance over only within one engine, model and workload: a llama.cpp
  landscape's for a vLLM config printed accept 7.54 where vLLM measured 4.97; now one line naming
  what differs, exit 2;
* ``--budgets`` past the budget the acceptance was measured at is refused (the twin's own acceptance
  was used for b16 beside b8's measured one, without a word);
* an option that needs another (``--accept-model`` without ``--acceptance``, ``--concurrency``
  without ``--breakdown``) is refused, not ignored;
* ``--acceptance /dev/zero`` (memory ran out) and a FIFO (it hung) are refused by the one reader.

In process (``main(argv)`` returns the exit status, the line on stderr) except the special files,
which run as real processes with a memory limit and a timeout: before the fix they would take the
test process down with them.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import subprocess_env

from faults.landscape_cases import LLAMACPP, VLLM
from sweep.sim import predict

VLLM_NGRAM = ["server=vllm", "model=smollm2", "hardware=cpu", "spec=ngram", "workload=edit"]
VLLM_B8 = f"{VLLM}#ngram-b8-max4-min2/edit"
LLAMA_B8 = f"{LLAMACPP}#ngram-b8-min2/cpu"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = predict.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str, key: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}: "), lines
    return lines[0]


def test_acceptance_from_another_engine_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *VLLM_NGRAM, "spec.budget=4", "--acceptance", LLAMA_B8)
    line = _one_line(err, "--acceptance")
    assert code == 2 and "engine llamacpp (this config: vllm)" in line and "workload cpu" in line, line
    assert "accept" not in out


def test_acceptance_from_the_same_engine_model_and_workload_carries_over(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *VLLM_NGRAM, "spec.budget=4", "--acceptance", VLLM_B8)
    assert code == 0, err
    assert "carried over from the per-position acceptance measured at budget 8" in out


def test_acceptance_from_another_workload_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *VLLM_NGRAM[:-1], "workload=prose", "spec.budget=4", "--acceptance", VLLM_B8)
    assert code == 2 and "workload edit (this config: prose)" in _one_line(err, "--acceptance")


def test_budgets_past_the_measured_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *VLLM_NGRAM, "--budgets", "1,2,4,16", "--acceptance", VLLM_B8)
    line = _one_line(err, "--budgets")
    assert code == 2 and "16 past budget 8" in line and not out, line


@pytest.mark.parametrize("argv, key, needs", [(["--accept-model", "truncate"], "--accept-model", "--acceptance"),
                                              (["--concurrency", "1,2"], "--concurrency", "--breakdown")])
def test_an_option_without_the_one_it_needs_is_refused(argv: list[str], key: str, needs: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *VLLM_NGRAM, *argv)
    assert code == 2 and f"only with {needs}" in _one_line(err, key) and not out


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # /dev/zero read whole: MemoryError, not the box


def test_special_files_as_acceptance_are_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    for source, kind in (("/dev/zero", "character device"), (str(tmp_path / "fifo.json"), "FIFO"),
                         (f"{tmp_path / 'fifo.json'}#cfg/edit", "FIFO")):
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "sweep.sim.predict", *VLLM_NGRAM, "--acceptance", source],
                                  cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=60,
                                  preexec_fn=_limited)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"--acceptance {source}: still reading after 60 s") from None
        assert proc.returncode == 2, (source, proc.stderr[-500:])
        assert kind in _one_line(proc.stderr, "--acceptance") and time.monotonic() - t0 < 30, proc.stderr
