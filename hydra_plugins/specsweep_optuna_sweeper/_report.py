"""The outcome of a study: best feasible config, its server command, best.yaml, Pareto front, plots.

``best.yaml`` is a *primary config* that extends the app's own primary config
(``defaults: [<config_name>, override <group>: <option>..., _self_]``) with the
winning values, so ``<app> --config-dir <sweep_dir> --config-name best`` runs
exactly the best trial's config again and still accepts further overrides.
The same config is also printed as a plain override command line.

Only feasible trials are ever reported: Optuna 5's ``best_trial`` /
``best_trials`` skip trials whose constraints are > 0 when the study is
constrained, and FAIL trials have no value at all.

The best is not named alone when noise cannot tell it from others: the project's
tie rule (``sweep.score.noise.tied_within_noise``, the one any report is to
apply) lists the runners-up whose 95% interval overlaps the
best's (intervals come from ``workload.repeats``; a config measured once has none).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from sweep import secrets

from . import _storage
from ._space import SearchSpace, format_value

log = logging.getLogger(__name__)


def app_command() -> str:
    """How the user started this app (``python -m sweep`` or ``python path/app.py``)."""
    argv0 = sys.argv[0] if sys.argv else "app.py"
    if argv0.endswith("__main__.py"):
        return f"python -m {Path(argv0).parent.name}"
    return f"python {argv0}"


def _original(study: optuna.Study, t: FrozenTrial) -> FrozenTrial:
    dup = t.user_attrs.get("duplicate_of")
    if isinstance(dup, int):
        for other in study.get_trials(deepcopy=False):
            if other.number == dup:
                return other
    return t


def select(study: optuna.Study) -> tuple[FrozenTrial | None, list[FrozenTrial]]:
    """(best feasible trial, feasible Pareto front); for one objective the front is [best]."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None, []
    if len(study.directions) == 1:
        try:
            best = _original(study, study.best_trial)
        except ValueError:  # no feasible trial
            return None, []
        return best, [best]
    front, seen = [], set()
    for t in study.best_trials:
        o = _original(study, t)
        if o.number not in seen:
            seen.add(o.number)
            front.append(o)
    if not front:
        return None, []
    sign = 1.0 if study.directions[0] == StudyDirection.MAXIMIZE else -1.0
    best = max(front, key=lambda t: sign * t.values[0])
    front.sort(key=lambda t: -sign * t.values[0])
    return best, front


def server_command(t: FrozenTrial) -> str | None:
    """The exact launch command recorded in the trial's result.json (secrets masked)."""
    from sweep import secrets
    from sweep.record.result import TrialResult

    path = t.user_attrs.get("result_path")
    if not path:
        return None
    try:
        command = TrialResult.load(Path(path)).command
    except (OSError, ValueError):
        return None
    return secrets.mask_text(command) if command else None


def _other_commands(study: optuna.Study, best: FrozenTrial, most: int = 20) -> list[str]:
    """Commands of up to ``most`` other finished trials (a failed one's too: its flags are
    what was tried): what the best's on-screen command is compared with, so it shows the
    flags that differ."""
    out: list[str] = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if t.number != best.number and len(out) < most:
            command = server_command(t)
            if command:
                out.append(command)
    return out


# Keys that describe how the study ran (the host pool), not the config found.
_RUN_ONLY_PREFIXES = ("launcher.hosts", "+launcher.hosts", "++launcher.hosts")


def overrides_of(t: FrozenTrial, space: SearchSpace) -> list[str]:
    """The overrides that reproduce trial ``t`` as one plain run (a quirk's workaround included)."""
    lines = space.overrides(t.params) + [str(w) for w in t.user_attrs.get("workaround") or []]
    return [o for o in lines if not o.startswith(_RUN_ONLY_PREFIXES)]


def _secret_override(line: str) -> bool:
    from sweep import secrets

    key = line.split("=", 1)[0]
    return "=" in line and secrets.is_secret_name(key)


def shown_overrides(t: FrozenTrial, space: SearchSpace) -> tuple[list[str], list[str]]:
    """(the overrides as printed and written -- no secret in them --, the secret keys left out).

    A secret given on the command line (``server.api_key=...``, a URL's password)
    is never printed or written in ``best.yaml``: its key is left for the user to
    give again (``best.yaml`` holds ``???``, Hydra's "must be set").
    """
    from sweep import secrets

    shown, left_out = [], []
    red = secrets.redactor()
    for line in overrides_of(t, space):
        if _secret_override(line):
            left_out.append(line.split("=", 1)[0].lstrip("+~"))
            continue
        shown.append(red.text(line))
    return shown, left_out


