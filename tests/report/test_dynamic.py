"""Per-load speculation derived (``python -m sweep.schedule --export``) and verified
(:mod:`sweep.report.verify`), on result files written like real ones with a known answer.

The family: ddtree budgets 2, 4 and 8 and the spec=none baseline on the simulated b300,
measured once per cell (judged with the simulated box's spread, 2% per measurement, as a prior:
nothing was measured twice; sweep/score/campaign.py: a pair's difference has a 2.8% standard error,
and with four configs the comparison with the best needs ~5.8% to separate). Worked out here:

=====  =====  =====  =====  =====  =========================================================
load   none   b8     b4     b2     budget
=====  =====  =====  =====  =====  =========================================================
1      100    250    200    160    8: b8 beyond noise (decided)
2      190    400    380    300    8: b8 at most 0.6% below the best (equivalent); b4 may be 11% below
4      360    560    640    520    4: b4 beyond noise (decided)
8      650    700    760    740    4: open -- b4 leads b2 by 2.7%, neither within the 2% margin;
                                   b4 has the smaller regret bound (3.1%)
16     1100   900    1000   1150   2: b2 at most 1.3% below the best (equivalent); the baseline may
                                   be 10% below, so it is not the pick
=====  =====  =====  =====  =====  =========================================================

so the table is ``[[1,2,8],[4,8,4],[16,16,2]]`` (batch sizes 3, 9-15 and above 16 not measured).
A suffix config at budget 4 is another family and stays out.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from report_docs import config
from sweep.record.result import Cell, Coding, TrialInfo, TrialResult
from sweep.report.dynamic import derive
from sweep.report.dynamic_export import document, render_table, text_lines
from sweep.report.verify import verifications
from sweep.score import metrics as score

LOADS = (1, 2, 4, 8, 16)
TOK_S = {0: (100, 190, 360, 650, 1100), 8: (250, 400, 560, 700, 900), 4: (200, 380, 640, 760, 1000),
         2: (160, 300, 520, 740, 1150)}
TABLE = [[1, 2, 8], [4, 8, 4], [16, 16, 2]]


def write(path: Path, budget: int, tok_s: Any, loads: Any = LOADS, *, per_load: Any = None,
          spec: str = "ddtree", finished: str = "2026-12-01T02:00:00") -> Path:
    cfg = config("b300", None if budget == 0 else budget, 4, "seed")
    if spec != "ddtree":
        cfg["spec"] = {**cfg["spec"], "algorithm": spec}
    if per_load is not None:
        cfg["spec"]["per_load"] = per_load
    cfg["workload"].update(contexts=[1024], concurrency=list(loads), max_tokens=64)
    over = ["spec=none"] if budget == 0 else [f"spec={spec}", f"spec.budget={budget}"]
    if 0 < budget < 4:  # the composed config's own rule (topk <= budget): what python -m sweep would have run
        over.append(f"spec.topk={budget}")
    if per_load is not None:
        over.append("spec.per_load=" + str(per_load).replace(" ", ""))
    doc = TrialResult(status="ok", simulated=True, config=cfg,
                      trial=TrialInfo(name="?", hardware="b300", spec="none" if budget == 0 else spec,
                                      overrides=[*over, "hardware=b300", "workload.contexts=[1024]",
                                                 "mlflow.enabled=false"], finished=finished,
                                      choices={"hardware": "b300", "spec": "none" if budget == 0 else spec,
                                               "server": "sim", "model": "kimi_k26", "workload": "seed"}),
                      cells=[Cell(context=1024, concurrency=c, requests=2 * c, errors=0, output_tok_s=float(t),
                                  completion_tokens=128 * c, duration_s=128 * c / t) for c, t in zip(loads, tok_s)],
                      coding=Coding(eval="five", passed=5, total=5, pass_rate=1.0))
    doc.metrics = score.metrics(doc)
    doc.write(path)
    return path


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    d = tmp_path / "sweep"
    for i, k in enumerate((0, 8, 4, 2)):
        write(d / str(i) / "result.json", k, TOK_S[k])
    write(d / "9" / "result.json", 4, TOK_S[4], spec="suffix")  # another family: one budget, stays out
    return d


def docs(d: Path) -> tuple[list[TrialResult], list[str]]:
    paths = sorted(d.rglob("result.json"))
    return [TrialResult.load(p) for p in paths], [str(p) for p in paths]


def test_the_table_is_derived_from_the_family_with_its_verdicts(measured: Path) -> None:
    [t] = derive(*docs(measured), family="ddtree")
    assert t.per_load == TABLE
    assert [(c.load, c.budget, c.state) for c in t.choices] == [
        (1, 8, "decided"), (2, 8, "equivalent"), (4, 4, "decided"), (8, 4, "open"), (16, 2, "equivalent")]
    assert "at most 0.6% below the best" in t.choices[1].why and "margin" in t.choices[1].why
    assert t.choices[3].why.startswith("open (") and "at most 3.1% below the best" in t.choices[3].why
    assert "at most 1.3% below the best" in t.choices[4].why
    notes = "\n".join(t.notes)
    for said in ("batch sizes 3: not measured; vLLM carries the previous band's budget (8)",
                 "batch sizes 9-15: not measured; vLLM carries the previous band's budget (4)",
                 "above 16: not measured; vLLM carries the last budget (2)", "batch size is the load"):
        assert said in notes, notes
    assert t.budgets == [2, 4, 8] and t.baseline is not None


def test_the_suffix_family_with_one_budget_is_its_own_table(measured: Path) -> None:
    tables = derive(*docs(measured))
    assert sorted(t.family for t in tables) == ["b300-ddtree-t4-w2048-seed-ctx1024-c1.2.4.8.16-mt64",
                                                "b300-suffix-t4-w2048-seed-ctx1024-c1.2.4.8.16-mt64"]


def test_the_first_band_starts_at_1_when_1_was_not_measured(tmp_path: Path) -> None:
    for i, k in enumerate((0, 8, 4)):
        write(tmp_path / str(i) / "result.json", k, TOK_S[k][1:], LOADS[1:])
    [t] = derive(*docs(tmp_path))
    # 2: b8 within the margin of the best (b4 may be 11% below) -> 8; 4, 8: b4; 16: the baseline
    assert t.per_load == [[1, 2, 8], [4, 8, 4], [16, 16, 0]]
    assert "batch sizes 1-1: not measured; the first band starts at 1" in t.notes[1]


def test_the_baseline_everywhere_is_no_table(tmp_path: Path) -> None:
    write(tmp_path / "0" / "result.json", 0, (300, 600, 900, 1200, 1500))
    write(tmp_path / "1" / "result.json", 8, TOK_S[8])
    [t] = derive(*docs(tmp_path))
    assert not t.usable and t.per_load == [[1, 16, 0]]
    assert any("no table" in n for n in t.notes)


def test_the_export_renders_the_dynamic_config_for_the_engine(measured: Path) -> None:
    [t] = derive(*docs(measured), family="ddtree")
    sim = render_table(t, "sim")
    assert sim["error"] is None and sim["argument"]["value"] == TABLE, sim
    assert sim["overrides"][0] == "server=sim" and "spec.budget=8" in sim["overrides"]
    assert "spec.per_load=[[1,2,8],[4,8,4],[16,16,2]]" in sim["overrides"]
    vllm = render_table(t, "vllm")  # DDTree has no vLLM form: said in one line, nothing else breaks
    assert vllm["argument"] is None and "has no rendering for server=vllm" in vllm["error"]
    doc, rendered = document([t], "sim", command="x")
    entry = yaml.safe_load(yaml.safe_dump(doc))["tables"][0]
    assert entry["per_load"] == TABLE and entry["statics"][8]["overrides"] == [
        "spec=ddtree", "spec.budget=8", "hardware=b300"]
    assert entry["baseline"]["overrides"] == ["spec=none", "hardware=b300"]
    assert [lv["budget"] for lv in entry["levels"]] == [8, 8, 4, 4, 2]
    lines = "\n".join(text_lines(t, "sim", rendered[0]))
    assert "--sim-per-load '[[1,2,8],[4,8,4],[16,16,2]]'" in lines


def test_the_ngram_family_exports_vllms_speculative_config(tmp_path: Path) -> None:
    """On vLLM the printed argument is --speculative-config with num_speculative_tokens = the largest budget."""
    cfgs = []
    for i, k in enumerate((0, 8, 2)):
        p = write(tmp_path / str(i) / "result.json", k, TOK_S[k][:3], LOADS[:3], spec="ngram")
        doc = TrialResult.load(p)
        doc.trial.overrides = ["server=vllm", *doc.trial.overrides[:2]] if k else ["server=vllm", "spec=none"]
        doc.write(p)
        cfgs.append(doc)
    [t] = derive(*docs(tmp_path))
    got = render_table(t, "vllm")
    assert got["error"] is None, got
    assert got["argument"]["value"]["num_speculative_tokens"] == 8
    # 1, 2, 4: b8 beyond noise (at 4 it leads b2 by 7.7%, beyond the ~5.5% three configs need)
    assert got["argument"]["value"]["num_speculative_tokens_per_batch_size"] == t.per_load == [[1, 4, 8]]


# --------------------------------------------------------------------------------- verification
DRIFT = (1.0, 1.03, 0.97)                        # the box, round by round (all arms alike)
JITTER = {1: (1.0, 1.005, 0.995), 2: (0.996, 1.0, 1.004)}  # per arm wobble, small
VERIFY = {"dynamic": (100, 135, 199), 8: (100, 150, 180), 2: (80, 140, 200), 0: (50, 90, 170)}


def verified(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    table = [[1, 1, 8], [2, 4, 2]]
    for r in (1, 2, 3):
        for n, (arm, base) in enumerate(VERIFY.items()):
            wobble = JITTER[1 + n % 2][r - 1]
            tok = [t * DRIFT[r - 1] * wobble for t in base]
            path = root / "verify" / f"round{r}" / f"{n}-{arm}" / "0" / "result.json"
            if arm == "dynamic":
                write(path, 8, tok, (1, 2, 4), per_load=table)
            else:
                write(path, int(arm), tok, (1, 2, 4))
    return root


def test_the_verification_reports_ratios_per_load_with_intervals(tmp_path: Path) -> None:
    root = verified(tmp_path)
    [v] = verifications(*docs(root))
    assert v.rounds == 3 and v.loads == [1, 2, 4] and v.best_static == 8  # geomean: b8 148.6 > b2 130.8
    by = {r.load: r for r in v.results}
    # paired per round: the drift cancels, the jitter stays (dynamic and b8 wobble alike: arms 0 and 1)
    assert by[2].vs_best.value == pytest.approx(135 / 150, rel=0.01) and by[2].vs_best.verdict == "loses"
    assert by[4].vs_best.value == pytest.approx(199 / 180, rel=0.01) and by[4].vs_best.verdict == "wins"
    assert by[4].load_best == 2 and by[4].vs_load_best.value == pytest.approx(199 / 200, rel=0.01)
    assert by[1].budget == 8 and by[2].budget == 2 and by[4].budget == 2
    gm = math.exp(statistics.fmean(math.log(a / b) for a, b in zip(VERIFY["dynamic"], VERIFY[8])))
    assert v.geomean.value == pytest.approx(gm, rel=0.01) and v.geomean.ci is not None and v.geomean.pairs == 3
    assert v.worst.load == 2
    assert v.worst_baseline.load == 4 and v.worst_baseline.vs_baseline.value == pytest.approx(199 / 170, rel=0.01)
    assert v.headline() == (f"dynamic vs best static: {v.geomean.value:.2f}x geometric mean over loads (worst load "
                            f"{by[2].vs_best.value:.2f}x); vs baseline: worst load {199 / 170:.2f}x")
    assert v.where_it_loses() == [f"concurrency 2: loses to the best static ({by[2].vs_best.text()})"]
    assert v.pays


def test_two_rounds_take_the_drift_out_as_a_block(tmp_path: Path) -> None:
    """Two rounds: the 3% drift between them is shared by every arm -- a round (block) effect the
    campaign model takes out (sweep/score/campaign.py) -- so the ratios are judged with the arms' own
    jitter (~0.5%), pooled over every arm and load; the old rule counted the drift as noise (a floor of
    ~2% a measurement) and could not tell 5% apart. Not a t-interval on one degree of freedom either.
    One round: nothing was measured twice, the box's declared spread judges as a prior."""
    import shutil

    from sweep.report.verify import box_spread
    from sweep.report.verify_view import text_lines
    from sweep.stats import Z975

    root = verified(tmp_path)
    shutil.rmtree(root / "verify" / "round3")
    [v] = verifications(*docs(root))
    assert v.rounds == 2
    spread, cells = box_spread([v.dynamic, *v.statics.values(), v.baseline])
    assert 0.01 < spread < 0.03  # what the drift looks like when it is counted as noise
    by = {r.load: r for r in v.results}
    for r in v.results:
        lo, hi = (math.log(x) for x in r.vs_best.ci)
        assert 0 < (hi - lo) / 2 < Z975 * spread  # the drift is not noise: narrower than its floor
    assert by[2].vs_best.verdict == "loses" and by[4].vs_best.verdict == "wins"
    assert by[1].vs_best.ci[0] < 1 < by[1].vs_best.ci[1] or abs(by[1].vs_best.value - 1) > 0.004
    noise = next(ln for ln in text_lines(v) if ln.strip().startswith("noise:"))
    assert "2 round(s)" in noise and "pooled" in noise and "rounds are blocks" in noise
    # one round: the box's declared spread (b300: hardware.spread 4.2%) judges alone, as a prior
    shutil.rmtree(root / "verify" / "round2")
    [one] = verifications(*docs(root))
    for r in one.results:
        lo, hi = (math.log(x) for x in r.vs_best.ci)
        assert (hi - lo) / 2 == pytest.approx(Z975 * math.sqrt(2) * math.log1p(0.042))
    assert "prior" in next(ln for ln in text_lines(one) if ln.strip().startswith("noise:"))


