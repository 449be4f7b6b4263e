"""Every flag our YAML renders for server=llamacpp is accepted by llama.cpp's own parser.

The built ``llama-server`` parses its whole command line before it looks at
``--help`` (common/arg.cpp: every handler runs, so a value it cannot take
fails too) and only then prints its usage and exits 0; an unknown flag or a
bad value exits 1 with ``error: invalid argument`` / ``error while handling
argument``. So rendering a trial's launch and running it with ``--help``
appended asks the real parser, loads no model and starts no server. The
rendered flags must also appear in the binary's own usage text.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import llamacpp_env  # noqa: E402

pytestmark = pytest.mark.contract

SPECS = sorted(p.stem for p in (ROOT / "conf" / "spec").glob("*.yaml")
               if p.stem.startswith("llamacpp_") or "llamacpp" in (yaml.safe_load(p.read_text()).get("render") or {}))
# Values that render extra flags (each spec's optional knobs, set once).
KNOBS = {
    "llamacpp_draft": ["spec.draft_n_min=1", "spec.draft_p_min=0.5", "spec.budget=3"],
    "llamacpp_synth": ["spec.synth_len=null", "spec.synth_rates=[0.9,0.6,0.3,0.1]"],
    "llamacpp_ngram": ["spec.ngram_n_match=8"],
    "ngram": ["spec.budget=6", "spec.ngram_n_max=8", "spec.draft_n_min=2", "spec.ngram_type=ngram-simple"],
    "draft": ["spec.budget=2", "spec.draft_n_min=1", "spec.draft_p_min=0.5"],
    "none": ["server.threads=2", "server.api_key=k"],
}


def rendered(spec: str, *extra: str):
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    return render(from_omegaconf(compose(["server=llamacpp", f"spec={spec}", *extra])))


def run(exe: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)


@lru_cache(maxsize=1)
def usage_flags(exe: str) -> frozenset[str]:
    proc = run(Path(exe), ["--help"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", proc.stdout + proc.stderr))


def test_every_spec_of_ours_is_covered():
    assert set(SPECS) == {"llamacpp_draft", "llamacpp_synth", "llamacpp_ngram", "ngram", "draft", "none"}
    assert set(KNOBS) == set(SPECS)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("knobs", [False, True], ids=["defaults", "knobs"])
def test_rendered_launch_passes_llama_server_parser(spec: str, knobs: bool):
    exe = llamacpp_env.require()["server"]
    launch = rendered(spec, *(KNOBS[spec] if knobs else []))
    assert launch.argv[0] == str(exe)
    flags = [a for a in launch.args if a.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", a)]
    unknown = sorted(set(flags) - usage_flags(str(exe)))
    assert not unknown, f"not in llama-server --help: {unknown}"
    proc = run(exe, [*launch.args, "--help"])
    assert proc.returncode == 0, f"llama-server rejected {launch.args}:\n{proc.stderr[-1500:]}"


def test_the_parser_really_rejects():
    """The check above can fail: llama.cpp's parser refuses unknown, removed and bad values."""
    exe = llamacpp_env.require()["server"]
    for args, needle in (
        (["--no-such-flag"], "invalid argument: --no-such-flag"),
        (["--draft-max", "4"], "the argument has been removed"),
        (["--spec-type", "no-such-type"], "--spec-type"),
        (["--spec-draft-n-max", "-1"], "error while handling argument"),
    ):
        proc = run(exe, [*args, "--help"])
        assert proc.returncode != 0, args
        assert needle in proc.stderr + proc.stdout, (args, proc.stderr[-500:])
