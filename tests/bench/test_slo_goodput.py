"""SLO attainment and goodput of a cell, the cell's keys, and the load plan -- no server.

The request records are built by hand with known latencies, so every figure
has a value worked out here independently of :mod:`sweep.stats.slo` (counting which
requests meet which limit), and the max-load search is driven against a known
edge.
"""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from sweep.bench.cell import CELL_KEYS, TRIAL_ADDS, CellResult, aggregate
from sweep.bench.loadplan import arrivals, matrix_points
from sweep.bench.maxload import LoadSearch
from sweep.bench.request import RequestResult
from sweep.record.result import Cell
from sweep.stats.slo import LATENCY_CAP, Slo, judge


def request(ttft_ms: float, e2e_ms: float, tokens: int, events: int | None = None) -> RequestResult:
    """A successful request whose tokens arrived evenly between TTFT and e2e."""
    events = events or tokens
    ttft, e2e = ttft_ms / 1000, e2e_ms / 1000
    chunk_t = [ttft + (e2e - ttft) * i / max(1, events - 1) for i in range(events)]
    return RequestResult(ok=True, started=0.0, ttft_s=ttft, e2e_s=e2e, chunk_t=chunk_t, chunks=events,
                         completion_tokens=tokens)


def test_cell_keys_are_the_result_files_cell_fields() -> None:
    """One type decides the keys: every Cell field the benchmark fills is a CellResult field."""
    cell_fields = [f.name for f in Cell._fields()]
    result_fields = {f.name for f in dataclasses.fields(CellResult)}
    assert list(CELL_KEYS) == [k for k in cell_fields if k not in TRIAL_ADDS]
    assert [k for k in CELL_KEYS if k not in result_fields] == []
    assert {"e2e_ms_p90", "e2e_ms_p99", "slo_attainment", "goodput_tok_s", "latencies"} <= set(CELL_KEYS)


def test_attainment_and_goodput_count_requests_meeting_every_limit() -> None:
    # TPOT = (e2e - ttft) / (tokens - 1): 10 ms for the fast ones, 30 ms for the slow ones
    fast = [request(100, 100 + 10 * 99, 100) for _ in range(6)]
    slow = [request(100, 100 + 30 * 49, 50) for _ in range(2)]
    late = [request(3000, 3000 + 10 * 99, 100)]            # TTFT too long
    failed = [RequestResult().fail("timeout", "x")]
    cell = aggregate(1024, 4, fast + slow + late + failed, duration_s=10.0,
                     slo=Slo(ttft_ms=2000, tpot_ms=20))
    assert cell.requests == 10 and cell.errors == 1
    assert cell.slo_attainment == pytest.approx(6 / 10)      # the failed one counts, never meets
    assert cell.goodput_req_s == pytest.approx(6 / 10.0)
    assert cell.goodput_tok_s == pytest.approx(6 * 100 / 10.0)
    assert cell.output_tok_s == pytest.approx((6 * 100 + 2 * 50 + 100) / 10.0)
    # no SLO: nothing judged, the rows kept for later
    plain = aggregate(1024, 4, fast + slow, duration_s=10.0)
    assert plain.slo_attainment is None and plain.goodput_tok_s is None
    assert len(plain.latencies or []) == 8
    # an unset limit does not count: TTFT alone
    ttft_only = aggregate(1024, 4, fast + slow + late, duration_s=10.0, slo=Slo(ttft_ms=2000))
    assert ttft_only.slo_attainment == pytest.approx(8 / 9, abs=1e-4)


def test_itl_is_judged_at_the_slos_percentile_per_request() -> None:
    # 20 tokens: 18 gaps of 10 ms and one of 200 ms (a stall); p90 of its gaps is 10 ms, p99 is not
    r = request(50, 50, 1)
    r.chunk_t = [0.05 + 0.01 * i for i in range(19)] + [0.05 + 0.01 * 18 + 0.2]
    r.e2e_s, r.completion_tokens, r.chunks = r.chunk_t[-1], 20, 20
    at90 = aggregate(60, 1, [r], duration_s=1.0, slo=Slo(itl_ms=15, percentile=90))
    at99 = aggregate(60, 1, [r], duration_s=1.0, slo=Slo(itl_ms=15, percentile=99))
    assert at90.slo_attainment == 1.0 and at99.slo_attainment == 0.0


