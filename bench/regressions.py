# SPDX-License-Identifier: BSD-3-Clause
"""regressions.py: which figures of a GPU run got worse than the committed results.

Two results files (the format benchmarks_page.py describes: bench/results/h200.json, or the
results.json that report.py writes after a run) are compared figure by figure, over the figures
whose better direction is known:
  - every figure a goal judges with <=, < (lower is better) or >=, > (higher is better), row by
    row, the rows matched by their label;
  - every other column whose name starts with "recap" and holds a ratio ("recap / raw",
    "recap / PyTorch"): recap's cost over a reference, lower is better.
A figure is worse when it moved the wrong way by more than the tolerance (10 per cent by
default) relative to the committed one. The result is a report: tools/gpu-check lists it in its
summary and does not fail on it, since a figure of a shared machine moves by itself too.
"""
import benchmarks_page as page

LOWER = ("<=", "<")
HIGHER = (">=", ">")


def _figures(section):
    """{(what, row label): (value, lower_is_better)} for the figures with a known direction."""
    out = {}
    for goal in section.get("goals", []):
        op = goal.get("op")
        if op not in LOWER + HIGHER:
            continue
        try:
            values = page.goal_values(section, goal)
        except (KeyError, ValueError, TypeError, IndexError):
            continue
        for label, value, _shown, _limit in values:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[(goal["what"], label)] = (float(value), op in LOWER)
    judged = {g.get("column") for g in section.get("goals", []) if g.get("op") in LOWER + HIGHER}
    for i, column in enumerate(section["columns"]):
        name = column["name"]
        if not name.startswith("recap") or "/" not in name or name in judged:
            continue
        for row in section["rows"]:
            value = page.number(row[i]) if i < len(row) else None
            if value is not None:
                out[(name, page.row_label(section, row))] = (float(value), True)
    return out


def compare(baseline, current, tolerance=0.10):
    """[(section, what, row label, committed, now, change)] of the figures that got worse, change
    being the relative move in the wrong direction (0.25: 25 per cent worse)."""
    worse = []
    for name, section in current.get("sections", {}).items():
        before_section = baseline.get("sections", {}).get(name)
        if not before_section:
            continue
        before = _figures(before_section)
        for key, (now, lower_better) in _figures(section).items():
            if key not in before:
                continue
            was = before[key][0]
            if was == 0 or now == 0:
                continue
            change = (now / was - 1) if lower_better else (was / now - 1)
            if change > tolerance:
                worse.append((name, key[0], key[1], was, now, change))
    return worse


def lines(baseline, current, tolerance=0.10):
    """The report's lines: the machines compared, then one line per figure that got worse."""
    gpu_before = baseline.get("machine", {}).get("gpu") or "?"
    gpu_now = current.get("device") or current.get("machine", {}).get("gpu") or "?"
    out = []
    if gpu_before not in gpu_now and gpu_now not in gpu_before:
        out.append(f"note: the committed results are from {gpu_before}, this run from {gpu_now}")
    worse = compare(baseline, current, tolerance)
    if not worse:
        out.append(f"no figure got worse by more than {tolerance:.0%} than the committed results")
    for name, what, label, was, now, change in worse:
        where = f"{what}, {label}" if label is not None else what
        out.append(f"{name}: {where}: {was:.4g} -> {now:.4g} ({change:+.0%} worse)")
    return out
