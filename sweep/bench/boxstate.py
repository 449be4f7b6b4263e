"""The box's state around a measurement: what else was using the machine while a cell ran.

Why: a throughput figure measured while neighbours share the cores is a figure of the
neighbourhood, not of the config (issue 41: a vLLM landscape recorded at a load average of
6.2 on 2 cores predicted a quiet box 31-43% low). So every cell records what the box was
doing, a trial can wait for a busy box to settle or refuse it, and the calibration fitted
to the cells says what state it was fitted in.

Read cheaply from the kernel's own files, no dependency (Linux; elsewhere the figures are
null and nothing is called busy):

* ``others_cpu`` -- cores' worth of CPU time the engine's cores spent on processes outside
  this run's own process tree over the window: ``/proc/stat`` per-CPU busy ticks of those
  cores (user, nice, system, irq, softirq: every process, visible or not -- another
  container's too) minus the ticks of our own tree (``/proc/<pid>/stat`` utime + stime of
  this process and its descendants: the client, the local server, its workers), plus the
  cores' **steal** (time the hypervisor gave to another guest). The figure the policy
  judges: it is direct, over the cell's own window, and not the 1-minute average's lag.
* ``load_avg`` (``/proc/loadavg``, 1 minute) and ``load_beyond_own``: the load average
  minus what our own tree contributes, taken as the larger of its runnable threads at the
  end of the window (``/proc/<pid>/task/*/stat`` in state R or D) and the cores' worth of
  CPU it used over the window (a server between requests has no runnable thread, yet it
  was on the run queue for most of the minute the average covers). Recorded, not judged:
  the average trails the box by a minute.
* ``steal``: stolen / all ticks of the engine's cores; ``cpu_mhz`` (and ``cpu_mhz_max``):
  ``/sys/devices/system/cpu/cpu*/cpufreq`` where the kernel shows it, else ``/proc/cpuinfo``.
* ``busy_procs``: the other processes (not ours) that used at least ``PROC_FLOOR`` of a core
  over the window and may run on the engine's cores (``Cpus_allowed_list``), the busiest first.
* on NVIDIA boxes (``nvidia-smi`` on the PATH; :mod:`sweep.bench.gpustate`): other processes
  on the GPUs, SM and memory clocks, throttle reasons, temperature.

A state is **busy** when ``others_cpu`` reaches ``workload.busy_load`` cores, or a GPU has
another process or is held down by heat or power; ``why`` says which, in words. The policy
(``workload.busy_box``): ``mark`` measures and marks, ``wait`` waits up to
``workload.busy_wait_s`` for the box to settle then measures (and marks), ``refuse`` waits as
long and then refuses (:class:`Busy`: one line saying what was busy).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
PROC_FLOOR = 0.05        # cores: a process using less than this over the window is not listed
TOP_PROCS = 8            # other processes listed per state, the busiest first
SETTLE_WINDOW_S = 1.0    # the window a settle check measures over
POLICIES = ("mark", "wait", "refuse")
REASON = "busy_box"      # the failure reason of a trial the policy refused
# A recording (a landscape, a verification) waits up to 5 minutes for a busy box, then refuses it:
# what it measures is kept and compared later, so a busy neighbour must not slip in unsaid.
RECORDING_POLICY = ("workload.busy_box=refuse", "workload.busy_wait_s=300")


def recording_policy(overrides: Sequence[str]) -> list[str]:
    """:data:`RECORDING_POLICY` where ``overrides`` do not set the key themselves (theirs win)."""
    given = {o.lstrip("+~").partition("=")[0] for o in overrides}
    return [o for o in RECORDING_POLICY if o.partition("=")[0] not in given]


def refused(doc: Mapping[str, Any] | None) -> str | None:
    """The one line of a trial the busy-box policy refused (None: it was not refused)."""
    failure = (doc or {}).get("failure") or {}
    return str(failure.get("message") or "") if failure.get("reason") == REASON else None


class Busy(Exception):
    """The box stayed busy and the policy is ``refuse``: :attr:`line` says what was busy."""

    def __init__(self, line: str, state: Mapping[str, Any]) -> None:
        super().__init__(line)
        self.line = line
        self.state = dict(state)


# ------------------------------------------------------------------------------ reading /proc


def _hz() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def _cpu_ticks() -> dict[int, tuple[int, int, int]]:
    """cpu index -> (busy, steal, all) ticks from ``/proc/stat``."""
    out: dict[int, tuple[int, int, int]] = {}
    try:
        lines = (PROC / "stat").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            cpu = int(name[3:])
            v = [int(x) for x in rest.split()]
        except ValueError:
            continue
        v += [0] * (8 - len(v))
        busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq (iowait is idle)
        out[cpu] = (busy, v[7], sum(v[:8]))
    return out


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    name: str
    ticks: int      # utime + stime
    state: str


def _read_stat(path: Path) -> Proc | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")  # the name may hold spaces and parentheses
    pid_s, _, name = head.partition(" (")
    f = tail.split()
    try:  # after the name: state ppid ... utime(14) stime(15), 1-based over the whole line
        return Proc(int(pid_s), int(f[1]), name[:32], int(f[11]) + int(f[12]), f[0])
    except (ValueError, IndexError):
        return None


def _procs() -> dict[int, Proc]:
    out: dict[int, Proc] = {}
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return out
    for entry in entries:
        if entry.name.isdigit() and (p := _read_stat(entry / "stat")) is not None:
            out[p.pid] = p
    return out


def tree(procs: Mapping[int, Proc], roots: Iterable[int]) -> set[int]:
    """``roots`` and every descendant of theirs (by parent pid) among ``procs``."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    seen: set[int] = set()
    todo = [r for r in roots if r in procs]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return seen


