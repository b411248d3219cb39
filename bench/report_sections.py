# SPDX-License-Identifier: BSD-3-Clause
"""report_sections.py: the tables of docs/benchmarks.md, built from the benchmarks' JSON files.

report.py merges the JSON files a GPU run writes; sections(data, merged) turns them into the
sections benchmarks_page.py renders (its docstring gives the format), with the same names, columns
and goals as bench/results/h200.json. A benchmark whose JSON is missing gives no section, and the
page says "not measured" there. The examples' tables (serve, solver, dp_mlp, decode, the MLP
example's loop and memory) come from programs that print them and write no JSON, so a run gives
none of them.
"""
import sys


def col(name, spec=None):
    return {"name": name, "format": spec} if spec else {"name": name}


def med(entry, key):
    """The median of entry[key], a stats object, or None."""
    value = (entry or {}).get(key)
    return value.get("median") if isinstance(value, dict) else None


def div(a, b):
    return a / b if a is not None and b else None


def sub(a, b):
    return a - b if a is not None and b is not None else None


def section(programs, columns, rows, goals=()):
    return {"programs": programs, "columns": columns, "rows": rows, "goals": list(goals)}


def gib(size):
    return f"{size / (1 << 30):g} GiB"


def mib(size):
    return size / (1 << 20) if size is not None else None


def size_label(size):
    if size >= 1 << 30 and size % (1 << 30) == 0:
        return f"{size >> 30} GiB"
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


# ---- replay, capture, allocator (from report.py's merged rows) --------------------------------

def graph_sections(merged):
    t, out = merged["targets"], {}
    if merged["replay"]:
        out["graph.replay"] = section(
            ["bench/bench_graph", "bench/torch_graph.py"],
            [col("N"), col("raw CUDA", ".3f"), col("recap", ".3f"), col("PyTorch", ".3f"),
             col("recap / raw", ".3f"), col("recap / PyTorch", ".2f")],
            [[r["n"], r["raw_us"], r["recap_us"], r["torch_us"], r["recap_vs_raw"], r["recap_vs_torch"]]
             for r in merged["replay"]],
            [{"what": "recap / raw", "column": "recap / raw", "op": "<=", "limit": t["replay_ratio"]}])
    if merged["capture"]:
        out["graph.capture"] = section(
            ["bench/bench_graph", "bench/torch_graph.py"],
            [col("N"), col("raw CUDA", ".1f"), col("recap", ".1f"), col("PyTorch", ".1f"),
             col("PyTorch ctx", ".1f"), col("recap / raw", ".3f"), col("recap − raw", ".1f")],
            [[r["n"], r["raw_us"], r["recap_us"], r["torch_us"], r["torch_scope_us"], r["recap_vs_raw"],
              sub(r["recap_us"], r["raw_us"])] for r in merged["capture"]],
            [{"what": "recap / raw", "column": "recap / raw", "op": "<=", "limit": t["capture_ratio"]},
             {"what": "recap / PyTorch", "ratio_columns": ["recap", "PyTorch"], "format": ".2f"},
             {"what": "recap − raw CUDA, µs", "column": "recap − raw"}])
    if merged["alloc"]:
        out["alloc.pair"] = section(
            ["bench/bench_alloc", "bench/torch_alloc.py"],
            [col("size"), col("recap", ".1f"), col("cudaMallocAsync", ".1f"), col("PyTorch", ".1f"),
             col("PyTorch `_C`", ".1f"), col("recap during a capture", ".1f"), col("routing adds", ".1f")],
            [[size_label(r["size"]), r["recap_ns"], r["cuda_async_ns"], r["torch_ns"], r["torch_c_ns"],
              r["recap_routed_ns"], r["routing_extra_ns"]] for r in merged["alloc"]],
            [{"what": "recap pair, ns", "column": "recap", "op": "<=", "limit": t["pair_ns"]},
             {"what": "routing to a capture's pool adds, ns", "column": "routing adds", "op": "<=",
              "limit": t["routing_extra_ns"]},
             {"what": "recap / cudaMallocAsync", "ratio_columns": ["recap", "cudaMallocAsync"],
              "format": ".3f"},
             {"what": "recap / PyTorch `_C`", "ratio_columns": ["recap", "PyTorch `_C`"], "format": ".3f"}])
    if any(r["python_floor_ns"] is not None or r["torch_routing_extra_ns"] is not None for r in merged["alloc"]):
        out["alloc.pytorch"] = section(
            ["bench/torch_alloc.py"],
            [col("size"), col("Python's own call cost, ns", ".1f"),
             col("PyTorch's pair during a capture: extra over its `torch._C` pair, ns", ".1f")],
            [[size_label(r["size"]), r["python_floor_ns"], r["torch_routing_extra_ns"]] for r in merged["alloc"]])
    return out


# ---- bench_rebind: {"figures": [{"table", "row", "column", "value"}]} --------------------------

