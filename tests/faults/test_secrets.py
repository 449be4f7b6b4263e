"""Secrets set every way a user can set them never reach a file, a log, MLflow or the terminal.

Real runs of ``python -m sweep`` on the simulator (MLflow on a sqlite store in
the run's directory): a token from the environment through
``${oc.env:HF_TOKEN}``, an API key from ``SPECSWEEP_API_KEY`` (the shipped
``server.api_key``), an API key typed on the command line (single run and a
``-m`` multirun, also in ``server.extra_args`` as ``--api-key=...``), a
``WANDB_API_KEY`` given as extra env, the SSH password in the environment,
and a key only in ``server.extra_args`` (dry run). Afterwards every file
under the run directory (result.json, server.log, ``.hydra/``, multirun.yaml,
mlflow_parent.json, ``mlflow.db``'s bytes, MLflow's artifacts, the launcher's
state files) and the captured stdout and stderr are searched for the canary
values: none may be found. The trials still work: the simulator enforces its
API key on every request, so an ``ok`` trial with its requests answered is
one whose server really got the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _support import free_port

pytestmark = pytest.mark.slow

CANARIES = {
    "HF_TOKEN": "hf_canaryTOKENfromENV7Q2",
    "SPECSWEEP_SSH_PASSWORD": "pw-canary-ssh-5Zq",
    "SPECSWEEP_API_KEY": "sk-canary-envkey-9Xw",
    "cli_api_key": "sk-canary-clikey-4Wm",
    "WANDB_API_KEY": "wandb-canary-3Vr",
    "extra_args_key": "sk-canary-extraarg-8Up",
}
FAST = ["workload=smoke", "server.sim.load_seconds=0.2"]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(cwd / "state"), "COLUMNS": "200",
           **{k: v for k, v in CANARIES.items() if k.isupper() and k != "WANDB_API_KEY"}}
    env.pop("MLFLOW_TRACKING_URI", None)
    tracking = f"mlflow.tracking_uri=sqlite:///{cwd / 'mlflow.db'}"
    return subprocess.run([sys.executable, "-m", "sweep", *args, tracking], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def hits(root: Path, *texts: str) -> list[str]:
    """Every file under ``root`` and every text that holds a canary: 'where: which'."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {name}" for name, value in CANARIES.items()
                      if value.encode() in data]
    for i, text in enumerate(texts):
        found += [f"output {i}: {name}" for name, value in CANARIES.items() if value in text]
    return found


def results(root: Path) -> list[dict]:
    """The trials' own result files (MLflow keeps a copy of each as an artifact under mlruns/)."""
    paths = [p for top in ("outputs", "multirun") for p in (root / top).rglob("result.json")]
    return sorted((json.loads(p.read_text()) for p in paths),
                  key=lambda d: (d["trial"]["sweep_dir"] or "", d["trial"]["job_num"]))


