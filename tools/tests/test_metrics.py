#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ppslab.metrics against known values (suite unit): percentile() is the
client's nearest rank (client/pps-stats.c: the value of rank
ceil(p/100 x n), rank 1 at least, of the sorted values), so a figure the lab
computes from the client's events is the one in the client's summary."""
import os
import sys
import tempfile

from ppslab.metrics import PEER_SCORE_SHIFTS, freeze_figures, peer_score, percentile, within_pct

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


five = [40, 15, 50, 35, 20]  # sorted: 15 20 35 40 50
for p, want in ((0, 15), (5, 15), (20, 15), (30, 20), (40, 20), (50, 35), (60, 35), (80, 40), (95, 50), (100, 50)):
    got = percentile(five, p)
    check(got == want, f"p{p} of {sorted(five)} = {got} (nearest rank: {want})")
# Ranks that land on a whole number: no interpolation and no rank + 1
# (0.95 x 20 is 19 in double arithmetic, as in the C code).
twenty = list(range(1, 21))
check(percentile(twenty, 95) == 19, f"p95 of 1..20 = {percentile(twenty, 95)} (19)")
check(percentile(twenty, 50) == 10, f"p50 of 1..20 = {percentile(twenty, 50)} (10, not 10.5)")
hundred = [x / 10 for x in range(100, 0, -1)]
check(percentile(hundred, 99) == 9.9, f"p99 of 0.1..10.0 = {percentile(hundred, 99)} (9.9)")
check(percentile([7.5], 50) == 7.5 and percentile([7.5], 99) == 7.5, "one value is every percentile")
check(percentile([], 50) is None, "no values: None")
check(within_pct([100, 200, 300, 400], 300) == 75.0, "within 300 of 100..400: 75%")

# 0, 33 ms, 600 ms, 633 ms: one gap of 567 ms; a step down 100 ms into it excuses 1 s of it.
fz = freeze_figures([0, 33_000, 600_000, 633_000], step_downs_us=[133_000])
check(fz["longest_us"] == 567_000 and fz["frozen_us"] == 567_000, f"longest gap and frozen time {fz['longest_us']}, {fz['frozen_us']}")
check(fz["over_500ms"] == 1 and fz["over_500ms_after_step"] == 1, "the long gap is excused by the step down")
check(fz["longest_outside_steps_us"] == 100_000, f"longest outside steps {fz['longest_outside_steps_us']} (the 100 ms before the step)")

# peer_score: scored again with --shift when most reference checks name the same neighbour. A
# stand-in scorer records its arguments and prints checks chosen by a shell `case` on them.
with tempfile.TemporaryDirectory() as d:
    fake = os.path.join(d, "score")
    tsv = os.path.join(d, "scores.tsv")

    def score_with(cases):
        """Runs peer_score with a stand-in whose checks are @cases (shell case arms on its
        arguments); returns (CompletedProcess, the argument lines it was called with)."""
        with open(fake, "w") as f:
            f.write("#!/bin/sh\n"
                    "echo \"$@\" >> \"$(dirname \"$0\")/calls\"\n"
                    "printf 'ordinal\\tref_check\\tref_best\\n'\n"
                    f"case \"$*\" in {cases} esac\n")
        os.chmod(fake, 0o755)
        if os.path.exists(os.path.join(d, "calls")):
            os.unlink(os.path.join(d, "calls"))
        r = peer_score(fake, "ball", "shown.y4m", tsv)
        with open(os.path.join(d, "calls")) as f:
            return r, f.read().splitlines()

    # n - 1 in 2 of 3 checks unless given --shift.
    r, calls = score_with("*--shift*) printf '0\\t1\\t0\\n1\\t1\\t0\\n' ;; "
                          "*) printf '0\\t0\\t-1\\n1\\t-1\\t\\n2\\t0\\t-1\\n3\\t1\\t0\\n' ;;")
    with open(tsv) as f:
        rows = f.read().splitlines()
    check(r.returncode == 0 and calls == ["--pattern ball shown.y4m", "--pattern ball --shift -1 shown.y4m"],
          f"scored again with --shift -1: {calls}")
    check(len(rows) == 3 and rows[1].endswith("\t0"), "the shifted scores are the ones kept")
    r, calls = score_with("*) printf '0\\t0\\t-1\\n1\\t1\\t0\\n' ;;")
    check(calls == ["--pattern ball shown.y4m"], f"half the checks naming a neighbour: scored once ({calls})")
    # Two buffers off: the first shift's checks still name n - 1, the second's n.
    r, calls = score_with("*'--shift -2'*) printf '0\\t1\\t0\\n' ;; "
                          "*) printf '0\\t0\\t-1\\n1\\t0\\t-1\\n' ;;")
    check(calls == ["--pattern ball shown.y4m", "--pattern ball --shift -1 shown.y4m",
                    "--pattern ball --shift -2 shown.y4m"], f"two buffers off: shifted twice ({calls})")
    # A scorer whose checks never agree with it stops after PEER_SCORE_SHIFTS runs more.
    r, calls = score_with("*) printf '0\\t0\\t1\\n' ;;")
    check(len(calls) == 1 + PEER_SCORE_SHIFTS and calls[-1].endswith(f"--shift {PEER_SCORE_SHIFTS} shown.y4m"),
          f"bounded: {len(calls)} runs")
sys.exit(1 if failures else 0)
