"""A stand-in "engine" that is hard to stop (not a test module).

Named for what it is: the *process shape* of a real engine that the
launcher must still clean up, around the real simulator that does the
serving. Started through the normal launcher as
``server.executable=[python, tests/faults/stubborn_server.py]``, it gets the
sim's rendered flags and:

* ignores SIGTERM, SIGINT and SIGHUP itself (llama-server finishes its
  in-flight work on SIGTERM; a wedged engine answers no signal at all);
* runs ``python -m sweep.sim`` with those flags as its child, in its process
  group (SGLang's scheduler/detokenizer children are group members too);
* starts two grandchildren that leave the group with ``setsid`` and ignore
  SIGTERM/SIGINT/SIGHUP: one keeps the environment (so it inherits whatever
  marker the launcher set), one runs with an *empty* environment (found only
  through its parent). Their command lines carry ``stubborn-orphan-<port>``
  so a test can find them without knowing any marker.

It exits only when killed; if the sim exits, it stays (a stuck parent).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

IGNORE = "import signal, time\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): " \
         "signal.signal(s, signal.SIG_IGN)\nwhile True: time.sleep(1)\n"


def _port(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--port" and i + 1 < len(argv):
            return argv[i + 1]
    return "unknown"


def main() -> None:
    argv = sys.argv[1:]
    tag = f"stubborn-orphan-{_port(argv)}"
    sim = subprocess.Popen([sys.executable, "-m", "sweep.sim", *argv])
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    kept_env = subprocess.Popen([sys.executable, "-c", IGNORE, tag], start_new_session=True)
    no_env = subprocess.Popen([sys.executable, "-c", IGNORE, tag], start_new_session=True, env={})
    print(f"stubborn server pid {os.getpid()}: sim {sim.pid}, setsid grandchildren "
          f"{kept_env.pid} (environment kept), {no_env.pid} (empty environment)", flush=True)
    while True:
        time.sleep(1)
        sim.poll()  # reap it if it exits; stay anyway


if __name__ == "__main__":
    main()
