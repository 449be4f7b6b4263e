"""Trials read back from MLflow as result documents (for ``python -m sweep.report``).

A run's params, metrics and tags carry enough for the comparison table
(status, headline metrics, the spec knobs, the objective, what the baseline
rule matches on); ``full`` fetches each run's result.json itself (the local
file when it is still there, else the artifact) for the plots, which need
the cells.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sweep.record._run_content import TAG_KIND, TAG_PARENT
from sweep.record._tracking_uri import probe
from sweep.record.naming import matches_sweep
from sweep.record.result import FILENAME, TrialResult
from sweep.errors import StorageError
from sweep.record.tracking import Tracker

_SECTIONS = {"spec": ("algorithm", "budget", "topk", "window"), "hardware": ("name", "tp", "ep", "dp"),
             "model": ("name",), "workload": ("name", "contexts", "concurrency", "max_tokens")}


def _param(value: str | None) -> Any:
    """A param as logged (str of a number, JSON of a list) back to a value."""
    if value is None or value == "None":
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        return json.loads(value)
    except ValueError:
        return value


def _quoted(value: str) -> str:
    """A value inside MLflow's single-quoted filter strings."""
    return str(value).replace("'", "\\'")


def doc_from_run(run: Any) -> TrialResult:
    """A result-shaped document from a run's params, metrics and tags."""
    p, tags = run.data.params, run.data.tags
    config: dict[str, Any] = {s: {k: _param(p.get(f"{s}.{k}")) for k in keys}
                              for s, keys in _SECTIONS.items()}
    config["spec"] = {k: p.get(f"spec.{k}") for k in _SECTIONS["spec"]}  # as logged, for display
    objective = {k[len("objective."):]: _param(v) for k, v in p.items() if k.startswith("objective.")}
    constraints = {k[len("constraints."):]: v for k, v in objective.items() if k.startswith("constraints.")}
    config["objective"] = {k: v for k, v in objective.items() if "." not in k}
    if constraints:
        config["objective"]["constraints"] = constraints
    return TrialResult.from_dict({
        "status": tags.get("status"), "simulated": tags.get("simulated") == "true",
        "failure": {"reason": tags.get("failure.reason")},
        "trial": {"name": run.info.run_name, "hardware": tags.get("hardware"),
                  "spec": tags.get("spec.algorithm"), "sweep_id": tags.get("sweep.id")},
        "config": config, "metrics": dict(run.data.metrics), "cells": []})


def docs_from_mlflow(tracking_uri: str | None, experiment: str, *, sweep_id: str | None = None,
                     hardware: str | None = None, spec: str | None = None,
                     full: bool = False) -> tuple[list[TrialResult], list[str]]:
    """Trial runs of an experiment (and their run ids); raises StorageError (one line at the
    command's boundary, exit 2) when the store is missing or unreachable."""
    from mlflow.tracking import MlflowClient

    tracker = Tracker({"tracking_uri": tracking_uri, "experiment": experiment})
    uri = tracker.tracking_uri
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):].partition("?")[0]).exists():
        raise StorageError(uri, "no MLflow store here: run from the launch directory, "
                           "or pass --tracking-uri / --dir")
    if problem := probe(uri):
        raise StorageError(tracker.display_uri, f"MLflow is unreachable: {problem} "
                           "(--dir DIR reads the result files instead)")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise StorageError(tracker.display_uri, f"no experiment {experiment!r} in this MLflow store")
    filters = [f"tags.`{TAG_KIND}` = 'trial'"]
    for tag, value in (("hardware", hardware), ("spec.algorithm", spec)):
        if value:
            filters.append(f"tags.`{tag}` = '{_quoted(value)}'")
    runs = list(client.search_runs([exp.experiment_id], " and ".join(filters),
                                   order_by=["attributes.start_time ASC"], max_results=5000))
    if sweep_id:
        parents = {str(r.info.run_id) for r in client.search_runs(
            [exp.experiment_id], f"tags.`{TAG_KIND}` = 'sweep'", max_results=5000)
            if matches_sweep(sweep_id, r.data.tags.get("sweep.id"),
                             {"name": r.info.run_name, "run_id": r.info.run_id})}
        runs = [r for r in runs if r.data.tags.get(TAG_PARENT) in parents
                or matches_sweep(sweep_id, r.data.tags.get("sweep.id"))]
    docs, sources = [], []
    for run in runs:
        doc = doc_from_run(run)
        if full:
            doc = _full_doc(client, run) or doc
        docs.append(doc)
        sources.append(run.info.run_id)
    return docs, sources


def _full_doc(client: Any, run: Any) -> TrialResult | None:
    """The run's result.json: the local file when it is still there, else the artifact."""
    local = Path(run.data.tags.get("specsweep.job_dir") or "/nonexistent") / FILENAME
    try:
        doc = TrialResult.load(local)
        if doc.mlflow.run_id == run.info.run_id:
            return doc
    except (OSError, ValueError):
        pass
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return TrialResult.load(Path(client.download_artifacts(run.info.run_id, FILENAME)))
    except Exception:  # noqa: BLE001 - fall back to the run's own data
        return None
