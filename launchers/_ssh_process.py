"""``launcher.mode=process``: the server as a detached process group on the box.

For hosts without systemd or root. Layout of the run dir
(``<workdir>/run``, mode 0700, one server per work dir)::

    run.sh        the launch (mode 0700: it may hold --api-key)
    pid           the process group id (written by run.sh itself: $$ after setsid)
    token         random id of this start, also exported as SPECSWEEP_RUN_TOKEN
    fingerprint   launch.fingerprint of the running server (reuse across sweeps)
    server.log    stdout+stderr of this start (the previous one: server.log.1)
    exit          exit code, when the server ended on its own

Why the token: a pid file can outlive its process, and the pid can be
reused by something else. Before signalling a group we check that one of
its live members carries our token in its environment (Linux /proc), so a
stale pid file never makes us kill a stranger. Stopping signals the whole
group (``kill -s TERM -- -PGID``, ``stop_grace_s``, ``-s KILL``; the
``-s`` form is the one dash, bash and busybox all accept), which reaches
SGLang's scheduler and detokenizer children too, and every process that
carries the token in its environment (a ``setsid``'d grandchild).

While a controller uses the server, a watchdog on the box ties it to the
controller's SSH session (:mod:`launchers._ssh_watchdog`).
"""

from __future__ import annotations

import secrets as _random
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launchers.base import LaunchFailure

if TYPE_CHECKING:
    from launchers._ssh_conn import Remote
    from sweep.launch import Launch

MAX_LOG_BYTES = 32 * 1024 * 1024

# Shell functions shared by every command; expect $pg and $tok to be set.
_FUNCS = r"""
members() { ps -e -o pid= -o pgid= -o stat= 2>/dev/null | awk -v g="$pg" '$2==g && $3 !~ /^Z/ {print $1}'; }
ours() {
  [ -d /proc/self ] || return 0
  for p in $(members); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qxF "SPECSWEEP_RUN_TOKEN=$tok" && return 0
  done
  return 1
}
running() { [ -n "$pg" ] && [ -n "$(members)" ] && ours; }
# Every process carrying the token, in whatever group or session (a setsid'd grandchild).
marked() {
  [ -d /proc/self ] || return 0
  grep -slzxF "SPECSWEEP_RUN_TOKEN=$tok" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/||; s|/environ$||'
}
# TERM, wait $1 tenths of a second, KILL: the group (if it is ours) and every marked process.
stop_ours() {
  g=; if running; then g=$pg; fi
  sig() {
    [ -z "$g" ] || kill -s "$1" -- -"$g" 2>/dev/null
    for p in $(marked); do kill -s "$1" "$p" 2>/dev/null; done
  }
  left() { { [ -n "$g" ] && [ -n "$(members)" ]; } || [ -n "$(marked)" ]; }
  sig TERM
  i=0; while left && [ $i -lt "$1" ]; do sleep 0.1; i=$((i+1)); done
  if left; then sig KILL; fi
  i=0; while left && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
}
"""


@dataclass(frozen=True, slots=True)
class State:
    running: bool
    pgid: int | None
    fingerprint: str | None
    exit_code: str | None


