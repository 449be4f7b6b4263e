"""Pre-flight checks of a box before a server is (re)started on it.

A real restart costs minutes (590 GB of weights) and a wrong box fails in
confusing ways (CUDA errors for an arch mismatch, Triton JIT errors for a
missing ``Python.h`` half-way through graph capture). So before the first
start, one shell script gathers everything in a single round trip and each
finding becomes a row: GPU count and compute capability vs
``hardware.num_gpus``/``hardware.arch``, the model path, free disk in the
work dir, Python headers, the server port, the executable and the tools the
chosen mode needs.

What the box must offer comes with the launch (:class:`sweep.launch.BoxNeeds`,
rendered from the trial's config). ``server=sim`` (simulated) skips the GPU
and model rows -- the simulator needs neither -- and only warns about missing
Python headers (it compiles nothing). The same checks run locally for
``launcher=local`` in ``python -m sweep.doctor`` (:mod:`launchers.doctor`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from launchers._ssh_conn import Result
    from sweep.launch import BoxNeeds, Launch, SSHSettings

MARK = "::specsweep::"
HEADERS_PY = ("import sysconfig,os;print(os.path.exists(os.path.join("
              "sysconfig.get_paths()['include'],'Python.h')))")
DEFAULT_MIN_FREE_GB = 5.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str  # ok | fail | warn | skip
    detail: str


def rpath(path: str) -> str:
    """A remote path as a shell word: ``~/x`` stays relative to $HOME, the rest is quoted."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def arch_to_cap(arch: str) -> str | None:
    """``sm_103`` -> ``10.3`` (nvidia-smi's compute_cap); None if not an sm_XY name."""
    m = re.fullmatch(r"sm_?(\d+)(\d)[a-z]?", arch.strip().lower())
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def looks_local(path: str | None) -> bool:
    """A filesystem path (checked) rather than a Hugging Face repo id (downloaded)."""
    return bool(path) and str(path).startswith(("/", "~", "./", "../"))


def server_python(launch: Launch) -> str:
    exe = launch.argv[0] if launch.argv else "python3"
    return exe if exe.rsplit("/", 1)[-1].startswith("python") else "python3"


def script(launch: Launch, *, workdir: str, port: int, mode: str,
           systemd: dict[str, Any] | None = None) -> str:
    """One POSIX sh script printing a MARK-delimited section per finding."""
    sec = lambda name: f"echo '{MARK}{name}'"  # noqa: E731
    lines = [
        sec("gpu"),
        "if command -v nvidia-smi >/dev/null 2>&1; then "
        "nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>&1; echo \"rc=$?\"; "
        "else echo 'rc=127'; fi",
        sec("disk"),
        f"mkdir -p {rpath(workdir)} 2>/dev/null; df -Pk {rpath(workdir)} 2>&1 | tail -n 1",
        sec("workdir"),
        f"if [ -d {rpath(workdir)} ] && [ -w {rpath(workdir)} ]; then echo yes; else echo no; fi",
        sec("headers"),
        f"{shlex.quote(server_python(launch))} -c {shlex.quote(HEADERS_PY)} 2>&1 | tail -n 1",
        sec("port"),
        f"if command -v ss >/dev/null 2>&1; then ss -Hltn 2>/dev/null | awk '{{print $4}}' | "
        f"grep -Eq '[:.]{port}$' && echo busy || echo free; "
        f"elif (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo busy; else echo free; fi",
        sec("exe"),
        f"command -v {shlex.quote(launch.argv[0])} 2>/dev/null || echo '(missing)'",
        sec("tools"),
        "for t in setsid nohup ps systemctl journalctl; do "
        "if command -v $t >/dev/null 2>&1; then echo \"$t yes\"; else echo \"$t no\"; fi; done",
    ]
    lines += _systemd_lines(systemd or {}, sec)
    for label, path in _model_paths(launch.box):
        lines += [sec(f"path:{label}"), f"if [ -e {rpath(path)} ]; then echo yes; else echo no; fi"]
    return "\n".join(lines) + "\n"


