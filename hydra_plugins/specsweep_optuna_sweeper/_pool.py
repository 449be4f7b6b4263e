"""A host pool: one Optuna worker process per host, all on one shared study.

``launcher.hosts=[{...}, {...}]`` (the key is ``hydra.sweeper.pool.hosts_key``)
turns the sweeper into a *controller*. It creates the study and queues the
seeds, then starts one worker per host: the same app command line in
multirun mode, plus that host's overrides (each entry key ``K`` becomes
``launcher.K=value``, ``server_port`` becomes ``server.port``, ``overrides``
are passed as they are), the shared sweep dir, storage and study name, and
``hydra.sweeper.pool.worker=<label>``. A worker is an ordinary search loop
(``_loop.SearchLoop``) that asks, runs and tells one trial at a time, so a
host never runs two trials at once, and the study's own machinery does the
scheduling: Optuna's storage hands out trial numbers, the study lock
serializes "count, then ask" so the workers stop at exactly ``n_trials``,
and the samplers see RUNNING trials (TPE's constant liar, the grid's running
cells). There is no queue or scheduler of our own.

Why processes, not threads: each worker keeps everything that is per box in
a process of its own -- the launcher registry (one server per process), the
Hydra job context, signal handling, and the kernel's PR_SET_PDEATHSIG link
to its local server.

What the controller does while they run:

* **Progress**: it polls the study and prints each trial as it starts and ends,
  with its host. Each worker's output goes to ``<sweep_dir>/workers/<label>.log``.
* **A dead worker** (killed, OOM, ...): its RUNNING trial is failed at once as
  ``stale`` (the controller knows the pid is gone; no heartbeat timeout) and its
  config queued again, so the other workers run it. The host is then free:
  once the dead worker's local processes (its server) have exited, a new
  worker is started on it, up to ``pool.max_restarts`` times.
* **Ctrl-C / SIGTERM**: workers run in their own sessions, so the terminal's
  signal reaches the controller only; it forwards one SIGINT to each worker,
  which marks its trial interrupted (queued again), stops its server and
  exits 130. A second Ctrl-C forwards another SIGINT, a third kills. If the
  controller itself is killed, PR_SET_PDEATHSIG sends each worker SIGTERM,
  which the app turns into the same interrupt; and since the workers carry
  ``launchers.reap_with_me()`` (``SPECSWEEP_REAP_WITH=<controller>``), each
  server's reaper (:mod:`launchers._reaper`) stops the server within
  ``launcher.reap_grace_s`` whatever the worker's own stop takes. A SIGKILLed
  worker's server goes the same way (its reaper sees the worker die).
* **The end**: when every worker has left (each leaves once the study has
  ``n_trials`` counted trials and none is still RUNNING), the controller prints
  the usual report and, through the app's multirun callback, closes the MLflow
  parent run that every worker's trials are nested under.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Mapping

import optuna
from omegaconf import DictConfig, ListConfig, OmegaConf
from optuna.trial import FrozenTrial, TrialState

import launchers
from sweep import secrets
from sweep.compose import storage_url
from sweep.errors import EXIT_INTERRUPTED
from sweep.compose.hosts import PoolHost, hydra_value, pool_hosts

from . import _storage
from ._dispatch import Interrupted
from ._loop import SearchLoop
from ._pool_proc import (TOKEN_ENV, _pdeathsig, _signame, _tail, base_command, processes_with_token,
                         worker_argv)

log = logging.getLogger(__name__)

POLL_S = 0.5
PROGRESS_S = 1.0
# After forwarding Ctrl-C: how long workers get to stop their servers, then SIGTERM, SIGKILL.
STOP_GRACE_S = 90.0


def default_storage(sweep_dir: Path) -> str:
    """Several processes on one machine: Optuna's journal file (the SQLite default is
    not made for concurrent writers)."""
    return "journal:" + str(Path(sweep_dir).absolute() / storage_url.DEFAULT_JOURNAL)


# -- hosts --------------------------------------------------------------------------------------
# What an entry of launcher.hosts means is decided once, by the app (sweep.compose.hosts).
def hosts_of(config: DictConfig, pool: Mapping[str, Any]) -> list[PoolHost]:
    """The pool's hosts from the app config (empty: no pool)."""
    key = pool.get("hosts_key")
    if not key:
        return []
    raw = OmegaConf.select(config, str(key), default=None)
    if isinstance(raw, (DictConfig, ListConfig)):
        raw = OmegaConf.to_container(raw, resolve=True)
    return pool_hosts(raw, parent=str(key).rpartition(".")[0], key_map=dict(pool.get("key_map") or {}))


@dataclass
class Worker:
    host: PoolHost
    proc: subprocess.Popen[bytes]
    log_path: Path
    token: str
    restarts: int
    outcome: str | None = None  # done | interrupted | died | error