def rebind_sections(data):
    figs = {}
    for f in data.get("figures", []):
        figs[(f["table"], f["row"], f["column"])] = f["value"]

    def fig(table, row, column):
        return figs.get((table, row, column))

    out, prog = {}, ["bench/bench_rebind"]
    ks = sorted({int(r[2:]) for (t, r, _) in figs if t == "rebind" and r.startswith("k=")})
    recapture, by_hand = fig("rebind", "recapture", "us"), fig("rebind", "capture_update_by_hand", "us")
    if ks:
        out["rebind.rebind"] = section(
            prog,
            [col("k"), col("k × raw set", ".2f"), col("rebind", ".2f"), col("target: 1.2 × k × raw + 2", ".2f"),
             col("reset + recapture + instantiate", ".1f"), col("reset + recapture / rebind", ".0f"),
             col("capture + update", ".1f"), col("capture + update / rebind", ".0f")],
            [[k, fig("rebind", f"k={k}", "raw_set_us"), fig("rebind", f"k={k}", "rebind_us"),
              fig("rebind", f"k={k}", "target_us"), recapture, fig("rebind", f"k={k}", "recapture_over_rebind"),
              by_hand, fig("rebind", f"k={k}", "capture_update_over_rebind")] for k in ks],
            [{"what": "rebind", "column": "rebind", "op": "<=", "limit_column": "target: 1.2 × k × raw + 2"},
             {"what": "reset + recapture / rebind", "column": "reset + recapture / rebind", "op": ">=",
              "limit": 100}])
    first = "first rebind after a capture: 16 buffers read by 4 kernels each, one batch"
    if fig("rebind", "first_rebind_16_buffers", "us") is not None:
        out["rebind.first"] = section(
            prog, [col("call"), col("µs", ".2f")],
            [[first, fig("rebind", "first_rebind_16_buffers", "us")],
             ["64 raw `cudaGraphExecKernelNodeSetParams`", None]],
            [{"what": "first rebind of 16 buffers, µs", "cell": [first, "µs"], "op": "<=", "limit": 100}])
    rows = [("recap: `recapture_begin` + launches + `capture_end`", "recap_recapture_update"),
            ("raw: capture + `cudaGraphExecUpdate` + `cudaGraphDestroy`", "raw_capture_update"),
            ("recap: `capture_end` that updates", "recap_capture_end_update"),
            ("recap: `capture_end` that instantiates afresh", "recap_capture_end_instantiate"),
            ("raw `cudaGraphExecUpdate`", "raw_update"), ("raw `cudaGraphInstantiate`", "raw_instantiate")]
    if any(fig("update", key, "us") is not None for _, key in rows):
        out["rebind.update"] = section(
            prog, [col("call, chain of 1,000 kernels"), col("µs", ".1f")],
            [[label, fig("update", key, "us")] for label, key in rows],
            [{"what": "recap recapture + update / raw", "ratio": [[rows[0][0], "µs"], [rows[1][0], "µs"]],
              "op": "<=", "limit": 1.1, "format": ".3f"},
             {"what": "instantiate / update, recap", "ratio": [[rows[3][0], "µs"], [rows[2][0], "µs"]],
              "op": ">=", "limit": 10, "format": ".1f"},
             {"what": "instantiate / update, raw CUDA (the driver's bound)",
              "ratio": [[rows[5][0], "µs"], [rows[4][0], "µs"]], "format": ".1f"}])
    shapes = [("chain", "chain of 1,000 kernels"), ("branches", "4 branches × 250 kernels"),
              ("cublas", "32 cuBLAS GEMMs"), ("memsets", "250 memset + kernel pairs")]
    if any(fig("replay", key, "host_fresh_us") is not None for key, _ in shapes):
        out["rebind.replay_after"] = section(
            prog,
            [col("shape"), col("host fresh", ".2f"), col("host rebound", ".2f"), col("host updated", ".2f"),
             col("GPU fresh", ".1f"), col("GPU rebound", ".1f"), col("GPU updated", ".1f"),
             col("GPU rebound / fresh", ".3f"), col("GPU updated / fresh", ".3f")],
            [[label] + [fig("replay", key, c) for c in ("host_fresh_us", "host_rebound_us", "host_updated_us",
                                                         "gpu_fresh_us", "gpu_rebound_us", "gpu_updated_us")]
             + [div(fig("replay", key, "gpu_rebound_us"), fig("replay", key, "gpu_fresh_us")),
                div(fig("replay", key, "gpu_updated_us"), fig("replay", key, "gpu_fresh_us"))]
             for key, label in shapes],
            [{"what": "GPU rebound / fresh", "column": "GPU rebound / fresh", "op": "<=", "limit": 1.01},
             {"what": "GPU updated / fresh", "column": "GPU updated / fresh", "op": "<=", "limit": 1.01}])
    if any(fig("policy", key, "fresh_replay_ms") is not None for key, _ in shapes):
        out["rebind.policy"] = section(
            prog, [col("shape"), col("fresh, ms", ".4f"), col("updated, ms", ".4f")],
            [[label, fig("policy", key, "fresh_replay_ms"), fig("policy", key, "updated_replay_ms")]
             for key, label in shapes],
            [{"what": "updated / fresh, which the policy compares with its 1%",
              "ratio_columns": ["updated, ms", "fresh, ms"], "op": "<=", "limit": 1.01, "format": ".3f"}])
    inputs = [("64KiB", "64 KiB"), ("4MiB", "4 MiB"), ("64MiB", "64 MiB")]
    if any(fig("graphed", key, "host_copy_us") is not None for key, _ in inputs):
        out["rebind.graphed"] = section(
            prog,
            [col("input"), col("host copy", ".2f"), col("host zero-copy", ".2f"),
             col("host zero-copy / copy", ".2f"), col("GPU copy", ".1f"), col("GPU zero-copy", ".1f"),
             col("GPU zero-copy / copy", ".2f")],
            [[label, fig("graphed", key, "host_copy_us"), fig("graphed", key, "host_zero_copy_us"),
              div(fig("graphed", key, "host_zero_copy_us"), fig("graphed", key, "host_copy_us")),
              fig("graphed", key, "gpu_copy_us"), fig("graphed", key, "gpu_zero_copy_us"),
              div(fig("graphed", key, "gpu_zero_copy_us"), fig("graphed", key, "gpu_copy_us"))]
             for key, label in inputs])
    return out