def _runnable_threads(pids: Iterable[int]) -> int:
    n = 0
    for pid in pids:
        try:
            tasks = list((PROC / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            t = _read_stat(task / "stat")
            n += t is not None and t.state in ("R", "D")
    return n


def _allowed(pid: int) -> set[int] | None:
    """The CPUs a process may run on (``Cpus_allowed_list``); None where it cannot be read."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpu_list(line.split(":", 1)[1])
    except OSError:
        return None
    return None


def parse_cpu_list(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpu-list format)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            continue
    return out


def _load_avg() -> float | None:
    try:
        return float((PROC / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_mhz(cores: Iterable[int]) -> tuple[float | None, float | None]:
    """(mean current MHz, mean maximum MHz) of ``cores``: cpufreq where the kernel shows it,
    else the current clock ``/proc/cpuinfo`` reports (no maximum there)."""
    cur, top = [], []
    for c in cores:
        d = SYS_CPU / f"cpu{c}" / "cpufreq"
        try:
            cur.append(int((d / "scaling_cur_freq").read_text()) / 1000)
            top.append(int((d / "cpuinfo_max_freq").read_text()) / 1000)
        except (OSError, ValueError):
            continue
    if cur:
        return round(sum(cur) / len(cur), 1), (round(sum(top) / len(top), 1) if top else None)
    try:
        mhz = [float(ln.split(":", 1)[1]) for ln in (PROC / "cpuinfo").read_text().splitlines()
               if ln.startswith("cpu MHz")]
    except (OSError, ValueError):
        return None, None
    return (round(sum(mhz) / len(mhz), 1) if mhz else None), None


# ------------------------------------------------------------------------------ a window


@dataclass
class Snapshot:
    """What the kernel said at one instant (two of them make a window)."""

    t: float
    cpus: dict[int, tuple[int, int, int]]
    procs: dict[int, Proc]


def snapshot() -> Snapshot:
    return Snapshot(time.monotonic(), _cpu_ticks(), _procs())


@dataclass
class Watch:
    """What a trial measures the box with: its own process tree, the engine's cores, the threshold.

    ``roots``: this run's own processes (the controller; a server it did not start as a child,
    e.g. an adopted kept one, by its pid); ``engine_pid``: the server, whose CPU affinity names the
    engine's cores (else this process's); ``gpus``: read ``nvidia-smi`` too (None: where it exists)."""

    busy_load: float = 0.5
    roots: tuple[int, ...] = field(default_factory=lambda: (os.getpid(),))
    engine_pid: int | None = None
    gpus: bool | None = None
    smi: str | None = None            # the nvidia-smi to run (tests: a stand-in script)

    def cores(self) -> set[int]:
        for pid in (self.engine_pid, 0):
            if pid is None:
                continue
            try:
                return set(os.sched_getaffinity(pid))
            except (OSError, AttributeError):
                continue
        return set(range(os.cpu_count() or 1))

    def start(self) -> Snapshot:
        return snapshot()

    def stop(self, before: Snapshot) -> dict[str, Any]:
        """The state over the window since ``before``."""
        return self.between(before, snapshot())

    def between(self, before: Snapshot, after: Snapshot) -> dict[str, Any]:
        window = max(1e-3, after.t - before.t)
        cores = self.cores()
        roots = tuple(r for r in self.roots if r) + ((self.engine_pid,) if self.engine_pid else ())
        own = tree(after.procs, roots) | tree(before.procs, roots) | set(roots)
        hz = _hz()

        def used(pid: int) -> float:
            a, b = after.procs.get(pid), before.procs.get(pid)
            if a is None:
                return 0.0
            return max(0, a.ticks - (b.ticks if b is not None and b.name == a.name else 0)) / hz / window

        own_cpu = sum(used(p) for p in own)
        out: dict[str, Any] = {"window_s": round(window, 2), "cpus": os.cpu_count(), "cores": sorted(cores)}
        ticks = [(after.cpus[c], before.cpus[c]) for c in cores if c in after.cpus and c in before.cpus]
        if ticks:
            busy = sum(a[0] - b[0] for a, b in ticks) / hz / window
            steal_t = sum(a[1] - b[1] for a, b in ticks)
            all_t = sum(a[2] - b[2] for a, b in ticks)
            steal = steal_t / all_t if all_t > 0 else 0.0
            out["steal"] = round(steal, 3)
            out["others_cpu"] = round(max(0.0, busy - own_cpu) + steal_t / hz / window, 2)
        else:
            out["steal"] = out["others_cpu"] = None
        out["own_cpu"] = round(own_cpu, 2)
        load = _load_avg()
        runnable = _runnable_threads(p for p in own if p in after.procs)
        out["load_avg"] = load
        out["own_runnable"] = runnable
        out["load_beyond_own"] = None if load is None else round(max(0.0, load - max(runnable, own_cpu)), 2)
        out["cpu_mhz"], out["cpu_mhz_max"] = cpu_mhz(cores)
        others = sorted(((used(p), p) for p in after.procs if p not in own), reverse=True)
        listed: list[dict[str, Any]] = []
        for share, pid in others:
            if share < PROC_FLOOR or len(listed) >= TOP_PROCS:
                break
            allowed = _allowed(pid)
            if allowed is not None and not allowed & cores:
                continue
            listed.append({"pid": pid, "name": after.procs[pid].name, "cpu": round(share, 2)})
        out["busy_procs"] = listed
        if self.gpus is not False:
            from sweep.bench import gpustate

            gpu = gpustate.read(own, smi=self.smi) if (self.gpus or gpustate.available(self.smi)) else None
            if gpu is not None:
                out.update(gpu)
        return judge(out, self.busy_load)

    def now(self, window_s: float = SETTLE_WINDOW_S) -> dict[str, Any]:
        """The state over a window of ``window_s`` starting now (a check before a trial or a cell)."""
        before = self.start()
        time.sleep(window_s)
        return self.stop(before)


def judge(state: dict[str, Any], busy_load: float) -> dict[str, Any]:
    """``state`` with ``busy`` and ``why`` set: other work reaching ``busy_load`` cores on the
    engine's cores (steal included), other processes on the GPUs, GPUs slowed by heat or power."""
    why: list[str] = []
    others = state.get("others_cpu")
    if isinstance(others, (int, float)) and others >= busy_load:
        top = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpu']:.2f}" for p in state.get("busy_procs") or [])
        steal = state.get("steal") or 0
        why.append(f"other work kept {others:.2f} cores of the engine's busy (workload.busy_load {busy_load:g})"
                   + (f"; steal {100 * steal:.0f}%" if steal >= 0.01 else "")
                   + (f": {top}" if top else ": no process this user can see (another container or user)"))
    for app in state.get("gpu_others") or []:
        why.append(f"another process on GPU {app.get('gpu')}: {app.get('name')} (pid {app.get('pid')}, "
                   f"{app.get('memory_mib')} MiB)")
    for gpu in state.get("gpus") or []:
        slow = [r for r in gpu.get("throttle") or [] if r in SLOWDOWNS]
        if slow:
            why.append(f"GPU {gpu.get('index')} held down: {', '.join(slow)} (SM {gpu.get('sm_mhz')} of "
                       f"{gpu.get('sm_mhz_max')} MHz, {gpu.get('temp_c')} C)")
    state["busy"] = bool(why) if state.get("others_cpu") is not None or state.get("gpus") else None
    state["why"] = why
    return state


