"""Terminal tables at 100 and 120 columns keep what a verdict needs, and one line says one fact.

Issue 38: below ~200 columns the report dropped its rank/★ and n columns, the closing table
printed ``b300-ddtree-b8-t4-w2048-sm…`` and the schedule two different configs as
``cpu-ngram-b16-ngr…``; a search said ``noise unknown`` above a table judged with the box's
spread, and growing a study printed two different bests. Here the tables are rendered from real
result files (tests/report/report_docs.py) and the recorded landscapes, by the commands
themselves where the width comes from ``$COLUMNS``, and read as a person reads them: every
line within the width, the marker, n and the figure in the row, every config's name distinct
and ending as its full name ends.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import ROOT, subprocess_env
from report_docs import crowded_sweep, trial
from rich.cells import cell_len
from rich.console import Console

from sweep.record.result import TrialResult
from sweep.report.compare import Group, build_groups
from sweep.report.records import marker, record
from sweep.report.shortnames import ELLIPSIS, short_names
from sweep.report.table import _headline, fitted_group, print_groups

LANDSCAPES = ROOT / "benchmarks" / "measured" / "landscapes"
WIDTHS = (100, 120)


def _docs(root: Path) -> tuple[list[TrialResult], list[str]]:
    paths = sorted(root.rglob("result.json"))
    return [TrialResult.load(p) for p in paths], [str(p) for p in paths]


def _too_wide(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines() if cell_len(line) > width]


def _body_rows(text: str) -> list[list[list[str]]]:
    """Each table's body rows, each row its cells (stripped), in order."""
    tables: list[list[list[str]]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("┡"):
            inside = True
            tables.append([])
        elif line.startswith("└"):
            inside = False
        elif inside and line.startswith("│"):
            tables[-1].append([c.strip() for c in line.strip("│").split("│")])
    return tables


def _ends_as_full(short: str, full: str, common: list[str] | tuple[str, ...] = ()) -> bool:
    """A shortened name keeps the end of its full name less the tokens every row shares (said in
    the title): what follows ``…`` ends it."""
    rest = "-".join(t for t in full.split("-") if t not in common)
    tail = short.rsplit(ELLIPSIS, 1)[-1].split("#")[0]
    return rest.endswith(tail)


def _render(groups: list[Group], width: int, **kw: Any) -> str:
    out = Console(width=width, record=True, file=io.StringIO())
    print_groups(out, groups, "report", **kw)
    return out.export_text()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_fits_and_keeps_marker_n_figure_and_distinct_names(tmp_path: Path, width: int) -> None:
    docs, sources = _docs(crowded_sweep(tmp_path))
    groups = build_groups(docs, sources)
    text = _render(groups, width)
    assert not _too_wide(text, width), _too_wide(text, width)
    tables = _body_rows(text)
    assert len(tables) == len(groups)
    for g, rows in zip(groups, tables):
        fitted = fitted_group(g, width)
        names = fitted.names.names
        assert len(set(names)) == len(g.rows), names  # different configs, different names
        assert len(rows) == len(g.rows)
        for r, cells, short in zip(g.rows, rows, names):
            rec = record(g, r)
            assert cells[0].startswith(marker(g, r))  # ★ / ≈ where the verdict put it
            assert cells[1] == short and _ends_as_full(short, r.name, fitted.names.common), (short, r.name)
            assert cells[2] == str(rec["repeats"] or r.copies)  # n
            assert _headline(rec) in cells, (cells, _headline(rec))  # the figure ± its interval
        assert g.headline_label in text
        for token in fitted.names.common:  # what every name shared is said once, in the title
            assert token in g.label + fitted.names.note()
    assert "★" in text and "±" in text  # a best and an interval are there to be kept
    wide = _render(groups, 250)
    assert "not shown at this width" not in wide and "not shown at this width" in text


def test_names_shorten_from_the_middle_keep_their_ends_and_never_collide() -> None:
    full = [f"b300-ddtree-b{b}-t4-w2048-seed-server.disable_cuda_graph=true-max_tokens={m}-{tail}"
            for b, m, tail in ((8, 4096, "x1"), (8, 4096, "x2"), (16, 8192, "x1"), (16, 2048, "x1"))]
    shown = short_names(full, width=14)
    assert shown.common == ["b300", "ddtree", "t4", "w2048", "seed", "server.disable_cuda_graph=true"]
    assert len(set(shown.names)) == 4 and all(len(n) <= 14 for n in shown.names), shown.names
    rest = [n.replace("b300-ddtree-", "").replace("-t4-w2048-seed-server.disable_cuda_graph=true", "") for n in full]
    assert all(_ends_as_full(s, f) for s, f in zip(shown.names, rest)), shown.names
    assert rest[0] == "b8-max_tokens=4096-x1"
    assert all(ELLIPSIS in s for s in shown.names)  # cut in the middle, the head kept
    assert all(s.startswith(f[: s.index(ELLIPSIS)]) for s, f in zip(shown.names, rest))
    # two configs with one name get their config id; a lone row keeps its whole name
    same = short_names(["b300-none-seed", "b300-none-seed", "b300-ddtree-seed"], ids=["aa11", "bb22", "cc33"])
    assert same.names == ["none#aa11", "none#bb22", "ddtree"]
    assert short_names(["b300-none-seed"]).names == ["b300-none-seed"]


def _cli(module: str, *args: str, width: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300,
                          env=subprocess_env(COLUMNS=str(width)), cwd=ROOT)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_command_fits_columns_and_its_full_names_and_json_name_every_config(
        tmp_path: Path, width: int) -> None:
    root = crowded_sweep(tmp_path)
    proc = _cli("sweep.report", "--dir", str(root), "--full-names", width=width)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("full names:")[0]
    assert not _too_wide(table, width) and "★ 1" in table
    docs, sources = _docs(root)
    groups = build_groups(docs, sources)
    for r in (r for g in groups for r in g.rows):  # the key: every full name and config id
        assert f"  {r.name}  (config {r.config_id})" in proc.stdout, r.name
    proc = _cli("sweep.report", "--dir", str(root), "--format", "json", width=width)
    rows = [row for g in json.loads(proc.stdout)["groups"] for row in g["rows"]]
    assert {row["trial"] for row in rows} == {r.name for g in groups for r in g.rows}
    assert all(len(row["config_id"]) >= 8 for row in rows)
    best = [row for row in rows if row["marker"] == "★"]
    assert best and all(row["rank"] == 1 and row["n"] >= 1 and row["tok_s_lowc"] > 0 for row in best)
    assert any(row["tok_s_lowc_ci_low"] is not None for row in rows)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_schedule_of_the_recorded_landscapes_fits_and_tells_every_config_apart(
        tmp_path: Path, width: int) -> None:
    before = sorted(p.name for p in LANDSCAPES.iterdir())
    out = tmp_path / "out"
    proc = _cli("sweep.schedule", "--dir", str(LANDSCAPES), "-o", str(out), "--full-names", width=width)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in LANDSCAPES.iterdir()) == before and (out / "schedule.yaml").is_file()
    text = proc.stderr  # the tables go to the terminal's stderr; --format json to stdout
    table = "\n".join(line for line in text.splitlines()  # the key and the files written: whole, to copy
                       if "  (config " not in line and not line.startswith(("chart:", "written:")))
    assert not _too_wide(table, width), _too_wide(table, width)
    tables = _body_rows(text)
    keys = [part.split("\n  not shown")[0] for part in text.split("full names:")[1:]]
    assert len(tables) == len(keys) >= 3  # a schedule per engine and context: llama.cpp's two, vLLM's edit
    levels = json.loads(_cli("sweep.schedule", "--dir", str(LANDSCAPES), "--no-write", "--format", "json",
                             width=width).stdout)["levels"]
    picks = iter(levels)
    for rows, key in zip(tables, keys):
        mapping: dict[str, str] = {}
        for line in key.strip("\n").splitlines():
            if not line.startswith("  ") or "(config " not in line:
                break
            short, full = line.split()[:2]
            mapping[short] = full
        assert len(mapping) == len(set(mapping.values())) >= 2  # distinct names, one per config
        shared = set.intersection(*(set(f.split("-")) for f in mapping.values()))
        for short, full in mapping.items():
            assert _ends_as_full(short, full, tuple(shared)), (short, full)
        for cells in rows:
            level = next(picks)
            assert cells[0] == f"{level['load']:g}" and cells[4] == str(level["n"])
            assert mapping[cells[1]] == level["name"]  # the row's name is its pick's, and only its
            assert cells[2] == level["verdict"] and cells[3].startswith(f"{level['tok_s']:,.1f} [")


