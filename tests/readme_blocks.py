"""The command blocks of README.md and docs/*.md, and what the comment before each says about running it.

The convention (docs/contributing.md): every code block of README.md and of each
page under docs/ is a command block that tests/test_readme.py runs as written --
in order, from a fresh copy of the checkout's tracked files -- unless

* it is fenced with a language that is not a shell (```yaml, ```json, ```text):
  a snippet or a picture, not something to type;
* an HTML comment right before it (blank lines between are fine) says
  otherwise. One comment, directives separated by ``;``::

      <!-- readme-test: skip: needs a GPU box running SGLang -->
      <!-- readme-test: exit 2 -->
      <!-- readme-test: needs llamacpp; timeout 900 -->

  ``skip: <reason>``   not run; the reason (the rest of the comment, so last) is required
                       and shows in the test report (the skip list is kept small and reviewed);
  ``exit N``           each command must exit with N (default 0);
  ``needs llamacpp``   runs where llama.cpp is installed (python -m sweep.engines
                       llamacpp); skipped in development without it, a failure in CI;
  ``needs vllm``       runs where vLLM is installed (python -m sweep.engines vllm); skipped
                       in development without it, a failure in CI;
  ``needs slurm``      runs against the test SLURM cluster (tests/_support/slurm_cluster.py,
                       started or reused; SLURM_CONF set for the command); skipped without
                       SLURM installed, a failure in CI;
  ``timeout S``        seconds per command (default 600).

A block is a list of commands, one per line (a trailing ``\\`` joins lines;
``# ...`` comments are the shell's). A block whose lines start with ``$ `` is a
transcript: each ``$ `` line is a command and the lines after it, up to the next
one, must appear in its output (stdout and stderr, in order, spaces normalised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<body>.*?)\s*-->\s*$")
SHELLS = ("", "sh", "bash", "shell", "console")
NEEDS = ("llamacpp", "vllm", "slurm")
DEFAULT_TIMEOUT_S = 600.0


class MarkerError(ValueError):
    """A readme-test comment this convention does not know (said with its line number)."""


@dataclass
class Command:
    line: int                 # 1-based line in its page
    text: str                 # the command as typed (continuations joined)
    expected: list[str] = field(default_factory=list)  # transcripts: output lines to find


@dataclass
class Block:
    line: int                 # 1-based line of the block's first line
    section: str              # the heading it is under
    commands: list[Command]
    skip: str | None = None   # the reason, when not run
    exit: int = 0
    needs: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    page: str = "README.md"   # the file it is in (README.md, docs/search.md ...)

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")[:40]

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.slug}"

    @property
    def where(self) -> str:
        """``docs/search.md:12``: where a person finds the block."""
        return f"{self.page}:{self.line}"


def _directives(body: str, line: int, page: str = "README.md") -> dict[str, object]:
    out: dict[str, object] = {}
    body, skip, reason = body.partition("skip:")  # the reason is the rest of the comment
    if skip:
        if not reason.strip():
            raise MarkerError(f"{page}:{line}: 'skip:' needs a reason")
        out["skip"] = reason.strip()
    for part in (p.strip() for p in body.split(";") if p.strip()):
        word, _, rest = part.partition(" ")
        if word == "exit" and rest.strip().isdigit():
            out["exit"] = int(rest)
        elif word == "needs" and rest.strip() in NEEDS:
            out["needs"] = (*out.get("needs", ()), rest.strip())  # type: ignore[misc]
        elif word == "timeout" and re.fullmatch(r"\d+(\.\d+)?", rest.strip()):
            out["timeout_s"] = float(rest)
        else:
            raise MarkerError(f"{page}:{line}: unknown readme-test directive {part!r} "
                              f"(skip: <reason> | exit N | needs {'|'.join(NEEDS)} | timeout S)")
    return out


def _commands(lines: list[tuple[int, str]]) -> list[Command]:
    """Commands of a block; a transcript's expected output is attached to its command."""
    transcript = any(text.lstrip().startswith("$ ") for _, text in lines)
    out: list[Command] = []
    pending: tuple[int, str] | None = None
    for no, raw in lines:
        text = raw.rstrip()
        if transcript:
            if text.lstrip().startswith("$ "):
                out.append(Command(no, text.lstrip()[2:].strip()))
            elif text.strip() and out:
                out[-1].expected.append(text.strip())
            continue
        if not text.strip():
            continue
        if pending is not None:
            pending = (pending[0], pending[1] + " " + text.strip())
        else:
            pending = (no, text.strip())
        if pending[1].endswith("\\"):
            pending = (pending[0], pending[1][:-1].rstrip())
            continue
        out.append(Command(*pending))
        pending = None
    if pending is not None:
        out.append(Command(*pending))
    return out


def blocks(path: Path, page: str | None = None) -> list[Block]:
    """Every code block of a Markdown file, with its directives (MarkerError on a bad one);
    ``page``: how messages name the file (its name by default)."""
    page = page or path.name
    lines = path.read_text().splitlines()
    found: list[Block] = []
    section = "top"
    marker: tuple[int, dict[str, object]] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if m := MARKER.match(line.strip()):
            marker = (i + 1, _directives(m.group("body"), i + 1, page))
            i += 1
            continue
        fence = re.match(r"^```\s*(\w*)\s*$", line)
        indented = line.startswith("    ") and line.strip() and (
            i == 0 or not lines[i - 1].strip() or MARKER.match(lines[i - 1].strip()))
        if fence or indented:
            start = i
            body: list[tuple[int, str]] = []
            if fence:
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append((i + 1, lines[i]))
                    i += 1
                language = fence.group(1).lower()
            else:
                while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                    body.append((i + 1, lines[i][4:]))
                    i += 1
                i -= 1
                language = ""
            directives = marker[1] if marker is not None else {}
            if language in SHELLS:
                found.append(Block(line=start + 1, section=section, commands=_commands(body), page=page,
                                   **directives))  # type: ignore[arg-type]
            elif marker is not None:
                raise MarkerError(f"{page}:{marker[0]}: a readme-test comment before a "
                                  f"```{language} block, which is never run")
            marker = None
        elif line.strip() and marker is not None:
            raise MarkerError(f"{page}:{marker[0]}: a readme-test comment must come right before "
                              "a code block")
        i += 1
    return found


# (page:line, command, seconds, outcome) of every command tests/test_readme.py ran;
# printed at the end of the session by tests/conftest.py.
TIMES: list[tuple[str, str, float, str]] = []


def _order(where: str) -> tuple[str, int]:
    page, _, line = str(where).rpartition(":")
    return page, int(line) if line.isdigit() else 0


def times_table() -> list[str]:
    """The measured time of each command of the README and the docs pages, for the session's summary."""
    lines = [f"{'where':<26} {'seconds':>8}  {'outcome':<8} command"]
    for where, text, took, outcome in sorted(TIMES, key=lambda t: _order(str(t[0]))):
        lines.append(f"{where:<26} {took:>8.1f}  {outcome:<8} {text[:100]}")
    lines.append(f"{'':<26} {sum(t for _, _, t, _ in TIMES):>8.1f}  total")
    return lines