@dataclass
class _Restart:
    host: PoolHost
    token: str
    restarts: int
    deadline: float


@dataclass
class Pool:
    """The controller: starts, watches and restarts the workers (see module docstring)."""

    config: DictConfig
    settings: Any  # _impl.Settings
    hosts: list[PoolHost]
    sweep_dir: Path
    study: optuna.Study
    study_name: str
    loop: SearchLoop
    lock: Any
    workers: list[Worker] = field(default_factory=list)
    ended: list[Worker] = field(default_factory=list)
    restarts: list[_Restart] = field(default_factory=list)
    _seen: dict[int, tuple[str, str]] = field(default_factory=dict)
    _started: float = 0.0
    _stopping: int = 0

    # -- starting -------------------------------------------------------------------------
    def _extra(self, host: PoolHost) -> list[str]:
        s, pool = self.settings, self.settings.pool
        extra = [f"hydra.sweep.dir={hydra_value(str(self.sweep_dir))}",
                 f"hydra.sweeper.storage={hydra_value(s.storage)}",
                 f"hydra.sweeper.study_name={hydra_value(self.study_name)}",
                 f"hydra.sweeper.pool.worker={hydra_value(host.label)}",
                 f"{pool.get('hosts_key')}=null"]
        extra += host.overrides
        extra += [str(o) for o in pool.get("worker_overrides") or []]
        return extra

    def _spawn(self, host: PoolHost, restarts: int = 0) -> Worker:
        argv = worker_argv(base_command(self.settings.pool.get("command")), sys.argv[1:],
                           self._extra(host))
        logs = self.sweep_dir / "workers"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / (re.sub(r"[^\w.@-]+", "_", host.label) + ".log")
        token = uuid.uuid4().hex
        # The reapers of the worker's servers also watch this controller: if it is SIGKILLed,
        # the servers go within launcher.reap_grace_s, however long the workers' own stop takes.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", TOKEN_ENV: token, **launchers.reap_with_me()}
        with open(log_path, "ab") as out:
            out.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} worker {host.label}: "
                      f"{secrets.mask_text(subprocess.list2cmdline(argv))}\n".encode())
            out.flush()
            # Own session: the terminal's Ctrl-C reaches the controller only, which forwards it
            # once (a second SIGINT while a worker stops its server would cut that short).
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    preexec_fn=_pdeathsig(os.getpid()), close_fds=True)
        worker = Worker(host, proc, log_path, token, restarts)
        self.workers.append(worker)
        log.info("worker %s started (pid %d)%s; log: %s", host.label, proc.pid,
                 f", restart {restarts}" if restarts else "", log_path)
        return worker

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> None:
        self._started = time.time()
        self._progress(quiet=True)
        previous = self._install_signals()
        try:
            for host in self.hosts:
                self._spawn(host)
            self._watch()
        except KeyboardInterrupt:
            self._interrupt()
            raise Interrupted(None) from None
        finally:
            self._restore_signals(previous)
            self._kill_all()
            self.lock.close()
        self._progress()

    def _watch(self) -> None:
        last = 0.0
        while self.workers or self.restarts:
            for w in list(self.workers):
                rc = w.proc.poll()
                if rc is not None:
                    self._exited(w, rc)
            for r in list(self.restarts):
                if not processes_with_token(r.token) or time.monotonic() > r.deadline:
                    self.restarts.remove(r)
                    if self.workers or not self._finished():
                        self._spawn(r.host, r.restarts)
            if time.monotonic() - last >= PROGRESS_S:
                self._progress()
                last = time.monotonic()
            time.sleep(POLL_S)

    def _finished(self) -> bool:
        with self.lock:
            trials = self.study.get_trials(deepcopy=False)
            done = sum(1 for t in trials if self.loop._counts(t))
            busy = any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials)
        return done >= self.settings.n_trials and not busy

    def _exited(self, w: Worker, rc: int) -> None:
        self.workers.remove(w)
        self.ended.append(w)
        label, pid = w.host.label, w.proc.pid
        if rc == 0:
            w.outcome = "done"
            log.info("worker %s finished", label)
            return
        if rc == EXIT_INTERRUPTED:
            w.outcome = "interrupted"
            log.warning("worker %s was interrupted", label)
            return
        if rc < 0:
            w.outcome = "died"
            why = f"its worker for {label} (pid {pid}) was killed by {_signame(rc)}"
        else:
            w.outcome = "error"
            why = f"its worker for {label} (pid {pid}) exited with status {rc}"
        with self.lock:
            failed = _storage.fail_trials_of(self.study, pid, why)
            if failed:
                self.loop.requeue()
        lost = f"; trial {', '.join(str(t.number) for t in failed)} marked FAIL (stale) and " \
            "its config queued again" if failed else ""
        if w.outcome == "error":
            log.error("worker %s exited with status %d%s; the last lines of %s:\n%s", label, rc,
                      lost, w.log_path, _tail(w.log_path))
            return
        log.warning("worker %s (pid %d) was killed by %s%s", label, pid, _signame(rc), lost)
        if self._stopping or w.restarts >= int(self.settings.pool.get("max_restarts", 1) or 0):
            log.warning("host %s leaves the pool (pool.max_restarts=%s)", label,
                        self.settings.pool.get("max_restarts"))
            return
        wait_s = float(self.settings.pool.get("restart_wait_s", 30.0) or 0.0)
        log.info("host %s is free again once the dead worker's servers have exited "
                 "(up to %.0f s): then a new worker starts on it", label, wait_s)
        self.restarts.append(_Restart(w.host, w.token, w.restarts + 1,
                                      time.monotonic() + wait_s))

    # -- progress ---------------------------------------------------------------------------
    def _progress(self, quiet: bool = False) -> None:
        try:
            trials = self.study.get_trials(deepcopy=False)
        except Exception as exc:  # noqa: BLE001 - a display problem never stops the pool
            log.debug("progress: %s", exc)
            return
        for t in trials:
            if t.state == TrialState.WAITING:
                continue
            state = (t.state.name, str(t.user_attrs.get("failure_reason") or ""))
            if self._seen.get(t.number) == state:
                continue
            self._seen[t.number] = state
            if not quiet:
                log.info("%s", _describe(t))

    def executed(self) -> int:
        """Jobs the workers ran during this run (server starts; repeats excluded)."""
        labels = {h.label for h in self.hosts}
        n = 0
        for t in self.study.get_trials(deepcopy=False):
            start = t.datetime_start.timestamp() if t.datetime_start else 0.0
            if t.user_attrs.get("host") in labels and "duplicate_of" not in t.user_attrs \
                    and start >= self._started - 1 and "job_dir" in t.user_attrs:
                n += 1
        return n

    def failed_all(self) -> bool:
        return bool(self.ended) and all(w.outcome == "error" for w in self.ended)

    # -- stopping -----------------------------------------------------------------------------
    def _install_signals(self) -> dict[int, Any]:
        """SIGTERM / SIGHUP end the controller like Ctrl-C (forwarded to the workers)."""
        previous: dict[int, Any] = {}

        def interrupt(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, interrupt)
        return previous

    @staticmethod
    def _restore_signals(previous: Mapping[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _signal_all(self, sig: int) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                try:
                    os.kill(w.proc.pid, sig)
                except ProcessLookupError:
                    pass

    def _interrupt(self) -> None:
        """Forward Ctrl-C once; escalate on a repeated Ctrl-C or after the grace period."""
        self.restarts.clear()
        log.warning("interrupted: each worker marks its trial interrupted (queued again) and "
                    "stops its server")
        self._stopping = 1
        self._signal_all(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_S
        while True:
            try:
                while any(w.proc.poll() is None for w in self.workers):
                    if time.monotonic() > deadline:
                        raise KeyboardInterrupt("grace period over")
                    time.sleep(0.1)
                break
            except KeyboardInterrupt:
                self._stopping += 1
                if self._stopping >= 3:
                    log.warning("killing the workers")
                    self._signal_all(signal.SIGKILL)
                    for w in self.workers:
                        w.proc.wait()
                    break
                log.warning("interrupted again: the workers get another SIGINT (once more kills)")
                self._signal_all(signal.SIGINT)
                deadline = time.monotonic() + STOP_GRACE_S / 3
        for w in list(self.workers):
            self._exited(w, w.proc.wait())

    def _kill_all(self) -> None:
        """Nothing of ours outlives the controller (an error in the controller itself)."""
        for w in list(self.workers):
            if w.proc.poll() is None:
                log.warning("stopping worker %s", w.host.label)
                w.proc.send_signal(signal.SIGINT)
                try:
                    w.proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    w.proc.wait()
            self._exited(w, w.proc.returncode)


def _describe(t: FrozenTrial) -> str:
    host = t.user_attrs.get("host") or "?"
    params = " ".join(f"{k}={v}" for k, v in (t.params or {}).items())
    if t.state == TrialState.RUNNING:
        return f"trial {t.number} on {host}: running {params}"
    if t.state == TrialState.COMPLETE:
        vals = ", ".join(f"{v:.6g}" for v in (t.values or []))
        extra = f" (repeat of trial {t.user_attrs['duplicate_of']})" \
            if "duplicate_of" in t.user_attrs else ""
        return f"trial {t.number} on {host}: COMPLETE {vals}{extra}"
    reason = t.user_attrs.get("failure_reason") or ""
    return f"trial {t.number} on {host}: {t.state.name} {reason}".rstrip()