def test_the_report_has_the_section_and_verify_writes_its_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    from sweep.report.html import render

    root = verified(tmp_path)
    page = render(*docs(root)[:1], title="t", sources=docs(root)[1])
    assert 'id="per-load"' in page and "Per-load speculation, verified" in page and "<svg" in page
    (root / "dynamic-sim.yaml").write_text(yaml.safe_dump({"format": "specsweep.dynamic/1", "tables": [{
        "workload": "seed", "context": 1024, "family": "x", "engine": "sim", "per_load": [[1, 1, 8], [2, 4, 2]],
        "overrides": ["spec=ddtree"], "levels": [{"load": 1}, {"load": 2}, {"load": 4}], "statics": {}}]}))
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "sweep.verify_dynamic", "--dir", str(root), "--report-only"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("dynamic vs best static: ") and "geometric mean over loads (worst load " in last
    assert (root / "verify.yaml").is_file() and list(root.glob("verify-1-seed-ctx1024.png"))
    doc = yaml.safe_load((root / "verify.yaml").read_text())
    assert doc["verifications"][0]["best_static"] == 8 and doc["verifications"][0]["loses"]


def _export(measured: Path) -> None:
    tables = derive(*docs(measured), family="ddtree")
    doc, _ = document(tables, "sim", command="test")
    (measured / "dynamic-sim.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def verify_cli(*args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "sweep.verify_dynamic", *args], capture_output=True, text=True,
                          timeout=120)


