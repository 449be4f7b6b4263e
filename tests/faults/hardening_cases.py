"""The cases of issue 24, one list per class of miss (not a test module).

Shared by ``tests/faults/test_hardening.py`` and ``benchmarks/fault_matrix.py``
(a row per class). An :class:`InputCase` is a command line that must be
refused before anything starts -- exit 2, one line ``error: <key>...``, no
traceback, nothing written, no server -- given the files its ``setup`` makes
in a work dir (a user's config dir, a FIFO, a damaged study file). The
classes:

1. the up-front check checks what runs (``--config-dir/-cd``, ``--config-path``, ``--config-name``);
2. search-space expressions, storage URLs, run dirs, the sweeper's settings;
3. path keys (special files, empty or wrong files, traversal);
5. storage faults on resume (a cut-short SQLite study, a half-written journal line, an emptied file);
7. config files as input (a YAML alias bomb);
8. (issue 32) values whose checks were skipped: an SLO limit of 0 or inf, a max-load search over rate
   that would run for hours, numbers with a leading zero, an objective cell never measured, a bad
   per-host override, a constraint that would fill memory, the engines' install keys;
9. (issue 32) SLURM options launcher=slurm relies on, and launcher=slurm where it cannot apply.

Classes 4 (what the server reports), 5's runtime faults and 6 (secrets)
need real runs: ``STAND_IN_USAGE`` lists the stand-in server's modes and the
field each must name.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from _support import free_port, subprocess_env

BOMB = "defaults:\n  - config\n  - _self_\na: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
OPTUNA = ["-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2"]


@dataclass(frozen=True)
class InputCase:
    cls: int
    label: str
    args: tuple[str, ...]
    key: str                                   # the line must start with "error: <key>"
    setup: Callable[[Path], None] | None = None
    max_s: float = 30.0                        # refused within this many seconds

    def argv(self, work: Path, *first: str) -> list[str]:
        """The command line, ``{work}`` filled in, ``first`` overrides before the case's own."""
        args = [a.replace("{work}", str(work)) for a in self.args]
        flags, rest, i = [], [], 0
        while i < len(args):  # flags (and the value of -cd/-cn/-cp) first, as argparse wants them
            if args[i] in ("-cd", "-cn", "-cp", "--config-dir", "--config-name", "--config-path"):
                flags += args[i:i + 2]
                i += 2
                continue
            (flags if args[i].startswith("-") and "=" not in args[i] else rest).append(args[i])
            i += 1
        return [*flags, *first, *rest]


def _user_config(budget: int) -> Callable[[Path], None]:
    def make(work: Path) -> None:
        (work / "conf").mkdir(parents=True, exist_ok=True)
        (work / "conf" / "mine.yaml").write_text(f"defaults:\n  - config\n  - _self_\nspec:\n  budget: {budget}\n")
    return make


def _bomb(work: Path) -> None:
    (work / "conf").mkdir(parents=True, exist_ok=True)
    (work / "conf" / "bomb.yaml").write_text(BOMB)


def _conf(name: str, body: str) -> Callable[[Path], None]:
    """A user's primary config ``conf/<name>.yaml``: the shipped config, then ``body``."""
    def make(work: Path) -> None:
        (work / "conf").mkdir(parents=True, exist_ok=True)
        (work / "conf" / f"{name}.yaml").write_text("defaults:\n  - config\n  - _self_\n" + body)
    return make


