"""Parse launches with vLLM's own parser and config classes: ``<vllm venv python> vllm_probe.py IN OUT``.

Run by tests/contract/test_vllm_flags.py with the interpreter of the vLLM venv
that ``python -m sweep.engines vllm`` installs (vLLM is never imported into the
project's environment). IN is a JSON list of cases ``{"argv": [...], "env":
{...}}`` -- the rendered server arguments (no executable) and environment; OUT
receives one JSON object per case:

* ``parse_error``: what vLLM's OpenAI server parser (``make_arg_parser`` on a
  ``FlexibleArgumentParser``, as ``vllm.entrypoints.openai.api_server`` builds
  it) or ``validate_parsed_serve_args`` said, when it refused the command line;
* ``config_error``: what building the engine's configuration said
  (``AsyncEngineArgs.from_cli_args(...).create_engine_config()``: every config
  class, ``SpeculativeConfig`` included, validated as the server would before
  it loads any weight -- an unknown JSON key, a bad value, a missing model);
* ``options``: every option string the parser knows (for a full-name check:
  argparse also accepts unambiguous prefixes);
* ``parsed``: the values that matter, as vLLM holds them (model, served name,
  max_model_len, enforce_eager, dtype, host, port, and the speculative config's
  fields) when both steps passed;
* ``per_batch_size``: for a per-load table (``num_speculative_tokens_per_batch_size``),
  the dense batch size -> K lookup vLLM's scheduler builds from it at start
  (``build_dynamic_sd_schedule_lookup(table, max_num_seqs, num_speculative_tokens)``,
  ``vllm/v1/core/sched/scheduler.py``; it validates the table with
  ``validate_and_normalize_dynamic_sd_schedule``, which ``create_engine_config``
  does not call): index i is the K of a step scheduling i requests; a table it
  refuses is a ``config_error``.

It imports nothing from specsweep.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _spec_fields(spec: object) -> dict[str, object] | None:
    if spec is None:
        return None
    keys = ("method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min",
            "suffix_decoding_max_tree_depth", "suffix_decoding_max_spec_factor",
            "suffix_decoding_min_token_prob", "suffix_decoding_max_cached_requests", "rejection_sample_method",
            "synthetic_acceptance_rates", "synthetic_acceptance_length", "num_speculative_tokens_per_batch_size",
            "enable_adaptive_verification")
    return {k: getattr(spec, k, None) for k in keys}


def probe(case: dict, parser_factory) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

    saved = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in (case.get("env") or {}).items()})
    out: dict = {"parse_error": None, "config_error": None, "parsed": None}
    try:
        parser = parser_factory()
        out["options"] = sorted(s for a in parser._actions for s in a.option_strings)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(list(case["argv"]))
                validate_parsed_serve_args(args)
        except SystemExit:
            out["parse_error"] = _last_line(err.getvalue()) or "parser exited"
            return out
        except Exception as exc:  # noqa: BLE001 - vLLM's own refusal is the result
            out["parse_error"] = f"{type(exc).__name__}: {exc}"
            return out
        try:
            cfg = AsyncEngineArgs.from_cli_args(args).create_engine_config()
        except Exception as exc:  # noqa: BLE001
            out["config_error"] = _last_line(f"{type(exc).__name__}: {exc}") or traceback.format_exc(limit=1)
            out["config_error_full"] = f"{type(exc).__name__}: {exc}"[:2000]
            return out
        spec = cfg.speculative_config
        if spec is not None and spec.num_speculative_tokens_per_batch_size:
            from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

            try:  # what the scheduler does with it at start (the engine core, before serving)
                out["per_batch_size"] = build_dynamic_sd_schedule_lookup(
                    spec.num_speculative_tokens_per_batch_size,
                    vllm_max_batch_size=cfg.scheduler_config.max_num_seqs,
                    vllm_num_speculative_tokens=spec.num_speculative_tokens)
            except Exception as exc:  # noqa: BLE001 - vLLM's own refusal is the result
                out["config_error"] = out["config_error_full"] = f"{type(exc).__name__}: {exc}"
                return out
        mc = cfg.model_config
        out["parsed"] = {
            "model": mc.model, "served_model_name": mc.served_model_name, "max_model_len": mc.max_model_len,
            "enforce_eager": mc.enforce_eager, "dtype": str(mc.dtype).replace("torch.", ""),
            "host": args.host, "port": args.port, "seed": mc.seed,
            "speculative": _spec_fields(cfg.speculative_config),
        }
        return out
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    cases = json.loads(open(src).read())
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    def factory():
        return make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))

    results = [probe(c, factory) for c in cases]
    with open(dst, "w") as fh:
        json.dump(results, fh, default=str)


if __name__ == "__main__":
    main()
