"""A per-load table's verification as one MLflow run (``python -m sweep.verify_dynamic``).

Its trials are MLflow runs of their own (each ``python -m sweep`` run logs itself); this run holds
the verdict: per verification the ratios per load (metrics with the load as the step:
``vs_best_static``, ``vs_baseline`` and their interval ends), the geometric mean over the loads
and the worst load, the table and the best static as params, ``verify.yaml`` and the charts as
artifacts. Best effort, as every MLflow write: a store that does not answer is a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from sweep.record._run_content import TAG_KIND

KIND = "verify"


def _metrics(i: int, v: Mapping[str, Any]) -> list[tuple[str, float, int]]:
    p = f"v{i}."
    out: list[tuple[str, float, int]] = []
    for r in v.get("per_load_results") or []:
        for key in ("vs_best_static", "vs_baseline", "vs_best_at_load"):
            got = r.get(key)
            if got:
                out.append((p + key, float(got["ratio"]), int(r["load"])))
                if got.get("ci"):
                    out += [(p + key + "_low", float(got["ci"][0]), int(r["load"])),
                            (p + key + "_high", float(got["ci"][1]), int(r["load"]))]
    for key in ("geomean_vs_best_static", "geomean_vs_baseline", "worst_load_vs_best_static",
                "worst_load_vs_baseline"):
        got = v.get(key)
        if got:
            out.append((p + key, float(got["ratio"]), 0))
    return out


def log_verification(settings: Mapping[str, Any], doc: Mapping[str, Any], files: Sequence[Path],
                     name: str) -> str | None:
    """One run with the verdicts of ``doc`` (``verify.yaml``'s content) and ``files``; its id, or None
    when MLflow is off (``mlflow.enabled``) or does not answer."""
    from sweep.record.tracking import Tracker, TrackingUnavailable

    tracker = Tracker(settings)
    if not tracker.enabled:
        return None
    try:
        client, _ = tracker.connect()
        run = tracker.create_run(run_name=name, tags={TAG_KIND: KIND})
        run_id = str(run.info.run_id)
        params: dict[str, str] = {}
        metrics: list[tuple[str, float, int]] = []
        for i, v in enumerate(doc.get("verifications") or [], 1):
            params.update({f"v{i}.workload": str(v.get("workload")), f"v{i}.family": str(v.get("family")),
                           f"v{i}.per_load": str(v.get("per_load")), f"v{i}.best_static": str(v.get("best_static")),
                           f"v{i}.rounds": str(v.get("rounds"))})
            metrics += _metrics(i, v)
            client.set_tag(run_id, f"v{i}.headline", str(v.get("headline")))
        tracker.log_batch(run_id, params=params, metrics=metrics)
        for f in files:
            client.log_artifact(run_id, str(f))
        client.set_terminated(run_id, status="FINISHED")
        return run_id
    except (TrackingUnavailable, Exception) as exc:  # noqa: BLE001 - best effort, said once
        import sys

        print(f"warning: mlflow: the verification was not logged ({str(exc).splitlines()[0] if str(exc) else exc})",
              file=sys.stderr)
        return None
