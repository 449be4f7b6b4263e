"""Per-load speculation on the real engine: derive vLLM's table from a fresh measurement, then verify it.

    python benchmarks/dynamic_sd.py [--requests 16] [--max-tokens 128] [--context 512]
        [--concurrency 1,2,4,8] [--budgets 1,2,4,8] [--workloads edit,prose]
        [--measure-rounds 3] [--rounds 3] [--statics all|chosen] [--work DIR]
        [--measured LANDSCAPE.json] [OVERRIDE ...]

On vLLM (CPU build, ``python -m sweep.engines vllm``; SmolLM2, ``hardware.cpu.threads_bind=1``: the
engine on one core, as the recorded landscape), three steps, each the project's own command:

1. **measure** the n-gram family -- lookup 4/2 (``spec.ngram_n_max=4 spec.ngram_n_min=2``) at each
   budget of ``--budgets`` -- and the autoregressive baseline, on each workload at context
   ``--context`` and every concurrency, ``--requests`` requests of ``--max-tokens`` new tokens per
   cell, in ``--measure-rounds`` rounds with the order rotated (``benchmarks/record_landscape.py``:
   one server start per config per round, both workloads on it; a rerun with the same ``--work``
   resumes). ``--measured FILE`` takes a recorded landscape of that family instead (e.g. the one
   ``record_landscape.py --engine vllm --rounds 3 --contexts 512 --concurrency 1,2,4,8
   --max-tokens 128 workload.requests_per_cell=16`` writes) and skips this step;
2. **derive** each workload's table from it (``sweep.report.dynamic``: the family's verdict per
   load, the schedule's tie rule; what ``python -m sweep.schedule --export vllm`` prints) and write
   ``dynamic-vllm.yaml``;
3. **verify** it: ``python -m sweep.verify_dynamic`` runs the dynamic config, the family's static
   budgets (``--statics``) and the baseline over the same loads in ``--rounds`` interleaved rounds,
   and reports per load dynamic / best static and dynamic / baseline with intervals.

Prints each workload's verdict, and as its last line, for the workload where speculation pays
(the best static budget beats the baseline over the loads; several: the one where it pays most):

    dynamic vs best static: X.XXx geometric mean over loads (worst load Y.YYx); vs baseline: worst load Z.ZZx

How long: about (configs x rounds) server starts of ~1 min plus the cells; on the 2-core box at
the defaults a config-round of both workloads took ~15 min in the recorded landscape, so the
measurement is ~5 x 3 x 15 min and the verification ~(4 statics + baseline) x 3 x 15 +
2 dynamic x 3 x 8 min: ~8 h in all, ~4.5 h with ``--measured``, less with ``--statics chosen``,
``--requests 8`` or ``--rounds``/``--measure-rounds`` lowered (two rounds are judged with the box
spread their cells measure, sweep/report/verify.py; three or more give each ratio its own interval).
"""

from __future__ import annotations

import argparse
import math
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from launchers.local import run_tied  # noqa: E402 - after the path above
from sweep import errors  # noqa: E402
from sweep.errors import ConfigError  # noqa: E402

LOOKUP = ("spec.ngram_n_max=4", "spec.ngram_n_min=2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(args: argparse.Namespace, measure_dir: Path) -> Path:
    """Step 1: the family and the baseline through the landscape recorder (rounds rotated, resumable)."""
    ids = ["none", *[f"ngram-b{b}-max4-min2" for b in args.budgets]]
    out = measure_dir / "landscape.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "record_landscape.py"), "--engine", "vllm",
           "--rounds", str(args.measure_rounds), "--contexts", str(args.context),
           "--concurrency", ",".join(map(str, args.concurrency)), "--max-tokens", str(args.max_tokens),
           "--configs", ",".join(ids), "--workloads", ",".join(args.workloads), "--out", str(out),
           "--work", str(args.work / "measure-runs"), f"workload.requests_per_cell={args.requests}",
           f"workload.min_requests={args.requests}", *args.extra]
    print(f"[measure] {len(ids)} configs x {args.measure_rounds} round(s): {' '.join(cmd[2:])}", flush=True)
    code = run_tied(cmd)  # a killed benchmark leaves no trial or server behind
    if code == errors.EXIT_INPUT:  # the recorder refused its input and said why in one line: nothing ran
        raise SystemExit(code)
    if code != 0 or not out.is_file():
        raise errors.Failed(f"measurement failed (exit {code}): see {args.work / 'measure-runs'}")
    return out


