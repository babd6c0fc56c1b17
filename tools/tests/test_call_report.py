#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-call-lab's directions, checks and value lists (suite unit, no
network): every ordered pair of participants is a direction, the checks
hold each to 95% shown and p95 300 ms, --down/--up/--delays take 1 or N
values."""
import sys

from ppslab import calllab
from ppslab.errors import UsageError

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


run = {"participants": ["alice", "bob", "carol"]}
d = [(s, r) for s, r, _, _ in calllab.directions(run)]
check(len(d) == 6 and ("alice", "bob") in d and ("bob", "alice") in d and ("alice", "alice") not in d,
      f"three parties: six directions, none to oneself ({d})")
check([(i, j) for s, r, i, j in calllab.directions(run) if (s, r) == ("carol", "alice")] == [(2, 0)],
      "a direction carries the sender's and the receiver's index (their links)")
rows = [{"sender": "alice", "receiver": "bob", "frames_shown_pct": 99.3, "frame_latency_p95_ms": 273.0},
        {"sender": "bob", "receiver": "alice", "frames_shown_pct": 94.9, "frame_latency_p95_ms": 301.0},
        {"sender": "bob", "receiver": "carol"}]
v = [c["verdict"] for c in calllab.call_checks(rows)]
check(v == ["met", "met", "**missed**", "**missed**", "not measured", "not measured"],
      f"99.3% / 273 ms met, 94.9% / 301 ms missed, no log: not measured ({v})")
check(calllab.split_values("8", 3, "down") == ["8", "8", "8"], "one value for every participant")
check(calllab.split_values("1, 8", 2, "up") == ["1", "8"], "one value each")
try:
    calllab.split_values("1,2,3", 2, "up")
    check(False, "three values for two participants refused")
except UsageError as error:
    check("--up" in str(error), f"three values for two participants refused: {error}")
check(calllab.rate_arg("8") == "8mbit" and calllab.rate_arg("800kbit") == "800kbit", "rates: Mbit/s unless a unit is given")
sys.exit(1 if failures else 0)
