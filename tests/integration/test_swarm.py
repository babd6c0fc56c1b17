# SPDX-License-Identifier: MIT
"""pps-swarm (tools/swarm/): many light viewers of one relay stream, with the
real programs on loopback: a publisher (pps-server --publish) pushes into
pps-relay, one pps-swarm holds 50 viewers of it and reports in JSON; then 50
viewers of a name no one publishes are all refused. And its counting against
a scripted server: gaps, lone dropped windows, windows outside the measure
span, protocol errors and BYEs, each on a viewer of its own. Every wait is on
an event (a port written, a line logged, a program's exit)."""
import json
import os
import struct
import subprocess
import sys
import threading
import time

from harness import check, run
from ppslab.records import KIND_ADU_FRAGMENT, KIND_WINDOW_END, bye, listener, record, stream_info
from test_relay import Relay, publish, stop_all

VIEWERS = 50
# The relay's defaults (16 viewers per stream, 8 per address) would refuse most.
RELAY_SETTINGS = ("server.max_clients=64", "server.max_clients_per_address=64")


def swarm(build, workdir, location, viewers, duration_s, out_name, extra=()):
    """Runs pps-swarm to its end; its report."""
    out = os.path.join(workdir, out_name)
    argv = [os.path.join(build, "tools", "swarm", "pps-swarm"), "--viewers", str(viewers), "--duration",
            str(duration_s), "--status-interval", "0", "--out", out] + list(extra) + [location]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=duration_s + 30)
    check(proc.returncode == 0, "pps-swarm: rc %d, %s" % (proc.returncode, proc.stderr[-1000:]))
    with open(out) as f:
        report = json.load(f)
    check(not os.path.exists(out + ".tmp"), "the temporary report is left behind")
    return report


def swarm_relay(build, workdir):
    """50 viewers of one stream through the relay: all admitted, all streaming
    to the end, the windows counted nearly all whole; then 50 of an unknown
    name: all refused with no-stream."""
    relay = Relay(build, workdir, *RELAY_SETTINGS)
    pub = None
    try:
        pub = publish(build, workdir, relay, "room/alice", duration=40)
        report = swarm(build, workdir, relay.address + "/room/alice", VIEWERS, 10, "swarm.json")
        refused = swarm(build, workdir, relay.address + "/room/nobody", VIEWERS, 3, "refused.json")
    finally:
        stop_all(pub, relay)
    text = json.dumps(report, indent=1)
    check(report["program"] == "pps-swarm" and report["viewers"] == VIEWERS, text)
    check(report["connected"] == VIEWERS and not report["connect_errors"], text)
    check(report["got_stream_info"] == VIEWERS, "not every viewer got STREAM_INFO: %s" % text)
    check(report["streaming_at_end"] == VIEWERS, "not every viewer streamed to the end: %s" % text)
    check(not report["closed_early"] and not report["refused"], "viewers ended early: %s" % text)
    windows = report["windows"]
    check(windows["counted"] > 0, "no window counted: %s" % text)
    check(windows["counted"] == windows["whole"] + windows["with_drops"] + windows["dropped"], text)
    check(windows["whole"] >= 0.95 * windows["counted"], "too few whole windows: %s" % text)
    check(report["latency_budget_ms"] > 0 and report["window_frames"] > 0, text)
    check(report["measure_from_us"] < report["measure_until_us"], text)
    lat = report["window_latency_ms"]
    check(0 < lat["p50"] <= lat["p99"] <= lat["max"], text)
    check(report["per_viewer_kbps"]["viewers"] == VIEWERS and report["per_viewer_kbps"]["min"] > 0, text)
    check(report["bytes"] >= report["payload_bytes"] > 0, text)

    text = json.dumps(refused, indent=1)
    check(refused["refused"] == {"no-stream": VIEWERS}, "not every viewer refused with no-stream: %s" % text)
    check(refused["got_stream_info"] == 0 and refused["streaming_at_end"] == 0, text)
    check(not refused["closed_early"] and not refused["connect_errors"], text)
    check(refused["windows"]["counted"] == 0, text)


KIND_WINDOW_BEGIN = 3
WINDOW_US = 66666  # records.stream_info(): 2 frames a window at 30/1


