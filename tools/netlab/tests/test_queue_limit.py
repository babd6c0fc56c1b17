# SPDX-License-Identifier: MIT
"""The bottleneck queue never holds more than its limits, in packets or in
bytes, whatever fills it: full-size UDP (the byte limit binds), small UDP (the
packet limit binds) and TCP elephants. Checked on every line of pps-linkem's
per-packet log and on its counters, and the limits must actually be reached."""

import json
import os
import subprocess
import tempfile

from netlab_test import NETLAB, PROBE, Check, Lab, read_linkem_log, require_lab_permission

LIMIT_PKTS = 20
LIMIT_BYTES = 20000

require_lab_permission(need_iperf3=True)
check = Check()
with tempfile.TemporaryDirectory(prefix="pps-netlab-queue-") as tmp:
    log_path, stats_path = os.path.join(tmp, "linkem.log"), os.path.join(tmp, "stats.json")
    with Lab("queue", "--rate", "10mbit", "--delay", "25ms", "--queue", str(LIMIT_PKTS), "--queue-bytes", str(LIMIT_BYTES), "--log", log_path, "--stats", stats_path) as lab:
        rcv = lab.addr("rcv")
        lab.start("rcv", [PROBE, "sink", "--bind", rcv, "--duration", "60s"], wait_ready=True)
        # 1500-byte datagrams at twice the rate: 13 of them fill 20000 bytes.
        lab.run_in("snd", [PROBE, "blast", "--to", rcv, "--rate", "20mbit", "--ip-bytes", "1500", "--duration", "1s"])
        # 200-byte datagrams: 20 packets are only 4000 bytes, so the packet limit binds.
        lab.run_in("snd", [PROBE, "blast", "--to", rcv, "--rate", "20mbit", "--ip-bytes", "200", "--duration", "1s"])
        traffic = subprocess.run([NETLAB, "traffic", lab.name, "--elephants", "3", "--duration", "4", "--wait"], capture_output=True, text=True)
        print(traffic.stdout, traffic.stderr)
    epoch, rows = read_linkem_log(log_path)
    with open(stats_path) as f:
        stats = json.load(f)

fwd = [r for r in rows if r["dir"] == "fwd"]
accepted = [r for r in fwd if r["event"] in ("queued", "marked")]
drops = [r for r in fwd if r["event"] == "drop-queue"]
max_pkts = max(r["queue_pkts"] for r in accepted)
max_bytes = max(r["queue_bytes"] for r in accepted)
print(f"{len(fwd)} fwd packets logged, {len(drops)} queue drops, max queue {max_pkts} pkts {max_bytes} bytes")
check(len(fwd) > 5000, "the log covers the run")
check(max_pkts <= LIMIT_PKTS, f"queue never above {LIMIT_PKTS} packets (max {max_pkts})")
check(max_bytes <= LIMIT_BYTES, f"queue never above {LIMIT_BYTES} bytes (max {max_bytes})")
check(max_pkts == LIMIT_PKTS, "the packet limit was reached")
check(max_bytes > LIMIT_BYTES - 1500, "the byte limit was reached")
check(len(drops) > 0, "packets were dropped at the limit")
check(all(r["queue_pkts"] == LIMIT_PKTS or r["queue_bytes"] + r["bytes"] > LIMIT_BYTES for r in drops), "every drop found the queue full")
for direction in ("fwd", "rev"):
    s = stats[direction]
    check(s["max_queue_pkts"] <= LIMIT_PKTS and s["max_queue_bytes"] <= LIMIT_BYTES, f"{direction} counters: max queue {s['max_queue_pkts']} pkts {s['max_queue_bytes']} bytes within limits")
check(stats["fwd"]["dropped_queue_pkts"] == len(drops), "counters and log agree on drops")
check.exit()
