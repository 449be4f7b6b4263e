"""Names in the HTML tables: shortened from the middle, the heading's words dropped, the full name kept."""

from __future__ import annotations

from pathlib import Path

from sweep.report.html_names import middle, names_html, results_dir, without


def test_a_long_name_keeps_both_ends_and_the_limit() -> None:
    name = "ngram-b16-ngram_n_match=8-threads=1-ctx64.256"
    short = middle(name, 24)
    assert len(short) == 24 and short.startswith("ngram-b16-n") and short.endswith("ctx64.256") and "…" in short
    assert middle("ngram-b8", 24) == "ngram-b8"


def test_what_the_heading_says_is_dropped_but_never_the_whole_name() -> None:
    assert without("cpu-ngram-b4-min1-smoke-c1.2.4.8", ("cpu", "smoke", "c1.2.4.8")) == "ngram-b4-min1"
    assert without("cpu", ("cpu",)) == "cpu"


def test_a_list_shows_two_names_and_a_count_with_every_name_on_hover() -> None:
    names = [f"cpu-ngram-b{b}-smoke" for b in (4, 8, 16, 32)]
    cell = names_html(names, ("cpu", "smoke"), prefix="≈ ")
    assert "≈ ngram-b4" in cell and "≈ ngram-b8" in cell and "ngram-b16</span>" not in cell
    assert "+2 more" in cell and all(n in cell for n in names)  # the title lists them all
    assert names_html([], ()) == "–"


def test_the_results_directory_is_where_every_source_lives(tmp_path: Path) -> None:
    sweep = tmp_path / "multirun" / "2026-12-01" / "02-00-00"
    files = []
    for job in (0, 1):
        (sweep / str(job)).mkdir(parents=True)
        (sweep / str(job) / "result.json").write_text("{}")
        files.append(str(sweep / str(job) / "result.json"))
    landscape = tmp_path / "landscapes" / "a.json"
    landscape.parent.mkdir()
    landscape.write_text("{}")
    assert results_dir(files) == str(sweep.resolve())
    assert results_dir([f"{landscape}#none/edit/round1"]) == str(landscape.parent.resolve())
    assert results_dir(["mlflow:run/0123"]) is None and results_dir([]) is None