# ---- bench_mlp, torch_mlp: {"shapes": [{"width", "depth", "batch", "ways": {...}}]} -------------

def mlp_sections(recap, torch):
    def by_shape(d):
        return {f"{s['width']}/{s['depth']}/{s['batch']}": s.get("ways", {}) for s in (d or {}).get("shapes", [])}

    r, t = by_shape(recap), by_shape(torch)
    labels = list(r) + [k for k in t if k not in r]
    if not labels:
        return {}
    out = {"mlp.step": section(
        ["bench/bench_mlp", "bench/torch_mlp.py"],
        [col("width/depth/batch")] + [col(n, ".1f") for n in (
            "recap eager", "recap graphed", "recap per layer", "recap whole", "torch eager", "torch graphed",
            "torch whole")],
        [[k] + [med(r.get(k, {}).get(w), "step_us") for w in ("eager", "graphed", "graphed_layers", "whole_step")]
         + [med(t.get(k, {}).get(w), "step_us") for w in ("eager", "graphed", "whole_step")] for k in labels],
        [{"what": "torch graphed / recap graphed", "ratio_columns": ["torch graphed", "recap graphed"],
          "rows": [k for k in ("512/8/32", "1024/16/64") if k in labels], "op": ">=", "limit": 4},
         {"what": "recap graphed / recap whole", "ratio_columns": ["recap graphed", "recap whole"], "op": "<=",
          "limit": 1.1}])}
    if r:
        out["mlp.host"] = section(["bench/bench_mlp"], [col("width/depth/batch"),
                                                         col("recap eager: host µs per step", ".1f")],
                                  [[k, med(r[k].get("eager"), "host_us")] for k in r])
    return out


# ---- bench_cond: {"results": [{"section", "way", "body", "wall_us", "host_us", "gpu_us"}]} -----