def ties(study: optuna.Study, best: FrozenTrial, spread: float | None = None) -> Any:
    """``sweep.score.noise.Ties`` of the best feasible trial (None: several objectives).

    Trials of one config (the same ``config_id``: a repeat that ran again) are one candidate,
    their values its measurements (mean, and the 95% interval over them); a config measured
    once gets the interval the box's ``spread`` gives it (sweep/score/noise.py)."""
    from sweep.score.noise import Candidate, Ties, tied_within_noise
    from sweep.stats import interval

    if len(study.directions) != 1 or not best.values:
        return None
    by_config: dict[Any, list[FrozenTrial]] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if "duplicate_of" in t.user_attrs or not t.values or any(v > 0 for v in t.constraints.values()):
            continue
        by_config.setdefault(t.user_attrs.get("config_id") or ("trial", t.number), []).append(t)
    cands = []
    for copies in by_config.values():
        key = best.number if any(c.number == best.number for c in copies) else copies[0].number
        values = [float(c.values[0]) for c in copies]
        if len(copies) > 1:
            ci = interval(values)
            cands.append(Candidate(key, sum(values) / len(values), ci, n=len(values)))
            continue
        own = copies[0].user_attrs.get("objective_ci")
        n = copies[0].user_attrs.get("objective_n")
        # an interval over repeats; a study recorded before objective_n: the docs' workload.repeats=3
        n = int(n) if isinstance(n, int) and n >= 2 else 3
        ci = (float(own[0]), float(own[1])) if isinstance(own, list) and len(own) == 2 else None
        cands.append(Candidate(key, values[0], ci, n=n if ci is not None else 1))
    found = tied_within_noise(cands, study.directions[0].name.lower(), spread=spread)
    if found is None:
        return None
    if found.best.key != best.number:  # equal values (or pooled copies): Optuna's pick leads
        me = next((c for c in found.tied if c.key == best.number), None) or next(
            (c for c in cands if c.key == best.number), found.best)
        others = [c for c in [found.best, *found.tied] if c.key != best.number]
        found = Ties(best=me, tied=[c for c in others if c.high >= me.low and c.low <= me.high],
                     noise_known=me.ci is not None, basis=found.basis, others=found.others)
    return found


def best_yaml(t: FrozenTrial, space: SearchSpace, groups: Mapping[str, Any], config_name: str,
              header: Sequence[str]) -> str:
    """best.yaml text: the app's primary config + group choices + winning values."""
    defaults: list[str] = [config_name]
    values = OmegaConf.create({})
    shown, left_out = shown_overrides(t, space)
    for key in left_out:  # "???": the rerun asks for the secret instead of holding it
        OmegaConf.update(values, key, "???", force_add=True)
    for o in OverridesParser.create().parse_overrides(shown):
        if o.is_delete():
            continue
        key = o.key_or_group
        if key in groups and not o.is_sweep_override():
            pkg = f"@{o.package}" if o.package else ""
            defaults.append(("" if o.is_add() else "override ") + f"{key}{pkg}: {o.value()}")
        else:
            OmegaConf.update(values, key, o.value(), force_add=True)
    defaults.append("_self_")
    lines = [f"# {h}" for h in header]
    if left_out:
        lines.append(f"# secrets are not written here: give {', '.join(k + '=...' for k in left_out)} again")
    lines.append("defaults:")
    lines.extend(f"  - {d}" for d in defaults)
    body = OmegaConf.to_yaml(values)
    if body.strip() not in ("", "{}"):
        lines.append(body.rstrip())
    return "\n".join(lines) + "\n"


