#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""plot_mlp.py: recap against PyTorch training the same MLP (bench_mlp.json, torch_mlp.json).

Prints, per shape (width/depth/batch), the median step time of each way of each framework and
the ratios the goals are about, and draws them as a PNG (grouped bars, log scale) when
matplotlib is available:

  goal 1: at small shapes (512/8/32 and 1024/16/64), recap's graphed-callables step is at least
          4x faster than torch's make_graphed_callables step (torch graphed / recap graphed >= 4);
  goal 2: recap's graphed-callables step is within 1.1x of recap's whole-step graph, the floor
          (recap graphed / recap whole_step <= 1.1).

The goals are reported, never asserted: the exit status is 0 whenever the inputs could be read.

    python3 bench/plot_mlp.py [--recap bench_mlp.json] [--torch torch_mlp.json]
                              [--png docs/mlp_bench.png]

Inputs default to $OUT/<name>.json when OUT is set, else ./<name>.json. A missing torch file is
reported and the recap figures alone are shown. Exit status: 0 done, 1 no readable recap file.
"""
import argparse
import json
import os
import sys

from bench_common import default_json

SMALL = {(512, 8, 32), (1024, 16, 64)}
# (key in the JSON, legend label, column heading)
RECAP_WAYS = (("eager", "recap eager", "recap eager"),
              ("graphed", "recap graphed callables", "recap graphed"),
              ("graphed_layers", "recap graphed, per layer", "recap gr/layer"),
              ("whole_step", "recap whole-step graph", "recap whole"))
TORCH_WAYS = (("eager", "torch eager", "torch eager"),
              ("graphed", "torch make_graphed_callables", "torch mgc"),
              ("whole_step", "torch whole-step graph", "torch whole"))


def load(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_mlp: no {what} results ({path}: {e})", file=sys.stderr)
        return None


def by_shape(doc):
    if not doc:
        return {}
    return {(s["width"], s["depth"], s["batch"]): s for s in doc.get("shapes", [])}


def median(shape_doc, way):
    try:
        return shape_doc["ways"][way]["step_us"]["median"]
    except (KeyError, TypeError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recap", default=default_json("bench_mlp"))
    parser.add_argument("--torch", default=default_json("torch_mlp"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--png", default=os.path.join(root, "docs", "mlp_bench.png"))
    args = parser.parse_args()

    recap_doc = load(args.recap, "recap (bench_mlp)")
    if recap_doc is None:
        return 1
    torch_doc = load(args.torch, "PyTorch (torch_mlp)")
    recap, torch = by_shape(recap_doc), by_shape(torch_doc)
    shapes = sorted(recap, key=lambda s: (s[0] * s[0] * s[1], s))

    print(f"MLP training step, median us (recap on {recap_doc.get('device', '?')}"
          + (f"; torch {torch_doc.get('torch_version', '?')} on {torch_doc.get('device', '?')}"
             if torch_doc else "") + ")")
    header = f"{'shape':<14}" + "".join(f"{heading:>15}" for _, _, heading in
                                        RECAP_WAYS + (TORCH_WAYS if torch else ()))
    print(header)
    goals = []
    for shape in shapes:
        row = f"{'/'.join(map(str, shape)):<14}"
        for way, _, _ in RECAP_WAYS:
            v = median(recap[shape], way)
            row += f"{v:>15.1f}" if v is not None else f"{'-':>15}"
        if torch:
            for way, _, _ in TORCH_WAYS:
                v = median(torch.get(shape), way)
                row += f"{v:>15.1f}" if v is not None else f"{'-':>15}"
        print(row)
        rg, rw = median(recap[shape], "graphed"), median(recap[shape], "whole_step")
        tg = median(torch.get(shape), "graphed") if torch else None
        if rg and tg and shape in SMALL:
            goals.append((shape, "torch graphed / recap graphed", tg / rg, ">= 4", tg / rg >= 4.0))
        if rg and rw:
            goals.append((shape, "recap graphed / recap whole-step", rg / rw, "<= 1.1",
                          rg / rw <= 1.1))
        if not recap[shape].get("bitwise", True):
            print(f"  note: recap's ways did not agree bit for bit at {shape}")

    print("\ngoals (reported, not asserted)")
    for shape, what, ratio, goal, met in goals:
        print(f"  {'/'.join(map(str, shape)):<14} {what:<34} {ratio:>7.2f}x  goal {goal:<6} "
              f"{'met' if met else 'NOT met'}")
    if not torch:
        print("  (no torch_mlp.json: the comparison with make_graphed_callables is not shown)")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\nplot_mlp: matplotlib is not available; no PNG written ({args.png})")
        return 0

    series = [(label, [median(recap[s], way) for s in shapes]) for way, label, _ in RECAP_WAYS]
    if torch:
        series += [(label, [median(torch.get(s), way) for s in shapes])
                   for way, label, _ in TORCH_WAYS]
    fig, ax = plt.subplots(figsize=(11, 6))
    n = len(series)
    width = 0.8 / n
    colors = ["#1f77b4", "#2ca02c", "#98df8a", "#17becf", "#d62728", "#ff7f0e", "#ffbb78"]
    for i, (label, values) in enumerate(series):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(shapes))]
        ys = [v if v is not None else 0 for v in values]
        bars = ax.bar(xs, ys, width, label=label, color=colors[i % len(colors)])
        for bar, v in zip(bars, values):
            if v:
                ax.annotate(f"{v:.0f}", (bar.get_x() + bar.get_width() / 2, v), ha="center",
                            va="bottom", fontsize=7, rotation=90, xytext=(0, 2),
                            textcoords="offset points")
    ax.set_yscale("log")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([f"width {w}, depth {d}, batch {b}" for w, d, b in shapes])
    ax.set_ylabel("median step time, us (log scale; lower is better)")
    ax.set_title("MLP training step: recap (C, cuBLAS) vs PyTorch, same shapes, same GPU")
    top = max((v for _, values in series for v in values if v), default=1.0)
    ax.set_ylim(top=top * 2.5)
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    fig.savefig(args.png, dpi=130)
    print(f"\nplot_mlp: wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
