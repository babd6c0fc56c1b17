#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""IDR amplification on loopback: what one misbehaving client costs another.

For each recovery budget asked for, three runs of a pps-server with one
headless pps-client ("viewer"):
  none         the viewer alone
  slow-reader  beside a raw client that says HELLO and then reads 512 bytes every
               100 ms through a 4 KiB receive buffer (it keeps losing its base
               layer, so it keeps asking for IDRs, but is never evicted)
  churner      beside a raw client that joins, reads for 0.5 s and leaves, in
               a loop (every join asks for an IDR)
and reports, from the server's --log, the viewer's mean sent bitrate over the
run after a warm-up, the encoder's output and the forced IDRs per second.
Loopback only; every run is bounded in time, and the processes and temporary
files are removed whatever happens.

  flock -x /tmp/pps-measure.lock tools/pps-idr-amplification.py build \\
      --seconds 20 --budgets 5,0 --set adapt.mode=fixed

Benchmarks print figures; they do not pass or fail.
"""
import argparse
import json
import sys
import tempfile

from ppslab import idr, programs
from ppslab.version import add_version_option


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_option(ap, "pps-idr-amplification")
    ap.add_argument("build", help="meson build directory")
    ap.add_argument("--seconds", type=float, default=20, help="viewer run length per scenario")
    ap.add_argument("--budgets", default="5,0",
                    help="server.recovery_budget_pct values, comma-separated (0 = time bound only)")
    ap.add_argument("--set", action="append", default=[], dest="settings",
                    help="extra server setting (section.key=value), repeatable")
    ap.add_argument("--scenarios", default="none,slow-reader,churner",
                    help="which runs, comma-separated (the first is the reference)")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    if a.seconds < idr.WARMUP_S + 4 or a.seconds > 120:
        ap.error("--seconds: %.0f..120" % (idr.WARMUP_S + 4))
    build = programs.Build(a.build)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pps-idr-") as workdir:
        for budget in [int(b) for b in a.budgets.split(",")]:
            base = None
            for scenario in a.scenarios.split(","):
                r = idr.one_run(build, workdir, scenario, budget, a.seconds, a.settings)
                base = base if base is not None else r["viewer_mbps"]
                r["vs_alone_pct"] = 100.0 * (r["viewer_mbps"] / base - 1) if base else float("nan")
                rows.append(r)
                print("budget %3d%%  %-11s  viewer %.3f Mbit/s (%+5.1f%% vs alone)  encoded %.3f "
                      "Mbit/s  forced IDRs %.2f/s  attacker joins %d  deferred %s  dropped %s  "
                      "IDR cost %s bit"
                      % (budget, scenario, r["viewer_mbps"], r["vs_alone_pct"], r["encoded_mbps"],
                         r["forced_idr_per_s"], r["attacker_joins"], r["recovery_deferred"],
                         r["recovery_dropped_client"], r["idr_cost_bits"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
