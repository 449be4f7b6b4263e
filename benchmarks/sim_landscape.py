"""The twin's landscape on a box: budget x topk at two concurrencies, and the drafter window.

Prints the tables docs/simulator.md shows, from the shipped calibration
(or --calibration): output tok/s and accept length per DDTree budget x topk
at context 60 (512 tokens out), with CUDA graphs where the box allows them
and eager (``*``) where its quirk crashes graph capture -- what a real run
of that config would have to use; then tok/s per window x context.

    python benchmarks/sim_landscape.py [--hardware b300] [--concurrency 1 64] [--calibration PATH|none]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUDGETS = (4, 6, 8, 12, 16, 24, 32)
TOPKS = (1, 2, 4, 8)
WINDOWS = (512, 1024, 2048, 4096)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hardware", default="b300")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    p.add_argument("--calibration", default=None)
    args = p.parse_args()

    from sweep.sim import cells, constants

    hw = yaml.safe_load((ROOT / "conf" / "hardware" / f"{args.hardware}.yaml").read_text())
    model = yaml.safe_load((ROOT / "conf" / "model" / "kimi_k26.yaml").read_text())
    cal = constants.resolve(hw, args.calibration)
    max_budget = (hw.get("quirks") or {}).get("cuda_graph_max_budget")
    t0 = time.perf_counter()
    print(f"{args.hardware}: {cal.source}; context 60, 512 tokens out, requests = 2 x C")

    def cell(spec: dict, ctx: int, conc: int) -> dict[str, float]:
        eager = max_budget is not None and int(spec.get("budget") or 0) > int(max_budget)
        return cells.estimate(hw, model, spec, context=ctx, concurrency=conc, max_tokens=512, requests=2 * conc,
                             disable_cuda_graph=eager, cal=cal)

    ar = {c: cell({"algorithm": "none"}, 60, c)["tok_s"] for c in args.concurrency}
    for conc in args.concurrency:
        print(f"\nC={conc}: output tok/s (accept length); autoregressive {ar[conc]:,.0f} tok/s; * = eager")
        print("| budget | " + " | ".join(f"topk {k}" for k in TOPKS) + " |")
        print("|---|" + "---|" * len(TOPKS))
        for b in BUDGETS:
            row = []
            for k in TOPKS:
                if k > b:
                    row.append("-")
                    continue
                e = cell({"algorithm": "ddtree", "budget": b, "topk": k, "window": 2048, "block": 8}, 60, conc)
                star = "*" if max_budget is not None and b > int(max_budget) else ""
                row.append(f"{e['tok_s']:,.0f}{star} ({e['accept_len']:.2f})")
            print(f"| {b} | " + " | ".join(row) + " |")
    print("\nwindow (DDTree b8/t4): output tok/s (accept length) by prompt context, C=1 / C=64")
    contexts = (60, 2048, 4096, 16384)
    print("| window | " + " | ".join(f"ctx {x}" for x in contexts) + " |")
    print("|---|" + "---|" * len(contexts))
    for w in WINDOWS:
        row = []
        for x in contexts:
            spec = {"algorithm": "ddtree", "budget": 8, "topk": 4, "window": w, "block": 8}
            one, many = cell(spec, x, 1), cell(spec, x, 64)
            row.append(f"{one['tok_s']:,.0f} / {many['tok_s']:,.0f} ({one['accept_len']:.2f})")
        print(f"| {w} | " + " | ".join(row) + " |")
    print(f"\n({time.perf_counter() - t0:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
