#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_mlp.py: PyTorch training the MLP of bench_mlp (examples/mlp), for comparison.

The same shapes as bench_mlp (width/depth/batch = 512/8/32, 1024/16/64, 4096/4/256; 2 input
features, 3 classes, ReLU, dropout 0.1 after each hidden layer, cross-entropy, Adam lr 1e-3),
FP32 without TF32, trained three ways:

  eager       model(x), F.cross_entropy, zero_grad(set_to_none=True), backward, Adam.step()
              (foreach Adam, PyTorch's default);
  graphed     torch.cuda.make_graphed_callables(model, (x,)) (forward and backward graphs), the
              loss eager, and the step of a capturable Adam captured once in a torch.cuda.graph
              and replayed; gradients are zeroed in place (zero_grad(set_to_none=False)) so the
              captured step always finds them at the same addresses;
  whole_step  forward, loss, backward and capturable Adam captured as one torch.cuda.graph
              (the "whole network capture" of PyTorch's CUDA graphs notes).

Every step first copies its batch from pinned host memory into static input tensors, as
bench_mlp does. A step's time is the GPU-timeline time between CUDA events recorded just
before and just after the step is enqueued, with no synchronisation per step (bench_mlp's
method); the median over the timed steps is reported, with the host time to enqueue a step.
Python's own overhead is part of what PyTorch users pay, so it is included.

Writes JSON (--json PATH, default $OUT/torch_mlp.json or ./torch_mlp.json). Exit status: 0 done,
1 a failure, 2 no CUDA device (or no torch).
"""
import argparse
import gc
import json
import math
import sys
import time

from bench_common import default_json, stats

SHAPES = ((512, 8, 32), (1024, 16, 64), (4096, 4, 256))
CLASSES = 3
DROPOUT = 0.1
LR = 1e-3
SEED = 1234
PER_CLASS = 2000


def spirals(torch, classes, per_class, noise, seed):
    """The task of examples/mlp (K noisy spirals), made with torch on the CPU."""
    g = torch.Generator().manual_seed(seed)
    r = torch.linspace(0.0, 1.0, per_class)
    xs, ys = [], []
    for k in range(classes):
        t = 2 * math.pi * k / classes + 3 * math.pi * r + noise * torch.randn(per_class, generator=g)
        xs.append(torch.stack((r * torch.sin(t), r * torch.cos(t)), dim=1))
        ys.append(torch.full((per_class,), k, dtype=torch.long))
    x, y = torch.cat(xs), torch.cat(ys)
    perm = torch.randperm(x.shape[0], generator=g)
    return x[perm], y[perm]


def schedule(torch, x, y, batch, steps, seed):
    """steps batches in shuffled epochs, in pinned memory."""
    g = torch.Generator().manual_seed(seed + 1)
    n = x.shape[0]
    order = torch.cat([torch.randperm(n, generator=g)
                       for _ in range((steps * batch + n - 1) // n)])[: steps * batch]
    bx = x[order].reshape(steps, batch, 2).contiguous().pin_memory()
    by = y[order].reshape(steps, batch).contiguous().pin_memory()
    return bx, by


def parameter_count(width, depth):
    return (2 * width + width) + (depth - 1) * (width * width + width) + width * CLASSES + CLASSES


def build(torch, width, depth):
    nn = torch.nn
    torch.manual_seed(SEED)
    layers, d_in = [], 2
    for _ in range(depth):
        layers += [nn.Linear(d_in, width), nn.ReLU(), nn.Dropout(DROPOUT)]
        d_in = width
    layers.append(nn.Linear(d_in, CLASSES))
    return nn.Sequential(*layers).cuda().train()


def run_way(torch, way, width, depth, batch, bx, by, warmup, steps):
    F = torch.nn.functional
    model = build(torch, width, depth)
    static_x = torch.zeros(batch, 2, device="cuda")
    static_y = torch.zeros(batch, dtype=torch.long, device="cuda")

    def copy_in(i):
        static_x.copy_(bx[i], non_blocking=True)
        static_y.copy_(by[i], non_blocking=True)

    t0 = time.perf_counter()
    last_loss = [None]
    if way == "eager":
        opt = torch.optim.Adam(model.parameters(), lr=LR)

        def step(i):
            copy_in(i)
            loss = F.cross_entropy(model(static_x), static_y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last_loss[0] = loss
    elif way == "graphed":
        gmodel = torch.cuda.make_graphed_callables(model, (static_x,))
        opt = torch.optim.Adam(model.parameters(), lr=LR, capturable=True)
        # Gradients exist from the start, so autograd always adds into them in place (it never
        # adopts the graph's static gradient buffer as .grad) and the captured Adam step finds
        # them at the same addresses every step.
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        # Eager steps on a side stream create the gradients and Adam's state before the capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):
                copy_in(i)
                loss = F.cross_entropy(gmodel(static_x), static_y)
                opt.zero_grad(set_to_none=False)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        opt_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(opt_graph):
            opt.step()

        def step(i):
            copy_in(i)
            loss = F.cross_entropy(gmodel(static_x), static_y)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt_graph.replay()
            last_loss[0] = loss
    elif way == "whole_step":
        opt = torch.optim.Adam(model.parameters(), lr=LR, capturable=True)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):
                copy_in(i)
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(static_x), static_y)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = F.cross_entropy(model(static_x), static_y)
            static_loss.backward()
            opt.step()
        last_loss[0] = static_loss

        def step(i):
            copy_in(i)
            graph.replay()
    else:
        raise ValueError(way)
    torch.cuda.synchronize()
    setup_ms = (time.perf_counter() - t0) * 1e3

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    host = []
    stream = torch.cuda.current_stream()
    for s in range(steps):
        starts[s].record(stream)
        h0 = time.perf_counter_ns()
        step(warmup + s)
        host.append((time.perf_counter_ns() - h0) / 1e3)
        ends[s].record(stream)
    torch.cuda.synchronize()
    step_us = [starts[s].elapsed_time(ends[s]) * 1e3 for s in range(steps)]
    final = float(last_loss[0].item())
    if not math.isfinite(final):
        raise RuntimeError(f"{way}: the loss is {final}")
    return {"step_us": stats(step_us), "host_us": stats(host), "setup_ms": setup_ms,
            "final_loss": final}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--json", default=None, help="output path")
    parser.add_argument("json_path", nargs="?", default=None)
    args = parser.parse_args()
    path = args.json or args.json_path or default_json("torch_mlp")

    try:
        import torch
    except ImportError as e:
        print(f"torch_mlp: no CUDA device: torch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_mlp: no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.init()
    name = torch.cuda.get_device_name()
    warmup, steps = (10, 60) if args.quick else (30, 300)
    print(f"torch_mlp: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}; median step "
          f"time in us (GPU timeline per step, {steps} timed steps after {warmup} warm-up)",
          flush=True)
    print(f"{'width/depth/B':<14} {'eager':>10} {'graphed':>10} {'whole':>10} {'gr/whole':>9} "
          f"{'eager/gr':>9}")

    x, y = spirals(torch, CLASSES, PER_CLASS, 0.2, SEED)
    results = []
    gc_was_enabled = gc.isenabled()
    try:
        for width, depth, batch in SHAPES:
            bx, by = schedule(torch, x, y, batch, warmup + steps, SEED)
            ways = {}
            for way in ("eager", "graphed", "whole_step"):
                gc.collect()
                gc.disable()  # a collection inside a timed step would be noise
                try:
                    ways[way] = run_way(torch, way, width, depth, batch, bx, by, warmup, steps)
                finally:
                    if gc_was_enabled:
                        gc.enable()
                torch.cuda.empty_cache()
            e, g, w = (ways[k]["step_us"]["median"] for k in ("eager", "graphed", "whole_step"))
            print(f"{f'{width}/{depth}/{batch}':<14} {e:>10.1f} {g:>10.1f} {w:>10.1f} "
                  f"{g / w:>8.2f}x {e / g:>8.2f}x", flush=True)
            print(f"{'':<14} {ways['eager']['host_us']['median']:>10.1f} "
                  f"{ways['graphed']['host_us']['median']:>10.1f} "
                  f"{ways['whole_step']['host_us']['median']:>10.1f}   (host us per step)",
                  flush=True)
            results.append({"width": width, "depth": depth, "batch": batch,
                            "parameters": parameter_count(width, depth),
                            "ways": ways})
    except Exception as e:  # say what failed, plainly
        print(f"torch_mlp: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1

    result = {"benchmark": "torch_mlp", "device": name, "torch_version": torch.__version__,
              "cuda_version": torch.version.cuda, "quick": args.quick, "warmup_steps": warmup,
              "timed_steps": steps,
              "timing": "step_us: CUDA event time from just before to just after each step's "
                        "enqueue (batch copy included), no synchronisation per step; host_us: "
                        "CPU time to enqueue one step",
              "shapes": results}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
