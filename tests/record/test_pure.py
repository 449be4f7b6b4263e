"""Cost formulas, parameter flattening, secret masking, tracking-URI resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.record import tracking
from sweep.record._params import flatten_params
from sweep.record.tracking import resolve_tracking_uri
from sweep.score import cost
from sweep.secrets import Redactor, collect_secrets, mask_tree


def test_cell_cost_is_hourly_price_over_tokens_per_hour() -> None:
    # 3.6M tokens/hour at 1000 tok/s; $36/h -> $10 per million.
    assert cost.cell_usd_per_mtok(36.0, 1000.0) == pytest.approx(10.0)
    assert cost.cell_usd_per_mtok(None, 1000.0) is None
    assert cost.cell_usd_per_mtok(36.0, 0.0) is None


def test_trial_cost_amortises_startup() -> None:
    # 150 s startup + 50 s measured = 200 s of a $36/h box = $2; 1M tokens -> $2/Mtok.
    assert cost.trial_usd_per_mtok(36.0, 1_000_000, 50.0, 150.0) == pytest.approx(2.0)
    assert cost.trial_usd_per_mtok(36.0, 1_000_000, 50.0, 0.0) == pytest.approx(0.5)
    assert cost.trial_usd_per_mtok(None, 1_000_000, 50.0, 150.0) is None
    assert cost.trial_usd_per_mtok(36.0, 0, 50.0, 150.0) is None
    assert cost.usd_per_mtok(36.0, 1000.0, startup_s=150.0, measured_s=50.0) == pytest.approx(2.0 / 0.05)


def test_params_are_dotted_readable_and_short() -> None:
    config = {"hardware": {"name": "b300", "perf": {"nvlink": True}},
              "spec": {"budget": 8, "render": {"sglang": {"args": {"--x": 1}}}},
              "server": {"args": {"--port": 1}, "sim_args": {"--sim-seed": 0}, "extra_args": ["--a", "b"],
                         "api_key": "sk-abcdefgh", "secret_flags": ["--api-key"], "long": "x" * 7000},
              "model": {"arch": {"experts_per_token": 8}}}
    params = flatten_params(config)
    assert params["hardware.name"] == "b300"
    assert params["hardware.perf.nvlink"] == "True"
    assert params["spec.budget"] == "8"
    assert params["server.extra_args"] == '["--a", "b"]'
    assert params["server.api_key"] == "***"
    assert params["server.secret_flags"] == '["--api-key"]'
    assert params["model.arch.experts_per_token"] == "8"
    assert len(params["server.long"]) == 6000
    assert not any(k.startswith(("spec.render", "server.args", "server.sim_args")) for k in params)


def test_secrets_come_from_config_keys_and_environment() -> None:
    tree = {"server": {"api_key": "sk-from-config", "max_tokens": "1024"},
            "hf": {"hf_token": "hf_abcdef"}, "a": {"password": "no"}}
    found = collect_secrets(tree, environ={"SPECSWEEP_API_KEY": "sk-from-env", "HOME": "/root",
                                           "SOME_TOKEN": "true"})
    assert found == {"sk-from-config", "hf_abcdef", "sk-from-env"}
    red = Redactor(found)
    assert red.text("--api-key sk-from-env x hf_abcdef") == "--api-key *** x ***"
    assert mask_tree(tree)["server"]["api_key"] == "***"
    assert mask_tree(tree)["server"]["max_tokens"] == "1024"


def test_default_uri_is_mlflow_default_in_the_launch_dir(tmp_path: Path) -> None:
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert resolve_tracking_uri("sqlite:///runs/x.db", tmp_path) == f"sqlite:///{tmp_path.resolve()}/runs/x.db"
    assert resolve_tracking_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert resolve_tracking_uri("store", tmp_path) == (tmp_path / "store").resolve().as_uri()


def test_env_uri_wins_and_legacy_mlruns_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mlruns" / "0").mkdir(parents=True)
    (tmp_path / "mlruns" / "0" / "meta.yaml").write_text("name: Default\n")
    assert resolve_tracking_uri(None, tmp_path) == (tmp_path / "mlruns").resolve().as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///env.db")
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/env.db"


def test_tracker_pins_the_launch_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    t = tracking.Tracker({"enabled": True, "tracking_uri": None, "experiment": "x"})
    (tmp_path / "job").mkdir()
    monkeypatch.chdir(tmp_path / "job")  # Hydra's chdir after the Tracker exists
    assert t.tracking_uri == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_disabled_tracker_does_nothing(tmp_path: Path) -> None:
    t = tracking.Tracker({"enabled": False})
    assert t.start_parent(tmp_path, "x", {}) is None
    assert t.log_trial({"trial": {}}, tmp_path, parent_run_id=None) is None
    assert not (tmp_path / "mlflow_parent.json").exists()


def test_safe_uri_drops_credentials() -> None:
    assert tracking.safe_uri("https://u:p@mlflow.example:8443/x") == "https://mlflow.example:8443/x"


def test_hydra_chdir_keeps_the_store_in_the_launch_dir(tmp_path: Path) -> None:
    """A real Hydra app with hydra.job.chdir=true: the default store stays where the user launched."""
    import os
    import subprocess
    import sys

    app = tmp_path / "app.py"
    app.write_text("import hydra, os\nfrom sweep.record.tracking import Tracker\n"
                   "@hydra.main(config_path=None, version_base='1.3')\n"
                   "def main(cfg):\n    print('CWD', os.getcwd())\n"
                   "    print('URI', Tracker({'tracking_uri': None}).tracking_uri)\n"
                   "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    out = subprocess.run([sys.executable, str(app), "hydra.job.chdir=true", f"hydra.run.dir={tmp_path / 'job'}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"CWD {tmp_path / 'job'}" in out.stdout
    assert f"URI sqlite:///{tmp_path.resolve()}/mlflow.db" in out.stdout


def test_group_names_differ_in_what_the_runs_list_shows(tmp_path: Path) -> None:
    """MLflow's runs list cuts a group's name after about 20 characters at 1400 px: groups of one box
    that differ in the workload, the engine or the layout differ there (issue 38: both read
    ``Group: b300 (tp...``)."""
    import copy

    from result_docs import make_result

    from sweep.record.naming import group_name
    from sweep.record.result import TrialResult

    _, doc = make_result(tmp_path, 0, 8)
    variants = {"as is": doc}
    for what, section, change in (("workload", "workload", {"name": "longctx"}),
                                  ("engine", "server", {"name": "vllm"}),
                                  ("layout", "hardware", {"tp": 4, "ep": 2})):
        other = copy.deepcopy(doc)
        other["config"][section].update(change)
        variants[what] = other
    names = {what: group_name(TrialResult.from_dict(d)) for what, d in variants.items()}
    heads = {what: name[:20] for what, name in names.items()}
    assert len(set(heads.values())) == len(heads), names
    assert names["as is"].startswith("smoke · b300/tp8 sim · ctx 60,1024 x c 1,2,4"), names["as is"]


def test_a_runs_description_leads_with_the_objective_and_its_interval(tmp_path: Path) -> None:
    from result_docs import make_result

    from sweep.record._run_content import description, trial_metrics
    from sweep.record.result import TrialResult
    from sweep.score.names import rounded

    _, doc = make_result(tmp_path, 0, 8)
    once = description(TrialResult.from_dict(doc))
    assert once is not None and once.endswith("low-load tok/s (c1) (measured once) · b300-ddtree-b8-t4-w2048"), once
    head = doc["cells"][0]
    head.update(repeats=3, output_tok_s_ci=[head["output_tok_s"] - 4.0, head["output_tok_s"] + 4.0])
    repeated = TrialResult.from_dict(doc)
    text = description(repeated)
    value = rounded(head["output_tok_s"])  # 4 significant figures, as the columns show it
    assert text is not None and text.startswith(f"{value:g} ± 4 low-load tok/s (c1) · "), text
    got = {k: v for k, v, _ in trial_metrics(repeated)}
    assert got["objective ci_high"] - got["objective ci_low"] == pytest.approx(8.0)
    _, failed = make_result(tmp_path, 1, 16, status="failed", reason="cuda_graph")
    assert description(TrialResult.from_dict(failed)) is None  # its note says why it failed