def cond_sections(data):
    entries = {}
    for e in data.get("results", data.get("entries", [])):
        entries[(e.get("section"), e.get("way"), e.get("body"))] = e

    def get(section_, way, body, key="wall_us"):
        return med(entries.get((section_, way, body)), key)

    out, prog = {}, ["bench/bench_cond"]
    bodies = sorted({b for (s, w, b) in entries if s == "i"})
    if bodies:
        rows = []
        for b in bodies:
            raw, region = get("i", "raw WHILE node", b), get("ii", "recap WHILE region", b)
            rows.append([f"{b} kernel" + ("" if b == 1 else "s"), raw, region, div(region, raw),
                         get("ii", "recap WHILE, host-loop path", b), get("i", "host loop, flag + sync", b),
                         get("i", "host replays, no check", b)])
        labels = [r[0] for r in rows]
        out["cond.while"] = section(
            prog,
            [col("body"), col("raw WHILE node", ".2f"), col("recap WHILE region", ".2f"), col("recap / raw", ".2f"),
             col("recap, host-loop path", ".2f"), col("host loop, flag + sync", ".2f"),
             col("host replays, no check", ".2f")], rows,
            [{"what": "recap WHILE region / raw WHILE node", "column": "recap / raw", "op": "<=", "limit": 1.1},
             {"what": "host loop / recap WHILE region, one kernel",
              "ratio_columns": ["host loop, flag + sync", "recap WHILE region"],
              "rows": [x for x in labels if x == "1 kernel"], "op": ">=", "limit": 2.5},
             {"what": "host loop / recap WHILE region", "ratio_columns": ["host loop, flag + sync", "recap WHILE region"],
              "rows": [x for x in labels if x != "1 kernel"]},
             {"what": "host loop / raw WHILE node", "ratio_columns": ["host loop, flag + sync", "raw WHILE node"]}])
    unrolled, every8 = get("iii", "recap_loop_capture, U = 8", 1), get("iii", "host loop, check every 8", 1)
    if unrolled is not None or every8 is not None:
        out["cond.unroll"] = section(
            prog, [col("one-kernel step, checked every 8"), col("µs per step", ".2f")],
            [["`recap_loop_capture`, unroll 8", unrolled], ["host loop checking every 8", every8]],
            [{"what": "host loop / `recap_loop_capture`",
              "ratio": [["host loop checking every 8", "µs per step"], ["`recap_loop_capture`, unroll 8", "µs per step"]],
              "op": ">=", "limit": 2}])
    ns = sorted({b for (s, w, b) in entries if s == "iv"})
    if ns:
        out["cond.nm"] = section(
            prog,
            [col("N"), col("WHILE: host µs per iteration", ".3f"), col("replays: host µs per iteration", ".1f"),
             col("WHILE: GPU µs per iteration", ".1f"), col("replays: GPU µs per iteration", ".1f")],
            [[n, get("iv", "WHILE region, M iterations", n, "host_us"), get("iv", "M host replays", n, "host_us"),
              get("iv", "WHILE region, M iterations", n, "gpu_us"), get("iv", "M host replays", n, "gpu_us")]
             for n in ns])
    ks = sorted({b for (s, w, b) in entries if s == "v"})
    if ks:
        out["cond.switch"] = section(
            prog,
            [col("branches"), col("SWITCH: host µs per replay", ".1f"), col("SWITCH: GPU µs per replay", ".1f"),
             col("chosen kernel alone: host µs", ".1f"), col("chosen kernel alone: GPU µs", ".1f")],
            [[k, get("v", "SWITCH over k branches", k, "host_us"), get("v", "SWITCH over k branches", k, "gpu_us"),
              get("v", "the chosen branch alone", k, "host_us"), get("v", "the chosen branch alone", k, "gpu_us")]
             for k in ks])
    return out


# ---- bench_sleep ------------------------------------------------------------------------------