def test_no_canary_anywhere_and_the_trials_still_authenticate(tmp_path: Path) -> None:
    key = CANARIES["cli_api_key"]
    single = run(tmp_path, *FAST, f"server.port={free_port()}", "+server.extra_env.HF_TOKEN=${oc.env:HF_TOKEN}",
                 f"+server.extra_env.WANDB_API_KEY={CANARIES['WANDB_API_KEY']}")
    multi = run(tmp_path, "-m", *FAST, f"server.port={free_port()}", "workload.max_tokens=16,24",
                f"server.api_key={key}", f"server.extra_args=['--api-key={key}']",
                "+server.extra_env.HF_TOKEN=${oc.env:HF_TOKEN}")
    dry = run(tmp_path, "dry_run=true", "server.api_key=null",
              f"server.extra_args=[--api-key,{CANARIES['extra_args_key']}]")
    outputs = [p.stdout + p.stderr for p in (single, multi, dry)]
    for proc in (single, multi, dry):
        assert proc.returncode == 0, proc.stderr[-3000:]

    assert hits(tmp_path, *outputs) == []

    # The trials worked: every request authenticated against a server that enforces its key.
    docs = results(tmp_path)
    assert [d["status"] for d in docs] == ["ok", "ok", "ok"], [d["failure"] for d in docs]
    for d in docs:
        assert d["coding"]["passed"] == d["coding"]["total"] == 5
        assert d["cells"][0]["errors"] == 0 and d["cells"][0]["output_tok_s"] > 0
        assert d["server"]["info"].get("api_key") == "***"  # the server has a key (it shows it masked)
        assert d["mlflow"]["run_id"]
    assert [d["server"]["reused"] for d in docs[1:]] == [False, True]

    # Masked, not dropped: the records still say where each secret went.
    single_doc, multi_doc = docs[0], docs[1]
    assert single_doc["config"]["server"]["extra_env"] == {"HF_TOKEN": "***", "WANDB_API_KEY": "***"}
    assert "HF_TOKEN=***" in single_doc["command"] and "WANDB_API_KEY=***" in single_doc["command"]
    assert "server.api_key=***" in multi_doc["trial"]["overrides"]
    assert multi_doc["config"]["server"]["api_key"] == "***"
    job = Path(multi_doc["trial"]["job_dir"])
    overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())
    assert "server.api_key=***" in overrides  # the reference to the env stays (escaped by Hydra's sweeper)
    assert "+server.extra_env.HF_TOKEN=$\\{oc.env\\:HF_TOKEN\\}" in overrides
    assert yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["server"]["api_key"] == "***"
    assert (Path(single_doc["trial"]["job_dir"]) / "server.log").stat().st_size > 0
    assert "--api-key ***" in dry.stdout.splitlines()[-1]


SEARCH_CANARIES = {
    "api_key": "sk-canary-search-key-6Hs",
    "ssh_pass": "canary-sshpass-2Lq",
    "url_password": "canary-urlpw-8Tn",
}


def search_hits(root: Path, *texts: str) -> list[str]:
    found = [f"{p.relative_to(root)}: {name}" for p in sorted(root.rglob("*")) if p.is_file()
             for name, value in SEARCH_CANARIES.items() if value.encode() in p.read_bytes()]
    return found + [f"output {i}: {name}" for i, text in enumerate(texts)
                    for name, value in SEARCH_CANARIES.items() if value in text]


def test_a_search_and_a_host_pool_keep_every_secret_out(tmp_path: Path) -> None:
    """Issue 24, class 6: best.yaml, the printed rerun line, the pool workers' .hydra/ files, a key added
    with + whose name says it is a secret, a password inside a URL -- in every file, output and MLflow."""
    secret_args = [f"server.api_key={SEARCH_CANARIES['api_key']}",
                   f"+server.extra_env.SSH_PASS={SEARCH_CANARIES['ssh_pass']}",
                   f"+server.extra_env.MODEL_SOURCE=https://user:{SEARCH_CANARIES['url_password']}@hf.example.com/m"]
    space = ["hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=choice(4,8)",
             "spec.topk=1", "spec.window=1024", "hydra.sweeper.n_trials=2", "hydra.sweeper.plots.enabled=false"]
    for sub in ("search", "pool"):
        (tmp_path / sub).mkdir()
    search = run(tmp_path / "search", "-m", *FAST, f"server.port={free_port()}", *space, *secret_args,
                 f"hydra.sweep.dir={tmp_path / 'search' / 'sweep'}")
    pool = run(tmp_path / "pool", "-m", *FAST, *space, *secret_args, f"hydra.sweep.dir={tmp_path / 'pool' / 'sweep'}",
               f"launcher.hosts=[{{server_port: {free_port()}}},{{server_port: {free_port()}}}]")
    for proc in (search, pool):
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert search_hits(tmp_path, *(p.stdout + p.stderr for p in (search, pool))) == []
    best = (tmp_path / "search" / "sweep" / "best.yaml").read_text()
    assert "api_key: ???" in best and "give server.api_key=..., server.extra_env.SSH_PASS=... again" in best
    assert "https://user:***@hf.example.com/m" in best
    assert "# and server.api_key=... server.extra_env.SSH_PASS=..." in search.stdout
    workers = list((tmp_path / "pool" / "sweep").glob("[0-9]*/.hydra/overrides.yaml"))
    assert len(workers) == 2 and all("server.api_key=***" in w.read_text() for w in workers)