def test_a_cell_is_judged_again_from_its_rows_under_another_slo() -> None:
    reqs = [request(100, 100 + t * 63, 64) for t in (5, 8, 11, 14, 17, 20, 23, 26)]
    cell = aggregate(512, 8, reqs, duration_s=4.0, slo=Slo(tpot_ms=15))
    assert cell.slo_attainment == pytest.approx(4 / 8)
    again = judge(cell.latencies or [], Slo(tpot_ms=21), requests=cell.requests, ok=8, duration_s=4.0,
                  completion_tokens=cell.completion_tokens)
    assert again is not None
    assert again.slo_attainment == pytest.approx(6 / 8)
    assert again.goodput_tok_s == pytest.approx(6 * 64 / 4.0)
    # the same SLO gives the recorded figures back
    same = judge(cell.latencies or [], Slo(tpot_ms=15), requests=8, ok=8, duration_s=4.0,
                 completion_tokens=cell.completion_tokens)
    assert same is not None and same.goodput_tok_s == cell.goodput_tok_s


def test_latency_rows_are_capped_by_an_even_sample() -> None:
    reqs = [request(100 + i, 1000 + i, 10) for i in range(1000)]
    cell = aggregate(60, 64, reqs, duration_s=10.0, slo=Slo(ttft_ms=600))
    rows = cell.latencies or []
    assert len(rows) == LATENCY_CAP
    assert rows[0][0] == pytest.approx(100) and rows[-1][0] == pytest.approx(1099)
    # the sample stands for the cell: 500 of 1000 meet TTFT <= 600 ms (rows: ~half)
    assert cell.slo_attainment == pytest.approx(0.5, abs=0.01)


def test_poisson_arrivals_are_planned_before_sending() -> None:
    a = arrivals(2000, 50.0, seed=7)
    assert a == arrivals(2000, 50.0, seed=7) and a != arrivals(2000, 50.0, seed=8)
    assert a[0] == 0.0 and all(x < y for x, y in zip(a, a[1:]))
    gaps = [y - x for x, y in zip(a, a[1:])]
    assert statistics.fmean(gaps) == pytest.approx(1 / 50.0, rel=0.08)
    assert statistics.pstdev(gaps) == pytest.approx(1 / 50.0, rel=0.12)   # exponential: sd = mean
    with pytest.raises(ValueError):
        arrivals(3, 0.0, 1)


def test_matrix_points_in_the_workloads_order() -> None:
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    wl = from_omegaconf(compose(["workload=seed", "workload.contexts=[60,1024]",
                                 "workload.concurrency=[1,8]"])).workload
    pts = matrix_points(wl)
    assert [(p.context, p.concurrency, p.requests) for p in pts] == [
        (60, 1, 2), (60, 8, 16), (1024, 1, 2), (1024, 8, 16)]
    assert all(p.rate is None and p.search is None for p in pts)


def run_search(search: LoadSearch, edge: float) -> list[float]:
    probed = []
    while (load := search.next()) is not None:
        probed.append(load)
        search.record(load, load <= edge)
    return probed