def test_the_closing_table_of_a_study_names_the_studys_best_once(tmp_path: Path, monkeypatch: Any,
                                                                  capsys: Any) -> None:
    """The sweeper writes optimization_results.yaml, then the closing table prints: one line ties
    the table to that trial -- no second rerun command, no second noise line."""
    from omegaconf import OmegaConf

    from sweep.report.sweep_summary import print_sweep

    sweep = tmp_path / "sweep"
    for job, (budget, topk) in enumerate([(8, 4), (16, 8), (4, 2)]):
        trial(sweep, job, "b300", budget, topk)
    monkeypatch.setenv("COLUMNS", "100")
    print_sweep(sweep, "study")
    plain = capsys.readouterr().err
    assert "run the best again" in plain and not _too_wide(plain, 100)
    OmegaConf.save(OmegaConf.create({"name": "optuna", "best_trial": 1, "best_params": {"spec.budget": 16}}),
                   sweep / "optimization_results.yaml")  # as the sweeper writes it
    print_sweep(sweep, "study")
    text = capsys.readouterr().err
    assert "run the best again" not in text and "to decide" not in text and not _too_wide(text, 100)
    assert "b16-t8 is trial 1, the study's pick above" in text
    assert sum("per measurement" in line for line in text.splitlines()) == 0  # the sweeper said the noise


