"""The report on a directory of typed result files: like with like, honest names, every export.

The directory (``report_docs.mixed_sweep``) mixes workloads, boxes, baselines,
failures, an interrupted and a pruned trial, repeated cells with intervals,
and (here) a result file in the format written before ``tok_s_lowc`` existed.
Everything runs the real command (``sweep.report.__main__.main``) on files.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from report_docs import mixed_sweep, trial

from sweep.record.result import TrialResult
from sweep.report import __main__ as report
from sweep.report.compare import build_groups
from sweep.score import objective
from sweep.score.metrics import headline, honest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mixed_sweep(tmp_path)


def _old_format(path: Path) -> dict:
    """A result file as written before tok_s_lowc: the lowest concurrency's tok/s as tok_s_c1."""
    doc = json.loads(path.read_text())
    head = doc["metrics"]
    doc["metrics"] = {k: v for k, v in head.items()
                      if k not in ("tok_s_lowc", "headline_concurrency", "headline_context")}
    doc["metrics"]["tok_s_c1"] = head["tok_s_lowc"]
    path.write_text(json.dumps(doc))
    return doc


def _groups(root: Path) -> dict[str, list]:
    docs = [TrialResult.load(p) for p in sorted(root.rglob("result.json"))]
    return {g.label: g.rows for g in build_groups(docs)}


def test_groups_never_cross_box_or_workload_and_speedups_use_the_groups_baseline(root: Path) -> None:
    groups = _groups(root)
    assert len(groups) == 3
    by_workload = {(rows[0].hardware, rows[0].workload): rows for rows in groups.values()}
    seed, smoke, pro = by_workload[("b300", "seed")], by_workload[("b300", "smoke")], \
        by_workload[("pro6000_tp8", "seed")]
    assert len(seed) == 9 and len(smoke) == 2 and len(pro) == 2
    # each group ranks its own feasible trials, 1..n; the best of each is its own
    for rows in (seed, smoke, pro):
        ranked = [r for r in rows if r.rank is not None]
        assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
        values = [r.objective_value for r in ranked]
        assert values == sorted(values, reverse=True)
    assert seed[0].name == "b300-ddtree-b8-t4-w2048-seed" and seed[0].rank == 1
    assert smoke[0].name == "b300-ddtree-b8-t4-w2048-smoke" and smoke[0].rank == 1
    # speedups: against the baseline of the same box and workload, never another's
    base = next(r for r in seed if r.is_baseline)
    for r in seed:
        if r.doc.ok and not r.is_baseline:
            assert r.speedup == pytest.approx(r.head.tok_s / base.head.tok_s)
            assert r.speedup_from_table and r.baseline_name == "b300-none-seed"
    pro_base = next(r for r in pro if r.is_baseline)
    assert pro[0].speedup == pytest.approx(pro[0].head.tok_s / pro_base.head.tok_s)
    assert all(r.speedup is None for r in smoke)  # a seed baseline never vouches for smoke
    # unfinished trials are shown as such, never ranked
    status = {r.name: r.status for r in seed}
    assert status["b300-ddtree-b4-t1-w2048-seed"] == "interrupted"
    assert status["b300-ddtree-b2-t2-w2048-seed"] == "pruned"
    assert all(r.rank is None for r in seed if r.status != "ok")


def test_a_trial_loaded_another_way_is_no_peer_of_the_closed_loop_ones(root: Path) -> None:
    """Same matrix, another load (Poisson arrivals) or temperature: its own group, no speedup
    against the closed-loop greedy baseline; a file without those keys reads as the defaults."""
    seed = root / "multirun" / "2026-12-01" / "01-43-41"
    base = json.loads((seed / "0" / "result.json").read_text())
    for job, change in ((20, {"request_rate": 4.0}), (21, {"temperature": 0.7}), (22, {})):
        doc = json.loads((seed / "2" / "result.json").read_text())  # b300 ddtree b4 t4, seed
        doc["config"]["workload"].update(change)
        if not change:  # written before the load keys existed
            for key in ("request_rate", "prompt_source", "dataset_path", "temperature", "ignore_eos"):
                doc["config"]["workload"].pop(key, None)
        doc["trial"]["name"] = f"job{job}"
        (seed / str(job)).mkdir()
        (seed / str(job) / "result.json").write_text(json.dumps(doc))
    rows = {r.name: (label, r) for label, group in _groups(root).items() for r in group}
    assert len({label for label, _ in rows.values()}) == 5
    seed_label = rows["b300-none-seed"][0]
    for name in ("job20", "job21"):
        label, row = rows[name]
        assert label != seed_label and row.rank == 1 and row.baseline_name is None
    label, row = rows["job22"]
    assert label == seed_label and row.baseline_name == "b300-none-seed"
    assert row.speedup == pytest.approx(row.head.tok_s / base["metrics"]["tok_s_lowc"])


