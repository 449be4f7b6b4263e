"""Run SGLang's bench_serving (``cli_main``, unmodified) once per stdin line.

A long-lived helper of ``crosscheck_bench_serving.py``: importing sglang,
transformers and torch takes seconds on a busy box, so one process runs
every repetition. Each stdin line is a JSON list of bench_serving
arguments; bench_serving's own printout goes to stderr, and one JSON line
``{"status": "ok" | "error: ..."}`` per run goes to stdout (its results are
in the ``--output-file`` the arguments name).
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import sglang_compat  # noqa: E402


def main() -> int:
    out = sys.stdout
    module = sglang_compat.bench_serving_module()
    out.write(json.dumps({"status": "ready"}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        sys.argv = ["bench_serving", *json.loads(line)]
        status = "ok"
        with contextlib.redirect_stdout(sys.stderr):
            try:
                module.cli_main()
            except SystemExit as exc:
                status = "ok" if not exc.code else f"error: exit {exc.code}"
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the check
                traceback.print_exc()
                status = f"error: {type(exc).__name__}: {exc}"
        out.write(json.dumps({"status": status}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
