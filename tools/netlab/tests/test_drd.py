# SPDX-License-Identifier: MIT
"""DRD marks ECN-capable packets once the queue passes drdmin and drops only
above drdcongest. ECT(0) datagrams (IP_TOS) are sent faster than the link;
the receiver reads each datagram's TOS byte (IP_RECVTOS) and must see CE on
exactly the packets pps-linkem marked. Not-ECT datagrams are never marked and,
again, dropped only above drdcongest."""

import json
import os
import tempfile

from netlab_test import PROBE, Check, Lab, read_linkem_log, require_lab_permission

BDP_BYTES = 62500  # 10 Mbit/s x 50 ms
DRD_MIN, DRD_CONGEST = 0.5, 1.5

require_lab_permission()
check = Check()
with tempfile.TemporaryDirectory(prefix="pps-netlab-drd-") as tmp:
    log_path, stats_path = os.path.join(tmp, "linkem.log"), os.path.join(tmp, "stats.json")
    with Lab("drd", "--rate", "10mbit", "--delay", "25ms", "--aqm", "drd", "--drd-min", str(DRD_MIN), "--drd-congest", str(DRD_CONGEST), "--log", log_path, "--stats", stats_path) as lab:
        rcv = lab.addr("rcv")
        check(lab.info["ecn"] == "on" and lab.info["link"]["fwd"]["aqm"] == "drd", "lab.json records drd and ecn on")
        sinks = {}
        for tos, port in ((2, 5301), (0, 5302)):
            sinks[tos] = lab.start("rcv", [PROBE, "sink", "--bind", rcv, "--port", str(port), "--json", "--idle-exit", "1s", "--duration", "30s"], wait_ready=True)
            lab.run_in("snd", [PROBE, "blast", "--to", rcv, "--port", str(port), "--rate", "15mbit", "--tos", str(tos), "--duration", "2s"])
            out, err = sinks[tos].communicate(timeout=30)
            sinks[tos] = json.loads(out)
            print(f"sink for tos {tos}: {sinks[tos]}")
    epoch, rows = read_linkem_log(log_path)
    with open(stats_path) as f:
        stats = json.load(f)

min_bytes, congest_bytes = stats["settings"]["fwd"]["drd_min_bytes"], stats["settings"]["fwd"]["drd_congest_bytes"]
check(min_bytes == int(DRD_MIN * BDP_BYTES) and congest_bytes == int(DRD_CONGEST * BDP_BYTES), f"thresholds {min_bytes} and {congest_bytes} bytes are {DRD_MIN} and {DRD_CONGEST} BDP")
fwd = [r for r in rows if r["dir"] == "fwd" and r["bytes"] == 1500]
ect = [r for r in fwd if r["ecn"] == 2]
not_ect = [r for r in fwd if r["ecn"] == 0]
for label, group in (("ECT(0)", ect), ("not-ECT", not_ect)):
    marked = [r for r in group if r["event"] == "marked"]
    dropped = [r for r in group if r["event"].startswith("drop")]
    print(f"{label}: {len(group)} packets, {len(marked)} marked, {len(dropped)} dropped")
    check(all(r["queue_bytes_seen"] > congest_bytes for r in dropped), f"{label}: every drop found more than drdcongest queued")
    check(all(r["event"] == "drop-aqm" for r in dropped), f"{label}: drops are DRD's, not the queue limit's")
    check(len(dropped) > 0, f"{label}: the queue did pass drdcongest")
    check(all(r["queue_bytes_seen"] > min_bytes for r in marked), f"{label}: no mark below drdmin")
check(len([r for r in ect if r["event"] == "marked"]) > 50, "ECT(0) packets were marked")
check(not [r for r in not_ect if r["event"] == "marked"], "not-ECT packets were never marked")
marked_total = stats["fwd"]["marked_pkts"]
check(sinks[2]["ce"] == marked_total, f"the receiver saw CE on exactly the {marked_total} marked packets (saw {sinks[2]['ce']})")
check(sinks[2]["ect0"] + sinks[2]["ce"] == sinks[2]["packets"], "every ECT(0) datagram arrived as ECT(0) or CE")
check(sinks[0]["ce"] == 0 and sinks[0]["packets"] > 0, "not-ECT datagrams arrived unmarked")
check.exit()
