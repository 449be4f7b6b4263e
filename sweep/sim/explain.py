"""Where a step's time goes, by concurrency, and why a wider tree stops paying.

    python -m sweep.sim.predict hardware=b300 --breakdown [--concurrency 1,8,64,256]

For each concurrency the twin's verify step is split into the drafter, the
verify forward (weights streamed vs GEMM compute: which one binds), attention
over the context (KV reads + its flops), communication (the layout's
collectives) and fixed overhead (kernel gaps, the scheduler, per-request and
per-token work, speculative bookkeeping). Then the config against a budget
twice as wide: a wider tree pays while its extra accepted tokens per step
outgrow its extra step time -- true at C=1 on an NVLink box only while new
experts stay cheap, at moderate load where every expert is read anyway, and
no longer once verify GEMMs turn compute-bound, attention reads grow with
context x batch, and the fixed and drafter costs scale with the batch. Last,
the best budget per concurrency against the autoregressive baseline, and the
crossover concurrencies (issue 22's "explain the crossover").
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sweep.sim.accept import CHAIN_FAMILIES, family
from sweep.sim.cells import cell

LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TREE_BUDGETS = (2, 4, 8, 16, 32, 64)
CHAIN_BUDGETS = (1, 2, 4, 8, 16, 32)
OVERHEAD = ("kernels", "fixed", "batch", "spec", "tree")


def _cell(su: Mapping[str, Any], spec: Mapping[str, Any], conc: int, ctx: int, max_tokens: int) -> dict[str, float]:
    return cell(su["box"], su["values"], spec, context=ctx, concurrency=conc, max_tokens=max_tokens,
                requests=2 * conc, disable_cuda_graph=su["eager"], max_running=su["max_running"])


def row(est: Mapping[str, float]) -> dict[str, Any]:
    """One concurrency's step split into the parts the breakdown names (ms)."""
    mem = est["step_weights_ms"] + est["step_kv_ms"]
    comp = est["step_gemm_ms"] + est["step_attn_ms"]
    return {
        "step": est["step_ms"], "draft": est["step_draft_ms"], "verify": est["step_gpu_ms"],
        "verify_memory": est["step_weights_ms"], "verify_compute": est["step_gemm_ms"],
        "attention": est["step_kv_ms"] + est["step_attn_ms"],
        "bound": "compute" if comp > mem else "memory",
        "comm": est["step_comm_ms"], "overhead": sum(est[f"step_{k}_ms"] for k in OVERHEAD),
        "accept": est["accept_len"], "width": est["step_width"], "tok_s": est["tok_s"],
        "per_stream": est["per_stream_tok_s"], "running": est["running"],
    }


def breakdown(config: Any, *, calibration: Any = None, concurrencies: Sequence[int] | None = None,
              context: int | None = None) -> dict[str, Any]:
    """Per concurrency: the step's parts, the config vs twice its budget, the best budget vs AR."""
    from sweep.sim._setup import setup

    su = setup(config, calibration)
    wl = su["cfg"]["workload"]
    ctx = int(context if context is not None else wl["contexts"][0])
    n = int(wl["max_tokens"])
    concs = list(concurrencies or wl["concurrency"])
    spec = su["spec"]
    fam = family(spec)
    out: dict[str, Any] = {"calibration": su["cal"].source, "context": ctx, "max_tokens": n, "rows": [],
                           "family": fam, "budget": spec.get("budget")}
    ar = {**spec, "algorithm": "none"}
    budgets = CHAIN_BUDGETS if fam in CHAIN_FAMILIES else TREE_BUDGETS
    for conc in concs:
        r = {"concurrency": conc, **row(_cell(su, spec, conc, ctx, n))}
        base = _cell(su, ar, conc, ctx, n)
        r["ar_tok_s"] = base["tok_s"]
        if fam != "none" and spec.get("budget"):
            wide = _cell(su, {**spec, "budget": 2 * int(spec["budget"])}, conc, ctx, n)
            r["wider"] = {"budget": 2 * int(spec["budget"]),
                          "tokens_per_step": wide["accept_len"] / r["accept"] - 1.0,
                          "step_time": wide["step_ms"] / r["step"] - 1.0,
                          "pays": wide["tok_s"] > r["tok_s"]}
            rates = {b: _cell(su, {**spec, "budget": b}, conc, ctx, n)["tok_s"] for b in budgets}
            best = max(rates, key=rates.__getitem__)
            r["best_budget"], r["best_tok_s"] = best, rates[best]
        out["rows"].append(r)
    out["crossover"] = crossovers(out["rows"])
    return out


def crossovers(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first concurrency where the config stops beating AR, and where twice its budget stops paying."""
    out: dict[str, Any] = {"spec_vs_ar": None, "wider_stops": None}
    for r in rows:
        if out["spec_vs_ar"] is None and r.get("ar_tok_s") and r["tok_s"] < r["ar_tok_s"]:
            out["spec_vs_ar"] = r["concurrency"]
    paid = False
    for r in rows:
        w = r.get("wider")
        if not w:
            continue
        paid = paid or w["pays"]
        if paid and not w["pays"] and out["wider_stops"] is None:
            out["wider_stops"] = r["concurrency"]
    return out


def render(b: Mapping[str, Any], title: str) -> str:
    lines = [f"where a step's time goes ({title}, context {b['context']}, {b['max_tokens']} tokens out; ms per step)",
             f"{'C':>5} {'step':>7} {'draft':>6} {'verify':>7} {'(weights':>9} {'gemm)':>7} {'bound':>7} "
             f"{'attn':>6} {'comm':>6} {'ovh':>6} {'accept':>6} {'tok/s':>9} {'AR tok/s':>9}"]
    for r in b["rows"]:
        lines.append(f"{r['concurrency']:>5} {r['step']:>7.2f} {r['draft']:>6.2f} {r['verify']:>7.2f} "
                     f"{r['verify_memory']:>9.2f} {r['verify_compute']:>7.2f} {r['bound']:>7} "
                     f"{r['attention']:>6.2f} {r['comm']:>6.2f} {r['overhead']:>6.2f} {r['accept']:>6.2f} "
                     f"{r['tok_s']:>9,.1f} {r['ar_tok_s']:>9,.1f}")
    wide = [r for r in b["rows"] if r.get("wider")]
    if wide:
        w0 = wide[0]["wider"]["budget"]
        lines.append(f"twice the budget (b{b['budget']} -> b{w0}): extra tokens per step vs extra step time")
        for r in wide:
            w = r["wider"]
            lines.append(f"{r['concurrency']:>5}  tokens/step {100 * w['tokens_per_step']:+6.1f}%  step time "
                         f"{100 * w['step_time']:+6.1f}%  -> {'pays' if w['pays'] else 'does not pay'}"
                         f"   (best budget b{r['best_budget']}: {r['best_tok_s']:,.1f} tok/s, "
                         f"{r['best_tok_s'] / r['ar_tok_s']:.2f}x AR)")
    cx = b["crossover"]
    lines.append("crossover: " + "; ".join([
        f"speculation stops beating autoregressive at C={cx['spec_vs_ar']}" if cx["spec_vs_ar"]
        else "speculation beats autoregressive at every concurrency shown",
        f"twice the budget stops paying at C={cx['wider_stops']}" if cx["wider_stops"]
        else "twice the budget never starts then stops paying here"]))
    return "\n".join(lines)