def derive_tables(measure_dir: Path, budgets: list[int]) -> list[Any]:
    """Step 2: each workload's table of the n-gram lookup-4/2 family, written as dynamic-vllm.yaml."""
    import yaml

    from sweep.io.atomic import write_atomic_text
    from sweep.report.dynamic import derive
    from sweep.report.dynamic_export import document, text_lines
    from sweep.schedule import _landscapes

    unreadable: list[Path] = []
    found = _landscapes(measure_dir, unreadable)
    if not found:
        raise errors.Failed(f"no landscape under {measure_dir}"
                            + (f" (unreadable: {', '.join(map(str, unreadable))})" if unreadable else ""))
    tables = [t for t in derive([d for _, d in found], [s for s, _ in found])
              if t.algorithm == "ngram" and set(budgets) <= set(t.budgets) and t.baseline is not None
              and _lookup_4_2(t)]
    if not tables:
        raise errors.Failed(f"no n-gram family with budgets {budgets} (lookup 4/2) and a baseline in {measure_dir}")
    doc, rendered = document(tables, "vllm", command="benchmarks/dynamic_sd.py")
    for t, r in zip(tables, rendered):
        print("\n".join(text_lines(t, "vllm", r)) + "\n", flush=True)
    write_atomic_text(measure_dir / "dynamic-vllm.yaml", yaml.safe_dump(doc, sort_keys=False, width=110))
    return tables


def _lookup_4_2(t: Any) -> bool:
    spec = t.statics[t.budgets[-1]].doc.config_section("spec")
    return spec.get("ngram_n_max") == 4 and spec.get("ngram_n_min") == 2


def verify(args: argparse.Namespace, measure_dir: Path) -> int:
    """Step 3: python -m sweep.verify_dynamic on the tables, with the measurement's own workload settings."""
    over = ["hardware.cpu.threads_bind=1", f"workload.max_tokens={args.max_tokens}",
            f"workload.requests_per_cell={args.requests}", f"workload.min_requests={args.requests}",
            "workload.repeats=1", "workload.coding=off", f"server.port={_free_port()}",
            f"mlflow.tracking_uri=sqlite:///{args.work.resolve()}/mlflow.db"]
    given = {e.split("=", 1)[0].lstrip("+~") for e in args.extra}
    over = [o for o in over if o.split("=", 1)[0] not in given] + list(args.extra)  # the user's value, once
    cmd = [sys.executable, "-m", "sweep.verify_dynamic", "--dir", str(measure_dir), "--rounds", str(args.rounds),
           "--statics", args.statics, *over]
    print(f"[verify] {' '.join(cmd[2:])}", flush=True)
    return run_tied(cmd, cwd=args.work)


