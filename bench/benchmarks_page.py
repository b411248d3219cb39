# SPDX-License-Identifier: BSD-3-Clause
"""benchmarks_page.py: docs/benchmarks.md, written whole from a results file.

A results file (bench/results/*.json, or the results.json that report.py writes after a GPU run)
holds "machine" (what ran the benchmarks) and "sections": one table per name, each with the
programs that produced it, its columns and rows, and its goals. The prose that says what each
benchmark measures lives in benchmarks.md.in beside this file; its lines {{header}} and
{{table NAME}} are replaced by the machine and by section NAME: the programs, the table, and
every goal with met or missed computed from the table's figures.

A section:
  {"programs": ["bench/bench_graph", ...],
   "columns": [{"name": "N"}, {"name": "recap / raw", "format": ".3f"}, ...],
   "rows": [[1, 0.992, ...], ...],          cells: numbers, text, or null (printed as a dash)
   "goals": [goal, ...]}
A goal names what it checks and where the figure is:
  "column": C            the figure of column C in every row (or only in "rows": [labels])
  "ratio_columns": [A, B]  column A over column B in every row (or in "rows")
  "cell": [ROW, C]       one figure, ROW being the row's first cell
  "ratio": [[ROW, C], [ROW, C]]  one figure over another
and how it is judged: "op" (<=, >=, <, >, ==) against "limit" (a number or a text), or against
"limit_column" (the same row's figure in that column). Without "op" the figure is only shown.
"format" formats a computed figure (default .2f).
"""
import re

OPS = {"<=": ("≤", lambda a, b: a <= b), ">=": ("≥", lambda a, b: a >= b),
       "<": ("<", lambda a, b: a < b), ">": (">", lambda a, b: a > b),
       "==": ("is", lambda a, b: a == b)}
DASH = "–"


