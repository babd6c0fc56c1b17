# SPDX-License-Identifier: MIT
"""One bulk cubic flow through a 10 Mbit/s, 50 ms RTT lab with the default
queue (1 BDP drop-tail) gets within 5% of the link rate once out of slow start.

Goodput is measured at the receiver (iperf3 server intervals) after the first
2 seconds. TCP/IP headers take 52 of every 1500 bytes (timestamps on), so the
ceiling is 96.5% of the rate: 5% leaves about 1.5% for the sawtooth."""

import json
import subprocess

from netlab_test import Check, Lab, require_lab_permission, wait_listening

RATE_BPS = 10_000_000
SECONDS = 12
SKIP_S = 2

require_lab_permission(need_iperf3=True)
check = Check()
with Lab("goodput", "--rate", "10mbit", "--delay", "25ms", "--congestion", "cubic") as lab:
    rcv = lab.addr("rcv")
    server = lab.start("rcv", ["iperf3", "-s", "-1", "-B", rcv, "--json"], stdout=subprocess.PIPE, text=True)
    wait_listening(lab, "rcv", 5201)
    client = json.loads(lab.run_in("snd", ["iperf3", "-c", rcv, "-C", "cubic", "-t", str(SECONDS), "--json"], timeout_s=SECONDS + 30))
    server_result = json.loads(server.communicate(timeout=30)[0])
    total_bytes = total_s = 0.0
    for interval in server_result["intervals"]:
        s = interval["sum"]
        if s["start"] >= SKIP_S - 1e-6 and s["seconds"] > 0.5:
            total_bytes += s["bytes"]
            total_s += s["seconds"]
    steady_bps = total_bytes * 8 / total_s
    overall_bps = client["end"]["sum_received"]["bits_per_second"]
    cc = client["end"].get("sender_tcp_congestion", "?")
    print(f"goodput after {SKIP_S} s: {steady_bps / 1e6:.3f} Mbit/s; whole run {overall_bps / 1e6:.3f} Mbit/s; "
          f"congestion {cc}; retransmits {client['end']['sum_sent'].get('retransmits')}")
    check(cc == "cubic", "the flow ran cubic")
    check(steady_bps >= 0.95 * RATE_BPS, f"goodput {steady_bps / 1e6:.3f} Mbit/s >= 95% of 10 Mbit/s")
    check(steady_bps <= RATE_BPS, f"goodput {steady_bps / 1e6:.3f} Mbit/s <= the rate")
check.exit()
