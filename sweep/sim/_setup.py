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


def figures_source(hardware: Mapping[str, Any], cal: constants.Calibration) -> str:
    """Whose figures a prediction runs on: ``calibration`` (the figures the calibration's points ran
    with: a CPU box's are measurements of one machine state, and its fitted efficiencies are fractions
    of them) or ``config`` (the hardware profile's: a GPU's spec sheet, or a CPU box re-probed)."""
    want = str((hardware.get("perf") or {}).get("figures") or "config")
    return "calibration" if want == "calibration" and cal.figures else "config"


# Setups the twin does not model, each with why: a prediction would be a guess, so it is refused.
UNMODELLED = {
    "spec.adaptive": "adaptive verification (the draft length chosen step by step from the batch and the "
                     "drafter's confidence) is not modelled by the twin: predict the fixed lengths it chooses from",
    "hardware.disaggregated": "prefill and decode on separate nodes is not modelled by the twin (it prices one "
                              "box running both): predict the decode box's layout alone",
}


def refuse(cfg: Mapping[str, Any]) -> None:
    """A ConfigError (one line, exit 2 at a command's boundary) for a setup the twin cannot model."""
    from sweep.errors import ConfigError

    for key, why in UNMODELLED.items():
        group, name = key.split(".")
        if (cfg.get(group) or {}).get(name):
            raise ConfigError(key, why)


def acceptance_of(spec: Mapping[str, Any]) -> str | None:
    """Where a prediction's accept length comes from: a source's measurement, or the twin's model."""
    if str(spec.get("algorithm") or "none").lower() in ("none", ""):
        return None
    if spec.get("accept_length"):
        src = spec.get("accept_source")
        return f"given: {float(spec['accept_length']):g} tokens per step" + (f" ({src})" if src else "")
    return "the twin's acceptance model (the calibration's drafter constants)"


def setup(config: Any, calibration: Any = None) -> dict[str, Any]:
    """What a prediction of this config runs on: box, spec (with the derived keys), constants.

    The same derivation as a measured point's (:func:`sweep.sim.measured.inputs`), so the twin
    predicts a config exactly as it was fitted to the measurements of that config."""
    from sweep.sim.measured import inputs

    cfg = _plain(config)
    refuse(cfg)
    workload, server = cfg["workload"], cfg.get("server") or {}
    got = inputs(cfg)
    hardware, model = got["hardware"], got["model"]
    cal = constants.resolve(hardware, calibration)
    figures = figures_source(hardware, cal)
    if figures == "calibration":
        hardware = {**hardware, "perf": {**(hardware.get("perf") or {}), **dict(cal.figures)}}
    constants.check_figures(hardware)
    return {"cfg": cfg, "cal": cal, "box": box_of(hardware, model), "spec": {**cfg["spec"], **got["spec"]},
            "workload": str(workload.get("name") or ""), "values": cal.for_workload(str(workload.get("name") or "")),
            "eager": got["eager"], "max_running": got["max_running"], "per_draft": got["per_draft"],
            "failure": _failure(hardware, model, cfg["spec"], server), "hardware": hardware, "model": model,
            "figures": figures}