def _systemd_lines(systemd: dict[str, Any], sec: Callable[[str], str]) -> list[str]:
    """systemd mode: can we write the unit (sudo or a writable unit dir); drop-in: does the unit exist."""
    if not systemd:
        return []
    unit_dir, unit = systemd["unit_dir"], systemd["unit"]
    sudo = "sudo -n " if systemd.get("sudo") else ""
    lines = [sec("unitdir"),
             "if sudo -n true 2>/dev/null; then echo yes; else echo no; fi" if sudo else
             f"if [ -w {shlex.quote(unit_dir)} ]; then echo yes; else echo no; fi"]
    if systemd.get("dropin"):
        lines += [sec("baseunit"), f"if {sudo}systemctl cat {shlex.quote(unit)} >/dev/null 2>&1; "
                  "then echo yes; else echo no; fi"]
    return lines


def _model_paths(box: BoxNeeds | None) -> list[tuple[str, str]]:
    if box is None or box.simulated:
        return []
    out = []
    if looks_local(box.model_path):
        out.append(("model.path", str(box.model_path)))
    if box.draft and looks_local(box.draft[1]):
        out.append(box.draft)
    return out


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line.strip())
    return out


def evaluate(output: str, launch: Launch, *, port: int, mode: str,
             workdir: str, port_owned: bool, min_free_gb: float) -> list[Check]:
    """Turn the script's output into check rows (``fail`` rows stop a start)."""
    s = _sections(output)
    box = launch.box
    simulated = box.simulated if box is not None else False
    checks = [_gpu(s.get("gpu", []), box)]
    for key in [k for k in s if k.startswith("path:")]:
        label = key[5:]
        ok = s[key][:1] == ["yes"]
        checks.append(Check(label, "ok" if ok else "fail",
                            "exists" if ok else "not found on the box: fix the path or copy the model"))
    if box is not None and not simulated and not looks_local(box.model_path):
        checks.append(Check("model.path", "skip", f"{box.model_path!r} is a Hugging Face id: "
                            "the server downloads it (not checked)"))
    checks.append(_disk(s.get("disk", []), workdir, min_free_gb))
    wd = s.get("workdir", [])[:1] == ["yes"]
    checks.append(Check("workdir", "ok" if wd else "fail",
                        f"{workdir} is writable" if wd else f"cannot create or write {workdir} "
                        "(launcher.workdir)"))
    if box is not None and box.num_gpus == 0 and not simulated:
        checks.append(Check("python headers", "skip", f"hardware={box.hardware} has no GPU "
                            "(no Triton kernels to compile)"))
    else:
        checks.append(_headers(s.get("headers", []), server_python(launch), simulated))
    busy = s.get("port", [])[:1] == ["busy"]
    if busy and port_owned:
        checks.append(Check("port", "ok", f"{port} is held by the server this launcher manages "
                            "(reused or restarted)"))
    else:
        checks.append(Check("port", "fail" if busy else "ok",
                            f"{port} is already in use on the box: stop that process or set "
                            "server.port" if busy else f"{port} is free"))
    exe = (s.get("exe") or ["(missing)"])[0]
    checks.append(Check("executable", "fail" if exe == "(missing)" else "ok",
                        f"{launch.argv[0]} not found on the remote PATH (server.executable)"
                        if exe == "(missing)" else exe))
    if "unitdir" in s:
        ok = s["unitdir"][:1] == ["yes"]
        checks.append(Check("unit dir", "ok" if ok else "fail", "the unit file can be written" if ok
                            else "cannot write the unit file: run as root, or set launcher.sudo=true "
                            "(passwordless sudo) or another launcher.unit_dir"))
    if "baseunit" in s:
        ok = s["baseunit"][:1] == ["yes"]
        checks.append(Check("unit", "ok" if ok else "fail", "the unit to drop into exists" if ok
                            else "launcher.dropin=true needs an existing launcher.unit on the box"))
    tools = dict(line.split(" ", 1) for line in s.get("tools", []) if " " in line)
    need = {"process": ("setsid", "nohup", "ps"), "systemd": ("systemctl", "journalctl")}.get(mode, ())
    missing = [t for t in need if tools.get(t) != "yes"]
    if need:
        hint = " (use launcher.mode=process on hosts without systemd)" if mode == "systemd" else ""
        checks.append(Check(f"{mode} tools", "fail" if missing else "ok",
                            f"missing: {', '.join(missing)}{hint}" if missing else ", ".join(need)))
    return checks


