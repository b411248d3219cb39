#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""report.py: merge the benchmarks' JSON files into one table of ratios.

Reads, from --dir (default: $OUT when set, else the current folder), whichever of these exist:
bench_graph.json, bench_alloc.json (recap and raw CUDA, from the C benchmarks) and
torch_graph.json, torch_alloc.json (PyTorch, from bench/torch_*.py). Prints:

  replay      host us per launch: raw cudaGraphLaunch, recap_graph_replay, torch g.replay();
              recap/raw against recap's target of 1.05, and recap/torch;
  capture     us for capture + instantiate of N kernels: raw, recap, torch (begin/end and the
              torch.cuda.graph context); recap/raw against 1.1, and recap/torch;
  allocator   ns per cached malloc + free pair: recap, cudaMallocAsync, torch; recap against
              60 ns, and what routing to a capture's pool adds against 100 ns;
  memory      from bench_sleep.json, bench_buckets.json and bench_vmm.json when present: sleep +
              wake of pools against the raw VMM floor and the pinned bandwidth, the bucket
              graphs' reserved bytes against the ideal and CUDA's graph memory nodes, and VMM
              segments against classic ones; from bench_sets.json and torch_sets.json, a graph
              set's reserved bytes over 8 buckets against PyTorch's shared pool, the memory
              nodes and the largest bucket alone, capture time against PyTorch's, an eager
              loop's throughput beside a background capture, set_run's cost against a replay,
              and PyTorch's serve loop with bucket graphs against eager.

It also reads, when present, bench_rebind, bench_cond, bench_mlp, torch_mlp, bench_nccl,
torch_nccl, bench_params and bench_params_device.json, for the tables of docs/benchmarks.md
(report_sections.py builds them).

Writes the merged rows, the page's tables ("sections") and the inputs as JSON (--out, default
bench/results.json beside this script), a plot of the ratios as PNG (--plot, default the --out path with .png) when
matplotlib is importable, and with --brief PATH a few lines for a summary. Exit status 0, or 1
when no input was found; missed targets are reported, not failed (--strict makes them fail).

  report.py RESULTS.json [--check PAGE]