def lines(measure_dir: Path, tables: list[Any]) -> list[str]:
    """Each workload's verdict line, and the last line: the workload where speculation pays."""
    import yaml

    from sweep.compose import yaml_guard
    from sweep.io import readback

    path = measure_dir / "verify.yaml"
    try:  # the verification's own file, read back as any: bounded, no alias bomb
        doc = yaml_guard.safe_load(readback.read_text(path), str(path)) if path.exists() else {}
    except (readback.BadFile, ConfigError, yaml.YAMLError) as exc:
        return [f"no verification: {path} cannot be read ({exc})"]
    vs = [v for v in (doc.get("verifications") if isinstance(doc, dict) else None) or [] if isinstance(v, dict)]
    out = []
    verified = {v.get("workload") for v in vs}
    for t in tables:
        if t.workload not in verified:
            why = "no table (the baseline wins or ties at every load)" if not t.usable else "not verified"
            out.append(f"{t.workload}: {why}")
    for v in vs:
        out.append(f"{v['workload']}: table {v['per_load']}, best static b{v['best_static']}, "
                   f"{v['rounds']} rounds: {v['headline']}")
    if not vs:
        return [*out, "no verification: nothing to report"]

    def gain(v: dict[str, Any]) -> float:  # how much the best static beats the baseline over the loads
        arms = v.get("arms") or {}
        best, base = arms.get(f"b{v.get('best_static')}") or {}, arms.get("baseline") or {}
        ratios = [best["tok_s"][x] / base["tok_s"][x] for x in v.get("loads") or []
                  if base.get("tok_s", {}).get(x) and best.get("tok_s", {}).get(x)]
        return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 0.0

    pays = [v for v in vs if v.get("speculation_pays")]
    pick = max(pays, key=gain) if pays else vs[0]
    if not pays:
        out.append("(speculation pays on no workload: the line is the first workload's)")
    return [*out, str(pick["headline"])]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--requests", type=int, default=16, help="requests per cell (default 16, the landscape's)")
    p.add_argument("--max-tokens", type=int, default=128, help="new tokens per request (default 128)")
    p.add_argument("--context", type=int, default=512, help="prompt tokens (default 512)")
    p.add_argument("--concurrency", default="1,2,4,8",
                   help="the loads measured (default 1,2,4,8); with --measured the verification runs the landscape's")
    p.add_argument("--budgets", default="1,2,4,8", help="the family's budgets (default 1,2,4,8; of 1,2,4,8)")
    p.add_argument("--workloads", default="edit,prose")
    p.add_argument("--measure-rounds", type=int, default=3, help="rounds of the measurement (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the verification (default 3)")
    p.add_argument("--statics", choices=("all", "chosen"), default="all",
                   help="verify against every budget (default) or those the table uses and the best static")
    p.add_argument("--work", type=Path, default=Path("/tmp/specsweep-dynamic-sd"))
    p.add_argument("--measured", type=Path, default=None,
                   help="a recorded landscape of the family (skips the measurement)")
    p.add_argument("extra", nargs="*", help="more overrides for every trial")
    return p


def _measured(path: Path) -> None:
    """``--measured`` is a landscape the reader takes (sweep/sim/landscape.py), before anything runs."""
    from sweep.sim import landscape

    try:
        landscape.trial_docs(landscape.load(path))
    except (landscape.LandscapeError, ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        why = str(exc).removeprefix("error: ").strip().splitlines()
        raise ConfigError("--measured", why[0] if why else f"{path}: not a landscape ({type(exc).__name__})") \
            from None


@errors.command("benchmarks/dynamic_sd.py")
def main(argv: list[str] | None = None) -> int:
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/dynamic_sd.py", parser(), argv)  # every argument by its rule
    args.concurrency = [int(x) for x in args.concurrency.split(",") if x]
    args.budgets = [int(x) for x in args.budgets.split(",") if x]
    args.workloads = [w for w in args.workloads.split(",") if w]
    if not args.workloads:
        raise ConfigError("--workloads", "no workload given (comma-separated workload options, e.g. edit,prose)")
    for w in args.workloads:  # each an option of the workload group, composed as the trials will be
        arguments.check_overrides("--workloads", [f"workload={w}", *args.extra],
                                  ["server=vllm", "hardware=cpu", "hardware.cpu.threads_bind=1"])
    if not set(args.budgets) <= {1, 2, 4, 8}:
        raise ConfigError("--budgets", f"{','.join(map(str, args.budgets))}: a subset of 1,2,4,8 (the recorder's "
                          "n-gram lookup-4/2 configs)")
    if args.measured is not None:
        _measured(args.measured)
    args.work = args.work.resolve()
    measure_dir = args.work / "measure"
    measure_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if args.measured is not None:
        shutil.copyfile(args.measured, measure_dir / "landscape.json")
        print(f"[measure] taken from {args.measured}", flush=True)
    else:
        measure(args, measure_dir)
    tables = derive_tables(measure_dir, args.budgets)
    code = verify(args, measure_dir)
    if code == errors.EXIT_INPUT:  # verify_dynamic refused its input in one line: nothing was measured
        return code
    if code not in (0, 1):
        print(f"[verify] exit {code}", file=sys.stderr)
    print(f"({(time.time() - t0) / 60:.0f} min; work dir {args.work})")
    print("\n".join(lines(measure_dir, tables)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
