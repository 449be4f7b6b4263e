"""The twin on GPU boxes, checked against public figures (benchmarks/public/gpu_figures.yaml).

Every row of every setup is predicted by ``python -m sweep.sim.predict`` -- its ``main()`` called
in this process with the command line a user would type (the setup's overrides plus the row's,
``--json --calibration FILE``), the same code path as the shell command, without a Python start
per row. The engines' step overheads are constants fitted here on the rows (a MAP fit around the
priors, ``priors.yaml``) and written as calibration files ``gpu-<engine>.yaml`` -- what a GPU box
with no calibration of its own runs on (sweep/sim/constants.py, docs/simulator.md):

* per engine (SGLang, vLLM, TensorRT-LLM): ``step_overhead_ms``, ``layer_overhead_us``,
  ``spec_overhead_ms``, ``draft_step_overhead_ms``, ``request_overhead_us``, ``dense_mem_eff``;
* shared by every engine (the GPU kernels): ``moe_mem_eff``, ``compute_eff``.

Printed per setup and overall: median and worst |error| of tok/s (aggregate or per user, as the
row gives; a TPOT row as 1000 / TPOT) and of the speedup over no speculation (rows paired with a
spec=none row of the same setup and concurrency), and how many measured values fall inside the
twin's 80% band -- in-sample (constants fitted on every setup) and leave-one-setup-out (fitted on
the others, the setup predicted as if never seen). Rows the twin cannot model must be refused by
predict in one line (exit 2); rows and setups left out are listed with why.

    python benchmarks/public_figures.py [--write] [--figures benchmarks/public/gpu_figures.yaml] [--detail]

``--write`` puts the in-sample constants into sweep/sim/calibrations/gpu-<engine>.yaml (the shipped
files; without it they go to a temporary directory and the shipped ones are compared with them).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIGURES = ROOT / "benchmarks" / "public" / "gpu_figures.yaml"
SHIPPED = ROOT / "sweep" / "sim" / "calibrations"
ENGINES = ("sglang", "vllm", "trtllm")
PER_ENGINE = ("step_overhead_ms", "layer_overhead_us", "spec_overhead_ms", "draft_step_overhead_ms",
              "request_overhead_us", "dense_mem_eff")
SHARED = ("moe_mem_eff", "compute_eff")
ROW_SD = 0.1      # the log error a row is weighed with against the priors (the model's, not the noise)
LEVEL = 0.8


@dataclass
class Row:
    setup: str
    engine: str
    argv: list[str]
    metric: str              # output | per_user | tpot
    value: float
    concurrency: int
    spec: str                # the row's spec overrides, for pairing and printing
    no_pair: bool = False
    refused: str | None = None
    counted: bool = True     # conditions stated (a setup with open conditions is reported apart)
    note: str = ""
    fast: dict[str, Any] = field(default_factory=dict)   # what the fit evaluates the twin's cell with

    @property
    def measured(self) -> float:
        """The row as tok/s (a TPOT as 1000 / TPOT: one stream's tokens per second)."""
        return 1000.0 / self.value if self.metric == "tpot" else self.value

    @property
    def key(self) -> str:
        return "per_stream_tok_s" if self.metric in ("per_user", "tpot") else "output_tok_s"

    @property
    def baseline(self) -> bool:
        return "spec=none" in self.spec.split()


def load(path: Path) -> tuple[list[Row], list[dict[str, Any]], list[str]]:
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows: list[Row] = []
    for s in doc["setups"]:
        for r in s["rows"]:
            over = [*s["overrides"], *r["spec"], "workload.coding=off"]
            if not any(o.startswith("workload.concurrency=") for o in s["overrides"]):
                over.append(f"workload.concurrency=[{int(r['c'])}]")
            rows.append(Row(setup=s["id"], engine=s["engine"], argv=over, metric=r.get("metric", s["metric"]),
                            value=float(r["value"]), concurrency=int(r["c"]), spec=" ".join(r["spec"]),
                            no_pair=bool(r.get("no_pair")), refused=r.get("refused"),
                            counted=not s.get("conditions_open"), note=str(r.get("note") or "")))
    return rows, doc["setups"], list(doc.get("not_predicted") or [])


def run_predict(argv: Sequence[str]) -> tuple[int, dict[str, Any] | None, str]:
    """``python -m sweep.sim.predict ARGV`` in this process: (exit status, its JSON, its stderr)."""
    from sweep.sim.predict import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue().strip()


# --------------------------------------------------------------------------- the fit


def prepare(rows: list[Row]) -> None:
    """Each row's composed config, box and cell arguments, once (the fit evaluates cells directly:
    the same performance model predict runs, without composing the config again per evaluation)."""
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim._setup import setup
    from sweep.sim.prediction import _cells, _requests

    for r in rows:
        if r.refused:
            continue
        raw = from_omegaconf(compose(r.argv)).raw
        su = setup(raw, "none")
        (ctx, conc), = _cells(raw["workload"])
        r.fast = {"box": su["box"], "spec": su["spec"],
                  "kw": {"context": ctx, "concurrency": conc, "max_tokens": int(raw["workload"]["max_tokens"]),
                         "requests": _requests(raw["workload"], conc), "disable_cuda_graph": su["eager"],
                         "max_running": su["max_running"]}}


def names() -> list[tuple[str, str | None]]:
    """The fitted constants: (name, engine) -- engine None for the shared ones."""
    return [(n, e) for e in ENGINES for n in PER_ENGINE] + [(n, None) for n in SHARED]


def values_for(z: Sequence[float], engine: str) -> dict[str, float]:
    from sweep.sim import constants as K

    out = K.prior_values("nvlink")
    for (n, e), zi in zip(names(), z):
        if e in (None, engine):
            out[n] = K.from_z(n, float(zi))
    return out


def fast_value(r: Row, values: dict[str, float]) -> float:
    from sweep.sim.cells import cell

    est = cell(r.fast["box"], values, r.fast["spec"], **r.fast["kw"])
    return float(est["per_stream_tok_s" if r.key == "per_stream_tok_s" else "tok_s"])


def fit(rows: list[Row]) -> tuple[list[float], list[list[float]], dict[str, float]]:
    """MAP constants on these rows: (z, covariance in z, per engine the robust residual scatter)."""
    import numpy as np
    from scipy.optimize import least_squares

    from sweep.sim import constants as K

    prm = names()
    z0 = np.array([K.to_z(n, float(K.prior(n)["value"])) for n, _ in prm])
    sd = np.array([float(K.prior(n)["sd"]) for n, _ in prm])
    used = [r for r in rows if r.fast and r.counted]

    def resid(z: np.ndarray) -> np.ndarray:
        cache: dict[str, dict[str, float]] = {}
        out = []
        for r in used:
            vals = cache.setdefault(r.engine, values_for(z, r.engine))
            out.append(math.log(max(fast_value(r, vals), 1e-9) / r.measured) / ROW_SD)
        return np.concatenate([np.array(out), (z - z0) / sd])

    got = least_squares(resid, z0, method="trf", diff_step=1e-3, x_scale=sd, max_nfev=400)
    jac = got.jac
    cov = np.linalg.pinv(jac.T @ jac)
    logs = got.fun[:len(used)] * ROW_SD
    scatter: dict[str, float] = {}
    for e in ENGINES:
        mine = [abs(x) for x, r in zip(logs, used) if r.engine == e]
        pooled = [abs(x) for x in logs]
        scatter[e] = 1.4826 * statistics.median(mine if len(mine) >= 5 else pooled) if pooled else ROW_SD
    return [float(x) for x in got.x], [[float(x) for x in row] for row in cov], scatter


def write_calibrations(folder: Path, z: Sequence[float], cov: Sequence[Sequence[float]],
                       scatter: dict[str, float], rows: list[Row], tag: str) -> dict[str, Path]:
    """gpu-<engine>.yaml per engine: every constant (the fitted ones here, the rest at their prior),
    the fitted ones' covariance and the model's error (the residual scatter) for the bands."""
    import yaml

    from sweep.sim import constants as K

    prm = names()
    out = {}
    for e in ENGINES:
        idx = [i for i, (_, eng) in enumerate(prm) if eng in (None, e)]
        vals = values_for(z, e)
        fitted = {prm[i][0] for i in idx}
        doc = {
            "schema": K.SCHEMA, "box": f"{K.GPU_ENGINE_PREFIX}{e}", "profiles": [], "nvlink": True, "kind": "nvlink",
            "model": sorted({str(a.split("=", 1)[1]) for r in rows if r.engine == e for a in r.argv
                             if a.startswith("model=")}),
            "inputs": [{"file": "benchmarks/public/gpu_figures.yaml", "setups": sorted({r.setup for r in rows
                                                                                       if r.engine == e and r.fast
                                                                                       and r.counted}),
                        "fit": tag}],
            "constants": {n: float(f"{vals[n]:.4g}") for n in K.fitted_names()},
            "status": {n: ("fitted" if n in fitted else "prior") for n in K.fitted_names()},
            "uncertainty": {
                "residual_sd_log": float(f"{scatter[e]:.4g}"),
                "model_sd_log_by_kind": {"output_tok_s": float(f"{scatter[e]:.4g}")},
                "names": [prm[i][0] for i in idx],
                "covariance": [[float(f"{cov[i][j]:.3g}") for j in idx] for i in idx],
            },
        }
        head = (f"# The twin's constants for engine {e!r} on a GPU box with no calibration of its own.\n"
                "# Written by benchmarks/public_figures.py --write from the public figures\n"
                "# (benchmarks/public/gpu_figures.yaml): the engine's step overheads and the GPU kernels'\n"
                "# efficiencies shared by every engine; everything else at its prior. Refit, do not edit.\n")
        path = folder / f"{K.GPU_ENGINE_PREFIX}{e}.yaml"
        path.write_text(head + yaml.safe_dump(doc, sort_keys=False, width=120), encoding="utf-8")
        out[e] = path
    return out


# --------------------------------------------------------------------------- judging


def predict_rows(rows: list[Row], cals: dict[str, Path], only: str | None = None) -> dict[int, dict[str, float]]:
    """Row index -> predicted value and its band, through predict's command line."""
    out = {}
    for i, r in enumerate(rows):
        if r.refused or (only and r.setup != only):
            continue
        code, pred, err = run_predict([*r.argv, "--json", "--calibration", str(cals[r.engine])])
        if code != 0 or not pred or not pred["cells"]:
            raise SystemExit(f"{r.setup} {r.spec}: predict failed ({code}): {err or (pred or {}).get('failure')}")
        cell = pred["cells"][0]
        out[i] = {"value": cell[r.key], "low": cell[f"{r.key}_low"], "high": cell[f"{r.key}_high"],
                  "acceptance": pred.get("acceptance") or "-"}
    return out


def speedups(rows: list[Row], pred: dict[int, dict[str, float]]) -> list[tuple[int, float, float]]:
    """(row, measured speedup, predicted speedup) for each spec row paired with a spec=none row."""
    out = []
    for i, r in enumerate(rows):
        if r.baseline or r.no_pair or i not in pred:
            continue
        base = [j for j, b in enumerate(rows) if b.setup == r.setup and b.baseline and b.concurrency == r.concurrency
                and b.metric == r.metric and j in pred]
        if base:
            j = base[0]
            out.append((i, r.measured / rows[j].measured, pred[i]["value"] / pred[j]["value"]))
    return out


def summary(rows: list[Row], pred: dict[int, dict[str, float]], idx: list[int]) -> dict[str, Any]:
    errs = [abs(pred[i]["value"] / rows[i].measured - 1) for i in idx if i in pred]
    inside = [pred[i]["low"] <= rows[i].measured <= pred[i]["high"] for i in idx if i in pred]
    sp = [abs(p / m - 1) for i, m, p in speedups(rows, pred) if i in idx]
    return {"n": len(errs), "med": statistics.median(errs) if errs else None, "worst": max(errs) if errs else None,
            "sp_n": len(sp), "sp_med": statistics.median(sp) if sp else None, "sp_worst": max(sp) if sp else None,
            "cover": sum(inside) / len(inside) if inside else None, "inside": sum(inside)}


def robust(logs: Sequence[float]) -> float:
    """1.4826 x median |log error|: a standard deviation that one wild setup does not set."""
    return 1.4826 * statistics.median([abs(x) for x in logs]) if logs else ROW_SD


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def line(label: str, ins: dict[str, Any], out: dict[str, Any]) -> str:
    def part(s: dict[str, Any]) -> str:
        return (f"{pct(s['med']):>6} {pct(s['worst']):>6}  {pct(s['sp_med']):>6} {pct(s['sp_worst']):>6}  "
                f"{s['inside']:>2}/{s['n']:<2} {pct(s['cover']):>6}")
    return f"{label:<8} {ins['n']:>4}  {part(ins)}  |  {part(out)}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", type=Path, default=FIGURES)
    ap.add_argument("--write", action="store_true", help="write the in-sample constants to the shipped files")
    ap.add_argument("--detail", action="store_true", help="every row's measured and predicted figures")
    args = ap.parse_args(argv)
    rows, setups, left_out = load(args.figures)
    prepare(rows)
    tmp = Path(tempfile.mkdtemp(prefix="public-figures-"))

    # Leave one setup out: fit on the others, predict it. The bands' model error is what predicting
    # a setup nobody fitted misses by -- the scatter of these out-of-sample errors over the other
    # setups (a first pass gives them; the held-out setup's own errors never set its band) --, not
    # the in-sample residuals, which the fit has already bent the constants towards.
    held_out = [s["id"] for s in setups if any(r.setup == s["id"] and r.fast for r in rows)]
    folds: dict[str, tuple[list[float], list[list[float]], list[Row]]] = {}
    first: dict[int, dict[str, float]] = {}
    for held in held_out:
        others = [r if r.setup != held else Row(**{**r.__dict__, "counted": False}) for r in rows]
        zs, covs, scat = fit(others)
        folds[held] = (zs, covs, others)
        (tmp / held).mkdir(exist_ok=True)
        first.update(predict_rows(rows, write_calibrations(tmp / held, zs, covs, scat, others, f"without {held}"),
                                  only=held))
    logs = {i: math.log(p["value"] / rows[i].measured) for i, p in first.items() if rows[i].counted}
    loso: dict[int, dict[str, float]] = {}
    for held in held_out:
        zs, covs, others = folds[held]
        err = robust([x for i, x in logs.items() if rows[i].setup != held])
        loso.update(predict_rows(rows, write_calibrations(tmp / held, zs, covs, dict.fromkeys(ENGINES, err), others,
                                                          f"without {held}"), only=held))
    z, cov, _ = fit(rows)
    folder = SHIPPED if args.write else tmp / "all"
    folder.mkdir(parents=True, exist_ok=True)
    scatter = dict.fromkeys(ENGINES, robust(list(logs.values())))
    cals = write_calibrations(folder, z, cov, scatter, rows, "every setup")
    ins = predict_rows(rows, cals)

    print("The twin against public GPU figures (benchmarks/public/gpu_figures.yaml), every row through "
          "python -m sweep.sim.predict")
    print(f"{'setup':<8} {'rows':>4}  {'in-sample: tok/s med worst  speedup med worst  in 80% band':<52}|  "
          "leave-one-setup-out: the same")
    counted: list[int] = []
    for s in setups:
        idx = [i for i, r in enumerate(rows) if r.setup == s["id"] and i in ins]
        if not idx:
            continue
        print(line(s["id"] + ("*" if s.get("conditions_open") else ""), summary(rows, ins, idx),
                   summary(rows, loso, idx)))
        if not s.get("conditions_open"):
            counted += idx
    print(line("overall", summary(rows, ins, counted), summary(rows, loso, counted)))
    print("* conditions not stated by the source (box, load): predicted under the setup's assumptions, "
          "not counted in overall")
    if args.detail:
        print(f"\n{'setup':<5} {'spec':<62} {'c':>4} {'measured':>9} {'in-sample [80%]':>24} {'LOSO':>9}  acceptance")
        for i, r in enumerate(rows):
            if i not in ins:
                continue
            p, q = ins[i], loso.get(i)
            band = f"{p['value']:,.1f} [{p['low']:,.0f}-{p['high']:,.0f}]"
            print(f"{r.setup:<5} {r.spec[:62]:<62} {r.concurrency:>4} {r.measured:>9,.1f} {band:>24} "
                  f"{(q['value'] if q else float('nan')):>9,.1f}  {p['acceptance'][:40]}")
    print("\nrefused by predict (one line, exit 2):")
    for r in rows:
        if r.refused:
            code, _, err = run_predict([*r.argv, "--json"])
            ok = code == 2 and len(err.splitlines()) == 1 and r.refused in err
            print(f"  {r.setup} {r.spec}: exit {code}{'' if ok else ' (NOT the expected refusal)'} -- {err}")
    print("not predicted:")
    for s in setups:
        for why in s.get("not_predicted") or []:
            print(f"  {s['id']}: {why}")
    for why in left_out:
        print(f"  {why}")
    print("\nconstants (in-sample fit; per engine: step ms, layer us, spec ms, draft step ms, request us, "
          "dense mem eff; shared: moe mem eff, compute eff):")
    for e in ENGINES:
        v = values_for(z, e)
        print(f"  {e:<7} " + ", ".join(f"{n} {v[n]:.4g}" for n in PER_ENGINE)
              )
    print(f"  the bands' model error: {100 * scatter['sglang']:.0f}% (log sd: the leave-one-setup-out errors' "
          "robust scatter)")
    v = values_for(z, "sglang")
    print("  shared  " + ", ".join(f"{n} {v[n]:.4g}" for n in SHARED))
    if not args.write:
        same = all((SHIPPED / p.name).is_file() and _constants(SHIPPED / p.name) == _constants(p)
                   for p in cals.values())
        print(f"shipped sweep/sim/calibrations/gpu-*.yaml {'match' if same else 'DIFFER FROM'} this fit"
              + ("" if same else " (python benchmarks/public_figures.py --write)"))
    return 0


def _constants(path: Path) -> dict[str, float]:
    import yaml

    return dict(yaml.safe_load(path.read_text(encoding="utf-8")).get("constants") or {})


if __name__ == "__main__":
    sys.exit(main())
