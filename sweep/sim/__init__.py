"""The embedded SGLang simulator (``python -m sweep.sim``).

Modules: ``cli`` (flags from flags.yaml), ``perf``/``accept``/``cells``
(performance model; its constants from ``constants``: a box's calibration or
the priors), ``predict`` (what-ifs without a server), ``measured``/``fit``/
``calfile`` (python -m sweep.calibrate), ``engine`` (continuous batching), ``serving`` and ``app``
(HTTP endpoints), ``text``/``tokens`` (what it says, how it counts),
``logs``/``faults``/``metrics`` (what it writes), ``server`` (lifecycle).
"""