def _save(ax: Any, path: Path) -> None:
    import numpy as np

    fig = np.ravel(ax)[0].figure if isinstance(ax, np.ndarray) else ax.figure
    fig.set_size_inches(max(fig.get_figwidth(), 8), max(fig.get_figheight(), 6))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def plots(study: optuna.Study, out: Path, contour: Sequence[str] | None,
          metric_names: Sequence[str]) -> list[Path]:
    """History, importance, contour (and Pareto front) as PNG; HTML too if plotly is present.

    Each plot may fail (too few complete trials, a constant param, ...): that is
    logged and the others are still written.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    from optuna.visualization import matplotlib as ovm

    out.mkdir(parents=True, exist_ok=True)
    multi = len(study.directions) > 1
    names = list(metric_names) or [f"objective {i}" for i in range(len(study.directions))]
    params = list(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))[0].params) \
        if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) else []
    pair = list(contour or params[:2])
    jobs: list[tuple[str, str, dict[str, Any]]] = []
    for i, name in enumerate(names if multi else names[:1]):
        kw: dict[str, Any] = {"target": (lambda t, i=i: t.values[i]), "target_name": name} \
            if multi else {"target_name": name}
        suffix = f"_{i}" if multi else ""
        jobs.append((f"history{suffix}", "plot_optimization_history", kw))
        jobs.append((f"importance{suffix}", "plot_param_importances", kw))
        if len(pair) == 2 and all(p in params for p in pair):
            jobs.append((f"contour{suffix}", "plot_contour", {**kw, "params": pair}))
    if multi:
        jobs.append(("pareto", "plot_pareto_front", {"target_names": names}))
    written: list[Path] = []
    ovp: Any = None
    try:
        import plotly  # noqa: F401
        from optuna import visualization as ovp
    except ImportError:
        pass
    for stem, fn, kw in jobs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                path = out / f"{stem}.png"
                _save(getattr(ovm, fn)(study, **kw), path)
                written.append(path)
            except Exception as exc:
                log.info("plot %s skipped: %s", stem, exc)
            if ovp is not None:
                try:
                    path = out / f"{stem}.html"
                    getattr(ovp, fn)(study, **kw).write_html(str(path))
                    written.append(path)
                except Exception as exc:
                    log.info("plot %s.html skipped: %s", stem, exc)
    return written


def moved_line(before: tuple[int, Mapping[str, Any]] | None, best: FrozenTrial) -> str | None:
    """One line when growing the study moved its best: which trial before, which now, what changed."""
    if before is None or before[0] == best.number:
        return None
    old, new = before[1], best.params
    changed = [f"{k} {format_value(old[k]) if k in old else '-'} -> {format_value(new[k]) if k in new else '-'}"
               for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    return (f"growing the study moved its best from trial {before[0]} to trial {best.number}"
            + (f": {', '.join(changed)}" if changed else " (the same params)"))


def _values_line(t: FrozenTrial, names: Sequence[str]) -> str:
    """``tok_s_lowc=407.5``: each metric's key (what objective.metric(s) and the dashboard say) and its
    value as a person reads it (sweep/score/names.py)."""
    from sweep.score.names import shown

    return ", ".join(f"{n}={shown(n, v)}" for n, v in zip(names, t.values or []))


def report(study: optuna.Study, space: SearchSpace, sweep_dir: Path, *, storage_shown: str,
           metric_names: Sequence[str], groups: Mapping[str, Any], config_name: str,
           contour: Sequence[str] | None, make_plots: bool, executed: int,
           spread: float | None = None) -> FrozenTrial | None:
    """Print the outcome and write best.yaml, pareto.yaml, optimization_results.yaml, plots/.

    ``spread``: the box's run-to-run spread (sweep/score/noise.py ``spread_of``) that judges configs
    measured once. A leader that does not beat a runner-up beyond noise is not called best: the files
    say "leader (undecided)" and name the configs it ties with."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    by_state: dict[str, int] = {}
    for t in trials:
        key = t.state.name if t.state != TrialState.FAIL else \
            f"FAIL:{_storage.failure_reason(t) or 'unknown'}"
        by_state[key] = by_state.get(key, 0) + 1
    repeats = sum(1 for t in trials if "duplicate_of" in t.user_attrs)
    print(f"\nstudy {study.study_name!r}: {len(trials)} trials "
          f"({', '.join(f'{k} {v}' for k, v in sorted(by_state.items()))}); "
          f"{executed} job(s) run now, {repeats} repeat(s) answered without a restart")
    cmd = app_command()
    from sweep.report.study_best import study_best

    before = study_best(sweep_dir)  # what the last report named best, before it is written again
    best, front = select(study)
    results: dict[str, Any] = {"name": "optuna", "study_name": study.study_name,
                               "storage": storage_shown}
    if best is None:
        print("no feasible trial yet: nothing is reported as best")
    else:
        noise = ties(study, best, spread)
        decided = noise is None or noise.decided or not noise.others
        what = "Best feasible trial" if decided else "Leader (undecided, no best yet): trial"
        header = [f"{what} {best.number} of Optuna study '{study.study_name}': "
                  f"{_values_line(best, metric_names)}",
                  *([f"noise: {noise.line(lambda n: f'trial {n}')}"] if noise is not None else []),
                  f"storage: {storage_shown}",
                  f"run it: {cmd} --config-dir {sweep_dir} --config-name best"]
        command = server_command(best)
        if command:
            header.append("server command: " + command.replace("\n", " "))
        if len(study.directions) > 1:  # no single best: the Pareto set, each with its own command line
            header.append(f"Pareto set ({len(front)} feasible trials; this file runs the first, "
                          f"best by {metric_names[0]}):")
            header.extend(f"  trial {t.number}: {_values_line(t, metric_names)}; run: {cmd} "
                          + " ".join(shlex.quote(o) for o in overrides_of(t, space)) for t in front)
        best_path = sweep_dir / "best.yaml"
        best_path.write_text(secrets.mask_text(best_yaml(best, space, groups, config_name, header)))
        label = ("best feasible" if decided else "leader, undecided (no best yet)") \
            if len(study.directions) == 1 else f"best feasible by {metric_names[0]} on the Pareto front"
        print(f"{label}: trial {best.number}: {_values_line(best, metric_names)}")
        print("  params: " + " ".join(f"{k}={format_value(v)}" for k, v in best.params.items()))
        moved = moved_line(before, best)
        if moved:
            print(f"  {moved}")
        if best.user_attrs.get("workaround"):
            print(f"  with the workaround of quirk {best.user_attrs.get('quirk')}: "
                  + " ".join(best.user_attrs["workaround"]))
        if noise is not None:
            ci = noise.best.ci
            band = f" [95% interval {ci[0]:,.1f} - {ci[1]:,.1f}]" if ci else ""
            print(f"  noise{band}: {noise.line(lambda n: f'trial {n}')}")
            results["tied_within_noise"] = [c.key for c in noise.tied]
            results["verdict"] = noise.state if noise.others else "decided"
            if not decided:
                print(f"  to decide: python -m sweep.decide --dir {sweep_dir} (measures again only these configs)")
        vals = best.user_attrs.get("values")
        if isinstance(vals, Mapping) and vals.get("speedup_vs_baseline") is not None:
            from sweep.score.names import shown as shown_value

            speedup = shown_value("speedup_vs_baseline", vals["speedup_vs_baseline"])
            print(f"  speedup vs the autoregressive baseline: {speedup}")
        if best.user_attrs.get("mlflow_run_id"):
            print(f"  mlflow run: {best.user_attrs['mlflow_run_id']}")
        if command:  # whole in best.yaml; on screen without its JSON blobs
            from sweep.report.long_command import on_screen

            print(f"  server command: {on_screen(command, best_path.name, _other_commands(study, best))}")
        print(f"  written: {best_path}")
        print(f"  rerun:   {cmd} --config-dir {sweep_dir} --config-name best")
        shown, left_out = shown_overrides(best, space)
        again = " ".join(f"{k}=..." for k in left_out)
        print(f"     or:   {cmd} " + " ".join(shlex.quote(o) for o in shown) + (f"  # and {again}" if again else ""))
        results.update(best_params=dict(best.params), best_trial=best.number,
                       best_values=dict(zip(metric_names, best.values or [])))
        if len(study.directions) == 1 and best.values:
            results["best_value"] = best.values[0]
    if len(study.directions) > 1:
        print(f"Pareto front (feasible, {len(front)} trials):")
        for t in front:
            print(f"  trial {t.number:4d}: {_values_line(t, metric_names)}   "
                  + " ".join(f"{k}={format_value(v)}" for k, v in t.params.items()))
        results["solutions"] = [{"trial": t.number, "params": dict(t.params),
                                 "values": dict(zip(metric_names, t.values or [])),
                                 "overrides": overrides_of(t, space)} for t in front]
        OmegaConf.save(OmegaConf.create(secrets.mask_tree({"pareto": results["solutions"]})),
                       sweep_dir / "pareto.yaml")
    OmegaConf.save(OmegaConf.create(secrets.mask_tree(results)), sweep_dir / "optimization_results.yaml")
    if make_plots:
        try:
            written = plots(study, sweep_dir / "plots", contour, metric_names)
            if written:
                print(f"plots: {', '.join(p.name for p in written)} in {sweep_dir / 'plots'}")
        except Exception as exc:  # plotting must never fail a finished study
            log.warning("plots skipped: %s", exc)
    dash = storage_shown if "://" in storage_shown else os.path.abspath(storage_shown)
    print(f"dashboard: optuna-dashboard {dash}")
    return best