def sleep_sections(data):
    out, prog = {}, ["bench/bench_sleep"]
    goals = data.get("goals", {})
    pinned = data.get("pinned") or {}
    if pinned:
        out["sleep.pinned"] = section(prog, [col(f"pinned copy of {gib(pinned.get('bytes', 0))}"), col("GB/s", ".1f")],
                                      [["device to host", pinned.get("d2h_gbps")],
                                       ["host to device", pinned.get("h2d_gbps")]])
    floor = data.get("floor") or {}
    if floor.get("chunks"):
        out["sleep.floor"] = section(
            prog, [col(f"floor, {gib(floor.get('bytes', 0))}"), col("map, ms", ".1f"), col("unmap + release, ms", ".1f")],
            [[f"{size_label(c['chunk'])} chunks", c.get("map_ms"), c.get("unmap_ms")] for c in floor["chunks"]])
    pools = data.get("pools", [])
    if not pools:
        return out

    def cycle(c, key, skipped_text=True):
        if not c:
            return None
        if "skipped" in c:
            return "skipped: " + c["skipped"] if skipped_text else None
        return c.get(key)

    big = gib(max(p["bytes"] for p in pools))
    out["sleep.discard"] = section(
        prog,
        [col("pool"), col("DISCARD sleep, ms", ".1f"), col("wake, ms", ".1f"), col("sleep + wake, ms", ".1f"),
         col("floor, ms", ".1f"), col("/ floor", ".2f"), col("back while asleep, %", ".2f"),
         col("replay after wake identical")],
        [[gib(p["bytes"]), cycle(p.get("discard"), "sleep_ms"), cycle(p.get("discard"), "wake_ms"),
          cycle(p.get("discard"), "total_ms"), p.get("floor_ms"), cycle(p.get("discard"), "vs_floor"),
          cycle(p.get("discard"), "back_percent"),
          (None if cycle(p.get("discard"), "identical") is None
           else "yes" if p["discard"]["identical"] else "no")] for p in pools],
        [{"what": f"sleep + wake of {big}, ms", "cell": [big, "sleep + wake, ms"], "op": "<=",
          "limit": goals.get("discard_ms_64gib", 100)},
         {"what": "sleep + wake / floor", "column": "/ floor", "op": "<=", "limit": goals.get("discard_vs_floor", 3)},
         {"what": "physical memory back while asleep, %", "column": "back while asleep, %", "op": ">=",
          "limit": goals.get("back_percent", 99)},
         {"what": "replay after wake identical to before", "column": "replay after wake identical", "op": "==",
          "limit": "yes"}])
    rows, measured = [], []
    for p in pools:
        label = gib(p["bytes"])
        keep = p.get("offload_keep") or {}
        cycles = [("first (pins and unpins)", p.get("offload")),
                  ("first cycle, pinned ahead (unpins)", p.get("offload_reserved")),
                  ("warm (`offload_keep_pinned=1`)", p.get("offload_warm")),
                  ("priming (`offload_keep_pinned=1`)", keep.get("prime"))]
        reserve = p.get("reserve_ms")
        rows.append([f"{label}, `recap_pinned_reserve` ahead",
                     reserve if reserve is not None else cycle(p.get("offload_reserved"), "sleep_ms"),
                     None, None, None, None])
        for name, c in cycles:
            row = f"{label}, {name}"
            release = keep.get("release_ms") if name.startswith("warm") else None
            rows.append([row, cycle(c, "sleep_ms"), cycle(c, "sleep_vs_pinned", False), cycle(c, "wake_ms", False),
                         cycle(c, "wake_vs_pinned", False), release])
            if not name.startswith("priming") and c and "skipped" not in c and not c.get("failed"):
                measured.append(row)
    goal = goals.get("offload_vs_pinned", 0.8)
    out["sleep.offload"] = section(
        prog,
        [col("pool, cycle"), col("sleep, ms", ".1f"), col("sleep, / pinned", ".2f"), col("wake, ms", ".1f"),
         col("wake, / pinned", ".2f"), col("release of the kept buffer, ms", ".1f")], rows,
        [{"what": "OFFLOAD sleep / pinned bandwidth", "column": "sleep, / pinned", "rows": measured, "op": ">=",
          "limit": goal},
         {"what": "OFFLOAD wake / pinned bandwidth", "column": "wake, / pinned", "rows": measured, "op": ">=",
          "limit": goal}])
    out["sleep.recapture"] = section(
        prog,
        [col("pool"), col("DISCARD sleep + wake, ms", ".1f"), col("free, ms", ".1f"),
         col("recapture (capture + instantiate), ms", ".1f"), col("first replay, ms", ".1f"),
         col("DISCARD / (free + recapture)", ".3f"), col("identical")],
        [[gib(p["bytes"]), cycle(p.get("discard"), "total_ms", False), (p.get("recapture") or {}).get("free_ms"),
          (p.get("recapture") or {}).get("capture_ms"), (p.get("recapture") or {}).get("first_replay_ms"),
          p.get("discard_vs_recapture"),
          {True: "yes", False: "no"}.get((p.get("recapture") or {}).get("identical"))] for p in pools])
    return out


# ---- bench_buckets, bench_vmm -------------------------------------------------------------------

def buckets_section(data):
    labels = {"nodes": "graph memory nodes", "shared": "recap shared pool", "shared_vmm": "recap shared pool, VMM",
              "private": "recap private pools", "private_vmm": "recap private pools, VMM"}
    ways = [w for w in data.get("ways", []) if w.get("way") in labels]
    if not ways:
        return {}
    recap = [labels[w["way"]] for w in ways if w["way"] != "nodes" and "skipped" not in w]
    return {"buckets": section(
        ["bench/bench_buckets"],
        [col("way"), col("reserved, MiB", ".1f"), col("/ ideal", ".2f"), col("/ driver", ".2f"),
         col("capture + instantiate, ms", ".1f"), col("replay, µs per launch", ".2f"), col("/ memory nodes", ".3f")],
        [[labels[w["way"]], mib(w.get("reserved_bytes")), w.get("vs_ideal"), w.get("vs_driver"), w.get("capture_ms"),
          med(w, "replay_us"), 1 if w["way"] == "nodes" else w.get("replay_vs_nodes")] for w in ways],
        [{"what": "recap shared pool, VMM: reserved / driver", "cell": ["recap shared pool, VMM", "/ driver"],
          "op": "<=", "limit": 1},
         {"what": "recap shared pool, VMM: reserved / ideal", "cell": ["recap shared pool, VMM", "/ ideal"],
          "op": "<=", "limit": data.get("goal_ideal_ratio", 1.1)},
         {"what": "recap replay / memory nodes", "column": "/ memory nodes", "rows": recap, "op": "<", "limit": 1}])}


