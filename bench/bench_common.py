# SPDX-License-Identifier: BSD-3-Clause
"""bench_common.py: what the PyTorch benchmark scripts share (torch_graph.py, torch_alloc.py,
torch_mlp.py) and plot_mlp.py: summary statistics of timing samples, in the same fields as the C
benchmarks' JSON, and where a result file goes by default. No torch here, so that every script
can import it. The scripts run as `python3 bench/NAME.py`, which puts bench/ on the import path.
"""
import os
import statistics


def stats(samples):
    """median (statistics.median), p10 and p90 (linear interpolation), min, max and count."""
    s = sorted(samples)
    n = len(s)

    def q(p):
        pos = p * (n - 1)
        lo = int(pos)
        if lo + 1 >= n:
            return s[-1]
        return s[lo] + (pos - lo) * (s[lo + 1] - s[lo])

    return {"median": statistics.median(s), "p10": q(0.1), "p90": q(0.9), "min": s[0],
            "max": s[-1], "count": n}


def default_json(name):
    """$OUT/NAME.json where the environment names OUT (gpu-check does), else ./NAME.json."""
    out = os.environ.get("OUT")
    return os.path.join(out, name + ".json") if out else name + ".json"
