"""A real single-host SLURM cluster for the tests, CI and the benchmark: munge, slurmctld, 3 slurmd.

    python tests/_support/slurm_cluster.py start    # start (or reuse) it; prints `export SLURM_CONF=...`
    python tests/_support/slurm_cluster.py status   # sinfo
    python tests/_support/slurm_cluster.py stop     # stop the daemons it started

Why three slurmd and not one node holding three jobs: Debian's 22.05 build has
``MULTIPLE_SLURMD = Yes`` (``scontrol show config``), so ``slurmd -N n1`` ...
``-N n3`` are three real nodes on one host, each with its own port, spool and
log. A job then lands on a *node* the way it does on a cluster -- SLURM picks
it, ``--exclusive`` and ``--gres`` mean what they mean there, and "a node goes
down" (``scontrol update state=down``) is testable; one big node would test
none of that. Each node has 1 CPU and one ``gpu`` GRES whose device file is
``/dev/null`` (a stand-in: this machine has no GPU; SLURM only counts it), so a
job asking ``--gres=gpu:1`` or ``--exclusive`` takes a whole node.

No systemd (the daemons are started directly), no slurmdbd (``sacct`` is not
available: the sweeper reads job states from ``squeue``, which keeps finished
jobs for ``MinJobAge`` = 600 s). Process tracking: ``proctrack/cgroup`` (cgroup
v1 freezer: every process of a job, setsid'd grandchildren included, is
killed with the job) when ``/sys/fs/cgroup/freezer`` is writable, otherwise
``proctrack/linuxproc`` (parentage only: the launcher's reaper then covers a
server that escaped; docs/cluster.md); ``SPECSWEEP_SLURM_PROCTRACK=linuxproc``
forces the latter (``stop`` first). ``KillWait=5`` (SIGTERM to SIGKILL) keeps
the tests quick. Slurm 22.05 does not create missing directories: this
module does. Everything lives in ``$SPECSWEEP_SLURM_DIR`` (default
``/var/tmp/specsweep-slurm``); clients find it through ``SLURM_CONF``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

NODES = ("n1", "n2", "n3")
CTLD_PORT = 16817
NODE_PORT = 16821  # n1; n2 = +1, n3 = +2
PARTITION = "debug"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")


@dataclass(frozen=True)
class Cluster:
    root: Path
    proctrack: str

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, the sweeper) needs in its environment."""
        return {"SLURM_CONF": str(self.conf)}


def missing() -> list[str]:
    """The programs this module needs that are not installed (apt-get install slurmctld
    slurmd slurm-client munge)."""
    return [b for b in BINARIES if not shutil.which(b) and not Path("/usr/sbin", b).exists()]


def _root() -> Path:
    return Path(os.environ.get("SPECSWEEP_SLURM_DIR") or "/var/tmp/specsweep-slurm")


def _bin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _run(*cmd: str, env: dict[str, str] | None = None, check: bool = True,
         timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check,
                          env={**os.environ, **(env or {})})


