"""Dequantize a GGUF model into a Hugging Face folder: ``python _gguf_to_hf.py GGUF OUT DTYPE``.

Run as a script by :func:`sweep.engines._weights.hf_from_gguf` with the
interpreter of the engine's venv (transformers, torch and gguf live there);
it imports nothing of specsweep. transformers reads the GGUF's metadata into a
config and a tokenizer; the model is built from that config, the file's
tensors are loaded dequantized into it (transformers' own GGUF reader, the
dense path of ``GgufConfig(dequantize=True)``, without ``accelerate``, which
``from_pretrained(gguf_file=...)`` insists on and vLLM's venv does not
have), tied weights re-tied, and config, tokenizer and safetensors weights
saved in ``DTYPE``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path, dtype_name: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    dtype = getattr(torch, dtype_name)
    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        sys.exit(f"the GGUF's tensors do not fit the model built from its config: missing {sorted(missing)[:5]}, "
                 f"unexpected {sorted(unexpected)[:5]}")
    model.tie_weights()
    model = model.to(dtype).eval()
    model.config.dtype = dtype
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: _gguf_to_hf.py GGUF OUT DTYPE")
    convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
