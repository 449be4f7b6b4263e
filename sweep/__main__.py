"""``python -m sweep``: check the command line, then hand it to Hydra."""

from __future__ import annotations

import sys


def main() -> None:
    from sweep import plugins, secrets
    from sweep.compose import cmdline

    secrets.install_log_masking()  # Hydra logs every job's overrides
    from sweep.compose.group_defaults import implied

    sys.argv[1:] = implied(sys.argv[1:])  # server=llamacpp brings model=smollm2 hardware=cpu ...
    plugins.register()
    cmdline.check(sys.argv[1:])
    if cmdline.print_job_config(sys.argv[1:]):
        return
    from sweep import app

    app.task()
    sys.exit(app.exit_status())  # 1 when the trial failed (every trial, for a multirun): sweep/app.py


if __name__ == "__main__":
    main()