def number(cell):
    """The figure in a cell: the number itself, or the number a text cell begins with."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        return cell
    if isinstance(cell, str):
        m = re.match(r"\s*(-?\d+(?:\.\d+)?)", cell)
        return float(m.group(1)) if m else None
    return None


def show(cell, spec=None):
    if cell is None:
        return DASH
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if isinstance(cell, float) and spec:
        return format(cell, spec)
    return str(cell)


def column_index(section, name):
    for i, c in enumerate(section["columns"]):
        if c["name"] == name:
            return i
    raise KeyError(f"no column '{name}' in a table of {', '.join(section['programs'])}")


def row_of(section, label):
    for row in section["rows"]:
        if str(row[0]) == str(label):
            return row
    raise KeyError(f"no row '{label}' in a table of {', '.join(section['programs'])}")


def table(section):
    cols = section["columns"]
    numeric = [any(isinstance(r[i], (int, float)) and not isinstance(r[i], bool)
                   for r in section["rows"]) for i in range(len(cols))]
    lines = ["| " + " | ".join(c["name"] for c in cols) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in section["rows"]:
        lines.append("| " + " | ".join(show(v, c.get("format")) for v, c in zip(row, cols)) + " |")
    return "\n".join(lines)


def row_label(section, row):
    head = section["columns"][0]["name"]
    if head and len(head) <= 6 and isinstance(row[0], (int, float)):
        return f"{head} = {row[0]}"
    return str(row[0])


def goal_values(section, goal):
    """(label, figure, limit) for each figure the goal judges; label None for a single one."""
    spec = goal.get("format", ".2f")
    rows = section["rows"]
    if "rows" in goal:
        rows = [row_of(section, label) for label in goal["rows"]]
    lim_col = column_index(section, goal["limit_column"]) if "limit_column" in goal else None

    def limit(row):
        return number(row[lim_col]) if lim_col is not None else goal.get("limit")

    if "column" in goal:
        i = column_index(section, goal["column"])
        cspec = section["columns"][i].get("format")
        out = []
        for r in rows:
            v = r[i] if isinstance(r[i], (str, bool)) and isinstance(goal.get("limit"), str) \
                else number(r[i])
            out.append((row_label(section, r), v, show(r[i], cspec), limit(r)))
        return out
    if "ratio_columns" in goal:
        a, b = (column_index(section, c) for c in goal["ratio_columns"])
        out = []
        for r in rows:
            x, y = number(r[a]), number(r[b])
            v = x / y if x is not None and y else None
            out.append((row_label(section, r), v, show(v, spec), limit(r)))
        return out
    if "cell" in goal:
        r = row_of(section, goal["cell"][0])
        i = column_index(section, goal["cell"][1])
        v = number(r[i]) if not isinstance(goal.get("limit"), str) else r[i]
        return [(None, v, show(r[i], section["columns"][i].get("format")), limit(r))]
    if "ratio" in goal:
        (ra, ca), (rb, cb) = goal["ratio"]
        x = number(row_of(section, ra)[column_index(section, ca)])
        y = number(row_of(section, rb)[column_index(section, cb)])
        v = x / y if x is not None and y else None
        return [(None, v, show(v, spec), goal.get("limit"))]
    raise KeyError(f"a goal of {', '.join(section['programs'])} names no figure")


def goal_line(section, goal):
    what = goal["what"]
    try:
        values = goal_values(section, goal)
    except KeyError:  # a row or column this run did not produce
        values = []
    if not values:
        return f"- {'Goal: ' if 'op' in goal else ''}{what}: not measured."
    if "op" not in goal:
        shown = ", ".join(s if label is None else f"{label}: {s}" for label, _, s, _ in values)
        return f"- {what}: {shown}."
    word, test = OPS[goal["op"]]
    limit = goal.get("limit")
    bound = goal["limit_column"] if "limit_column" in goal else \
        f"{limit:g}" if isinstance(limit, float) else show(limit)
    claim = f"{what}" if goal["op"] == "==" else f"{what} {word} {bound}"
    met, missed, unknown = [], [], []
    # Labels that hold commas or brackets (table rows such as "1 GiB, first (pins)") are set
    # apart with semicolons and a colon, so that no bracket nests and no list runs together.
    busy = any(label and ("," in label or "(" in label) for label, _, _, _ in values)
    sep = "; " if busy else ", "
    for label, v, s, lim in values:
        item = s if label is None else f"{label}: {s}" if busy else f"{label} ({s})"
        if v is None or lim is None:
            unknown.append(item)
        elif test(v, lim):
            met.append(item)
        else:
            missed.append(item)
    parts = []
    single = len(values) == 1 and values[0][0] is None
    if met:
        parts.append("**met**" + (f" ({met[0]})" if single else " at " + sep.join(met)))
    if missed:
        parts.append("**missed**" + (f" ({missed[0]})" if single else " at " + sep.join(missed)))
    if unknown:
        parts.append("not measured" + ("" if single else " at " + sep.join(unknown)))
    if len(parts) > 1:
        return f"- Goal: {claim}:\n" + "\n".join(f"  - {p}." for p in parts)
    return f"- Goal: {claim}: " + parts[0] + "."


def section_text(section):
    programs = " and ".join(f"`{p}`" for p in section["programs"])
    out = [f"From {programs}:", "", table(section)]
    goals = section.get("goals", [])
    if goals:
        out.append("")
        out.extend(goal_line(section, g) for g in goals)
    return "\n".join(out)


def header(machine):
    def get(key):
        return machine.get(key) or "unknown"

    text = f"Measured with an {get('gpu')} (driver {get('driver')}, CUDA {get('cuda')}) on {get('host')}"
    extra = [f"{k} {machine[k.lower()]}" for k in ("PyTorch", "NCCL") if machine.get(k.lower())]
    if extra:
        text += "; " + " and ".join(extra) + " on the same machine"
    return text + "."


def render(results, template):
    """The page: the template with its {{...}} lines replaced from results."""
    sections = results.get("sections", {})
    lines = template.splitlines()
    if lines and lines[0].startswith("<!--"):  # the template's own opening comments
        while lines and lines[0].startswith(("<!--", "     ")):
            lines.pop(0)
    out = []
    for line in lines:
        m = re.fullmatch(r"\{\{(header|table (\S+))\}\}", line.strip())
        if not m:
            out.append(line)
        elif m.group(1) == "header":
            out.append(header(results.get("machine", {})))
        elif m.group(2) in sections:
            out.append(section_text(sections[m.group(2)]))
        else:
            out.append(f"Not measured: the results hold no table `{m.group(2)}`.")
    return "\n".join(out).rstrip("\n") + "\n"
