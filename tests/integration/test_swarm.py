# SPDX-License-Identifier: MIT
"""pps-swarm (tools/swarm/): many light viewers of one relay stream, with the
real programs on loopback: a publisher (pps-server --publish) pushes into
pps-relay, one pps-swarm holds 50 viewers of it and reports in JSON; then 50
viewers of a name no one publishes are all refused. Every wait is on an event
(a port written, a line logged, a program's exit)."""
import json
import os
import subprocess
import sys

from harness import check, run
from test_relay import Relay, publish, stop_all

VIEWERS = 50
# The relay's defaults (16 viewers per stream, 8 per address) would refuse most.
RELAY_SETTINGS = ("server.max_clients=64", "server.max_clients_per_address=64")


def swarm(build, workdir, location, viewers, duration_s, out_name):
    """Runs pps-swarm to its end; its report."""
    out = os.path.join(workdir, out_name)
    argv = [os.path.join(build, "tools", "swarm", "pps-swarm"), "--viewers", str(viewers), "--duration",
            str(duration_s), "--status-interval", "0", "--out", out, location]
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


TESTS = {f.__name__: f for f in [swarm_relay]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