def test_growing_a_study_says_what_moved_and_the_sweeper_judges_with_the_boxs_spread(tmp_path: Path) -> None:
    import optuna
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from hydra_plugins.specsweep_optuna_sweeper._impl import _spread
    from hydra_plugins.specsweep_optuna_sweeper._report import moved_line
    from sweep.report.study_best import study_best

    # the sweeper's config holds Hydra's own unresolvable keys: the spread is still read
    with initialize_config_module(config_module="sweep.conf", version_base=None):
        cfg = compose(config_name="config", overrides=["workload=smoke"], return_hydra_config=True)
    assert _spread(cfg) == cfg.server.sim.noise > 0
    OmegaConf.save(OmegaConf.create({"best_trial": 3, "best_params": {"spec.topk": 8, "spec.window": 512}}),
                   tmp_path / "optimization_results.yaml")
    before = study_best(tmp_path)
    assert before == (3, {"spec.topk": 8, "spec.window": 512})
    dist = optuna.distributions.CategoricalDistribution([4, 8, 512, 2048])
    now = optuna.trial.create_trial(params={"spec.topk": 4, "spec.window": 2048}, value=1.0,
                                    distributions={"spec.topk": dist, "spec.window": dist})
    now.number = 11
    assert moved_line(before, now) == ("growing the study moved its best from trial 3 to trial 11: "
                                       "spec.topk 8 -> 4, spec.window 512 -> 2048")
    now.number = 3
    assert moved_line(before, now) is None
    (tmp_path / "optimization_results.yaml").write_text("best_trial: [1, 2]\n")
    assert study_best(tmp_path) is None  # not a trial number: no claim about the best


def test_the_export_names_configs_as_the_schedule_does_and_says_the_noise_once() -> None:
    proc = _cli("sweep.schedule", "--dir", str(LANDSCAPES), "--no-write", "--export", "vllm", width=120)
    assert proc.returncode == 0, proc.stderr
    levels = [line for line in proc.stdout.splitlines() if line.startswith("  concurrency ")]
    assert levels and not any("c1.2.4" in line for line in levels)  # the shared tokens: once, in the title
    # an open level's pick named as in the schedule's table (ngram-b8, never the family's full name)
    assert any(" open (ngram-b8: at most " in line for line in levels), levels
    titles = [line for line in proc.stdout.splitlines() if line.startswith("per-load table: ")]
    assert titles and all("names without " in line for line in titles)
    assert "noise: noise" not in proc.stdout and "; noise " in proc.stdout