def window_begin(window_id, capture_us, adus=4):
    return record(KIND_WINDOW_BEGIN, struct.pack(">IqqHHII", window_id, capture_us, capture_us + 250000, 2, adus, 4000,
                                 window_id * 4))


def window_end(window_id, adus_sent=4, adus_dropped=0, dropped=False):
    return record(KIND_WINDOW_END, struct.pack(">IHHIIB", window_id, adus_sent, adus_dropped, 100 * adus_sent,
                                               100 * adus_dropped, 1 if dropped else 0))


def fragment(window_id, capture_us, payload):
    return record(KIND_ADU_FRAGMENT, struct.pack(">IIIqIBBBBH", window_id, window_id * 4, 0, capture_us, 0, 0, 0,
                                                 0, 0, 0) + struct.pack(">II", 0, len(payload)) + payload)


def scripts(t0):
    """What the server sends each viewer (by its HELLO name swarm-K)."""
    def cap(i):
        return t0 + (i - 1) * WINDOW_US  # window i's first capture; window 0's is before t0

    def whole(i):
        return window_begin(i, cap(i)) + window_end(i)

    v0 = (stream_info() + whole(0) + window_begin(1, cap(1)) + fragment(1, cap(1), b"0123456789") + window_end(1) +
          whole(2) + whole(3) +
          whole(6) +  # 4 and 5 never came: gaps
          window_end(7, 0, 4, dropped=True) +  # a lone dropped window
          window_begin(8, cap(8)) + window_end(8, 2, 2) +  # two ADUs dropped
          window_begin(9, cap(9)) + window_end(9, 0, 4, dropped=True))  # begun, then dropped
    return {
        0: v0,
        1: stream_info() + fragment(1, cap(1), b"x"),  # a fragment outside any window
        2: b"\x02\x05\x00\x00",  # a record of version 2
        3: bye(1, b"full"),  # refused before STREAM_INFO
        4: stream_info() + bye(6, b"slow"),  # ended by the server after STREAM_INFO
        5: stream_info(),  # then closed without a BYE
    }


def swarm_accounting(build, workdir):
    """Six viewers of a scripted server, each sent a script of its own: the
    report counts gaps, lone and begun dropped windows, ADU drops, the window
    before the span, and names each viewer's end."""
    lsock, address = listener()
    t0 = int(time.time() * 1e6) - 5000000
    plan = scripts(t0)
    held, done = [], threading.Event()

    def serve():
        lsock.settimeout(30)
        for _ in plan:
            conn, _ = lsock.accept()
            hello = conn.recv(4096)  # one small record, sent whole by a fresh socket
            name_len = hello[4 + 6]
            viewer = int(hello[4 + 7:4 + 7 + name_len].decode().rsplit("-", 1)[1])
            conn.sendall(plan[viewer])
            if viewer in (2, 3, 4, 5):
                conn.close()
            else:
                held.append(conn)
        done.wait(30)
        for conn in held:
            conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        report = swarm(build, workdir, address + "/room/alice", len(plan), 3, "accounting.json",
                       extra=["--measure-from", str(t0), "--measure-until", str(t0 + 100 * WINDOW_US)])
    finally:
        done.set()
        server.join(30)
        lsock.close()
    text = json.dumps(report, indent=1)
    check(report["connected"] == 6 and report["got_stream_info"] == 4, text)
    check(report["refused"] == {"server-full": 1}, text)
    check(report["closed_early"] == {"protocol-order": 1, "protocol-version": 1, "bye-too-slow": 1, "eof": 1}, text)
    check(report["streaming_at_end"] == 1, text)
    # Counted: 1, 2, 3 whole, 4 and 5 gaps, 6 whole, 7 lone dropped, 8 with
    # drops, 9 begun and dropped; window 0 is before the span.
    check(report["windows"] == {"counted": 9, "whole": 4, "with_drops": 1, "dropped": 4, "gaps": 2}, text)
    check(report["window_latency_ms"]["samples"] == 6, text)  # the windows with a WINDOW_BEGIN
    check(report["window_latency_ms"]["min"] >= 4000, text)  # captured 5 s before the run
    check(report["payload_bytes"] == 10, text)
    check(report["viewers_full"] == 0 and report["viewers_with_drops"] == 1, text)
    check(report["latency_budget_ms"] == 250 and report["window_frames"] == 2, text)


TESTS = {f.__name__: f for f in [swarm_relay, swarm_accounting]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