class ProcessBackend:
    name = "process"

    def __init__(self, remote: "Remote", workdir: str) -> None:
        self.remote = remote
        self.workdir = workdir  # absolute, resolved on the box
        self.run_dir = workdir.rstrip("/") + "/run"
        self.pgid: int | None = None
        self.start_mark: Any = None

    def _prelude(self) -> str:
        d = shlex.quote(self.run_dir)
        return (f"cd {d} 2>/dev/null || {{ echo 'state none'; exit 0; }}\n"
                "pg=$(cat pid 2>/dev/null); tok=$(cat token 2>/dev/null)\n" + _FUNCS)

    def state(self) -> State:
        cmd = self._prelude() + (
            'if running; then s=alive; else s=dead; fi\n'
            'echo "state $s"; echo "pgid $pg"; echo "fingerprint $(cat fingerprint 2>/dev/null)"\n'
            'echo "exit $(cat exit 2>/dev/null)"\n')
        res = self.remote.run(cmd, what="checking the remote server")
        info = dict((ln.split(" ", 1) + [""])[:2] for ln in res.out.splitlines() if ln.strip())
        pg = info.get("pgid", "").strip()
        return State(running=info.get("state") == "alive", pgid=int(pg) if pg.isdigit() else None,
                     fingerprint=info.get("fingerprint", "").strip() or None,
                     exit_code=info.get("exit", "").strip() or None)

    def probe(self, launch: "Launch") -> tuple[bool, bool]:
        """(a server of ours runs, it is this launch)."""
        st = self.state()
        if st.running:
            self.pgid = st.pgid
        return st.running, st.running and st.fingerprint == launch.fingerprint

    def alive(self) -> bool:
        return self.state().running

    def exit_detail(self) -> str:
        st = self.state()
        return f"exit code {st.exit_code}" if st.exit_code else "killed or exited"

    def start(self, launch: "Launch", *, stop_grace_s: float) -> None:
        """Stop whatever of ours runs there, then start ``launch`` detached."""
        self.stop(stop_grace_s)
        token = _random.token_hex(8)
        d = shlex.quote(self.run_dir)
        run_sh = "\n".join([
            "#!/bin/sh",
            f"# Written by specsweep (launcher=ssh, mode=process); fingerprint={launch.fingerprint}",
            "echo $$ > pid.tmp && mv pid.tmp pid",
            f"SPECSWEEP_RUN_TOKEN={token}; export SPECSWEEP_RUN_TOKEN",
            f"cd {shlex.quote(self.workdir)} || exit 1",
            launch.shell_line(redact=False),
            "code=$?",
            f"echo \"$code\" > {d}/exit",
            "exit \"$code\"",
        ]) + "\n"
        cmd = "\n".join([
            "set -e", "umask 077", f"mkdir -p {d}", f"cd {d}",
            "if [ -f server.log ]; then mv -f server.log server.log.1; fi",
            "rm -f pid exit",
            "cat > run.sh.tmp && chmod 700 run.sh.tmp && mv run.sh.tmp run.sh",
            f"echo {shlex.quote(launch.fingerprint)} > fingerprint",
            f"echo {token} > token",
            ": > server.log",
            "(setsid nohup sh ./run.sh > server.log 2>&1 < /dev/null &)",
            "i=0; while [ ! -s pid ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
            "cat pid",
        ]) + "\n"
        self.start_mark = (token, 0)
        res = self.remote.check(cmd, stdin=run_sh, what="starting the server", redact=launch.redact)
        pid = res.out.strip().splitlines()[-1:] or [""]
        if not pid[0].isdigit():
            raise LaunchFailure("crashed", f"the server did not start in {self.run_dir} "
                                "(no pid file after 10 s)")
        self.pgid = int(pid[0])

    def stop(self, stop_grace_s: float) -> bool:
        """SIGTERM the group and whatever carries the token, grace, SIGKILL; True if
        something of ours was running."""
        ticks = max(1, int(stop_grace_s * 10))
        cmd = self._prelude() + (
            "if running || [ -n \"$(marked)\" ]; then\n"
            f"  stop_ours {ticks}\n"
            "  echo 'state stopped'\n"
            "fi\n"
            "rm -f pid\n")
        res = self.remote.run(cmd, timeout=stop_grace_s + 60, what="stopping the server")
        self.pgid = None
        return "state stopped" in res.out

    # ---- logs

    def log_mark(self) -> tuple[str, int]:
        cmd = (f"cd {shlex.quote(self.run_dir)} 2>/dev/null || exit 0\n"
               'echo "$(cat token 2>/dev/null) $(wc -c < server.log 2>/dev/null || echo 0)"\n')
        parts = self.remote.run(cmd, what="reading the server log").out.split()
        if len(parts) == 2 and parts[1].isdigit():
            return parts[0], int(parts[1])
        return "", 0

    def log_since(self, mark: Any) -> str:
        token, offset = mark if mark else ("", 0)
        cmd = (f"cd {shlex.quote(self.run_dir)} 2>/dev/null || exit 0\n"
               f"if [ \"$(cat token 2>/dev/null)\" = {shlex.quote(str(token))} ]; then "
               f"tail -c +{int(offset) + 1} server.log; else cat server.log; fi 2>/dev/null "
               f"| tail -c {MAX_LOG_BYTES}\n")
        return self.remote.run(cmd, timeout=120, what="reading the server log").out

    def describe(self) -> str:
        return f"process group {self.pgid} in {self.run_dir}"
