"""Write a rendered launch as a systemd unit (or drop-in) that runs exactly that argv.

A unit file is not a shell script, and shell quoting in it is wrong in
both directions. systemd's rules (systemd.syntax(7), systemd.service(5)):

* ``ExecStart=`` splits words on whitespace; a word wrapped in double quotes
  keeps its spaces, and C escapes work inside (``\\\\``, ``\\"``, ``\\t``,
  ``\\xNN``). Every word is written double-quoted with those escapes.
* ``%`` starts a unit specifier (``%h``, ``%n``): a literal one is ``%%``.
* ``$VAR``/``${VAR}`` are expanded when the command runs: a literal ``$`` is
  ``$$``. (We rely on the expansion for secrets, see below.)
* a lone ``;`` separates two commands; a literal one is ``\\;``.
* ``Environment=`` takes one quoted ``"NAME=value"`` per line, same escapes,
  ``%%`` for ``%``, no ``$`` expansion.
* the executable may not contain quotes, backslashes or control characters
  and must be an absolute path or a bare file name.

Secrets (``--api-key``'s value) are not written into the unit, which is
world-readable and whose ExecStart any local user can read over D-Bus:
the word becomes ``${SPECSWEEP_SECRET_0}`` and the value goes to an
``EnvironmentFile=`` written with mode 0600.

Any word with a newline, carriage return or NUL is refused before a byte is
written: it would end the ``ExecStart=`` line and start a new directive.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping

from launchers.base import LaunchFailure

if TYPE_CHECKING:
    from sweep.launch import Launch

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_VAR = "SPECSWEEP_SECRET_{}"
_FORBIDDEN = ("\n", "\r", "\x00")


def check_launch(launch: "Launch", *, systemd: bool = True) -> None:
    """Refuse argv/env words that could break out of a unit line or a shell line.

    ``systemd`` adds systemd's own rules for the executable.
    """
    for i, word in enumerate(launch.argv):
        if any(c in word for c in _FORBIDDEN):
            raise LaunchFailure("preflight", f"argv[{i}] ({launch.redact(word)[:60]!r}) contains a "
                                "newline or NUL: refusing to write it into a unit file or shell line")
    for name, value in launch.env.items():
        if not ENV_NAME.match(name):
            raise LaunchFailure("preflight", f"environment variable name {name!r} is not valid "
                                "(letters, digits, underscore; not starting with a digit)")
        if any(c in value for c in _FORBIDDEN):
            raise LaunchFailure("preflight", f"environment variable {name} contains a newline or NUL")
    exe = launch.argv[0] if launch.argv else ""
    if not systemd:
        return
    if not exe or any(c in exe for c in "\"'\\") or any(ord(c) < 32 or ord(c) == 127 for c in exe):
        raise LaunchFailure("preflight", f"executable {exe!r} is empty or has quotes, backslashes "
                            "or control characters (systemd refuses it)")
    if "/" in exe and not exe.startswith("/"):
        raise LaunchFailure("preflight", f"executable {exe!r}: systemd needs an absolute path or "
                            "a bare program name (server.executable)")


def _escape(text: str, *, dollar: bool) -> str:
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "%":
            out.append("%%")
        elif c == "$" and dollar:
            out.append("$$")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "".join(out)


def _secret_names(secrets: frozenset[str]) -> dict[str, str]:
    """Stable variable names for secret values (longest first, so overlaps resolve)."""
    ordered = sorted((s for s in secrets if s), key=lambda s: (-len(s), s))
    return {s: SECRET_VAR.format(i) for i, s in enumerate(ordered)}


def exec_word(word: str, secret_vars: Mapping[str, str] | None = None) -> str:
    """One ExecStart word, double-quoted; secret substrings become ${VAR}."""
    if word == ";":
        return "\\;"
    segments: list[tuple[bool, str]] = [(False, word)]  # (is a variable, text)
    for secret, var in (secret_vars or {}).items():
        split: list[tuple[bool, str]] = []
        for is_var, text in segments:
            if is_var:
                split.append((True, text))
                continue
            for j, piece in enumerate(text.split(secret)):
                if j:
                    split.append((True, var))
                split.append((False, piece))
        segments = split
    body = "".join("${" + text + "}" if is_var else _escape(text, dollar=True)
                   for is_var, text in segments)
    return f'"{body}"'


def exec_line(argv: list[str], secret_vars: Mapping[str, str] | None = None) -> str:
    return " ".join(exec_word(w, secret_vars) for w in argv)


def env_line(name: str, value: str) -> str:
    return f'Environment="{_escape(name, dollar=False)}={_escape(value, dollar=False)}"'


def _path_value(path: str) -> str:
    """A path setting (WorkingDirectory=, EnvironmentFile=): only specifiers are special."""
    return path.replace("%", "%%")


def env_file(secret_vars: Mapping[str, str]) -> str:
    """The EnvironmentFile= content: NAME='value' (double quotes if the value has a ')."""
    lines = ["# Written by specsweep: secret launch values, mode 0600. Do not edit."]
    for secret, var in sorted(secret_vars.items(), key=lambda kv: kv[1]):
        if "'" not in secret:
            lines.append(f"{var}='{secret}'")
        else:
            escaped = "".join("\\" + c if c in '"\\`$' else c for c in secret)
            lines.append(f'{var}="{escaped}"')
    return "\n".join(lines) + "\n"


def service_body(launch: "Launch", *, workdir: str, stop_grace_s: float,
                 env_file_path: str | None, dropin: bool) -> tuple[str, dict[str, str]]:
    """The [Service] lines and the secret variables they reference."""
    check_launch(launch)
    secret_vars = _secret_names(launch.secrets)
    lines = ["[Service]"]
    if dropin:
        lines.append("ExecStart=")  # clear the unit's own command first
    else:
        lines.append("Type=simple")
    lines += [
        f"WorkingDirectory={_path_value(workdir)}",
        *(env_line(k, v) for k, v in sorted(launch.env.items())),
    ]
    if secret_vars:
        assert env_file_path is not None
        lines.append(f"EnvironmentFile={_path_value(env_file_path)}")
    lines += [
        f"ExecStart={exec_line(launch.argv, secret_vars)}",
        # A crash must stay a crash: the launcher reports it with the log tail.
        "Restart=no",
        "KillMode=control-group",
        f"TimeoutStopSec={max(1, int(round(stop_grace_s)))}",
    ]
    return "\n".join(lines) + "\n", secret_vars


def render_unit(launch: "Launch", *, name: str, description: str, workdir: str,
                stop_grace_s: float, env_file_path: str | None,
                dropin: bool = False) -> tuple[str, dict[str, str]]:
    """The whole unit (or drop-in) file and its secret variables.

    The header carries the launch fingerprint, so "same file content" means
    "same server": the launcher compares contents to decide reuse.
    """
    body, secret_vars = service_body(launch, workdir=workdir, stop_grace_s=stop_grace_s,
                                     env_file_path=env_file_path, dropin=dropin)
    what = f"drop-in for {name}" if dropin else name
    head = [f"# Written by specsweep (launcher=ssh, mode=systemd): {what}.",
            f"# fingerprint={launch.fingerprint}; rewritten at every restart, edits are lost."]
    if not dropin:
        desc = "".join(c for c in description if ord(c) >= 32).replace("%", "%%")
        head += ["[Unit]", f"Description={desc}", "Wants=network-online.target",
                 "After=network-online.target", ""]
    return "\n".join(head) + "\n" + body, secret_vars