def test_headline_says_what_it_measured_and_old_files_read_right(root: Path) -> None:
    smoke = sorted((root / "multirun" / "2026-12-01" / "02-10-00").rglob("result.json"))[0]
    new = TrialResult.load(smoke)
    assert new.metrics.headline_concurrency == 2 and new.metrics.tok_s_c1 is None
    assert new.metrics.tok_s_lowc == new.cells[0].output_tok_s
    raw = _old_format(smoke)
    old = TrialResult.load(smoke)
    assert old.to_dict() == raw  # loads and writes back unchanged
    assert old.metrics.tok_s_c1 == new.metrics.tok_s_lowc  # what the old name held
    head = headline(old)
    assert (head.tok_s, head.concurrency, head.label) == (new.metrics.tok_s_lowc, 2, "low-load tok/s (c2)")
    fixed = honest(old)
    assert fixed.tok_s_c1 is None and fixed.tok_s_lowc == new.metrics.tok_s_lowc
    # the old objective name is an accepted alias with that meaning, and the sweeper's values carry it
    obj = objective.objective_of(old)
    for name in ("tok_s_lowc", "tok_s_c1"):
        legacy = type(obj)(metric=name, context=obj.context, concurrency=obj.concurrency,
                           weights=obj.weights, constraints=obj.constraints)
        assert objective.objective_value(old, legacy) == new.metrics.tok_s_lowc
        assert objective.metric_name(legacy) == "tok_s_lowc"
        ret = objective.trial_return(old, legacy, str(smoke))
        assert ret["objective"] == ret["values"]["tok_s_lowc"] == ret["values"]["tok_s_c1"]
    # the report reads the old file into the same group, under the honest header
    groups = _groups(root)
    smoke_rows = next(rows for rows in groups.values() if rows[0].workload == "smoke")
    assert len(smoke_rows) == 2 and all(r.head.concurrency == 2 for r in smoke_rows)


