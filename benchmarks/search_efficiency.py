"""How many trials the Optuna sweeper needs to find the best feasible config, vs a grid and random.

Space: budget {4,6,8,12,16,24,32} x topk {1,2,4,8} x window {512,1024,2048,4096}
(112 grid points) on b300, with the box's rules in force: budget > 8 crashes
at CUDA-graph capture (a server start that fails, reason ``cuda_graph``) and
topk > budget is rejected by the config check (reason ``config_error``, no
server start). Throughput comes from the simulator's performance model
(``sweep.sim.cells.estimate`` / ``startup_failure``) in-process: no server.

Same code path as ``python -m sweep -m hydra/sweeper=optuna``: the sweeper
settings are composed by Hydra from the project's config (sampler, seed
config, ready-made space), the study is opened by the plugin's
``open_study`` (sampler construction included) and driven by its
``SearchLoop``; only the job is replaced by a call to the model.

Per seed it counts, until a trial reaches the best feasible value of the
grid (ties -- configs the model scores identically -- all count as best):

* trials:   Optuna trials, including repeats the sweeper answers from the study
* starts:   server starts (crashed ones included; config_error and repeats excluded)
* runs:     jobs run (starts + config_error rejections)

and prints the median over seeds for each sampler, the grid size (the cost
of a grid sweep) and the ratio. Target: the sweeper's median <= 25% of the grid.

    python benchmarks/search_efficiency.py [--seeds 20] [--objective mean|c1|cell:4096:1]
        [--samplers tpe,random,gp] [--override hydra.sweeper.sampler.n_startup_trials=4]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, cast

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPACE = {"spec.budget": [4, 6, 8, 12, 16, 24, 32], "spec.topk": [1, 2, 4, 8],
         "spec.window": [512, 1024, 2048, 4096]}
SEED_MATRIX = [(ctx, c) for ctx in (60, 1024, 4096) for c in (1, 8, 32, 64)]


def compose(hardware: str, sampler: str, extra: list[str] | None = None) -> Any:
    """The project's composed config with hydra/sweeper=optuna (what the CLI would build)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    import sweep.compose.resolvers  # noqa: F401

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="sweep.conf", version_base="1.3"):
        return hydra_compose(config_name="config", return_hydra_config=True, overrides=[
            f"hardware={hardware}", "hydra/sweeper=optuna", f"hydra/sweeper/sampler={sampler}",
            *(extra or [])])


def objective_fn(kind: str, hw: dict, model: dict) -> Callable[[dict], float]:
    from sweep.sim import cells

    def tok_s(spec: dict, ctx: int, conc: int) -> float:
        return cells.estimate(hw, model, spec, context=ctx, concurrency=conc, max_tokens=512)["tok_s"]

    if kind == "mean":  # objective.metric=weighted_mean over the seed workload, equal weights
        return lambda spec: statistics.fmean(tok_s(spec, x, c) for x, c in SEED_MATRIX)
    if kind == "c1":
        return lambda spec: tok_s(spec, 60, 1)
    if kind.startswith("cell:"):
        _, ctx, conc = kind.split(":")
        return lambda spec: tok_s(spec, int(ctx), int(conc))
    raise SystemExit(f"--objective: mean | c1 | cell:CTX:CONC, got {kind!r}")


class ModelJob:
    """The job: config check, startup failure, then the objective from the model."""

    def __init__(self, cfg: Any, objective: str) -> None:
        from omegaconf import OmegaConf

        plain: dict[str, dict[str, Any]] = {
            k: cast("dict[str, Any]", OmegaConf.to_container(cfg[k], resolve=True))
            for k in ("hardware", "model", "spec", "server")}
        self.hw, self.model, self.spec = plain["hardware"], plain["model"], plain["spec"]
        self.flags = {k: plain["server"].get(k) for k in ("skip_server_warmup", "disable_cuda_graph")}
        self.value = objective_fn(objective, self.hw, self.model)
        self.starts = 0
        self.runs = 0

    def spec_for(self, params: dict) -> dict:
        return dict(self.spec, budget=int(params["spec.budget"]), topk=int(params["spec.topk"]),
                    window=int(params["spec.window"]))

    def truth(self, params: dict) -> tuple[float | None, str | None]:
        spec = self.spec_for(params)
        if spec["topk"] > spec["budget"]:
            return None, "config_error"
        from sweep.sim import perf

        reason = perf.startup_failure(self.hw, self.model, spec, self.flags)
        return (None, reason) if reason else (self.value(spec), None)

    def __call__(self, number: int, overrides: list[str]) -> Any:
        from hydra_plugins.specsweep_optuna_sweeper import _result
        from optuna.trial import TrialState

        params = dict(o.split("=", 1) for o in overrides if o.startswith("spec."))
        value, reason = self.truth(params)
        self.runs += 1
        if reason != "config_error":
            self.starts += 1
        if reason or value is None:
            return _result.failed(reason or "no_objective")
        return _result.Outcome(TrialState.COMPLETE, [value], {"crashed": 0.0}, {"status": "ok"})


