"""The embedded SGLang simulator (``python -m sweep.sim``).

Modules: ``cli`` (flags from flags.yaml), ``perf`` (performance model,
calibration.yaml), ``engine`` (continuous batching), ``serving`` and ``app``
(HTTP endpoints), ``text``/``tokens`` (what it says, how it counts),
``logs``/``faults``/``metrics`` (what it writes), ``server`` (lifecycle).
"""