def vmm_section(data):
    if not data.get("pairs"):
        return {}
    rows = [[f"pair {size_label(p['size'])}, ns", med(p, "classic_ns"), med(p, "vmm_ns"), p.get("vmm_vs_classic")]
            for p in data["pairs"]]
    for key, label in (("capture_us", "capture + instantiate, µs"), ("replay_us", "replay, µs")):
        d = data.get(key) or {}
        rows.append([label, med(d, "classic"), med(d, "vmm"), d.get("vmm_vs_classic")])
    frag = data.get("fragmentation") or {}
    c, v = frag.get("classic") or {}, frag.get("vmm") or {}
    for key, label in (("reserved_vs_allocated", "growing workload: reserved / allocated"),):
        rows.append([label, c.get(key), v.get(key), div(v.get(key), c.get(key))])
    peak_c = div(c.get("peak_reserved_bytes"), c.get("peak_allocated_bytes"))
    peak_v = div(v.get("peak_reserved_bytes"), v.get("peak_allocated_bytes"))
    rows.append(["growing workload: peak reserved / allocated", peak_c, peak_v, div(peak_v, peak_c)])
    rows.append(["growing workload: device allocations", c.get("device_allocs"), v.get("device_allocs"), None])
    rows.append(["growing workload: reserved, MiB", mib(c.get("reserved_bytes")), mib(v.get("reserved_bytes")), None])
    rows.append(["growing workload: allocated, MiB", mib(c.get("allocated_bytes")), mib(v.get("allocated_bytes")),
                 None])
    return {"vmm": section(["bench/bench_vmm"], [col("figure"), col("classic", ".3f"), col("VMM", ".3f"),
                                                 col("VMM / classic", ".3f")], rows)}


# ---- bench_sets, torch_sets ---------------------------------------------------------------------

def sets_sections(sets, tsets):
    out = {}
    tb = (tsets or {}).get("buckets") or {}
    torch_bytes, torch_alone = tb.get("reserved_bytes"), tb.get("alone_reserved_bytes")
    labels = {"nodes": "graph memory nodes", "set": "recap set, 8 sizes", "set_vmm": "recap set, 8 sizes, VMM",
              "alone": "recap set, 512 alone", "alone_vmm": "recap set, 512 alone, VMM"}
    ways = {w["way"]: w for w in (sets or {}).get("memory", []) if "skipped" not in w}
    nodes = (ways.get("nodes") or {}).get("reserved_bytes")
    rows = []
    for key, label in labels.items():
        w = ways.get(key)
        if not w:
            continue
        rows.append([label, mib(w.get("reserved_bytes")), div(w.get("reserved_bytes"), torch_bytes),
                     1 if key == "nodes" else w.get("vs_nodes"),
                     None if key == "nodes" else 1 if key.startswith("alone") else w.get("vs_alone"),
                     None if key == "nodes" else mib(w.get("exec_bytes")), w.get("capture_ms")])
    if torch_bytes is not None:
        rows.append(["PyTorch, shared pool", mib(torch_bytes), 1, div(torch_bytes, nodes), tb.get("vs_alone"), None,
                     tb.get("capture_ms")])
        rows.append(["PyTorch, 512 alone", mib(torch_alone), div(torch_alone, torch_bytes), div(torch_alone, nodes),
                     1, None, None])
    if rows:
        sets_rows = [r[0] for r in rows if r[0].startswith("recap set, 8")]
        goals = (sets or {}).get("goals", {})
        out["sets.memory"] = section(
            ["bench/bench_sets", "bench/torch_sets.py"],
            [col("way"), col("reserved, MiB", ".1f"), col("/ PyTorch", ".2f"), col("/ memory nodes", ".2f"),
             col("/ largest alone", ".2f"), col("executables, MiB", ".1f"), col("capture + instantiate, ms", ".1f")],
            rows,
            [{"what": "recap set / PyTorch's shared pool", "column": "/ PyTorch", "rows": sets_rows, "op": "<=",
              "limit": 1},
             {"what": "recap set / memory nodes", "column": "/ memory nodes", "rows": sets_rows, "op": "<=", "limit": 1},
             {"what": "recap set / largest alone", "column": "/ largest alone", "rows": sets_rows, "op": "<=",
              "limit": goals.get("alone_ratio", 1.25)}]
            + ([{"what": "capture + instantiate, recap set / PyTorch",
                 "ratio": [["recap set, 8 sizes", "capture + instantiate, ms"],
                           ["PyTorch, shared pool", "capture + instantiate, ms"]]}]
               if "set" in ways and torch_bytes is not None else []))
    if sets and sets.get("background"):
        bg, goals = sets["background"], sets.get("goals", {})
        rows = [["0.2 (default)", med(bg, "alone_steps_per_s"), med(bg, "during_steps_per_s"), bg.get("ratio"),
                 med(bg, "all_ready_ms")]]
        for s in sets.get("background_shares", []):
            if abs(s.get("share", 0) - 0.2) > 1e-9:
                rows.append([f"{s['share']:g}", None, None, s.get("ratio"), s.get("all_ready_ms")])
        out["sets.background"] = section(
            ["bench/bench_sets"],
            [col("helper share"), col("eager loop alone, steps/s", ".0f"),
             col("during the background capture, steps/s", ".0f"), col("during / alone", ".3f"),
             col(f"{bg.get('sizes', 32)} sizes graphed, ms", ".1f")], rows,
            [{"what": "eager loop during / alone", "column": "during / alone", "op": ">=",
              "limit": goals.get("background_ratio", 0.9)}])
    if sets and sets.get("run_cost"):
        rc = sets["run_cost"]
        out["sets.run_cost"] = section(
            ["bench/bench_sets"], [col("call"), col("host µs per call", ".3f")],
            [["`recap_graph_replay`", med(rc, "replay_us")], ["`recap_graph_set_run`", med(rc, "set_run_us")],
             ["set_run / replay", rc.get("ratio")]])
    return out


