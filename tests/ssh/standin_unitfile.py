"""Unit-file parsing for the systemd STAND-IN (tests only), per systemd's documented rules.

Written from systemd.syntax(7), systemd.service(5) and systemd.exec(5),
independently of the launcher's writer (launchers/_ssh_unit.py), so a test
comparing the two catches a quoting bug on either side. Stricter than
systemd where that helps: unsupported specifiers, unknown keys, ExecStart
prefixes and several commands per line are errors, not guesses.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", '"': '"', "'": "'", "s": " "}
KNOWN = {
    "Unit": {"Description", "Wants", "After", "Requires", "Documentation"},
    "Service": {"Type", "ExecStart", "Environment", "EnvironmentFile", "WorkingDirectory",
                "Restart", "KillMode", "TimeoutStopSec", "User", "Group"},
    "Install": {"WantedBy"},
}


class UnitError(Exception):
    pass


def _cunescape(s: str, i: int) -> tuple[str, int]:
    """Decode the C escape starting after the backslash at s[i-1]."""
    if i >= len(s):
        raise UnitError("trailing backslash")
    c = s[i]
    if c in ESCAPES:
        return ESCAPES[c], i + 1
    if c == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", s[i + 1:i + 3]):
        return chr(int(s[i + 1:i + 3], 16)), i + 3
    if c in "01234567" and re.fullmatch(r"[0-7]{3}", s[i:i + 3]):
        return chr(int(s[i:i + 3], 8)), i + 3
    if c == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 1:i + 5]):
        return chr(int(s[i + 1:i + 5], 16)), i + 5
    if c == "U" and re.fullmatch(r"[0-9a-fA-F]{8}", s[i + 1:i + 9]):
        return chr(int(s[i + 1:i + 9], 16)), i + 9
    raise UnitError(f"unknown escape \\{c}")


SEMICOLON = object()  # an unquoted lone ';' in ExecStart: a command separator


def split_words(value: str, *, exec_line: bool = False) -> list[Any]:
    """Words of a value. Quotes only at a word's start and closed before a blank.

    With ``exec_line``, an unquoted lone ``;`` yields SEMICOLON and a lone
    ``\\;`` a literal ``;`` (systemd.service(5)).
    """
    words: list[Any] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            return words
        if exec_line:
            for lone, word in ((";", SEMICOLON), ("\\;", ";")):
                j = i + len(lone)
                if value.startswith(lone, i) and (j >= n or value[j] in " \t"):
                    words.append(word)
                    i = j
                    break
            else:
                lone = ""
            if lone:
                continue
        quote = value[i] if value[i] in "\"'" else None
        i += 1 if quote else 0
        out = []
        while True:
            if i >= n:
                if quote:
                    raise UnitError(f"unbalanced quoting in {value!r}")
                break
            c = value[i]
            if quote and c == quote:
                i += 1
                if i < n and value[i] not in " \t":
                    raise UnitError(f"closing quote not followed by whitespace in {value!r}")
                break
            if not quote and c in " \t":
                break
            if not quote and c in "\"'":
                raise UnitError(f"quote inside an unquoted word in {value!r}")
            if c == "\\":
                ch, i = _cunescape(value, i + 1)
                out.append(ch)
                continue
            out.append(c)
            i += 1
        words.append("".join(out))


def specifiers(text: str) -> str:
    """Resolve ``%%``; any other specifier is an error (the launcher never writes one)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) != "%":
            raise UnitError(f"unsupported or lone specifier %{m.group(1)} in {text!r}")
        return "%"
    return re.sub(r"%(.|$)", sub, text, flags=re.S)


def parse_exec(value: str) -> list[str]:
    raw = value.strip()
    if raw[:1] in "-@:+!":
        raise UnitError(f"ExecStart prefix {raw[0]!r} not supported by the stand-in")
    words: list[str] = []
    for token in split_words(raw, exec_line=True):
        if token is SEMICOLON:
            raise UnitError("several commands in one ExecStart= are not supported by the stand-in")
        words.append(specifiers(token))
    if not words:
        raise UnitError("empty ExecStart")
    exe = words[0]
    if any(c in exe for c in "\"'\\") or not (exe.startswith("/") or "/" not in exe):
        raise UnitError(f"invalid executable {exe!r}")
    return words


def expand_env(words: list[str], env: dict[str, str]) -> list[str]:
    """systemd's exec-time expansion: $$ -> $, ${NAME} -> value, a lone $NAME word -> split."""
    out: list[str] = []
    for w in words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
        if m:
            out += env.get(m.group(1), "").split()
            continue
        def sub(mm: re.Match[str]) -> str:
            if mm.group(0) == "$$":
                return "$"
            return env.get(mm.group(1), "")
        out.append(re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, w))
    return out


def parse_env_file(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        name, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            raise UnitError(f"bad EnvironmentFile line {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r'\\(["\\`$])', r"\1", value[1:-1])
        env[name.strip()] = value
    return env


def read_unit_file(path: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) triples; strict about keys the stand-in knows."""
    out, section = [], None
    lines = path.read_text().split("\n")
    joined: list[str] = []
    buf = ""
    for line in lines:
        if line.endswith("\\") and not line.strip().startswith(("#", ";")):
            buf += line[:-1] + " "
            continue
        joined.append(buf + line)
        buf = ""
    for line in joined:
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        key, sep, value = s.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or section is None:
            raise UnitError(f"{path}: bad line {line!r}")
        if key not in KNOWN.get(section, set()):
            raise UnitError(f"{path}: unknown key {section}.{key}")
        out.append((section, key, value))
    return out


def load_unit(unit: str, unit_dirs: list[str]) -> dict[str, Any]:
    """Parse the unit and its drop-ins into {argv, env, workdir, files}."""
    files: list[Path] = []
    for d in unit_dirs:
        if (Path(d) / unit).is_file():
            files.append(Path(d) / unit)
            break
    if not files:
        raise UnitError(f"Unit {unit} not found.")
    for d in unit_dirs:
        files += sorted((Path(d) / f"{unit}.d").glob("*.conf"))
    execs: list[list[str]] = []
    env: dict[str, str] = {}
    env_files: list[str] = []
    workdir = "/"
    stop_s = 90.0
    for f in files:
        for section, key, value in read_unit_file(f):
            if key == "ExecStart":
                execs = [] if not value else execs + [parse_exec(value)]
            elif key == "Environment":
                for word in split_words(value):
                    name, sep, val = specifiers(word).partition("=")
                    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                        raise UnitError(f"bad Environment= assignment {word!r}")
                    env[name] = val
            elif key == "EnvironmentFile":
                env_files.append(specifiers(value))
            elif key == "WorkingDirectory":
                workdir = specifiers(value)
            elif key == "TimeoutStopSec":
                stop_s = float(value)
    if len(execs) != 1:
        raise UnitError(f"{unit}: needs exactly one ExecStart (got {len(execs)})")
    return {"argv_raw": execs[0], "env": env, "env_files": env_files, "workdir": workdir,
            "stop_s": stop_s, "files": {str(f): f.read_text() for f in files}}
