#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_nccl.py: PyTorch's side of bench_nccl: a step of K all-reduces (K = 1, 8, 32; 1024
floats each) with torch.distributed on NCCL with one rank (a process group of size 1 through a
file store), eagerly (K dist.all_reduce calls) and captured as one CUDA graph (torch.cuda.graph,
replayed with graph.replay()). torch's all_reduce works in place, and one rank's in-place
all-reduce enqueues no work in NCCL: torch's graph is empty (torch warns so), its replay the cost
of launching an empty graph, and its eager figure torch's own cost per call. Printed: host nanoseconds per step (a batch of
steps between two clock reads, the stream synchronised between batches, outside the timing),
the median over batches, and graph / eager.

Writes JSON (--json PATH, default $OUT/torch_nccl.json or ./torch_nccl.json). Exit status: 0
done, 1 a failure, 2 no CUDA device (or no torch, or no NCCL in torch).
"""
import argparse
import json
import os
import sys
import tempfile
import time

from bench_common import default_json, stats

COUNT = 1024
STEP_SIZES = (1, 8, 32)
STEPS_PER_BATCH = 50


def time_batches(torch, run_step, batches):
    samples = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(STEPS_PER_BATCH):
            run_step()
        samples.append((time.perf_counter_ns() - t0) / STEPS_PER_BATCH)
    torch.cuda.synchronize()
    return stats(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches")
    parser.add_argument("--json", default=None, help="output path")
    parser.add_argument("json_path", nargs="?", default=None)
    args = parser.parse_args()
    path = args.json or args.json_path or default_json("torch_nccl")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"torch_nccl: no CUDA device: torch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print("torch_nccl: no CUDA device or no NCCL in torch", file=sys.stderr)
        return 2
    torch.cuda.set_device(0)
    store_dir = tempfile.mkdtemp(prefix="torch_nccl.")
    store = dist.FileStore(os.path.join(store_dir, "store"), 1)
    try:
        dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                                device_id=torch.device("cuda", 0))
    except TypeError:  # a torch without device_id
        dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    version = ".".join(str(v) for v in torch.cuda.nccl.version())
    batches = 20 if args.quick else 100
    print(f"torch_nccl: {torch.cuda.get_device_name()}, torch {torch.__version__}, NCCL {version}, "
          f"one rank{' (quick run)' if args.quick else ''}", flush=True)
    results = []
    try:
        s = torch.cuda.Stream()
        buffers = [torch.zeros(COUNT, device="cuda") for _ in range(max(STEP_SIZES))]
        with torch.cuda.stream(s):
            for b in buffers:  # NCCL sets up at the first collective
                dist.all_reduce(b)
        torch.cuda.synchronize()
        print(f"\nhost ns per step of K all-reduces of {COUNT} floats (median of {batches} batches "
              f"of {STEPS_PER_BATCH} steps)")
        print(f"{'K':>4} {'eager':>11} {'graph':>11} {'graph/eager':>12}")
        for k in STEP_SIZES:
            def eager_step():
                for b in buffers[:k]:
                    dist.all_reduce(b)

            with torch.cuda.stream(s):
                eager = time_batches(torch, eager_step, batches)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=s):
                eager_step()
            graphed = time_batches(torch, graph.replay, batches)
            print(f"{k:>4} {eager['median']:>11.0f} {graphed['median']:>11.0f} "
                  f"{graphed['median'] / eager['median']:>12.3f}")
            results.append({"k": k, "eager": eager, "graph": graphed})
            del graph
    finally:
        dist.destroy_process_group()
    with open(path, "w") as f:
        json.dump({"benchmark": "torch_nccl", "torch": torch.__version__, "nccl": version,
                   "steps": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
