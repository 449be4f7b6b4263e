"""What a launcher consumes: the launch, the server's address, the launcher's settings.

A leaf module (it imports only :mod:`sweep.secrets`): ``launchers/`` is a
layer below the trial and beside compose, so everything it needs from the
typed config is declared here -- :class:`Launch` (what to start, rendered by
:mod:`sweep.compose.render`), :class:`Endpoint` (where the server listens,
satisfied by the typed ``server`` config), :class:`LauncherSettings` (the
``launcher`` group, built and checked by :mod:`sweep.compose.settings`),
:class:`BoxNeeds` (what the box must offer, for the pre-flight checks) and
:data:`BACKENDS`, the one table from a ``launcher.name`` to the classes that
serve it (``"module:Class"`` strings, imported only when used), read by the
key table, the settings builder, the launcher registry and the sweeper -- so
no launcher name is compared as a string anywhere else.

Defaults are not restated here: every launcher value comes from
``conf/launcher/<name>.yaml``; fields that belong to one launcher only are
None for the other.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from sweep import secrets


@dataclass(frozen=True, slots=True)
class BoxNeeds:
    """What the box must offer for a launch: checked before a (re)start."""

    simulated: bool
    hardware: str
    num_gpus: int
    arch: str
    model_path: str | None
    # (config key, path) of the draft model the spec needs, if any
    draft: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Launch:
    """What to start: a program, its arguments and its extra environment.

    ``secrets`` are the values masked wherever the launch is shown (flag
    values such as ``--api-key``'s, secret-named environment values);
    ``box`` is what the box must offer (not part of the fingerprint).
    """

    executable: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    secrets: frozenset[str] = field(default_factory=frozenset)
    box: BoxNeeds | None = field(default=None, compare=False)
    # The fingerprint of the launch as configured, when it was moved to another port because
    # the configured one was in use (server.port unset; sweep/trial/port.py): where a server
    # listens is not what it is, so reuse, resume and comparisons see the same server.
    identity: str | None = field(default=None, compare=False)

    @property
    def argv(self) -> list[str]:
        return [*self.executable, *self.args]

    @property
    def fingerprint(self) -> str:
        if self.identity:
            return self.identity
        blob = json.dumps({"argv": self.argv, "env": dict(sorted(self.env.items()))},
                          sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def redact(self, text: str) -> str:
        """``text`` with this launch's secrets (and every other known one) masked."""
        return secrets.mask_text(text, self.secrets)

    def shell_line(self, *, redact: bool = True) -> str:
        """One shell line: ``env K=V ... EXECUTABLE ARGS...``, every word quoted.

        ``bash -c "<line>"`` starts the server (unless a secret was masked).
        """
        words = [f"{k}={v}" for k, v in sorted(self.env.items())]
        words = [*(["env"] if words else []), *words, *self.argv]
        line = " ".join(shlex.quote(w) for w in words)
        return self.redact(line) if redact else line

    def to_dict(self) -> dict[str, Any]:
        """The launch as recorded (masked): argv, env, fingerprint, shell line."""
        return {"argv": secrets.mask_argv(self.argv, values=self.secrets),
                "env": secrets.mask_env(self.env, self.secrets),
                "fingerprint": self.fingerprint, "shell": self.shell_line()}


class Endpoint(Protocol):
    """Where the server listens and how it is asked whether it is ready."""

    @property
    def name(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def health_path(self) -> str: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def base_url(self) -> str: ...
    @property
    def info_paths(self) -> tuple[str, ...]: ...  # what the server says about itself (first that answers)


@dataclass(frozen=True, slots=True)
class SSHSettings:
    """``launcher=ssh``: the box, the connection and how the server runs there (docs/remote.md)."""

    host: str
    port: int
    user: str | None
    key_filename: tuple[str, ...]
    gateway: str | None
    connect_timeout: float
    known_hosts: str | None
    host_key_policy: str  # reject | accept-new
    allow_agent: bool
    mode: str  # systemd | process
    unit: str
    unit_dir: str
    dropin: bool
    sudo: bool
    workdir: str
    port_forward: bool
    preflight: bool
    min_free_gb: float
    # process mode: how long the watchdog on the box waits for a controller to reconnect
    remote_lease_s: float = 15.0

    @property
    def unit_name(self) -> str:
        return self.unit if self.unit.endswith(".service") else self.unit + ".service"

    @property
    def label(self) -> str:
        """user@host:port via gateway, for messages."""
        user = f"{self.user}@" if self.user else ""
        via = f" via {self.gateway}" if self.gateway else ""
        return f"{user}{self.host}:{self.port}{via}"

    @property
    def user_known_hosts(self) -> str:
        """``launcher.known_hosts``, else the user's ``~/.ssh/known_hosts`` (like OpenSSH)."""
        return self.known_hosts or os.path.expanduser("~/.ssh/known_hosts")


_SLURM_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")


def slurm_seconds(text: str) -> int | None:
    """A SLURM time limit (``--time``: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
    ``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``) in seconds; None
    when ``text`` is not one of those forms."""
    m = _SLURM_TIME.match(str(text).strip())
    if m is None:
        return None
    d, dh, dm, ds, a, b, c = (int(g) if g else None for g in m.groups())
    if d is not None:
        return ((d * 24 + (dh or 0)) * 60 + (dm or 0)) * 60 + (ds or 0)
    if c is not None:  # hours:minutes:seconds
        return ((a or 0) * 60 + (b or 0)) * 60 + c
    return (a or 0) * 60 + (b or 0)  # minutes[:seconds]


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    """``launcher=slurm``: how each trial is submitted as one SLURM job (docs/cluster.md).

    ``sbatch`` holds the job's options, in sbatch's own long-option names
    (``partition``, ``gres``, ``time``, ``exclusive`` ...), each checked by the key
    table; ``extra`` are further ``--option=value`` words. ``setup`` lines run in
    the job's shell before the trial (``module load ...``, ``source .venv/bin/activate``).
    """

    sbatch: Mapping[str, Any]  # option name -> value (None: not given; True: a bare flag)
    extra: tuple[str, ...]
    setup: tuple[str, ...]
    command: tuple[str, ...] | None  # how the job starts the app; None: as the controller was started
    signal_s: int  # the job gets SIGUSR1 this long before its time limit (--signal=B:USR1@N)
    poll_s: float  # how often the controller asks squeue
    max_requeue: int  # a config whose job was lost (cancelled, node down) runs again this often
    job_name: str
    free_port: bool = True  # the job's server listens on a port free on its node

    @property
    def time_s(self) -> int | None:
        t = self.sbatch.get("time")
        return None if t is None else slurm_seconds(str(t))


@dataclass(frozen=True, slots=True)
class Backend:
    """What one ``launcher.name`` means (an entry of :data:`BACKENDS`).

    ``server``: the :class:`launchers.base.ServerLauncher` that starts the server
    where the trial runs; ``settings``: the :class:`LauncherSettings` field with
    this backend's own settings; ``remote``: the server runs on another machine
    (named by ``launcher.host``); ``trials``: the class that runs a search's
    trials as jobs somewhere else (``None``: in the sweeper's own process, or its
    host pool's workers); ``pool``: ``launcher.hosts`` is allowed; ``reasons``:
    the failure reasons this backend adds to the launchers' common ones.
    """

    server: str
    settings: str | None = None
    remote: bool = False
    trials: str | None = None
    pool: bool = True
    reasons: tuple[str, ...] = ()


BACKENDS: dict[str, Backend] = {
    "local": Backend("launchers.local:LocalLauncher"),
    "ssh": Backend("launchers.ssh:SSHLauncher", settings="ssh", remote=True,
                   reasons=("ssh_unreachable", "ssh_auth", "ssh_host_key", "ssh_dropped", "preflight")),
    # Inside its job a trial starts its server on the job's node, as launcher=local does.
    "slurm": Backend("launchers.local:LocalLauncher", settings="slurm", pool=False,
                     trials="launchers.slurm:SlurmJobs",
                     reasons=("preempted", "job_lost", "time_limit", "submit_failed", "job_failed")),
}


# Reasons a launch fails on any backend; launchers.classify mines the first eight from logs.
LAUNCH_REASONS = (
    "cuda_graph", "oom", "missing_module", "python_headers", "model_missing", "bad_flag",
    "port_in_use", "timeout", "crashed", "unknown",
) + tuple(dict.fromkeys(r for b in BACKENDS.values() for r in b.reasons))
# ... and a trial's own (sweep/trial/run.py, the search sweeper): every reason a result.json
# can carry, declared once so ``resume.deterministic_failures`` is checked against it.
TRIAL_REASONS = (
    "bench_errors", "busy_box", "disk_full", "error", "interrupted", "pruned",
    "config_error", "compose_error", "exception", "no_objective",
)
FAILURE_REASONS = LAUNCH_REASONS + TRIAL_REASONS


def backend(name: str) -> Backend:
    """The table's entry for ``launcher.name`` (KeyError for an unknown name: the key
    table refuses those before anything asks)."""
    return BACKENDS[name]


def load(target: str) -> Any:
    """The class a ``"module:Class"`` entry names (imported now, not before)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True, slots=True)
class LauncherSettings:
    """The ``launcher`` group: how long to wait, how to stop, whether to keep the server."""

    name: str  # a key of BACKENDS
    ready_timeout_s: float
    poll_interval_s: float
    poll_max_s: float
    stop_grace_s: float
    keep_server: bool
    log_tail_lines: int
    state_dir: str | None = None  # launcher=local: where kept servers are recorded
    ssh: SSHSettings | None = None  # launcher=ssh
    slurm: SlurmSettings | None = None  # launcher=slurm
    # If the controller dies: SIGTERM, SIGINT at half, SIGKILL at this (launchers._reaper;
    # ssh process mode: the watchdog on the box, launchers._ssh_watchdog)
    reap_grace_s: float = 3.0

    @property
    def backend(self) -> Backend:
        return BACKENDS[self.name]
