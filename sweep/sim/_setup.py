"""What a prediction of a config runs on (box, spec, constants), shared by ``predict`` and ``explain``.

Its own module so that the predictor's command (which shows ``explain``'s
breakdown) and ``explain`` (which builds on the same setup) do not import each other.
"""

from __future__ import annotations

from typing import Any, Mapping

from sweep.sim import constants
from sweep.sim.perf import box_of, startup_failure


def _plain(config: Any) -> Mapping[str, Any]:
    raw = getattr(config, "raw", None)  # a validated TrialConfig
    if raw is not None:
        return raw
    if hasattr(config, "_metadata"):  # an OmegaConf DictConfig
        from omegaconf import OmegaConf

        import sweep.compose.resolvers  # noqa: F401  (registers the project's resolvers)

        return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]
    return config


def _failure(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any],
             server: Mapping[str, Any]) -> str | None:
    """The startup failure the server would hit with these flags (None: it starts)."""
    flags = {k: server.get(k) for k in ("disable_cuda_graph", "skip_server_warmup", "mem_fraction_static")}
    return startup_failure(hardware, model, spec, flags)


def setup(config: Any, calibration: Any = None) -> dict[str, Any]:
    """What a prediction of this config runs on: box, spec (with the derived keys), constants."""
    from sweep.sim.measured import max_running_of, spec_of

    cfg = _plain(config)
    workload, server = cfg["workload"], cfg.get("server") or {}
    from sweep.sim.arch import as_served

    hardware, model = constants.engine_hardware(cfg["hardware"], server), as_served(cfg["model"], server)
    cal = constants.resolve(hardware, calibration)
    return {"cfg": cfg, "cal": cal, "box": box_of(hardware, model), "spec": {**cfg["spec"], **spec_of(cfg)},
            "workload": str(workload.get("name") or ""), "values": cal.for_workload(str(workload.get("name") or "")),
            "eager": bool(server.get("disable_cuda_graph")), "max_running": max_running_of(cfg),
            "failure": _failure(hardware, model, cfg["spec"], server)}