prints docs/benchmarks.md from a results file (benchmarks_page.py says what it holds; the
merged JSON above holds the sections this script can build from the benchmarks' JSON). With
--check it prints nothing and exits 1, with a diff, when PAGE differs from what it would print.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmarks_page  # noqa: E402  (beside this script)
import regressions  # noqa: E402
import report_sections  # noqa: E402

INPUTS = ("bench_graph", "bench_alloc", "torch_graph", "torch_alloc", "bench_sleep",
          "bench_buckets", "bench_vmm", "bench_sets", "torch_sets", "bench_rebind", "bench_cond",
          "bench_mlp", "torch_mlp", "bench_nccl", "torch_nccl", "bench_params", "bench_params_device")
MEMORY = ("bench_sleep", "bench_buckets", "bench_vmm", "bench_sets", "torch_sets")


def load(folder):
    data = {}
    for name in INPUTS:
        path = os.path.join(folder, name + ".json")
        if os.path.exists(path):
            try:
                with open(path) as f:
                    data[name] = json.load(f)
            except (OSError, ValueError) as e:
                print(f"report: cannot read {path}: {e}", file=sys.stderr)
    return data


def med(entry, key):
    """The median of entry[key], a stats object, or None."""
    if not entry or key not in entry or not isinstance(entry[key], dict):
        return None
    return entry[key].get("median")


def div(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt(x, spec):
    """x formatted by spec, or a dash as wide as spec asks when x is missing."""
    if isinstance(x, (int, float)) and not math.isnan(x):
        return format(x, spec)
    width = re.match(r"\d*", spec).group()
    return "-".rjust(int(width)) if width else "-"


def by_key(rows, key):
    return {r[key]: r for r in rows or []}


def size_label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def merge(data):
    graph, alloc = data.get("bench_graph", {}), data.get("bench_alloc", {})
    tgraph, talloc = data.get("torch_graph", {}), data.get("torch_alloc", {})
    gt = graph.get("targets", {"replay_ratio": 1.05, "capture_ratio": 1.10})
    at = alloc.get("targets", {"pair_ns": 60.0, "routing_extra_ns": 100.0})
    targets = {**gt, **at}

    replay = []
    c_replay, t_replay = by_key(graph.get("replay"), "n"), by_key(tgraph.get("replay"), "n")
    for n in sorted(set(c_replay) | set(t_replay)):
        c, t = c_replay.get(n), t_replay.get(n)
        raw, rec, tor = med(c, "raw_us"), med(c, "recap_us"), med(t, "torch_us")
        r = div(rec, raw)
        replay.append({"n": n, "raw_us": raw, "recap_us": rec, "torch_us": tor,
                       "recap_vs_raw": r, "torch_vs_raw": div(tor, raw),
                       "recap_vs_torch": div(rec, tor),
                       "meets_target": None if r is None else r <= targets["replay_ratio"]})

    capture = []
    c_cap, t_cap = by_key(graph.get("capture"), "n"), by_key(tgraph.get("capture"), "n")
    for n in sorted(set(c_cap) | set(t_cap)):
        c, t = c_cap.get(n), t_cap.get(n)
        raw, rec = med(c, "raw_us"), med(c, "recap_us")
        tor, tscope = med(t, "torch_us"), med(t, "torch_scope_us")
        r = div(rec, raw)
        capture.append({"n": n, "raw_us": raw, "recap_us": rec, "torch_us": tor,
                        "torch_scope_us": tscope, "recap_vs_raw": r,
                        "torch_vs_raw": div(tor, raw), "recap_vs_torch": div(rec, tor),
                        "meets_target": None if r is None else r <= targets["capture_ratio"]})

    allocs = []
    c_al, t_al = by_key(alloc.get("sizes"), "size"), by_key(talloc.get("sizes"), "size")
    for size in sorted(set(c_al) | set(t_al)):
        c, t = c_al.get(size), t_al.get(size)
        rec, cu = med(c, "recap_ns"), med(c, "cuda_async_ns")
        routed, other = med(c, "recap_routed_ns"), med(c, "recap_other_stream_in_capture_ns")
        tor, torc = med(t, "torch_ns"), med(t, "torch_c_ns")
        extra = routed - rec if routed is not None and rec is not None else None
        best_torch = min(x for x in (tor, torc) if x is not None) if (tor or torc) else None
        allocs.append({
            "size": size, "recap_ns": rec, "cuda_async_ns": cu, "recap_routed_ns": routed,
            "recap_other_stream_in_capture_ns": other, "routing_extra_ns": extra,
            "torch_ns": tor, "torch_c_ns": torc, "torch_empty_ns": med(t, "torch_empty_ns"),
            "torch_routing_extra_ns": t.get("routing_extra_ns") if t else None,
            "python_floor_ns": med(t, "python_floor_ns"),
            "recap_vs_cuda_async": div(rec, cu), "recap_vs_torch": div(rec, best_torch),
            "meets_pair_target": None if rec is None else rec <= targets["pair_ns"],
            "meets_routing_target": None if extra is None else extra <= targets["routing_extra_ns"],
        })

    def all_met(rows, key):
        values = [r[key] for r in rows if r[key] is not None]
        return all(values) if values else None

    met = {"replay": all_met(replay, "meets_target"), "capture": all_met(capture, "meets_target"),
           "alloc_pair": all_met(allocs, "meets_pair_target"),
           "routing": all_met(allocs, "meets_routing_target")}
    device = graph.get("device") or alloc.get("device") or tgraph.get("device")
    checks = [d.get("checks_passed") for d in data.values() if "checks_passed" in d]
    return {"generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "targets": targets, "targets_met": met,
            "checks_passed": all(checks) if checks else None,
            "quick": any(d.get("quick") for d in data.values()),
            "replay": replay, "capture": capture, "alloc": allocs,
            "memory": memory_lines(data), "machine": machine(data), "inputs": data}


def machine(data):
    """What ran the benchmarks, for the page's header: GPU, driver, CUDA, PyTorch, NCCL, host."""
    import platform
    import subprocess
    first = next((d for d in data.values() if d.get("device")), {})
    out = {"gpu": first.get("device")}
    try:
        out["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        out["driver"] = None
    runtime = first.get("runtime_version")
    if isinstance(runtime, int):
        out["cuda"] = f"{runtime // 1000}.{runtime % 1000 // 10}"
    torch_version = next((d["torch_version"] for d in data.values() if d.get("torch_version")), None)
    if torch_version:
        out["pytorch"] = torch_version
    code = (data.get("bench_nccl") or {}).get("nccl_version")
    if isinstance(code, int) and code >= 10000:  # NCCL_VERSION_CODE: major*10000 + minor*100 + patch
        out["nccl"] = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        out["host"] = f"a host of {round(kib / (1 << 20))} GiB memory ({platform.machine()})"
    except (OSError, ValueError, IndexError):
        out["host"] = None
    return out


def gib_label(size):
    return f"{size / (1 << 30):g}G"


def memory_lines(data):
    """A few lines of the memory benchmarks' key figures (bench_sleep, bench_buckets, bench_vmm),
    for the table and the summary. Figures a run did not produce print as dashes."""
    lines = []
    sleep = data.get("bench_sleep")
    if sleep:
        goals = sleep.get("goals", {})
        pools = sleep.get("pools", [])
        rows = [(gib_label(p["bytes"]), p.get("discard") or {}, p.get("offload") or {}) for p in pools]

        def col(key, spec, which):
            """key of each pool's DISCARD ('d') or OFFLOAD ('o') figures, labelled by size."""
            return " ".join(f"{lab}:{fmt((d if which == 'd' else o).get(key), spec)}"
                            for lab, d, o in rows)

        big = [r for r in rows if r[0] == "64G" and "total_ms" in r[1]]
        met64 = yes(big[0][1]["total_ms"] <= goals.get("discard_ms_64gib", 100)) if big else "-"
        floors = [d.get("vs_floor") for _, d, _ in rows if "vs_floor" in d]
        backs = [d.get("back_percent") for _, d, _ in rows if "back_percent" in d]
        same = [d.get("identical") for _, d, _ in rows if "identical" in d] + \
               [o.get("identical") for _, _, o in rows if "identical" in o] + \
               [(p.get("offload_warm") or {}).get("identical") for p in pools
                if "identical" in (p.get("offload_warm") or {})]
        lines.append(f"sleep DISCARD ms  {col('total_ms', '.1f', 'd')}  (64G <= "
                     f"{goals.get('discard_ms_64gib', 100):g}: {met64})")
        lines.append(f"sleep / floor     {col('vs_floor', '.2f', 'd')}  (<= "
                     f"{goals.get('discard_vs_floor', 3):g}: "
                     f"{yes(all(x <= goals.get('discard_vs_floor', 3) for x in floors)) if floors else '-'})")
        lines.append(f"sleep back %      {col('back_percent', '.2f', 'd')}  (>= "
                     f"{goals.get('back_percent', 99):g}: "
                     f"{yes(all(x >= goals.get('back_percent', 99) for x in backs)) if backs else '-'});"
                     f" identical after wake: {yes(all(same)) if same else '-'}")
        ratios = [x for _, _, o in rows for x in (o.get("sleep_vs_pinned"), o.get("wake_vs_pinned"))
                  if x is not None]
        pinned = sleep.get("pinned", {})
        goal = goals.get("offload_vs_pinned", 0.8)
        lines.append(f"OFFLOAD/pinned    sleep {col('sleep_vs_pinned', '.2f', 'o')}; wake "
                     f"{col('wake_vs_pinned', '.2f', 'o')}  (first cycle, pinning included; >= {goal:g}: "
                     f"{yes(all(x >= goal for x in ratios)) if ratios else '-'};"
                     f" pinned {fmt(pinned.get('d2h_gbps'), '.1f')}/{fmt(pinned.get('h2d_gbps'), '.1f')} GB/s)")
        # The warm cycles (offload_keep_pinned=1: the buffer kept from a priming cycle), and the
        # release of the kept buffer; absent from the JSON of older runs.
        warm = [(gib_label(p["bytes"]), p.get("offload_warm") or {}, p.get("offload_keep") or {})
                for p in pools]

        def warm_col(key, spec):
            return " ".join(f"{lab}:{fmt(w.get(key), spec)}" for lab, w, _ in warm)

        warm_ratios = [x for _, w, _ in warm for x in (w.get("sleep_vs_pinned"), w.get("wake_vs_pinned"))
                       if x is not None]
        release = " ".join(f"{lab}:{fmt(k.get('release_ms'), '.1f')}" for lab, _, k in warm)
        lines.append(f"OFFLOAD warm/pin  sleep {warm_col('sleep_vs_pinned', '.2f')}; wake "
                     f"{warm_col('wake_vs_pinned', '.2f')}  (offload_keep_pinned=1; >= {goal:g}: "
                     f"{yes(all(x >= goal for x in warm_ratios)) if warm_ratios else '-'};"
                     f" kept buffer freed, ms {release})")
    buckets = data.get("bench_buckets")
    if buckets:
        ways = {w["way"]: w for w in buckets.get("ways", [])}
        mib = " ".join(f"{name}:{fmt((w.get('reserved_bytes') or 0) / (1 << 20) if 'reserved_bytes' in w else None, '.1f')}"
                       for name, w in ways.items())
        vmm = ways.get("shared_vmm", {})
        lines.append(f"buckets MiB       {mib}  (ideal {buckets.get('ideal_bytes', 0) / (1 << 20):g})")
        lines.append(f"buckets VMM shared /ideal {fmt(vmm.get('vs_ideal'), '.2f')} /driver "
                     f"{fmt(vmm.get('vs_driver'), '.2f')}  (<= {buckets.get('goal_ideal_ratio', 1.1):g} "
                     f"and <= 1: {yes(buckets.get('goal_met'))})")
        lines.append("buckets replay us " + " ".join(
            f"{name}:{fmt(med(w, 'replay_us'), '.2f')}" for name, w in ways.items()) +
            f"  (VMM shared/nodes {fmt(vmm.get('replay_vs_nodes'), '.3f')})")
    vmmb = data.get("bench_vmm")
    if vmmb:
        pairs = " ".join(f"{size_label(p['size']).replace(' ', '')}:{fmt(p.get('vmm_vs_classic'), '.2f')}"
                         for p in vmmb.get("pairs", []))
        frag = vmmb.get("fragmentation", {})
        lines.append(f"vmm/classic       pair {pairs}; capture "
                     f"{fmt(vmmb.get('capture_us', {}).get('vmm_vs_classic'), '.2f')}; replay "
                     f"{fmt(vmmb.get('replay_us', {}).get('vmm_vs_classic'), '.2f')}")
        lines.append(f"growing reserved/allocated  classic "
                     f"{fmt(frag.get('classic', {}).get('reserved_vs_allocated'), '.3f')}, vmm "
                     f"{fmt(frag.get('vmm', {}).get('reserved_vs_allocated'), '.3f')}")
    lines.extend(sets_lines(data))
    return lines


def sets_lines(data):
    """The graph sets' figures (bench_sets, torch_sets): ratios against their goals."""
    sets, tsets = data.get("bench_sets"), data.get("torch_sets")
    lines = []
    tb = (tsets or {}).get("buckets", {})
    torch_bytes = tb.get("reserved_bytes")
    if sets:
        ways = {w["way"]: w for w in sets.get("memory", [])}
        goals = sets.get("goals", {})
        mib = " ".join(f"{k}:{fmt(ways.get(k, {}).get('reserved_bytes', float('nan')) / (1 << 20), '.1f')}"
                       for k in ("nodes", "set", "set_vmm", "alone", "alone_vmm"))
        if torch_bytes is not None:
            mib += f" torch:{torch_bytes / (1 << 20):.1f}"
        lines.append(f"sets MiB          {mib}")
        for key in ("set", "set_vmm"):
            w = ways.get(key, {})
            vs_torch = div(w.get("reserved_bytes"), torch_bytes)
            lines.append(f"sets {key + ' /torch':<12} {fmt(vs_torch, '.2f')} /nodes "
                         f"{fmt(w.get('vs_nodes'), '.2f')} /alone {fmt(w.get('vs_alone'), '.2f')}"
                         f"  (<= 1, <= 1, <= {goals.get('alone_ratio', 1.25):g})")
        cap = ways.get("set", {}).get("capture_ms")
        lines.append(f"sets capture ms   recap {fmt(cap, '.1f')} nodes "
                     f"{fmt(ways.get('nodes', {}).get('capture_ms'), '.1f')} torch "
                     f"{fmt(tb.get('capture_ms'), '.1f')}  (recap/torch "
                     f"{fmt(div(cap, tb.get('capture_ms')), '.2f')})")
        bg = sets.get("background", {})
        lines.append(f"sets background   eager loop during/alone {fmt(bg.get('ratio'), '.3f')} "
                     f"(>= {goals.get('background_ratio', 0.9):g}); {bg.get('sizes', '-')} sizes "
                     f"graphed in {fmt(med(bg, 'all_ready_ms'), '.1f')} ms (default share)")
        shares = sets.get("background_shares", [])
        if shares:
            lines.append("sets bg shares    " + "  ".join(
                f"{s.get('share', 0):g}: {fmt(s.get('ratio'), '.3f')} in {fmt(s.get('all_ready_ms'), '.1f')} ms"
                for s in shares))
        rc = sets.get("run_cost", {})
        lines.append(f"sets run/replay   {fmt(rc.get('ratio'), '.3f')} (set_run "
                     f"{fmt(med(rc, 'set_run_us'), '.2f')} us, replay {fmt(med(rc, 'replay_us'), '.2f')} us)")
    if tsets:
        sv = tsets.get("serve", {})
        lines.append(f"torch serve       graphs/eager {fmt(sv.get('speedup'), '.2f')}x requests/s; "
                     f"shared pool /alone {fmt(tb.get('vs_alone'), '.2f')}")
    return lines


def yes(x):
    return "-" if x is None else "yes" if x else "NO"


def print_tables(res):
    t = res["targets"]
    print(f"benchmarks on {res['device'] or 'an unknown device'}"
          f"{' (quick run: noisy figures)' if res['quick'] else ''}")
    print(f"\ngraph replay, host us per launch call (target recap/raw <= {t['replay_ratio']})")
    print(f"{'N':>6} {'raw':>8} {'recap':>8} {'torch':>8} {'recap/raw':>10} {'met':>4} "
          f"{'torch/raw':>10} {'recap/torch':>12}")
    for r in res["replay"]:
        print(f"{r['n']:>6} {fmt(r['raw_us'], '8.3f')} {fmt(r['recap_us'], '8.3f')} "
              f"{fmt(r['torch_us'], '8.3f')} {fmt(r['recap_vs_raw'], '10.3f')} "
              f"{yes(r['meets_target']):>4} {fmt(r['torch_vs_raw'], '10.2f')} "
              f"{fmt(r['recap_vs_torch'], '12.3f')}")
    print(f"\ncapture + instantiate of N kernels, us (target recap/raw <= {t['capture_ratio']})")
    print(f"{'N':>6} {'raw':>9} {'recap':>9} {'torch':>9} {'torch ctx':>10} {'recap/raw':>10} "
          f"{'met':>4} {'recap/torch':>12}")
    for r in res["capture"]:
        print(f"{r['n']:>6} {fmt(r['raw_us'], '9.1f')} {fmt(r['recap_us'], '9.1f')} "
              f"{fmt(r['torch_us'], '9.1f')} {fmt(r['torch_scope_us'], '10.1f')} "
              f"{fmt(r['recap_vs_raw'], '10.3f')} {yes(r['meets_target']):>4} "
              f"{fmt(r['recap_vs_torch'], '12.4f')}")
    print(f"\nallocator, ns per cached malloc + free pair (targets: recap <= {t['pair_ns']:g}, "
          f"routing adds <= {t['routing_extra_ns']:g})")
    print(f"{'size':>8} {'recap':>7} {'met':>4} {'cuAsync':>8} {'torch':>8} {'torch._C':>9} "
          f"{'r/cuda':>7} {'r/torch':>8} {'+routing':>9} {'met':>4} {'torch +rt':>10}")
    for r in res["alloc"]:
        print(f"{size_label(r['size']):>8} {fmt(r['recap_ns'], '7.1f')} "
              f"{yes(r['meets_pair_target']):>4} {fmt(r['cuda_async_ns'], '8.1f')} "
              f"{fmt(r['torch_ns'], '8.1f')} {fmt(r['torch_c_ns'], '9.1f')} "
              f"{fmt(r['recap_vs_cuda_async'], '7.3f')} {fmt(r['recap_vs_torch'], '8.3f')} "
              f"{fmt(r['routing_extra_ns'], '9.1f')} {yes(r['meets_routing_target']):>4} "
              f"{fmt(r['torch_routing_extra_ns'], '10.1f')}")
    if res["memory"]:
        print("\nmemory (bench_sleep, bench_buckets, bench_vmm, bench_sets, torch_sets; their own tables "
              "are in bench.log)")
        for line in res["memory"]:
            print("  " + line)
    m = res["targets_met"]
    print(f"\ntargets met: replay {yes(m['replay'])}, capture {yes(m['capture'])}, "
          f"alloc pair {yes(m['alloc_pair'])}, routing {yes(m['routing'])}; "
          f"correctness checks {yes(res['checks_passed'])}")


def brief_lines(res):
    lines = []
    m, t = res["targets_met"], res["targets"]

    def series(rows, key, spec, label):
        return " ".join(f"{label(r)}:{fmt(r[key], spec)}" for r in rows)

    if res["replay"]:
        lines.append(f"replay recap/raw  {series(res['replay'], 'recap_vs_raw', '.3f', lambda r: 'N' + str(r['n']))}"
                     f"  (<= {t['replay_ratio']}: {yes(m['replay'])})")
        lines.append(f"replay torch/raw  {series(res['replay'], 'torch_vs_raw', '.2f', lambda r: 'N' + str(r['n']))}")
    if res["capture"]:
        lines.append(f"capture recap/raw {series(res['capture'], 'recap_vs_raw', '.3f', lambda r: 'N' + str(r['n']))}"
                     f"  (<= {t['capture_ratio']}: {yes(m['capture'])})")
        lines.append(f"capture torch/raw {series(res['capture'], 'torch_vs_raw', '.2f', lambda r: 'N' + str(r['n']))}")
    if res["alloc"]:
        lab = lambda r: size_label(r["size"]).replace(" ", "")
        lines.append(f"alloc pair ns     {series(res['alloc'], 'recap_ns', '.1f', lab)}"
                     f"  (<= {t['pair_ns']:g}: {yes(m['alloc_pair'])})")
        lines.append(f"routing +ns       {series(res['alloc'], 'routing_extra_ns', '.1f', lab)}"
                     f"  (<= {t['routing_extra_ns']:g}: {yes(m['routing'])})")
        lines.append(f"recap/cudaAsync   {series(res['alloc'], 'recap_vs_cuda_async', '.3f', lab)};"
                     f" recap/torch {series(res['alloc'], 'recap_vs_torch', '.3f', lab)}")
    lines.extend(res["memory"])
    return lines


def plot(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    t = res["targets"]
    for ax, key, title, target in ((axes[0], "replay", "replay host cost / raw", t["replay_ratio"]),
                                   (axes[1], "capture", "capture+instantiate / raw", t["capture_ratio"])):
        rows = res[key]
        xs = [str(r["n"]) for r in rows]
        width = 0.38
        pos = range(len(xs))
        ax.bar([p - width / 2 for p in pos], [r["recap_vs_raw"] or 0 for r in rows], width,
               label="recap / raw CUDA")
        ax.bar([p + width / 2 for p in pos], [r["torch_vs_raw"] or 0 for r in rows], width,
               label="torch / raw CUDA")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.axhline(target, color="red", ls="--", lw=1, label=f"target {target}")
        ax.set_xticks(list(pos), xs)
        ax.set_xlabel("kernels in graph (N)")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
    ax = axes[2]
    rows = res["alloc"]
    xs = [size_label(r["size"]) for r in rows]
    series = [("recap", "recap_ns"), ("recap routed", "recap_routed_ns"),
              ("cudaMallocAsync", "cuda_async_ns"), ("torch._C", "torch_c_ns"),
              ("torch", "torch_ns")]
    width = 0.8 / len(series)
    for i, (label, key) in enumerate(series):
        ax.bar([p - 0.4 + width * (i + 0.5) for p in range(len(xs))],
               [r[key] or 0 for r in rows], width, label=label)
    ax.axhline(t["pair_ns"], color="red", ls="--", lw=1, label=f"target {t['pair_ns']:g} ns")
    ax.set_xticks(list(range(len(xs))), xs)
    ax.set_yscale("log")
    ax.set_ylabel("ns per malloc+free pair")
    ax.set_title("allocator hot path")
    ax.legend(fontsize=8)
    fig.suptitle(f"recap benchmarks on {res['device'] or '?'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def page_main(results_path, check):
    """Print the benchmarks page for a results file, or compare it with the page at check."""
    import difflib
    here = os.path.dirname(os.path.abspath(__file__))
    with open(results_path, encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(here, "benchmarks.md.in"), encoding="utf-8") as f:
        template = f.read()
    text = benchmarks_page.render(results, template)
    if not check:
        sys.stdout.write(text)
        return 0
    with open(check, encoding="utf-8") as f:
        current = f.read()
    if current == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                               check, f"report.py {results_path}"))
    print(f"report: {check} is not what {results_path} gives: regenerate it with\n"
          f"  python3 bench/report.py {results_path} > {check}", file=sys.stderr)
    return 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) > 1 and sys.argv[1].endswith(".json"):
        check = sys.argv[3] if len(sys.argv) == 4 and sys.argv[2] == "--check" else None
        if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and not check):
            print("usage: report.py RESULTS.json [--check PAGE]", file=sys.stderr)
            return 2
        return page_main(sys.argv[1], check)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=os.environ.get("OUT") or ".",
                        help="folder holding the benchmarks' JSON files")
    parser.add_argument("--out", default=os.path.join(here, "results.json"),
                        help="merged JSON to write")
    parser.add_argument("--plot", default=None, help="PNG to write (default: --out with .png)")
    parser.add_argument("--brief", default=None, help="write a few summary lines here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--compare", default=None, metavar="COMMITTED",
                        help="list the figures that got worse by over 10%% than this results file "
                             "(bench/results/h200.json), in the output and after --brief's lines")
    args = parser.parse_args()

    data = load(args.dir)
    if not data:
        print(f"report: no benchmark JSON found in {args.dir}", file=sys.stderr)
        return 1
    res = merge(data)
    res["sections"] = report_sections.sections(data, res)
    print_tables(res)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"\nmerged results: {args.out}")
    png = args.plot or os.path.splitext(args.out)[0] + ".png"
    try:
        if plot(res, png):
            print(f"plot: {png}")
    except Exception as e:  # a plot is a nicety; the tables and JSON are the results
        print(f"report: no plot ({type(e).__name__}: {e})", file=sys.stderr)
    brief = brief_lines(res)
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            committed = json.load(f)
        worse = regressions.lines(committed, res)
        print(f"\nagainst {args.compare}:")
        print("\n".join("  " + line for line in worse))
        brief += [f"against {os.path.basename(args.compare)}:"] + ["  " + line for line in worse]
    if args.brief:
        with open(args.brief, "w") as f:
            f.write("\n".join(brief) + "\n")
    missed = [k for k, v in res["targets_met"].items() if v is False]
    if args.strict and (missed or res["checks_passed"] is False):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
