"""Benchmark harness: load generation, coding eval, sandbox, server-side stats.

* :mod:`sweep.bench.matrix` -- ``run_matrix``: the context x concurrency cells.
* :mod:`sweep.bench.coding` -- ``run_coding_eval``: five problems (+ HumanEval subset).
* :mod:`sweep.bench.client` -- one streamed request, measured; error kinds.
* :mod:`sweep.bench.sse` -- the incremental SSE parser (the per-chunk hot path).
* :mod:`sweep.bench.sandbox` -- ``run_python``: model code with no way back to the box (docs/sandbox.md).
* :mod:`sweep.bench.serverstats` -- accept length from the server's log and /metrics.
* :mod:`sweep.bench.prompts` -- unique prompts of a target length from real text.

Nothing heavy is imported here: ``python -m sweep --help`` stays fast.
"""