def test_search_doubles_then_bisects_to_the_edge() -> None:
    s = LoadSearch(start=1, limit=256, tolerance=0.1, max_rounds=8, integer=True)
    probed = run_search(s, edge=37)
    assert probed[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert s.met is not None and s.missed is not None and s.stopped == "tolerance"
    assert s.met <= 37 < s.missed and s.missed - s.met <= 0.1 * s.met   # the stated tolerance
    assert len(probed) <= 7 + 8
    exact = LoadSearch(start=1, limit=256, tolerance=0.001, max_rounds=8, integer=True)
    run_search(exact, edge=37)
    assert (exact.met, exact.missed, exact.stopped) == (37, 38, "tolerance")  # adjacent counts


def test_search_stops_at_its_round_limit_and_its_load_limit() -> None:
    s = LoadSearch(start=1, limit=256, tolerance=0.01, max_rounds=2, integer=True)
    run_search(s, edge=37)
    assert s.stopped == "rounds" and s.met is not None and 32 <= s.met <= 37 and s.missed and s.missed > 37
    top = LoadSearch(start=1, limit=100, tolerance=0.1, max_rounds=8, integer=True)
    assert run_search(top, edge=1000)[-1] == 100 and top.stopped == "limit" and top.met == 100


def test_rate_search_halves_when_the_first_probe_misses() -> None:
    s = LoadSearch(start=8.0, limit=64.0, tolerance=0.1, max_rounds=8, integer=False)
    probed = run_search(s, edge=2.7)
    assert probed[:3] == [8.0, 4.0, 2.0]
    assert s.met is not None and s.missed is not None
    assert s.met <= 2.7 < s.missed and (s.missed - s.met) <= 0.1 * s.met
    none = LoadSearch(start=1, limit=8, integer=True)
    assert run_search(none, edge=0.5) == [1] and none.stopped == "first_missed" and none.met is None


def judged_trial(pass_rate: float = 1.0, max_load: dict | None = None):
    """A trial judged under TPOT <= 20 ms: concurrency 1, 4 meet it, 16 does not."""
    from sweep.record.result import Coding, MaxLoad, TrialResult
    from sweep.score import metrics as score

    cells = []
    for conc, tpot, tok_s in ((1, 8.0, 100.0), (4, 15.0, 300.0), (16, 40.0, 700.0)):
        rows = [[50.0, tpot, 50 + tpot * 63, 64, tpot] for _ in range(8)]
        judged = judge(rows, Slo(tpot_ms=20), requests=8, ok=8, duration_s=8 * 64 / tok_s, completion_tokens=512)
        cells.append(Cell(context=512, concurrency=conc, requests=8, errors=0, output_tok_s=tok_s,
                          per_stream_tok_s=1000 / tpot, completion_tokens=512, duration_s=8 * 64 / tok_s,
                          latencies=rows, slo_attainment=judged.slo_attainment if judged else None,
                          goodput_tok_s=judged.goodput_tok_s if judged else None))
    doc = TrialResult(status="ok", cells=cells, coding=Coding(eval="five", passed=5, total=5, pass_rate=pass_rate),
                      config={"objective": {"metric": "goodput", "slo": {"tpot_ms": 20},
                                            "constraints": {"coding_pass_rate_min": 1.0, "max_errors": 0}}},
                      max_load=MaxLoad.from_dict(max_load) if max_load else None)
    doc.metrics = score.metrics(doc)
    return doc


def test_goodput_and_max_load_objectives_under_the_slo() -> None:
    from sweep.compose.settings import Objective
    from sweep.score.noise import objective_interval
    from sweep.score.objective import feasible, objective_value

    doc = judged_trial()
    assert doc.metrics.goodput_tok_s == pytest.approx(300.0)     # c16 missed: no goodput there
    assert doc.metrics.max_load == 4.0                           # the highest measured load meeting it
    assert doc.metrics.per_stream_tok_s_lowc == pytest.approx(125.0)
    goodput = Objective.from_mapping({"metric": "goodput", "slo": {"tpot_ms": 20}})
    assert objective_value(doc, goodput) == pytest.approx(300.0) and feasible(doc, goodput)
    # the answers changed: no max load, and infeasible whatever the objective
    wrong = judged_trial(pass_rate=0.8)
    assert wrong.metrics.max_load is None and not feasible(wrong, goodput)
    # the search's answer wins over the matrix's, with its uncertainty as the tie rule's interval
    searched = judged_trial(max_load={"over": "concurrency", "value": 6, "value_ci": [5, 7]})
    max_load = Objective.from_mapping({"metric": "max_load", "slo": {"tpot_ms": 20}})
    assert objective_value(searched, max_load) == 6
    assert objective_interval(searched, max_load, 6.0) == (5.0, 7.0)


def test_mlflow_gets_attainment_and_goodput_per_cell_with_step_concurrency() -> None:
    from sweep.record._run_content import cell_metric, cell_table, trial_metrics

    doc = judged_trial()
    got = {(k, step): v for k, v, step in trial_metrics(doc)}
    attained = cell_metric("9 slo/attainment ", 512)  # MLflow's chart section "9 slo"
    assert attained == "9 slo/attainment ctx00000512"  # zero-padded: contexts sort as numbers
    assert got[(attained, 4)] == 1.0 and got[(attained, 16)] == 0.0
    assert got[(cell_metric("9 slo/goodput_tok_s ", 512), 4)] == pytest.approx(300.0)
    assert got[("goodput_tok_s", 0)] == pytest.approx(300.0) and got[("max_load", 0)] == 4.0
    assert "latencies" not in cell_table(doc)   # the rows stay in result.json (an artifact already)


def test_the_report_shows_attainment_and_goodput_per_cell() -> None:
    from sweep.report import html
    from sweep.report.compare import build_groups
    from sweep.report.records import record

    doc = judged_trial()
    page = html.render([doc], title="slo")
    cells = page[page.index("<h3>Cells</h3>"):]
    assert "SLO attainment" in cells and "goodput tok/s" in cells and ">0%<" in cells and ">100%<" in cells
    [g] = build_groups([doc])
    rec = record(g, g.rows[0])
    assert rec["goodput_tok_s"] == pytest.approx(300.0) and rec["max_load"] == 4.0
