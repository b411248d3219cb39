#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_graph.py: PyTorch's CUDA graphs on the same workload as bench_graph, for comparison.

For graphs of N = 1, 10, 100 and 1000 tiny kernels (x.add_(1) on a one-element tensor, chained
on one stream):

  replay    the host time of torch.cuda.CUDAGraph.replay(), timed in batches exactly as
            bench_graph times recap_graph_replay (same batch sizes, stream synchronised between
            batches, so the launch queue never fills);
  capture   the host time of CUDAGraph() + capture_begin() + N ops + capture_end(), which
            instantiates (PyTorch's equivalent of recap_graph_create + capture_begin + capture_end),
            and, as a second figure, the same through the `with torch.cuda.graph(g):` context
            manager, which also synchronises and empties the cache on entry.

Python's own overhead is part of what PyTorch users pay, so it is included. Writes JSON
(--json PATH, default $OUT/torch_graph.json or ./torch_graph.json). Exit status: 0 done,
1 a check failed, 2 no CUDA device (or no torch).
"""
import argparse
import gc
import json
import sys
import time

from bench_common import default_json, stats

SIZES = (1, 10, 100, 1000)


def replay_plan(n, quick):
    """Batch size and number of batches: the same as bench_graph's."""
    batch = 50 if n <= 10 else 25 if n <= 100 else 10
    launches = 2000 if n <= 100 else 400
    if quick:
        launches //= 5
    return batch, launches // batch


def bench_capture(torch, n, reps, stream):
    x = torch.zeros(1, device="cuda")

    def with_begin_end():
        t0 = time.perf_counter_ns()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            g.capture_begin()
            for _ in range(n):
                x.add_(1)
            g.capture_end()
        t1 = time.perf_counter_ns()
        del g
        return (t1 - t0) / 1e3

    def with_context():
        t0 = time.perf_counter_ns()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(n):
                x.add_(1)
        t1 = time.perf_counter_ns()
        del g
        return (t1 - t0) / 1e3

    for _ in range(2):
        with_begin_end()
        with_context()
    plain, scoped = [], []
    for i in range(reps):
        if i % 2 == 0:
            plain.append(with_begin_end())
            scoped.append(with_context())
        else:
            scoped.append(with_context())
            plain.append(with_begin_end())
    return {"n": n, "reps": reps, "torch_us": stats(plain), "torch_scope_us": stats(scoped)}


def bench_replay(torch, n, quick, stream):
    batch, batches = replay_plan(n, quick)
    x = torch.zeros(1, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        g.capture_begin()
        for _ in range(n):
            x.add_(1)
        g.capture_end()
    torch.cuda.synchronize()
    x.zero_()
    torch.cuda.synchronize()

    replays = 0
    samples = []
    with torch.cuda.stream(stream):
        for i in range(batches + 2):  # two warm-up batches
            stream.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(batch):
                g.replay()
            t1 = time.perf_counter_ns()
            replays += batch
            if i >= 2:
                samples.append((t1 - t0) / 1e3 / batch)
        stream.synchronize()
    value = int(x.item())
    ok = value == n * replays
    if not ok:
        print(f"torch_graph: CHECK FAILED for N={n}: x = {value} after {replays} replays, "
              f"expected {n * replays}", file=sys.stderr)
    del g
    return {"n": n, "batch": batch, "batches": batches, "torch_us": stats(samples)}, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", default=None, help="output path")
    parser.add_argument("json_path", nargs="?", default=None)
    args = parser.parse_args()
    path = args.json or args.json_path or default_json("torch_graph")

    try:
        import torch
    except ImportError as e:
        print(f"torch_graph: no CUDA device: torch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_graph: no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    torch.cuda.init()
    name = torch.cuda.get_device_name()
    print(f"torch_graph: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}"
          f"{' (quick run)' if args.quick else ''}", flush=True)
    stream = torch.cuda.Stream()
    # Load the kernel and warm the allocator before anything is timed.
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()

    reps = 6 if args.quick else 20
    replay, capture, ok_all = [], [], True
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside a timed batch would be noise, not PyTorch's cost
    try:
        for n in SIZES:
            capture.append(bench_capture(torch, n, reps, stream))
            r, ok = bench_replay(torch, n, args.quick, stream)
            replay.append(r)
            ok_all &= ok
            print(f"  N={n:<5d} replay {r['torch_us']['median']:.3f} us; capture "
                  f"{capture[-1]['torch_us']['median']:.1f} us, with torch.cuda.graph "
                  f"{capture[-1]['torch_scope_us']['median']:.1f} us", flush=True)
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()

    print("\ntorch graph replay: host time of one g.replay(), us (median of batches)")
    print(f"{'N':>6} {'torch':>10} {'p10-p90':>17}")
    for r in replay:
        s = r["torch_us"]
        print(f"{r['n']:>6} {s['median']:>10.3f} {s['p10']:>8.3f}-{s['p90']:<8.3f}")
    print(f"\ntorch capture + instantiate of N ops, us (median of {reps})")
    print(f"{'N':>6} {'begin/end':>10} {'torch.cuda.graph':>17}")
    for c in capture:
        print(f"{c['n']:>6} {c['torch_us']['median']:>10.1f} {c['torch_scope_us']['median']:>17.1f}")

    result = {"benchmark": "torch_graph", "device": name, "torch_version": torch.__version__,
              "cuda_version": torch.version.cuda, "quick": args.quick, "checks_passed": ok_all,
              "unit": "us", "replay": replay, "capture": capture}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nresults: {path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