def _gpu(lines: list[str], hw: BoxNeeds | None) -> Check:
    if hw is None:
        return Check("gpus", "skip", "hardware config not known")
    if hw.simulated:
        return Check("gpus", "skip", "server is simulated (no GPU needed)")
    if hw.num_gpus == 0:
        return Check("gpus", "skip", f"hardware={hw.hardware} is a CPU box (no GPU expected)")
    rc = next((ln for ln in reversed(lines) if ln.startswith("rc=")), "rc=127")
    rows = [ln for ln in lines if not ln.startswith("rc=")]
    if rc != "rc=0":
        why = "nvidia-smi not found" if rc == "rc=127" else f"nvidia-smi failed: {' '.join(rows)[:200]}"
        return Check("gpus", "fail", f"{why}; hardware={hw.hardware} expects {hw.num_gpus} GPUs")
    caps = sorted({r.rsplit(",", 1)[-1].strip() for r in rows})
    names = sorted({r.rsplit(",", 1)[0].strip() for r in rows})
    want = arch_to_cap(hw.arch)
    problems = []
    if len(rows) != hw.num_gpus:
        problems.append(f"{len(rows)} GPUs, hardware.num_gpus={hw.num_gpus}")
    if want is not None and caps != [want]:
        problems.append(f"compute capability {', '.join(caps) or '?'}, hardware.arch={hw.arch} "
                        f"needs {want}")
    desc = f"{len(rows)} x {', '.join(names)} (compute {', '.join(caps)})"
    if problems:
        return Check("gpus", "fail", f"{desc}: {'; '.join(problems)} -- wrong box or wrong "
                     f"hardware= choice")
    return Check("gpus", "ok", desc)


def _disk(lines: list[str], workdir: str, min_free_gb: float) -> Check:
    try:
        free_gb = int(lines[-1].split()[3]) / 1024 / 1024
    except (IndexError, ValueError):
        return Check("disk", "warn", f"could not read free space of {workdir}")
    if free_gb < min_free_gb:
        return Check("disk", "fail", f"{free_gb:.1f} GB free in {workdir}, need "
                     f"{min_free_gb:g} GB (launcher.min_free_gb)")
    return Check("disk", "ok", f"{free_gb:.0f} GB free in {workdir}")


def _headers(lines: list[str], python: str, simulated: bool) -> Check:
    answer = lines[-1] if lines else ""
    if answer == "True":
        return Check("python headers", "ok", f"Python.h present for {python}")
    what = (f"Python.h missing for {python}: Triton cannot JIT kernels (install python3.x-dev)"
            if answer == "False" else f"could not run {python}: {answer[:120]}")
    return Check("python headers", "warn" if simulated else "fail", what)


def run_checks(run: Callable[[str], Result], launch: Launch, *, port: int, port_owned: bool,
               mode: str, workdir: str, min_free_gb: float, ssh: SSHSettings | None = None) -> list[Check]:
    """Run the script through ``run`` (SSH or local) and evaluate it; ``ssh`` gives the
    unit settings of ``mode=systemd``."""
    systemd = None
    if mode == "systemd" and ssh is not None:
        systemd = {"unit": ssh.unit_name, "unit_dir": ssh.unit_dir, "sudo": ssh.sudo,
                   "dropin": ssh.dropin}
    res = run(script(launch, workdir=workdir, port=port, mode=mode, systemd=systemd))
    return evaluate(res.out, launch, port=port, mode=mode, workdir=workdir,
                    port_owned=port_owned, min_free_gb=min_free_gb)


def failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == "fail"]