def test_verify_runs_every_arm_each_round_in_rotated_order(measured: Path) -> None:
    _export(measured)
    out = verify_cli("--dir", str(measured), "--dry-run", "--rounds", "3", "workload.requests_per_cell=4")
    assert out.returncode == 0, out.stderr
    runs = out.stdout.strip().splitlines()
    assert len(runs) == 15  # dynamic, b2, b4, b8, baseline x 3 rounds
    labels = [r.rsplit("/", 1)[-1] for r in runs]
    assert labels[:5] == ["0-dynamic1", "1-b2", "2-b4", "3-b8", "4-baseline"]
    assert labels[5:10] == ["0-b2", "1-b4", "2-b8", "3-baseline", "4-dynamic1"]  # rotated
    first = runs[0]
    assert "server=sim" in first and "spec.per_load=[[1,2,8],[4,8,4],[16,16,2]]" in first
    assert "spec.budget=8" in first and "workload.concurrency=[1,2,4,8,16]" in first
    import re

    # every run of the command has a dir of its own under verify/ (a rerun never writes where one ran)
    assert "workload.contexts=[1024]" in first and re.search(
        # a verification is a recording: it waits for a busy box, then refuses it, unless told otherwise
        re.escape("baseline.auto_run=false workload.busy_box=refuse workload.busy_wait_s=300 "
                  "workload.requests_per_cell=4 hydra.sweep.dir=" + str(measured.resolve())
                  + "/verify/") + r"[\w-]+/round1/0-dynamic1$", first), first