# ---- bench_nccl, torch_nccl ---------------------------------------------------------------------

def nccl_sections(nccl, tnccl):
    out = {}
    if nccl and nccl.get("steps"):
        ways = ("raw eager", "recap eager", "raw graph", "recap graph", "raw g+event")
        rows = []
        for s in nccl["steps"]:
            v = [med(s, w) for w in ways]
            rows.append([s["k"]] + v + [div(v[1], v[0]), div(v[3], v[2]), div(v[3], v[4]), div(v[3], v[1])])
        out["nccl.steps"] = section(
            ["bench/bench_nccl"],
            [col("K")] + [col(w, ".0f") for w in ways]
            + [col(n, ".3f") for n in ("recap/raw eager", "recap/raw graph", "recap graph / raw g+event",
                                       "recap graph / recap eager")], rows)
    if nccl and nccl.get("check"):
        raw = med(nccl, "raw_exchange")
        rows = [["raw `ncclAllGather` of 16 bytes + `cudaStreamSynchronize`", raw, 1]]
        for c in nccl["check"]:
            n = c["collectives"]
            value = med(c, "stats")
            label = (f"`recap_graph_check_collectives`, {n} collective" + ("" if n == 1 else "s"))
            rows.append([label, value, div(value, raw)])
        out["nccl.check"] = section(["bench/bench_nccl"], [col("call"), col("µs", ".1f"),
                                                           col("/ raw exchange", ".2f")], rows)
    if tnccl and tnccl.get("steps"):
        out["nccl.torch"] = section(
            ["bench/torch_nccl.py"],
            [col("K"), col("eager `all_reduce`: host µs per step", ".1f"), col("captured graph: host µs per replay", ".1f")],
            [[s["k"], div(med(s, "eager"), 1000), div(med(s, "graph"), 1000)] for s in tnccl["steps"]])
    return out


# ---- bench_params (figures), bench_params_device: {"steps", "sizes", "costs"} -------------------