def test_table_csv_json_md_html_exports(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main(["--dir", str(root)]) == 0
    table = capsys.readouterr().out
    titles = " ".join(table.split())  # a title wraps where the screen ends: its words, not its lines
    assert titles.count("objective low-load tok/s") == 3  # the figure's one name (sweep/score/names.py)
    assert "low-load tok/s (c2)" in table and "low-load tok/s (c1)" in table
    assert "★ 1" in table and "failed: cuda_graph" in table and "pruned" in table
    assert report.main(["--dir", str(root), "--format", "csv", "-o", str(tmp_path / "t.csv")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))
    assert len(rows) == 13 and len({r["group"] for r in rows}) == 3
    best = next(r for r in rows if r["trial"] == "b300-ddtree-b8-t4-w2048-seed")
    assert best["rank"] == "1" and best["headline_concurrency"] == "1"
    assert float(best["tok_s_lowc_ci_low"]) < float(best["tok_s_lowc"]) < float(best["tok_s_lowc_ci_high"])
    assert best["ttft_ms_p90"] and best["ttft_ms_p99"] and best["tpot_ms_p99"]  # not p50 only
    smoke = [r for r in rows if r["workload"] == "smoke"]
    assert all(r["tok_s_c1"] == "" and r["speedup_vs_baseline"] == "" for r in smoke)
    assert report.main(["--dir", str(root), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["best"] for g in doc["groups"]] == ["b300-ddtree-b8-t4-w2048-seed", "pro6000_tp8-ddtree-b8-t4-w2048-seed",
                                                 "b300-ddtree-b8-t4-w2048-smoke"]
    assert doc["groups"][0]["rows"][0]["cells"][0]["ttft_ms_p99"] is not None
    assert report.main(["--dir", str(root), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.count("\n## ") == 3 and "| low-load tok/s (c2) |" in md and "**b300-ddtree-b8-t4-w2048-seed**" in md
    assert report.main(["--dir", str(root), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert html.count('<section id="group-') == 3 and "<svg" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch


def test_the_best_is_not_named_alone_when_noise_cannot_tell_it_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repeated cells' intervals (made up, +-3.5% over 3 repeats: ~1.4% a measurement, pooled over the
    configs by the campaign model): b32/t8 511 leads b16/t8 (scaled to 509, 0.5% behind) -- neither is
    shown within the 2% margin of the best, so the verdict is open; b8/t8 413 is shown worse, b16/t4 390
    was measured once."""
    sweep = tmp_path / "multirun" / "2026-12-01" / "03-00-00"
    for job, (budget, topk, repeats) in enumerate([(8, 8, 3), (16, 8, 3), (32, 8, 3), (16, 4, 1)]):
        trial(sweep, job, "b300", budget, topk, repeats=repeats, scale=1.042 if (budget, topk) == (16, 8) else 1.0)
    assert report.main(["--dir", str(tmp_path), "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    # b32/t8 leads but is not told apart from b16/t8: nobody is called best, the group is open
    assert group["best"] is None and group["leader"] == "b300-ddtree-b32-t8-w2048-seed"
    assert group["verdict"] == "open"
    assert group["tied_within_noise"] == ["b300-ddtree-b16-t8-w2048-seed"]
    assert group["noise"].startswith("open: not told apart from b300-ddtree-b16-t8-w2048-seed (508.")
    assert "pick b300-ddtree-b32-t8-w2048-seed: at most" in group["noise"]
    tied = {r["trial"]: r["tied_with_best"] for r in group["rows"]}
    assert tied == {"b300-ddtree-b32-t8-w2048-seed": False, "b300-ddtree-b16-t8-w2048-seed": True,
                    "b300-ddtree-b8-t8-w2048-seed": False, "b300-ddtree-b16-t4-w2048-seed": False}
    assert report.main(["--dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "≈ 1" in table and "≈ 2" in table and "★" not in table.split("★ best feasible")[0]
    # the lines under the table name rows as the table does: the box and workload are in its title
    assert "no best yet: b32-t8 leads, open: not told apart from b16-t8" in table
    assert report.main(["--dir", str(tmp_path), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| ≈ 2 |" in md and "No best yet: **b300-ddtree-b32-t8-w2048-seed** leads" in md
    # once the leader's runner-up is gone, it is a clear winner (b16/t4, measured once, is judged with
    # the simulated box's spread: far below); alone, it is just the only feasible config
    (sweep / "1" / "result.json").unlink()
    assert report.main(["--dir", str(tmp_path), "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert group["noise"].startswith("clear winner") and group["best"] == "b300-ddtree-b32-t8-w2048-seed"
    for job in (0, 2):
        (sweep / str(job) / "result.json").unlink()
    assert report.main(["--dir", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"][0]["noise"] == "the only feasible config of its group"


def test_copies_of_one_config_are_one_row_with_their_repeats_pooled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same config run three times (three sweeps) is one row: its three measurements pooled, their
    spread its interval, ``repeats`` counting them -- never three rows ranked against each other."""
    for i in range(3):
        sweep = tmp_path / "multirun" / "2026-12-01" / f"0{i}-00-00"
        trial(sweep, 0, "b300", 8, 4, repeats=1, scale=1.0 + 0.01 * i)
        trial(sweep, 1, "b300", 16, 4, repeats=1)
    assert report.main(["--dir", str(tmp_path), "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    rows = {r["trial"]: r for r in group["rows"]}
    assert sorted(rows) == ["b300-ddtree-b16-t4-w2048-seed", "b300-ddtree-b8-t4-w2048-seed"]
    b8 = rows["b300-ddtree-b8-t4-w2048-seed"]
    assert b8["repeats"] == 3 and b8["tok_s_lowc_ci_low"] < b8["tok_s_lowc"] < b8["tok_s_lowc_ci_high"]


@pytest.mark.parametrize("given", ["01-43-41", "2026-12-01/01-43-41", "2026-12-01 01-43-41",
                                   "2026-12-01 01:43:41", "grid spec.budget=4,8 · 2026-12-01 01:43:41",
                                   "0123abcd"])
def test_sweep_id_takes_what_the_ui_shows(root: Path, given: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed = root / "multirun" / "2026-12-01" / "01-43-41"
    (seed / "mlflow_parent.json").write_text(json.dumps(
        {"name": "grid spec.budget=4,8 · 2026-12-01 01:43:41", "run_id": "0123abcd"}))
    assert report.main(["--dir", str(root), "--sweep-id", given, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 11 and {r["sweep_id"] for r in rows} == {"2026-12-01/01-43-41"}
    assert report.main(["--dir", str(root), "--sweep-id", "02-10-00", "--format", "csv"]) == 0
    assert len(list(csv.DictReader(io.StringIO(capsys.readouterr().out)))) == 2
    assert report.main(["--dir", str(root), "--sweep-id", "03-00-00"]) == 1