# Throttle reasons that mean the GPU runs slower than it would on a quiet, cool box.
SLOWDOWNS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def describe(state: Mapping[str, Any]) -> str:
    """One line: what was busy (when something was), then the figures it was judged on."""
    bits = [f"other work {state['others_cpu']:.2f} cores" if state.get("others_cpu") is not None else "",
            f"load average {state['load_avg']:.2f} ({state['load_beyond_own']:.2f} beyond this run)"
            if state.get("load_avg") is not None and state.get("load_beyond_own") is not None else "",
            f"steal {100 * state['steal']:.0f}%" if state.get("steal") else "",
            f"{state['cpu_mhz']:.0f} MHz" if state.get("cpu_mhz") else ""]
    text = ", ".join(b for b in bits if b)
    if state.get("why"):
        return "; ".join(state["why"]) + (f" ({text})" if text else "")
    return f"quiet: {text}" if state.get("busy") is False else text


# ------------------------------------------------------------------------------ the policy


def settle(watch: Watch, policy: str, wait_s: float, *, say: Callable[[str], None] | None = None,
           window_s: float = SETTLE_WINDOW_S, what: str = "the trial") -> dict[str, Any]:
    """The box's state before ``what``, by the policy: ``mark`` measures once; ``wait`` and
    ``refuse`` measure again until it is quiet or ``wait_s`` has passed; then ``refuse`` raises
    :class:`Busy`. The state carries ``policy`` and ``waited_s``."""
    t0 = time.monotonic()
    state = watch.now(window_s)
    said = False
    while policy != "mark" and state.get("busy") and time.monotonic() - t0 + window_s <= wait_s:
        if say is not None and not said:
            say(f"box busy before {what}: {describe(state)}; waiting up to {wait_s:g} s for it to settle "
                f"(workload.busy_box={policy})")
            said = True
        state = watch.now(window_s)
    state["policy"] = policy
    state["waited_s"] = round(time.monotonic() - t0, 1)
    if policy == "refuse" and state.get("busy"):
        raise Busy(f"refused: the box is busy before {what} (workload.busy_box=refuse, waited "
                   f"{state['waited_s']:g} s): {describe(state)}", state)
    return state