def params_sections(params, device):
    out = {}
    figs = {(f["table"], f["row"], f["column"]): f["value"] for f in (params or {}).get("figures", [])}

    def fig(table, row, column):
        return figs.get((table, row, column))

    set_rows = sorted({r for (t, r, _) in figs if t == "set"},
                      key=lambda r: tuple(int(v.split("=")[1]) for v in r.split(",")))
    if set_rows:
        out["params.set"] = section(
            ["bench/bench_params"],
            [col("parameters, k nodes"), col("k raw sets, µs", ".2f"), col("recap, µs", ".2f"),
             col("recap / raw", ".3f"), col("target: 1.2 × k × raw + 1", ".2f")],
            [[r.replace("params=", "").replace(",k=", " param(s), k = "), fig("set", r, "raw_us"),
              fig("set", r, "recap_us"), fig("set", r, "recap_over_raw"), fig("set", r, "goal_us")]
             for r in set_rows],
            [{"what": "recap", "column": "recap, µs", "op": "<=", "limit_column": "target: 1.2 × k × raw + 1"}])
    step_rows = sorted({r for (t, r, _) in figs if t == "step"}, key=lambda r: int(r[2:]))
    if step_rows:
        out["params.step"] = section(
            ["bench/bench_params"],
            [col("S"), col("params + replay", ".2f"), col("raw sets + launch", ".2f"),
             col("recapture + update + replay", ".2f"), col("raw capture + update + launch", ".2f"),
             col("params on the GPU + replay", ".2f"), col("recapture / params", ".1f"),
             col("recapture / params on the GPU", ".1f")],
            [[int(r[2:]), fig("step", r, "params_replay_us"), fig("step", r, "raw_set_launch_us"),
              fig("step", r, "recapture_update_replay_us"), fig("step", r, "raw_capture_update_launch_us"),
              fig("step", r, "params_gpu_replay_us"), fig("step", r, "recapture_over_params"),
              fig("step", r, "recapture_over_params_gpu")] for r in step_rows],
            [{"what": "recapture / params, set from the host", "column": "recapture / params", "op": ">=",
              "limit": 10},
             {"what": "recapture / params, applied on the GPU", "column": "recapture / params on the GPU",
              "op": ">=", "limit": 10}])
    if device and device.get("steps"):
        out["params.device_step"] = section(
            ["bench/bench_params_device"],
            [col("K"), col("raw launch", ".3f"), col("plain replay", ".3f"), col("host patching", ".3f"),
             col("on the GPU", ".3f"), col("on the GPU − plain", ".3f")],
            [[s["k"], med(s, "raw_us"), med(s, "plain_us"), med(s, "host_us"), med(s, "device_us"),
              sub(med(s, "device_us"), med(s, "plain_us"))] for s in device["steps"]],
            [{"what": "on the GPU − plain, µs", "column": "on the GPU − plain", "op": "<=", "limit": 0.5}])
    if device and device.get("sizes"):
        out["params.device_sizes"] = section(
            ["bench/bench_params_device"],
            [col("n"), col("recap GPU", ".2f"), col("raw GPU", ".2f"), col("exact GPU", ".2f"),
             col("padded GPU", ".2f"), col("recap / raw", ".3f"), col("host recap", ".3f"),
             col("host plain launch", ".3f"), col("host recap / plain", ".3f"), col("bits")],
            [[s["n"], med(s, "recap_gpu_us"), med(s, "raw_gpu_us"), med(s, "exact_gpu_us"),
              med(s, "padded_gpu_us"), div(med(s, "recap_gpu_us"), med(s, "raw_gpu_us")),
              med(s, "recap_host_us"), med(s, "plain_host_us"),
              div(med(s, "recap_host_us"), med(s, "plain_host_us")),
              "same" if s.get("same_bits") else "DIFFER"] for s in device["sizes"]],
            [{"what": "recap / raw, GPU", "column": "recap / raw", "op": "<=", "limit": 1.1},
             {"what": "host recap / plain", "column": "host recap / plain", "op": "<=", "limit": 1.05}])
    if device and device.get("costs"):
        names = ["plain", "updatable", "upd_dev", "upd_pin", "recap", "recap_host"]
        out["params.device_costs"] = section(
            ["bench/bench_params_device"],
            [col("K"), col("plain", ".2f"), col("device-updatable", ".2f"),
             col("+ updater, device memory", ".2f"), col("+ updater, pinned memory", ".2f"),
             col("recap on the GPU", ".2f"), col("recap, host sets", ".2f")],
            [[c["k"]] + [med(c, f"{n}_gpu_us") for n in names] for c in device["costs"]])
    mem = (device or {}).get("memory")
    if mem and mem.get("alone_bytes"):
        alone = mem["alone_bytes"]
        mib = 1024.0 * 1024.0
        out["params.device_memory"] = section(
            ["bench/bench_params_device"],
            [col("way"), col("reserved MiB", ".1f"), col("/ largest bucket alone", ".3f"), col("bits")],
            [["one graph, sizes from device memory", mem["device_bytes"] / mib, mem["device_bytes"] / alone,
              "same" if mem.get("same_bits") else "DIFFER"],
             [f"graph set of {mem.get('buckets')} buckets, one pool", mem["set_bytes"] / mib,
              mem["set_bytes"] / alone, ""],
             ["the largest bucket alone", alone / mib, 1.0, ""]],
            [{"what": "one graph / the largest bucket alone", "op": "<=", "limit": 1.0,
              "cell": ["one graph, sizes from device memory", "/ largest bucket alone"]}])
    return out


def sections(data, merged):
    """Every table of the page that the JSON files in data (name -> parsed JSON) can give. A
    benchmark whose JSON does not have the shape expected gives no table and a line on stderr:
    the merged results and the other tables matter more than one table."""
    builders = [
        ("bench_graph, bench_alloc", lambda: graph_sections(merged)),
        ("bench_rebind", lambda: rebind_sections(data.get("bench_rebind") or {})),
        ("bench_mlp, torch_mlp", lambda: mlp_sections(data.get("bench_mlp"), data.get("torch_mlp"))),
        ("bench_cond", lambda: cond_sections(data.get("bench_cond") or {})),
        ("bench_sleep", lambda: sleep_sections(data.get("bench_sleep") or {})),
        ("bench_buckets", lambda: buckets_section(data.get("bench_buckets") or {})),
        ("bench_vmm", lambda: vmm_section(data.get("bench_vmm") or {})),
        ("bench_sets, torch_sets", lambda: sets_sections(data.get("bench_sets"), data.get("torch_sets"))),
        ("bench_nccl, torch_nccl", lambda: nccl_sections(data.get("bench_nccl"), data.get("torch_nccl"))),
        ("bench_params, bench_params_device",
         lambda: params_sections(data.get("bench_params"), data.get("bench_params_device"))),
    ]
    out = {}
    for names, build in builders:
        try:
            out.update(build())
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            print(f"report: no page tables from {names}: {type(e).__name__}: {e}", file=sys.stderr)
    return out