def _fifo(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    os.mkfifo(work / "prompts.jsonl")


def _files(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "empty.jsonl").write_text("")
    (work / "notjson.jsonl").write_text("hello\nworld\n")
    (work / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    (work / "cal.yaml").write_text("schema: 1\nconstants: {box_bw_eff: .nan}\n")


def make_study(path: Path) -> None:
    """A real Optuna study in an SQLite file, as a finished search leaves it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{path}", direction="maximize")
    for i in range(3):
        study.enqueue_trial({"spec.budget": 4 * (i + 1)})
        t = study.ask({"spec.budget": optuna.distributions.IntDistribution(1, 64)})
        study.tell(t, float(i))


def _cut_sqlite(work: Path) -> None:
    (work / "sweep").mkdir(parents=True, exist_ok=True)
    db = work / "sweep" / "optuna.db"
    make_study(db)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def _garbled_sqlite(work: Path) -> None:
    (work / "sweep").mkdir(parents=True, exist_ok=True)
    db = work / "sweep" / "optuna.db"
    make_study(db)
    con = sqlite3.connect(db)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    data[page * 2: page * 3] = b"\xff" * page  # a B-tree page overwritten: same size, damaged
    db.write_bytes(bytes(data))


def _empty_sqlite(work: Path) -> None:
    (work / "sweep").mkdir(parents=True, exist_ok=True)
    (work / "sweep" / "optuna.db").write_bytes(b"")


def _cut_journal(work: Path) -> None:
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    work.mkdir(parents=True, exist_ok=True)
    path = work / "study.journal"
    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="s", storage=storage)
    study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=2)
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # the last entry half-written


INPUT: list[InputCase] = [
    # 1. what runs is what is checked
    InputCase(1, "a user's primary config (--config-dir) with spec.budget: 0",
              ("--config-dir", "{work}/conf", "--config-name", "mine"), "spec.budget", _user_config(0)),
    InputCase(1, "the same through -cp/-cn (its defaults name the shipped config: not found)",
              ("-cp", "{work}/conf", "-cn", "mine"), "defaults", _user_config(8)),
    InputCase(1, "a primary config that does not exist (-cn)", ("-cn", "nothere"), "--config-name"),
    InputCase(1, "a --config-dir that does not exist", ("-cd", "{work}/nothere", "-cn", "x"), "--config-dir"),
    # 2. expressions, storage, dirs, sweeper settings
    InputCase(2, "reversed range", (*OPTUNA, "spec.budget=range(16,4)"), "spec.budget"),
    InputCase(2, "zero-step range", (*OPTUNA, "spec.budget=range(4,16,step=0)"), "spec.budget"),
    InputCase(2, "empty choice", (*OPTUNA, "spec.budget=choice()"), "spec.budget"),
    InputCase(2, "reversed int interval", (*OPTUNA, "spec.budget=int(interval(16,4))"), "spec.budget"),
    InputCase(2, "log scale from 0", (*OPTUNA, "spec.budget=tag(log,interval(0,16))"), "spec.budget"),
    InputCase(2, "an unknown key in params", (*OPTUNA, "hydra.sweeper.params={spec.bogus: 'choice(1,2)'}"),
              "spec.bogus"),
    InputCase(2, "an unknown key as a sweep", (*OPTUNA, "spec.bogus=choice(1,2)"), "spec.bogus"),
    InputCase(2, "a malformed storage URL", (*OPTUNA, "hydra.sweeper.storage=notaurl"), "hydra.sweeper.storage"),
    InputCase(2, "a storage file where nothing can be written",
              (*OPTUNA, "hydra.sweeper.storage=sqlite:////proc/x/optuna.db"), "hydra.sweeper.storage"),
    InputCase(2, "an unreachable PostgreSQL (refused within seconds)",
              (*OPTUNA, "hydra.sweeper.storage='postgresql+psycopg://u:pw@127.0.0.1:1/db'"),
              "hydra.sweeper.storage", max_s=20.0),
    InputCase(2, "direction=sideways", (*OPTUNA, "hydra.sweeper.direction=sideways"), "hydra.sweeper.direction"),
    InputCase(2, "n_trials=0", ("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=0"), "hydra.sweeper.n_trials"),
    InputCase(2, "n_trials=-1", ("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=-1"),
              "hydra.sweeper.n_trials"),
    InputCase(2, "a run dir that cannot be created", ("hydra.run.dir=/proc/specsweep/x",), "hydra.run.dir"),
    InputCase(2, "a sweep dir under a file", ("-m", "hydra.sweep.dir=/etc/hostname/x"), "hydra.sweep.dir"),
    # 3. paths
    InputCase(3, "dataset_path=/dev/zero", ("workload.prompt_source=dataset", "workload.dataset_path=/dev/zero"),
              "workload.dataset_path"),
    InputCase(3, "dataset_path a FIFO", ("workload.prompt_source=dataset", "workload.dataset_path={work}/prompts.jsonl"),
              "workload.dataset_path", _fifo),
    InputCase(3, "an empty dataset", ("workload.prompt_source=dataset", "workload.dataset_path={work}/empty.jsonl"),
              "workload.dataset_path", _files),
    InputCase(3, "a non-JSON dataset", ("workload.prompt_source=dataset",
                                        "workload.dataset_path={work}/notjson.jsonl"), "workload.dataset_path", _files),
    InputCase(3, "a missing tokenizer", ("server.sim.tokenizer={work}/missing.json",), "server.sim.tokenizer"),
    InputCase(3, "a tokenizer.json that is none", ("server.sim.tokenizer={work}/tokenizer.json",),
              "server.sim.tokenizer", _files),
    InputCase(3, "a missing calibration", ("+hardware.perf.calibration={work}/missing.yaml",),
              "hardware.perf.calibration"),
    InputCase(3, "a calibration with NaN in it", ("+hardware.perf.calibration={work}/cal.yaml",),
              "hardware.perf.calibration", _files),
    InputCase(3, "hydra.sweep.subdir=../../x", ("-m", "hydra.sweep.subdir=../../x"), "hydra.sweep.subdir"),
    InputCase(3, "hydra.output_subdir=../x", ("hydra.output_subdir=../x",), "hydra.output_subdir"),
    # 5. storage on resume
    InputCase(5, "an SQLite study cut short, resumed", (*OPTUNA, "hydra.sweep.dir={work}/sweep"), "{work}/sweep/optuna.db",
              _cut_sqlite),
    InputCase(5, "an SQLite study with a damaged page, resumed", (*OPTUNA, "hydra.sweep.dir={work}/sweep"),
              "{work}/sweep/optuna.db", _garbled_sqlite),
    InputCase(5, "an emptied SQLite study, resumed", (*OPTUNA, "hydra.sweep.dir={work}/sweep"),
              "{work}/sweep/optuna.db", _empty_sqlite),
    InputCase(5, "a journal whose last entry is half-written",
              (*OPTUNA, "hydra.sweeper.storage=journal:{work}/study.journal"), "{work}/study.journal", _cut_journal),
    # 7. config files as input
    InputCase(7, "a YAML alias bomb in a user's config", ("-cd", "{work}/conf", "-cn", "bomb"), "{work}/conf/bomb.yaml",
              _bomb, max_s=15.0),
    InputCase(7, "a Python tag in a user's config", ("-cd", "{work}/conf", "-cn", "tag"), "{work}/conf/tag.yaml",
              _conf("tag", "spec:\n  budget: !!python/object/apply:os.system [id]\n")),
    InputCase(7, "a key given twice in a user's config", ("-cd", "{work}/conf", "-cn", "twice"),
              "{work}/conf/twice.yaml", _conf("twice", "spec:\n  budget: 8\nspec:\n  budget: 16\n")),
    InputCase(7, "a user's config nested 5,000 deep", ("-cd", "{work}/conf", "-cn", "deep"), "{work}/conf/deep.yaml",
              _conf("deep", "x: " + "[" * 5000 + "]" * 5000 + "\n")),
]

def _zero_yaml(work: Path) -> None:
    _conf("zero", "workload:\n  max_tokens: 017\n")(work)


def _setup_token(work: Path) -> None:
    _conf("tok", "launcher:\n  setup: [\"export HF_TOKEN=hf_specsweep_config_file_canary\"]\n")(work)


SEARCH = ["-m", "hydra/sweeper=optuna", "spec.budget=choice(4,8)"]
SLURM = [*SEARCH, "launcher=slurm"]

# Issue 32: 8. values whose checks were skipped; 9. SLURM options and where launcher=slurm applies.
INPUT += [
    InputCase(8, "objective.slo.tpot_ms=0 (no request meets it)", ("objective.slo.tpot_ms=0",), "objective.slo.tpot_ms"),
    InputCase(8, "an SLO limit of inf", ("objective.slo.ttft_ms=inf",), "objective.slo.ttft_ms"),
    InputCase(8, "an SLO limit of 1e400", ("objective.slo.e2e_ms=1e400",), "objective.slo.e2e_ms"),
    InputCase(8, "a max-load search over rate from 0.001 req/s (hours)",
              ("workload=max_load", "workload.max_load.over=rate", "workload.max_load.start=0.001",
               "objective.slo.tpot_ms=50"), "workload.max_load.start"),
    InputCase(8, "workload.max_tokens=017 (17 here, 15 in YAML)", ("workload.max_tokens=017",), "workload.max_tokens"),
    InputCase(8, "max_tokens: 017 in a user's config file", ("-cd", "{work}/conf", "-cn", "zero"),
              "{work}/conf/zero.yaml", _zero_yaml),
    InputCase(8, "objective.metric=cell at a context the matrix never measures",
              ("objective.metric=cell", "objective.context=999"), "objective.context"),
    InputCase(8, "objective.metric=cell at a concurrency the matrix never measures",
              ("objective.metric=cell", "objective.context=60", "objective.concurrency=3"), "objective.concurrency"),
    InputCase(8, "an objective.context the matrix never measures (any metric)", ("objective.context=999",),
              "objective.context"),
    InputCase(8, "a bad per-host override of launcher.hosts (before any worker starts)",
              (*SEARCH, "launcher.hosts=[{server_port:31701},{server_port:31702,overrides:['spec.topk=0']}]"),
              "launcher.hosts[1]"),
    InputCase(8, "a constraint that would fill memory ('x' * 10^11)",
              ("spec.constraints=[\"'x' * 100000000000 == 'y'\"]",), "spec.constraints[0]"),
    InputCase(8, "an engine install key out of range", ("server=llamacpp", "server.install.jobs=0"),
              "server.install.jobs"),
    InputCase(9, "sbatch_extra --array", (*SLURM, "launcher.sbatch_extra=['--array=1-4']"), "launcher.sbatch_extra[0]"),
    InputCase(9, "sbatch_extra --signal", (*SLURM, "launcher.sbatch_extra=['--signal=USR1@60']"),
              "launcher.sbatch_extra[0]"),
    InputCase(9, "sbatch_extra --requeue", (*SLURM, "launcher.sbatch_extra=['--requeue']"), "launcher.sbatch_extra[0]"),
    InputCase(9, "sbatch_extra --export=NONE", (*SLURM, "launcher.sbatch_extra=['--export=NONE']"),
              "launcher.sbatch_extra[0]"),
    InputCase(9, "sbatch_extra --arr (an abbreviation of --array)", (*SLURM, "launcher.sbatch_extra=['--arr=1-3']"),
              "launcher.sbatch_extra[0]"),
    InputCase(9, "sbatch_extra --time (a typed key's option)", (*SLURM, "launcher.sbatch_extra=['--time=5']"),
              "launcher.sbatch_extra[0]"),
    InputCase(9, "launcher=slurm on a single run", ("launcher=slurm",), "launcher"),
    InputCase(9, "launcher=slurm on a plain grid", ("-m", "launcher=slurm", "spec.budget=4,8"), "launcher"),
    InputCase(9, "a launcher.setup line with a token, from a config file", ("-cd", "{work}/conf", "-cn", "tok", *SLURM),
              "launcher.setup[0]", _setup_token),
]

try:  # the client parses with orjson when it is there: it refuses 1e400 as JSON (json.loads makes it inf)
    import orjson  # noqa: F401

    _INF = "bad_sse: malformed event"
except ImportError:
    _INF = "usage.completion_tokens: inf is not a whole count"

# Class 4: the stand-in server's usage modes and the field each failed trial must name.
STAND_IN_USAGE = {
    "usage_negative": "usage.completion_tokens: -4 is negative",
    "usage_absurd": "usage.completion_tokens: 1e+30 is beyond any real count",  # orjson: a float past u64
    "usage_inf": _INF,
    "usage_string": "usage.completion_tokens: '4' is not a number",
    "running_down": "usage.completion_tokens (running): went down from 3 to 1",
    # issue 32: the server's counts cross-checked against what the stream showed, and against each other
    "usage_fewer": "usage_mismatch: 3 tokens, although 64 events carried text",
    "usage_twice": "usage_mismatch: 2 usage blocks disagree (4 then 3 tokens)",
    "running_short": "usage_mismatch: the final count 9 is not the last running count 4",
    "metrics_negative": "/metrics: accept_len: -2.5 is out of range",
}


@dataclass
class Outcome:
    case: InputCase
    code: int | None
    lines: list[str]
    seconds: float
    wrote: list[str] = field(default_factory=list)
    traceback: bool = False

    @property
    def clean(self) -> bool:
        key = self.case.key
        return (self.code == 2 and len(self.lines) == 1 and self.lines[0].startswith(f"error: {key}")
                and not self.traceback and not self.wrote and self.seconds <= self.case.max_s)

    @property
    def problem(self) -> str:
        if self.clean:
            return ""
        return (f"exit {self.code}, {len(self.lines)} lines ({(self.lines or ['-'])[0][:90]}), "
                f"{self.seconds:.1f} s" + (f", wrote {self.wrote}" if self.wrote else ""))


def run_cli(case: InputCase, work: Path) -> Outcome:
    """``python -m sweep`` for one case in ``work/run`` (its files made in ``work``)."""
    work.mkdir(parents=True, exist_ok=True)
    if case.setup is not None:
        case.setup(work)
    cwd = work / "run"
    cwd.mkdir(exist_ok=True)
    argv = case.argv(work, f"server.port={free_port()}")
    key = case.key.replace("{work}", str(work))
    resolved = InputCase(case.cls, case.label, case.args, key, case.setup, case.max_s)
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "sweep", *argv], cwd=cwd, env=subprocess_env(COLUMNS="300"),
                              capture_output=True, text=True, timeout=case.max_s + 60)
    except subprocess.TimeoutExpired:
        return Outcome(resolved, None, ["(still running: accepted?)"], time.monotonic() - t0)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return Outcome(resolved, proc.returncode, lines, time.monotonic() - t0,
                   wrote=sorted(p.name for p in cwd.iterdir()), traceback="Traceback" in proc.stderr)