def combine(states: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One state for a cell measured several times (``workload.repeats``): busy when any repeat
    was, every reason kept once, the figures the worst repeat's (the largest)."""
    got = [dict(s) for s in states if s]
    if not got:
        return None
    if len(got) == 1:
        return got[0]
    out = dict(got[0])
    for key in ("others_cpu", "own_cpu", "load_avg", "load_beyond_own", "steal", "own_runnable"):
        vals = [s[key] for s in got if isinstance(s.get(key), (int, float))]
        out[key] = max(vals) if vals else None
    out["window_s"] = round(sum(float(s.get("window_s") or 0) for s in got), 2)
    flags = [s.get("busy") for s in got if s.get("busy") is not None]
    out["busy"] = any(flags) if flags else None
    out["why"] = list(dict.fromkeys(w for s in got for w in s.get("why") or []))
    return out


def state_key(cell: Any) -> str | None:
    """The block a cell's box state puts it in, for models that pool cells (the verdict model):
    ``"busy"`` for a cell measured on a busy box, ``None`` for a quiet one or one that does not say
    (cells recorded before the state was). Cells of different keys are never pooled silently."""
    state = cell.get("box_state") if isinstance(cell, Mapping) else getattr(cell, "box_state", None)
    if state is None:
        return None
    busy = state.get("busy") if isinstance(state, Mapping) else getattr(state, "busy", None)
    return "busy" if busy else None