def test_a_hand_written_table_is_checked_the_same_way(measured: Path) -> None:
    _export(measured)
    out = verify_cli("--dir", str(measured), "--dry-run", "--rounds", "1", "--statics", "chosen",
                     "--table", "[[1,256,8]]")
    assert out.returncode == 0, out.stderr
    runs = out.stdout.strip().splitlines()
    # its own budget (8) and the best static over the loads as measured (b4: geometric mean 503 vs b8's 499)
    assert [r.rsplit("/", 1)[-1] for r in runs] == ["0-dynamic1", "1-b4", "2-b8", "3-baseline"]
    assert "spec.per_load=[[1,256,8]]" in runs[0] and "spec.budget=8" in runs[0]
    bad = verify_cli("--dir", str(measured), "--dry-run", "--table", "[[2,4,4]]")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --table: the first band must start at 1 (every batch size needs a budget), got 2")


@pytest.mark.slow
def test_measure_export_and_verify_on_the_simulator(tmp_path: Path) -> None:
    """The whole path over real runs: a family (budgets 8, 16) and the baseline measured on the simulator,
    the table exported for it, one verification round run by the command (every arm a real python -m sweep
    multirun), and the verdict recognises the dynamic config, both statics and the baseline in it."""
    import subprocess
    import sys

    from _support import free_port, subprocess_env

    common = ["hardware=pro6000_ep4", "workload=smoke", "workload.concurrency=[1,64]", "workload.contexts=[1024]",
              "workload.max_tokens=16", "workload.requests_per_cell=64", "workload.coding=off",
              "server.sim.time_scale=0.02", "server.sim.load_seconds=0.2", "mlflow.enabled=false",
              f"server.port={free_port()}"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, env=subprocess_env(),
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        return out

    run("sweep", "-m", "spec=ddtree", "spec.budget=8,16", *common, f"hydra.sweep.dir={tmp_path}/m")
    run("sweep", "spec=none", *common, f"hydra.run.dir={tmp_path}/base")
    run("sweep.schedule", "--dir", str(tmp_path), "--export", "sim", "--no-write")  # prints, writes nothing
    assert not (tmp_path / "dynamic-sim.yaml").exists()
    run("sweep.schedule", "--dir", str(tmp_path), "--export", "sim")
    [table] = yaml.safe_load((tmp_path / "dynamic-sim.yaml").read_text())["tables"]
    assert table["budgets"] == [8, 16] and table["baseline"] is not None
    if not table["per_load"]:  # the baseline won everywhere: check the one hand-written table instead
        extra = ["--table", "[[1,1,16],[2,64,8]]"]
    else:
        extra = []
    # the simulator's timing and the port are launch plumbing: from this command line, never from the export
    # (and a CI box running other tests beside this one is busy: measured and marked, not refused)
    plumbing = ["server.sim.time_scale=0.02", "server.sim.load_seconds=0.2", f"server.port={free_port()}",
                "workload.busy_box=mark"]
    out = run("sweep.verify_dynamic", "--dir", str(tmp_path), "--rounds", "1", *extra, "mlflow.enabled=false",
              *plumbing)
    assert "not taken from the file" in out.stderr and "server.sim.time_scale=0.02" in out.stderr
    doc = yaml.safe_load((tmp_path / "verify.yaml").read_text())
    [v] = doc["verifications"]
    assert set(v["arms"]) == {"dynamic", "b8", "b16", "baseline"} and v["rounds"] == 1 and v["loads"] == [1, 64]
    assert out.stdout.strip().splitlines()[-1] == v["headline"]


def test_two_runs_of_the_verification_are_rounds_of_their_own(tmp_path: Path) -> None:
    """``verify/<run id>/round<r>/``: a rerun's round 1 is not the earlier run's round 1 (never paired as one)."""
    import shutil

    root = verified(tmp_path)
    shutil.move(str(root / "verify"), str(tmp_path / "first"))
    (root / "verify").mkdir()
    shutil.move(str(tmp_path / "first"), str(root / "verify" / "run-a"))
    shutil.copytree(root / "verify" / "run-a" / "round1", root / "verify" / "run-b" / "round1")
    [v] = verifications(*docs(root))
    assert v.rounds == 4


def test_an_api_key_never_reaches_verify_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sweep.verify_dynamic import main

    secret = "sk-verify-yaml-4c1d9e"
    root = verified(tmp_path)
    (root / "dynamic-sim.yaml").write_text(yaml.safe_dump({"format": "specsweep.dynamic/1", "tables": [{
        "workload": "seed", "context": 1024, "family": "x", "engine": "sim", "per_load": [[1, 1, 8], [2, 4, 2]],
        "overrides": ["spec=ddtree"], "levels": [{"load": 1}, {"load": 2}, {"load": 4}], "statics": {}}]}))
    assert main(["--dir", str(root), "--report-only", f"server.api_key={secret}"]) == 0
    out = capsys.readouterr()
    written = (root / "verify.yaml").read_text()
    assert "server.api_key=***" in written and secret not in written + out.out + out.err


@pytest.fixture
def busy_neighbour() -> Any:
    from tests.bench.test_boxstate import burning

    yield from burning(120)


def test_a_verification_waits_then_refuses_a_busy_box_and_says_so(tmp_path: Path, busy_neighbour: int) -> None:
    """``python -m sweep.verify_dynamic`` is a recording: the first arm's trial is refused on the busy
    box (no server started), the verification stops with the policy's line and where its runs are."""
    import json

    from _support import free_port

    root = tmp_path / "sweep"
    for i, k in enumerate((0, 8, 4, 2)):
        write(root / str(i) / "result.json", k, TOK_S[k])
    _export(root)
    out = verify_cli("--dir", str(root), "--rounds", "2", "workload.busy_wait_s=2", "workload.busy_load=0.1",
                     "mlflow.enabled=false", f"server.port={free_port()}")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    stop = next(i for i, line in enumerate(lines) if line.startswith("stopped: round 1 "))
    assert lines[stop - 1].startswith("refused: the box is busy before the trial (workload.busy_box=refuse, waited")
    assert f"pid {busy_neighbour}" in lines[stop - 1]
    refused = [json.loads(p.read_text()) for p in (root / "verify").rglob("result.json")]
    assert len(refused) == 1 and refused[0]["failure"]["reason"] == "busy_box" and refused[0]["server"] is None
