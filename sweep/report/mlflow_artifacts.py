"""What the report makes of a trial and of a sweep for MLflow: the plots, the HTML report, the trials table.

Why here: :mod:`sweep.record` uploads runs but never imports the report
(recording does not reach up into presentation). The callers that know both
-- the trial (:mod:`sweep.trial.run`), the Hydra callback
(:mod:`sweep.cli.callbacks`) and ``python -m sweep.sync`` -- hand these
functions to the record, which calls them once the run exists and uploads
what they wrote and returned.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sweep.record.parent import SweepArtifacts, record_name
from sweep.record.result import TrialResult
from sweep.report.outputs import PLOTS_DIR, plot_files


def trial_plots(doc: TrialResult, job_dir: Path, out: Path) -> None:
    """The trial's plots into ``out/plots/``: the files it drew next to its result
    (``<job dir>/plots/``), else -- an older result being synced -- drawn now; and its tok/s
    against load per context into ``out/charts/`` (MLflow's step axis cannot say "concurrency")."""
    from sweep.report import load_charts, plots

    load_charts.tok_s_by_load(doc, out / load_charts.CHARTS_DIR)

    drawn = plot_files(Path(job_dir) / PLOTS_DIR)  # the trial drew them next to its result
    if drawn:
        (out / PLOTS_DIR).mkdir(exist_ok=True)
        for png in drawn:
            shutil.copyfile(png, out / PLOTS_DIR / png.name)
    else:  # an older result being synced
        plots.trial_plots(doc, out / PLOTS_DIR)


def sweep_artifacts(sweep_dir: Path, out: Path) -> SweepArtifacts:
    """The parent run's content: summary metrics, the best trial(s) and the deployment tags, the
    trials table; the sweep plots into ``out/plots/`` (those drawn into the sweep dir, else drawn now)
    and ``report.html`` (the sweep dir's, else written into ``out``)."""
    from sweep.record.result import iter_results
    from sweep.report import html, plots, table
    from sweep.report.compare import build_groups
    from sweep.report.deployment_plots import deployment_artifacts

    sweep_dir = Path(sweep_dir)
    found = sorted(iter_results(sweep_dir), key=lambda p: str(p[0]))
    docs = [doc for _, doc in found]
    groups = build_groups(docs, [str(p) for p, _ in found])
    rows = [r for g in groups for r in g.rows]
    metrics: dict[str, float] = {"trials": len(rows), "trials_ok": sum(r.status == "ok" for r in rows),
               "trials_failed": sum(r.status == "failed" for r in rows),
               "trials_feasible": sum(r.feasible for r in rows), "groups": len(groups)}
    tags: dict[str, str] = {}
    # best.* of the largest group (a sweep is usually one group); every group's best as a tag
    largest = max(groups, key=lambda g: len(g.rows), default=None)
    best = largest.best if largest is not None else None
    if best is not None:
        for key, value in (("tok_s_lowc", best.head.tok_s), ("tok_s_peak", best.metrics.tok_s_peak),
                           ("headline_concurrency", best.head.concurrency),
                           ("speedup_vs_baseline", best.speedup)):
            if value is not None:
                metrics[f"best.{key}"] = value
        tags["best.trial"] = best.name
    if len(groups) > 1:
        tags["best.trials"] = ", ".join(b.name for b in table.best_per_group(groups))
    drawn = plot_files(sweep_dir / PLOTS_DIR)  # the sweep's end drew them into its dir
    if drawn:
        (out / PLOTS_DIR).mkdir()
        for png in drawn:
            shutil.copyfile(png, out / PLOTS_DIR / png.name)
    else:
        plots.sweep_plots(docs, out / PLOTS_DIR)
    _, front_tags = deployment_artifacts(groups, out / PLOTS_DIR)  # schedule, user-vs-GPU, study front
    tags.update(front_tags)
    report = sweep_dir / html.FILENAME
    if not report.is_file() and docs:
        html.write_report(docs, out / html.FILENAME, title=str(record_name(sweep_dir)),
                          sources=[str(p) for p, _ in found])
    return SweepArtifacts(metrics=metrics, tags=tags, table=table.table_columns(groups) if rows else None,
                          files=[report] if report.is_file() else [])
