# SPDX-License-Identifier: BSD-3-Clause
"""test_regressions.py: regressions.py finds a figure made worse, and only that one (ctest
bench.regressions_listed, on the committed results)."""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import regressions  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "results", "h200.json"), encoding="utf-8") as f:
    committed = json.load(f)

same = regressions.compare(committed, committed)
assert same == [], same
assert "no figure got worse" in regressions.lines(committed, committed)[-1]

# recap / raw of the replay at N = 10 up by 20%: lower is better, so it is listed, once.
worse = copy.deepcopy(committed)
replay = worse["sections"]["graph.replay"]
column = [c["name"] for c in replay["columns"]].index("recap / raw")
replay["rows"][1][column] *= 1.2
found = regressions.compare(committed, worse)
assert [(s, w, r) for s, w, r, *_ in found] == [("graph.replay", "recap / raw", "N = 10")], found
assert abs(found[0][5] - 0.2) < 1e-9, found

# A figure where higher is better (a >= goal) that fell by a third; and a move within 10%.
better = copy.deepcopy(committed)
section = better["sections"]["graph.replay"]
section["rows"][1][column] *= 0.5  # better: not listed
section["rows"][2][column] *= 1.05  # within the tolerance: not listed
assert regressions.compare(committed, better) == []
higher = [(n, s, g) for n, s in committed["sections"].items() for g in s.get("goals", [])
          if g.get("op") == ">=" and "column" in g]
name, _, goal = higher[0]
fell = copy.deepcopy(committed)
sec = fell["sections"][name]
i = [c["name"] for c in sec["columns"]].index(goal["column"])
row = next(r for r in sec["rows"] if isinstance(r[i], (int, float)) and r[i])
row[i] = row[i] / 1.5
listed = regressions.compare(committed, fell)
assert any(s == name and w == goal["what"] for s, w, *_ in listed), (name, goal, listed)
print(f"regressions.py: {len(regressions._figures(replay))} figures of graph.replay compared; "
      f"a worse one listed, better and close ones not")
