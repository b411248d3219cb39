#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_sets.py: PyTorch capturing bucket graphs into one shared pool, for bench_sets and the
serve example (examples/serve).

(a) buckets: the 8 buckets of bench_sets (b = 512, 256, .., 4) of three GEMMs of 4096 x 4096
    (y1 = x[:b] @ W1, y2 = y1 @ W2, y3 = y2 @ W3, FP32 without TF32), each captured with
    torch.cuda.graph(g, pool=pool, stream=s), largest first, every graph in the pool of the
    first (PyTorch's documented way of sharing memory across captures). Each graph's y3 stays
    alive (the graph's static output), y1 and y2 go back to the pool. Printed: the reserved
    memory the captures added (torch.cuda.memory_reserved after, minus before, the cache
    emptied first), the same for the largest bucket alone, and the time to capture the 8
    (torch.cuda.graph's enter to exit, instantiation included). Each graph's output is
    compared with an eager run's, bit for bit.

(b) serve: the loop of examples/serve on PyTorch: the same trace (the same xorshift32 generator
    and seed, so the same batch sizes), the same shapes (an MLP 512 -> 1024 -> 1024 -> 64, GELU
    (tanh) after the hidden layers), requests padded to the next power of two up to 256; run
    eagerly and with one graph per bucket captured up front into a shared pool. Each request
    copies its inputs from pinned memory into the static input, runs, copies its outputs into
    pinned memory and synchronises; latency is the host time of that, requests/s the count
    over the latencies' sum (examples/serve's rule). The weights are PyTorch's own draws, not
    the example's: the figures compare, the outputs do not.

Writes JSON (--json PATH, default $OUT/torch_sets.json or ./torch_sets.json). Exit status: 0
done, 1 a failure (or graphed outputs that differ from eager ones), 2 no CUDA device (or no
torch).
"""
import argparse
import gc
import json
import math
import sys
import time

from bench_common import default_json, stats

BUCKETS = (512, 256, 128, 64, 32, 16, 8, 4)
WIDTH = 4096
MiB = 1 << 20

# examples/serve's defaults.
SERVE_SEED = 1234
SERVE_MAX_BATCH = 256
SERVE_DIM, SERVE_HIDDEN, SERVE_CLASSES = 512, 1024, 64
INPUT_POOL_COLUMNS = 4096


def bucket_memory(torch, sizes, s):
    """Capture the anchor workload for each size into one pool; returns (reserved bytes added,
    capture ms, outputs equal to eager)."""
    g = torch.Generator(device="cuda").manual_seed(1234)
    x = torch.rand(max(sizes), WIDTH, device="cuda", generator=g) * 2 - 1
    w = [(torch.rand(WIDTH, WIDTH, device="cuda", generator=g) * 2 - 1) * (1.7 / math.sqrt(WIDTH))
         for _ in range(3)]

    def step(b):
        y1 = x[:b] @ w[0]
        y2 = y1 @ w[1]
        return y2 @ w[2]

    # Eager runs on the capture stream first: cuBLAS makes its workspace for that stream and
    # loads its kernels outside the captures; their outputs are the references.
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        reference = {b: step(b).clone() for b in sizes}
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    graphs, outputs = [], {}
    pool = torch.cuda.graph_pool_handle()
    t0 = time.perf_counter()
    for b in sizes:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=s):
            outputs[b] = step(b)
        graphs.append(graph)
    torch.cuda.synchronize()
    capture_ms = (time.perf_counter() - t0) * 1e3
    added = torch.cuda.memory_reserved() - before
    same = True
    for graph, b in zip(graphs, sizes):
        graph.replay()
        torch.cuda.synchronize()
        if not torch.equal(outputs[b], reference[b]):
            print(f"torch_sets: bucket {b}: the graph's output differs from the eager one",
                  file=sys.stderr)
            same = False
    del graphs, outputs, reference, x, w
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return added, capture_ms, same


class XorShift32:
    """examples/serve's generator, step for step."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFF or 1

    def u32(self):
        s = self.s
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        self.s = s
        return s

    def unit(self):
        return (self.u32() >> 8) / float(1 << 24)


def serve_trace(requests, seed=SERVE_SEED, max_batch=SERVE_MAX_BATCH):
    """(batch size, input column) per request, as examples/serve's trace_make draws them."""
    rng = XorShift32(seed ^ 0x9E3779B9)
    log_range = math.log(max_batch + 1.0)
    trace = []
    for _ in range(requests):
        n = int(math.floor(math.exp(rng.unit() * log_range)))
        n = min(max(n, 1), max_batch)
        column = rng.u32() % (INPUT_POOL_COLUMNS - n + 1)
        trace.append((n, column))
    return trace


def bucket_of(n, max_batch=SERVE_MAX_BATCH):
    b = 1
    while b < n:
        b *= 2
    return min(b, max_batch)


def serve(torch, requests):
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(SERVE_SEED)

    def uniform(*shape, scale=1.0):
        return (torch.rand(*shape, device="cuda", generator=g) * 2 - 1) * scale

    w1 = uniform(SERVE_DIM, SERVE_HIDDEN, scale=2 / math.sqrt(SERVE_DIM))
    b1 = uniform(SERVE_HIDDEN, scale=0.1)
    w2 = uniform(SERVE_HIDDEN, SERVE_HIDDEN, scale=2 / math.sqrt(SERVE_HIDDEN))
    b2 = uniform(SERVE_HIDDEN, scale=0.1)
    w3 = uniform(SERVE_HIDDEN, SERVE_CLASSES, scale=1 / math.sqrt(SERVE_HIDDEN))
    b3 = uniform(SERVE_CLASSES, scale=0.1)
    inputs = (torch.rand(INPUT_POOL_COLUMNS, SERVE_DIM) * 2 - 1).pin_memory()
    static_x = torch.zeros(SERVE_MAX_BATCH, SERVE_DIM, device="cuda")
    staging = torch.empty(SERVE_MAX_BATCH, SERVE_CLASSES).pin_memory()
    buckets = sorted({bucket_of(n) for n in range(1, SERVE_MAX_BATCH + 1)}, reverse=True)
    trace = serve_trace(requests)

    def step(b):
        h = F.gelu(torch.addmm(b1, static_x[:b], w1), approximate="tanh")
        h = F.gelu(torch.addmm(b2, h, w2), approximate="tanh")
        return torch.addmm(b3, h, w3)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for b in buckets:  # warm-up: cuBLAS's workspace and kernels
            step(b)
    torch.cuda.synchronize()

    def loop(run):
        latencies = []
        with torch.cuda.stream(s):
            for n, column in trace:
                t0 = time.perf_counter()
                static_x[:n].copy_(inputs[column:column + n], non_blocking=True)
                out = run(n)
                staging[:n].copy_(out[:n], non_blocking=True)
                s.synchronize()
                latencies.append((time.perf_counter() - t0) * 1e6)
        return latencies

    result = {}
    eager = loop(lambda n: step(bucket_of(n)))
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    graphs, outputs = {}, {}
    t0 = time.perf_counter()
    for b in buckets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=s):
            outputs[b] = step(b)
        graphs[b] = graph
    torch.cuda.synchronize()
    capture_ms = (time.perf_counter() - t0) * 1e3
    graph_bytes = torch.cuda.memory_reserved() - before

    def replay(n):
        b = bucket_of(n)
        graphs[b].replay()
        return outputs[b]

    graphed = loop(replay)
    for name, lat in (("eager", eager), ("graphs", graphed)):
        result[name] = {"latency_us": stats(lat), "p99_us": sorted(lat)[max(0, math.ceil(0.99 * len(lat)) - 1)],
                        "requests_per_s": len(lat) / (sum(lat) / 1e6)}
    result["graphs"]["capture_ms"] = capture_ms
    result["graphs"]["reserved_bytes"] = graph_bytes
    result["speedup"] = result["graphs"]["requests_per_s"] / result["eager"]["requests_per_s"]
    result["requests"] = len(trace)
    result["buckets"] = buckets
    del graphs, outputs
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a shorter serve trace")
    parser.add_argument("--json", default=None, help="output path")
    parser.add_argument("json_path", nargs="?", default=None)
    args = parser.parse_args()
    path = args.json or args.json_path or default_json("torch_sets")

    try:
        import torch
    except ImportError as e:
        print(f"torch_sets: no CUDA device: torch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_sets: no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.init()
    name = torch.cuda.get_device_name()
    print(f"torch_sets: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}"
          f"{' (quick run)' if args.quick else ''}", flush=True)
    try:
        s = torch.cuda.Stream()
        shared, capture_ms, same = bucket_memory(torch, BUCKETS, s)
        alone, alone_ms, same_alone = bucket_memory(torch, BUCKETS[:1], s)
        print(f"\n(a) 8 buckets (b = 512 .. 4) of three GEMMs of {WIDTH} x {WIDTH}, one shared pool, "
              "largest first")
        print(f"{'':<24} {'MiB':>8} {'/alone':>8} {'capture ms':>11} {'outputs':>8}")
        print(f"{'shared pool, 8 buckets':<24} {shared / MiB:>8.1f} "
              f"{shared / alone if alone else 0:>8.3f} {capture_ms:>11.1f} "
              f"{'same' if same else 'DIFFER':>8}")
        print(f"{'largest bucket alone':<24} {alone / MiB:>8.1f} {1.0:>8.3f} {alone_ms:>11.1f} "
              f"{'same' if same_alone else 'DIFFER':>8}", flush=True)
        requests = 400 if args.quick else 2000
        sv = serve(torch, requests)
        print(f"\n(b) the serve loop of examples/serve ({requests} requests, buckets "
              f"{min(sv['buckets'])}..{max(sv['buckets'])}), a synchronisation per request")
        print(f"{'way':<24} {'requests/s':>11} {'p50 us':>9} {'p99 us':>9} {'capture ms':>11} "
              f"{'graph MiB':>10}")
        for way in ("eager", "graphs"):
            r = sv[way]
            print(f"{way:<24} {r['requests_per_s']:>11.0f} {r['latency_us']['median']:>9.1f} "
                  f"{r['p99_us']:>9.1f} {r.get('capture_ms', float('nan')):>11.1f} "
                  f"{r.get('reserved_bytes', float('nan')) / MiB:>10.1f}")
        print(f"graphs / eager: {sv['speedup']:.2f}x requests/s")
    except Exception as e:  # say what failed, plainly
        print(f"torch_sets: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1

    result = {"benchmark": "torch_sets", "device": name, "torch_version": torch.__version__,
              "cuda_version": torch.version.cuda, "quick": args.quick,
              "checks_passed": same and same_alone,
              "buckets": {"sizes": list(BUCKETS), "width": WIDTH, "reserved_bytes": shared,
                          "alone_reserved_bytes": alone, "vs_alone": shared / alone if alone else None,
                          "capture_ms": capture_ms, "outputs_match": same},
              "serve": sv}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nresults: {path}")
    return 0 if same and same_alone else 1


if __name__ == "__main__":
    sys.exit(main())
