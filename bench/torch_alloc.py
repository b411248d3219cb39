#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_alloc.py: PyTorch's caching allocator on the same workload as bench_alloc.

For request sizes of 512 B, 64 KiB and 4 MiB, the host time of one cached allocate + free pair:

  torch          torch.cuda.caching_allocator_alloc(size, stream=s) + caching_allocator_delete(p),
                 the allocator's raw entry points;
  torch_c        the same through torch._C._cuda_cudaCachingAllocator_raw_alloc/_raw_delete,
                 which the public functions wrap (skipped where a torch lacks them): the least
                 Python there is between the caller and PyTorch's C++ allocator;
  torch_empty    torch.empty(size, dtype=uint8, device="cuda") and dropping it, the usual way;
  torch_routed   the torch_c pair (the public pair without those entry points) while a graph
                 capture is under way on s, so allocations go to the graph's private pool, as
                 in bench_alloc's "routed";
  python_floor   two calls of a Python function that does nothing: the interpreter's own part
                 of every figure above, for reading them against recap's C figures.

Rounds and batches follow bench_alloc (each round times one batch of every variant). Writes JSON
(--json PATH, default $OUT/torch_alloc.json or ./torch_alloc.json). Exit status: 0 done,
2 no CUDA device (or no torch).
"""
import argparse
import gc
import json
import sys
import time

from bench_common import default_json, stats

SIZES = (512, 64 << 10, 4 << 20)
WARMUP = 100


def label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", default=None, help="output path")
    parser.add_argument("json_path", nargs="?", default=None)
    args = parser.parse_args()
    path = args.json or args.json_path or default_json("torch_alloc")

    try:
        import torch
    except ImportError as e:
        print(f"torch_alloc: no CUDA device: torch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_alloc: no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    torch.cuda.init()
    name = torch.cuda.get_device_name()
    print(f"torch_alloc: {name}, torch {torch.__version__}"
          f"{' (quick run)' if args.quick else ''}", flush=True)
    device = torch.cuda.current_device()
    stream = torch.cuda.Stream()
    alloc = torch.cuda.caching_allocator_alloc
    delete = torch.cuda.caching_allocator_delete
    empty = torch.empty
    uint8 = torch.uint8
    x = torch.zeros(1, device="cuda")

    def raw_pairs(size, pairs):
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            delete(alloc(size, device, stream))
        return (time.perf_counter_ns() - t0) / pairs

    raw_alloc_c = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", None)
    raw_delete_c = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", None)
    stream_handle = stream.cuda_stream

    def c_pairs(size, pairs):
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            raw_delete_c(raw_alloc_c(size, stream_handle))
        return (time.perf_counter_ns() - t0) / pairs

    have_c = raw_alloc_c is not None and raw_delete_c is not None
    routed_pairs = c_pairs if have_c else raw_pairs
    routed_base = "torch_c_ns" if have_c else "torch_ns"

    def empty_pairs(size, pairs):
        with torch.cuda.stream(stream):
            t0 = time.perf_counter_ns()
            for _ in range(pairs):
                t = empty(size, dtype=uint8, device="cuda")
                del t
            return (time.perf_counter_ns() - t0) / pairs

    def nothing(*_):
        return 0

    def floor_pairs(size, pairs):
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            nothing(nothing(size, device, stream))
        return (time.perf_counter_ns() - t0) / pairs

    rounds = 7 if args.quick else 31
    pairs = 1000 if args.quick else 5000
    rows = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for size in SIZES:
            samples = {"torch_ns": [], "torch_empty_ns": [], "torch_routed_ns": [],
                       "python_floor_ns": []}
            order = [("torch_ns", raw_pairs), ("torch_empty_ns", empty_pairs),
                     ("python_floor_ns", floor_pairs)]
            if have_c:
                samples["torch_c_ns"] = []
                order.insert(1, ("torch_c_ns", c_pairs))
            for r in range(rounds):
                order.reverse()  # alternate the order, as bench_alloc does
                for key, fn in order:
                    fn(size, WARMUP)
                    samples[key].append(fn(size, pairs))
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.stream(stream):
                    g.capture_begin()
                    x.add_(1)  # so the graph is not empty
                    routed_pairs(size, WARMUP)  # the private pool's first segment
                    samples["torch_routed_ns"].append(routed_pairs(size, pairs))
                    g.capture_end()
                del g
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            row = {"size": size, "routed_base": routed_base}
            row.update({k: stats(v) for k, v in samples.items()})
            row["routing_extra_ns"] = (row["torch_routed_ns"]["median"]
                                       - row[routed_base]["median"])
            rows.append(row)
            c_text = f", torch._C {row['torch_c_ns']['median']:.1f} ns" if have_c else ""
            print(f"  {label(size):<8s} torch {row['torch_ns']['median']:.1f} ns{c_text}, torch.empty "
                  f"{row['torch_empty_ns']['median']:.1f} ns, routed "
                  f"{row['torch_routed_ns']['median']:.1f} ns, python floor "
                  f"{row['python_floor_ns']['median']:.1f} ns", flush=True)
    finally:
        if gc_was_enabled:
            gc.enable()

    print(f"\ntorch allocator: host time of one alloc + free pair, ns (median of {rounds} "
          f"batches of {pairs})")
    print(f"{'size':>8} {'public':>8} {'torch._C':>8} {'empty':>8} {'routed':>8} {'+routing':>9} "
          f"{'py floor':>9}")
    for row in rows:
        c = row["torch_c_ns"]["median"] if "torch_c_ns" in row else float("nan")
        print(f"{label(row['size']):>8} {row['torch_ns']['median']:>8.1f} {c:>8.1f} "
              f"{row['torch_empty_ns']['median']:>8.1f} {row['torch_routed_ns']['median']:>8.1f} "
              f"{row['routing_extra_ns']:>9.1f} {row['python_floor_ns']['median']:>9.1f}")

    result = {"benchmark": "torch_alloc", "device": name, "torch_version": torch.__version__,
              "quick": args.quick, "rounds": rounds, "pairs_per_batch": pairs, "unit": "ns",
              "sizes": rows}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
