"""A per-load study: search the family's budgets for the best at each load, end with the table verified.

``objective.metrics=${sweep.tok_s_at:${workload.concurrency}}`` (what
``hydra/sweeper/space=per_load`` sets) makes the study multi-objective with one value per load,
``tok_s_at_c<N>`` (the trial's tok/s at concurrency N, :func:`sweep.score.metrics.load_values`):
the budget that is best at some load is on the study's Pareto front, so the sampler spends its
trials finding each load's best instead of one compromise budget. At the study's end the
family's per-load table is derived from every result in the sweep dir
(:mod:`sweep.report.dynamic`, the same as ``python -m sweep.schedule --export``), printed and
written to ``dynamic-<engine>.yaml``; with ``hydra.sweeper.verify_rounds=N`` the sweeper then
runs ``python -m sweep.verify_dynamic --dir <sweep dir> --rounds N`` (the dynamic config, the
static budgets and the baseline, interleaved), else it prints that command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence

from sweep.score.metrics import LOAD_METRIC


def is_per_load(metrics: Sequence[str] | None) -> bool:
    """Every metric of the study is a load's tok/s."""
    return bool(metrics) and all(LOAD_METRIC.match(str(m)) for m in metrics or ())


# what the study's own command line sets that the verification must not take from it: the config's
# identity and the engine (the table's runs set them), the workload and the objective (the table's
# context and loads), Hydra's and the search's settings
_NOT_PASSED = ("spec", "workload", "objective", "hydra", "optuna", "server", "model", "hardware")
# ... but the busy-box policy is how to measure, not what: the study's goes with it
_POLICY = ("workload.busy_box", "workload.busy_wait_s", "workload.busy_load")


def passed_on(arguments: Sequence[str]) -> list[str]:
    """The study's overrides its verification runs with too: how the server is reached and launched
    (``server.executable``, ``server.api_key``, ``launcher.*``, ``hardware.cpu.threads_bind``...).
    The export carries only the identity knobs (it is read back as data, never as a launch), so
    without these the verification measured a server other than the one the study searched."""
    from sweep.compose.cmdline import fixed_overrides

    out = []
    for line in fixed_overrides(arguments):
        key = line.lstrip("+~").split("=", 1)[0]
        if "=" not in line or key.startswith("hydra/") or (key in _NOT_PASSED and "." not in key):
            continue
        if key.split(".")[0] in _NOT_PASSED[:5] and key not in _POLICY:
            continue
        out.append(line)
    return out


def finish(sweep_dir: Path, rounds: int, engine: str, arguments: Sequence[str] = ()) -> None:
    """Derive, print and write the table; verify it when ``rounds`` (else print how), with the
    study's own launch overrides (:func:`passed_on`)."""
    import yaml

    from sweep.io.atomic import write_atomic_text
    from sweep.record.result import iter_results
    from sweep.report.dynamic import derive
    from sweep.report.dynamic_export import ENGINES, document, text_lines

    found = sorted(iter_results(sweep_dir), key=lambda x: str(x[0]))
    found = [(p, d) for p, d in found if "verify" not in p.relative_to(sweep_dir).parts]
    tables = derive([d for _, d in found], [str(p) for p, _ in found])
    print()
    if not tables:
        print("per-load: no table (no two budgets of one family measured at closed-loop loads)")
        return
    engine = engine if engine in ENGINES else "vllm"
    doc, rendered = document(tables, engine, command=f"per-load study in {sweep_dir}")
    for t, r in zip(tables, rendered):
        print("\n".join(text_lines(t, engine, r)) + "\n")
    path = write_atomic_text(sweep_dir / f"dynamic-{engine}.yaml", yaml.safe_dump(doc, sort_keys=False, width=110))
    print(f"per-load table: {path}")
    import shlex

    from sweep import secrets

    cmd = [sys.executable, "-m", "sweep.verify_dynamic", "--dir", str(sweep_dir), "--rounds", str(rounds or 3),
           *passed_on(arguments)]
    shown = secrets.mask_text(shlex.join(cmd[2:]))
    if not rounds or not any(t.usable for t in tables):
        print("verify it: python -m " + shown)
        return
    from launchers.registry import stop_all

    stop_all()  # the study's last server: the verification starts its own
    print(f"verifying it ({rounds} rounds): python -m {shown}", flush=True)
    subprocess.run(cmd, check=False)