def search(cfg: Any, objective: str, seed: int, best: float, cap: int) -> tuple[int, int, int]:
    """(trials, server starts, jobs) until a trial reaches ``best`` (cap if never)."""
    from hydra_plugins.specsweep_optuna_sweeper import _impl, _space
    from hydra_plugins.specsweep_optuna_sweeper._loop import SearchLoop
    from optuna.trial import TrialState

    kw = {k: cfg.hydra.sweeper[k] for k in cfg.hydra.sweeper if k != "_target_"}
    kw.update(seed=seed, storage="memory", study_name=f"bench-{seed}")
    settings = _impl.Settings.from_kwargs(kw)
    space = _space.parse({k: f"choice({', '.join(map(str, v))})" for k, v in SPACE.items()}, [])
    study, _ = _impl.open_study(settings, space, Path("."), settings.study_name or "bench")
    job = ModelJob(cfg, objective)
    loop = SearchLoop(study, space, job, n_trials=cap, deterministic=settings.deterministic,
                      reuse_completed=settings.reuse_completed)
    loop.enqueue(settings.enqueue)
    for done in range(cap):
        t = loop.step(done)
        if t.state == TrialState.COMPLETE and t.values[0] >= best * (1 - 1e-9):
            return done + 1, job.starts, job.runs
        if loop.exhausted():
            break
    return cap, job.starts, job.runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--objective", default="mean")
    ap.add_argument("--hardware", default="b300")
    ap.add_argument("--samplers", default="tpe,random")
    ap.add_argument("--override", action="append", default=[],
                    help="extra Hydra override, e.g. hydra.sweeper.sampler.n_startup_trials=4")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)

    cfg = compose(args.hardware, "tpe")
    job = ModelJob(cfg, args.objective)
    grid = [dict(zip(SPACE, combo)) for combo in itertools.product(*SPACE.values())]
    scored = [(job.truth({k: str(v) for k, v in p.items()}), p) for p in grid]
    feasible = [(v, p) for (v, r), p in scored if r is None and v is not None]
    best = max(v for v, _ in feasible)
    winners = [p for v, p in feasible if v >= best * (1 - 1e-9)]
    crashes = sum(1 for (_, r), _ in scored if r not in (None, "config_error"))
    rejected = sum(1 for (_, r), _ in scored if r == "config_error")
    n = len(grid)
    print(f"space: {n} grid points on {args.hardware} ({len(feasible)} feasible, {crashes} crash at "
          f"startup, {rejected} rejected by the config check); objective {args.objective}")
    print(f"best feasible: {best:.1f} tok/s at " + "; ".join(
        " ".join(f"{k.split('.')[1]}={v}" for k, v in p.items()) for p in winners)
        + f" ({len(winners)} tied)")
    print(f"grid search: {n} runs, {n - rejected} server starts (every point)")
    print(f"random order, analytic: expected {(n + 1) / (len(winners) + 1):.1f} runs to hit a best point")
    variants = [("shipped", []), ("cold", ["hydra.sweeper.enqueue=[]"])]
    print("shipped = as `hydra/sweeper=optuna` runs (production config enqueued first); "
          "cold = nothing enqueued")
    results: dict[tuple[str, str], tuple[float, float, float]] = {}
    for name in args.samplers.split(","):
        for variant, extra in variants:
            cfg_s = compose(args.hardware, name, [*args.override, *extra])
            t0 = time.perf_counter()
            rows = [search(cfg_s, args.objective, seed, best, cap=3 * n) for seed in range(args.seeds)]
            med = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows),
                   statistics.median(r[2] for r in rows))
            results[(name, variant)] = med
            print(f"{name:>6} {variant:>7}: median over {args.seeds} seeds: {med[0]:5.1f} trials "
                  f"({med[0] / n:5.1%} of the grid), {med[1]:5.1f} server starts, {med[2]:5.1f} jobs"
                  f"  [trials per seed {[r[0] for r in rows]}; {time.perf_counter() - t0:.1f} s]")
    for variant, _ in variants:
        if ("tpe", variant) in results:
            tr, st, _ = results[("tpe", variant)]
            line = (f"ratio tpe/grid ({variant}): {tr / n:.1%} of the grid's trials, "
                    f"{st / (n - rejected):.1%} of its server starts (target <= 25%)")
            if ("random", variant) in results:
                rr, rs, _ = results[("random", variant)]
                line += f"; tpe/random: {tr / rr:.2f} x trials, {st / rs:.2f} x server starts"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