def _cgroup_v1_freezer() -> bool:
    probe = Path("/sys/fs/cgroup/freezer/specsweep-probe")
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def _conf(root: Path, proctrack: str) -> str:
    nodes = "\n".join(
        f"NodeName={n} NodeHostname=localhost Port={NODE_PORT + i} CPUs=1 RealMemory=1000 "
        "Gres=gpu:1 State=UNKNOWN" for i, n in enumerate(NODES))
    return f"""# written by tests/_support/slurm_cluster.py: a single-host test cluster
ClusterName=specsweep
SlurmctldHost=localhost
SlurmctldPort={CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType={proctrack}
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=600
GresTypes=gpu
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


def _pid_alive(pidfile: Path) -> bool:
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def _munge_ok() -> bool:
    try:
        enc = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if enc.returncode != 0:
            return False
        return subprocess.run(["unmunge"], input=enc.stdout, capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munge() -> None:
    if _munge_ok():
        return
    run_dir = Path("/run/munge")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        _run("/usr/sbin/mungekey", "--create", check=True)
        shutil.chown(key, "munge", "munge")
    _run("runuser", "-u", "munge", "--", _bin("munged"))
    deadline = time.monotonic() + 10
    while not _munge_ok():
        if time.monotonic() > deadline:
            raise RuntimeError("munged did not start (munge -n | unmunge fails)")
        time.sleep(0.2)


def _nodes_ready(env: dict[str, str]) -> bool:
    out = _run("sinfo", "-h", "-N", "-o", "%N %t", env=env, check=False)
    if out.returncode != 0:
        return False
    states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    return set(states) == set(NODES) and all(
        s.rstrip("*") in ("idle", "alloc", "mix", "comp") for s in states.values())


def start() -> Cluster:
    """Start the cluster, or reuse the one already running from the same directory."""
    if missing():
        raise RuntimeError(f"not installed: {', '.join(missing())} "
                           "(apt-get install slurmctld slurmd slurm-client munge)")
    root = _root()
    wanted = os.environ.get("SPECSWEEP_SLURM_PROCTRACK")  # cgroup | linuxproc (default: cgroup if it works)
    proctrack = f"proctrack/{wanted}" if wanted else \
        "proctrack/cgroup" if _cgroup_v1_freezer() else "proctrack/linuxproc"
    cluster = Cluster(root, proctrack)
    env = cluster.env
    _start_munge()
    running = _pid_alive(root / "run" / "slurmctld.pid")
    if running and _nodes_ready(env):
        text = cluster.conf.read_text()
        return Cluster(root, "proctrack/cgroup" if "proctrack/cgroup" in text else "proctrack/linuxproc")
    for sub in ("state", "log", "run", *(f"spool/{n}" for n in NODES)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    cluster.conf.write_text(_conf(root, proctrack))
    (root / "gres.conf").write_text(
        "# the gpu GRES is a stand-in (no GPU here): SLURM counts it, nothing uses /dev/null\n"
        "AutoDetect=off\n" + "".join(f"NodeName={n} Name=gpu Count=1 File=/dev/null\n"
                                     for n in NODES))
    (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
    if not running:
        _run(_bin("slurmctld"), "-f", str(cluster.conf), env=env)
    for n in NODES:
        if not _pid_alive(root / "run" / f"slurmd-{n}.pid"):
            _run(_bin("slurmd"), "-f", str(cluster.conf), "-N", n, env=env)
    deadline = time.monotonic() + 60
    while not _nodes_ready(env):
        # A node that registered before (a reused state dir) may come back DOWN: resume it.
        _run("scontrol", "update", "nodename=" + ",".join(NODES), "state=resume", env=env,
             check=False)
        if time.monotonic() > deadline:
            log = (root / "log" / "slurmctld.log")
            raise RuntimeError("SLURM nodes not ready after 60 s: "
                               + _run("sinfo", "-N", env=env, check=False).stdout
                               + (log.read_text()[-2000:] if log.exists() else ""))
        time.sleep(0.5)
    return cluster


def stop() -> None:
    """Stop the daemons this module started (by their pid files); munged is left running."""
    root = _root()
    for pidfile in [root / "run" / f"slurmd-{n}.pid" for n in NODES] + [root / "run" / "slurmctld.pid"]:
        try:
            os.kill(int(pidfile.read_text().split()[0]), 15)
        except (OSError, ValueError, IndexError):
            pass


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "start"
    if what == "start":
        cluster = start()
        print(f"SLURM test cluster up ({', '.join(NODES)}; {cluster.proctrack}); "
              f"export SLURM_CONF={cluster.conf}")
        return 0
    if what == "stop":
        stop()
        return 0
    if what == "status":
        env = {"SLURM_CONF": str(_root() / "slurm.conf")}
        print(_run("sinfo", "-N", env=env, check=False).stdout, end="")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
