"""`python -m sweep.engines llamacpp` on a machine where it already ran, and the draft it writes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from sweep.engines import _weights as _engine_weights

from .conftest import env


def test_second_run_finds_everything_and_prints_the_paths(engine):
    proc = subprocess.run([sys.executable, "-m", "sweep.engines", "llamacpp"], env=env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "server already built" in proc.stderr and "weights present" in proc.stderr
    assert proc.stdout.splitlines() == [f"{k}: {engine[k]}" for k in ("server", "model", "draft")]


def test_random_draft_is_deterministic_and_shares_the_vocabulary(engine, tmp_path: Path):
    import gguf

    spec = {"layers": 1, "hidden": 32, "heads": 2, "ff": 64, "seed": 7}
    a = _engine_weights.random_draft(spec, engine["model"], tmp_path / "a.gguf")
    b = _engine_weights.random_draft(spec, engine["model"], tmp_path / "b.gguf")
    c = _engine_weights.random_draft({**spec, "seed": 8}, engine["model"], tmp_path / "c.gguf")
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    assert digest[0] == digest[1] != digest[2]
    draft, target = gguf.GGUFReader(str(a)), gguf.GGUFReader(str(engine["model"]))
    assert draft.fields["general.architecture"].contents() == "llama"
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.eos_token_id"):
        assert draft.fields[key].contents() == target.fields[key].contents(), key
