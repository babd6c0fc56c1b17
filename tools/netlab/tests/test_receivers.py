# SPDX-License-Identifier: MIT
"""A lab with one sender and three receivers (`up --receivers 3`), each behind
its own link: every receiver answers from its own address with its own RTT
(plus the probe's serialization at its own rate), the settings are recorded
per receiver, and `down` removes every namespace."""

import json
import subprocess

from netlab_test import PROBE, Check, Lab, require_lab_permission

RATES_BPS = (500_000, 2_000_000, 8_000_000)
DELAYS_MS = (25, 25, 10)
PROBE_IP_BYTES = 64

require_lab_permission()
check = Check()
with Lab("rcvs", "--receivers", "3", "--rate", "500kbit,2mbit,8mbit", "--delay", "25ms,25ms,10ms") as lab:
    name = lab.name
    check(len(lab.info.get("receivers", [])) == 3, "lab.json lists three receivers")
    for k, (rate, delay) in enumerate(zip(RATES_BPS, DELAYS_MS), 1):
        side = f"rcv{k}"
        r = lab.info["receivers"][k - 1]
        check(r["side"] == side and r["link"]["fwd"]["rate_bps"] == rate and r["rtt_ms"] == 2 * delay,
              f"{side}: recorded {r['link']['fwd']['rate_bps']} bit/s, rtt {r['rtt_ms']} ms")
        addr = lab.addr(side)
        check(addr == lab.info["addr"]["snd"].replace("198.18.", "198.19.").rsplit(".", 1)[0] + f".{k}", f"{side} address {addr}")
        lab.start(side, [PROBE, "echo", "--bind", addr, "--duration", "60s"], wait_ready=True)
        result = json.loads(lab.run_in("snd", [PROBE, "ping", "--to", addr, "--count", "10", "--interval", "30ms",
                                            "--ip-bytes", str(PROBE_IP_BYTES), "--json"]))
        expected_ms = 2 * delay + 2 * PROBE_IP_BYTES * 8 / rate * 1e3
        check(result["received"] == result["sent"] == 10, f"{side}: every probe came back")
        # Scheduling on a core shared with other tests only ever adds delay, so the fastest probe is
        # the one that shows the link: it must sit within 3 ms above the expected round trip and never
        # below it (the emulator wakes at most 0.2 ms early). The median is checked loosely, enough
        # to tell a 50 ms receiver from a 20 ms one.
        check(expected_ms - 0.4 < result["rtt_min_ms"] < expected_ms + 3.0,
              f"{side}: min rtt {result['rtt_min_ms']:.3f} ms within [-0.4, +3] ms of {expected_ms:.3f} ms")
        check(abs(result["rtt_median_ms"] - expected_ms) < 8.0,
              f"{side}: median rtt {result['rtt_median_ms']:.3f} ms within 8 ms of {expected_ms:.3f} ms")
    check(lab.run_in("rcv", ["sh", "-c", "echo $PPS_LAB_SIDE"]).strip() == "rcv1", "side rcv means rcv1")
left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
check(f"pps-{name}-" not in left, "down removed every namespace")
check.exit()
