"""``python -m sweep``: check the command line, then hand it to Hydra, inside the command's one boundary.

Hydra reports an exception from a job as its own traceback and exit 1; here it
is told to pass every exception on (``HYDRA_FULL_ERROR=1``, set for Hydra
only when the user did not set it) so :func:`sweep.errors.boundary` reports
it once, as one line (``--debug`` or a user's ``HYDRA_FULL_ERROR=1``: with
the traceback).
"""

from __future__ import annotations

import os
import sys


def _hydra_passes_errors_on() -> None:
    from sweep import errors

    if os.environ.get("HYDRA_FULL_ERROR") != "1":
        os.environ["HYDRA_FULL_ERROR"] = "1"
        os.environ[errors.OWN_FULL_ERROR_ENV] = "1"


def _run(boundary: object) -> int:
    from sweep import errors, secrets
    from sweep.cli import plugins
    from sweep.compose import cmdline
    from sweep.trial import rerun

    secrets.install_log_masking()  # Hydra logs every job's overrides
    from sweep.compose.group_defaults import implied

    argv, fresh = rerun.take_fresh_flag(sys.argv[1:])
    # flags before overrides (``a=1 -m b=2,3``), server=llamacpp brings model=smollm2 ...
    sys.argv[1:] = cmdline.canonical(implied(cmdline.flags_first(argv)))
    plugins.register()
    cmdline.validate(sys.argv[1:])  # every job, every value: one line, exit 2 (sweep/compose/cmdline.py)
    if cmdline.print_config(sys.argv[1:]):
        return 0
    # the same multirun again: in its unfinished sweep dir (sweep/trial/rerun.py)
    sys.argv[1:] = rerun.choose(sys.argv[1:], fresh)
    from sweep.cli import app

    boundary.work_started()  # type: ignore[attr-defined]
    try:
        app.task()
    except BaseException as exc:  # Ctrl-C: "... run the same command again to resume" (Hydra may wrap it)
        if isinstance(exc, KeyboardInterrupt) or isinstance(errors.cause(exc), errors.Interrupted):
            raise rerun.interrupted(exc) from None
        raise
    return app.exit_status()  # 1 when the trial failed (every trial, for a multirun): sweep/cli/app.py


def main() -> None:
    from sweep import errors

    debug = errors.debug_requested(sys.argv[1:])
    sys.argv[1:] = errors.take_debug_flag(sys.argv[1:])
    _hydra_passes_errors_on()
    code = errors.EXIT_OK
    with errors.boundary("sweep", debug=debug) as b:
        code = _run(b)
    sys.exit(b.exit_code or code)


if __name__ == "__main__":
    main()
