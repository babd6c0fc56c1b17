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
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# The process helpers shared with the lab drivers (tools/netlab/netlab_lab.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlab"))
import netlab_lab  # noqa: E402

WARMUP_S = 4.0


def hello_record(name):
    body = struct.pack(">HHHB", 1, 0, 0, len(name)) + name + b"\x00"
    return struct.pack(">BBH", 1, 1, len(body)) + body


class Attacker(threading.Thread):
    """A raw client on its own thread until stop()."""

    def __init__(self, kind, port):
        super().__init__(daemon=True)
        self.kind = kind
        self.port = port
        self.halt = threading.Event()
        self.joins = 0

    def stop(self):
        self.halt.set()
        self.join(timeout=5)

    def connect(self, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", self.port))
        s.sendall(hello_record(self.kind.encode()))
        self.joins += 1
        return s

    def run(self):
        if self.kind == "slow-reader":
            s = self.connect(rcvbuf=4096)
            s.settimeout(0.05)
            try:
                while not self.halt.wait(0.1):
                    try:
                        if not s.recv(512):
                            s.close()
                            s = self.connect(rcvbuf=4096)
                            s.settimeout(0.05)
                    except socket.timeout:
                        pass
            finally:
                s.close()
        elif self.kind == "churner":
            while not self.halt.is_set():
                s = self.connect()
                s.settimeout(0.05)
                end = time.monotonic() + 0.5
                try:
                    while time.monotonic() < end and not self.halt.is_set():
                        try:
                            if not s.recv(65536):
                                break
                        except socket.timeout:
                            pass
                finally:
                    s.close()


def one_run(build, workdir, scenario, budget, seconds, settings):
    tag = "%s-%s" % (scenario, budget)
    port_file = os.path.join(workdir, "port-" + tag)
    log_file = os.path.join(workdir, "server-%s.jsonl" % tag)
    stats_file = os.path.join(workdir, "server-%s.json" % tag)
    args = [os.path.join(build, "server", "pps-server"), "--listen", "127.0.0.1:0",
            "--port-file", port_file, "--log", log_file, "--stats-json", stats_file, "-q",
            "--duration", str(seconds + 2), "--set", "server.recovery_budget_pct=%d" % budget]
    for s in settings:
        args += ["--set", s]
    err = open(os.path.join(workdir, "server-%s.err" % tag), "w")
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    viewer = attacker = None
    try:
        if not netlab_lab.wait_file(port_file, server, 30):
            raise RuntimeError("pps-server did not start (see its stderr)")
        port = int(open(port_file).read())
        viewer = subprocess.Popen(
            [os.path.join(build, "client", "pps-client"), "127.0.0.1:%d" % port, "--display",
             "none", "--duration", str(seconds), "--set", "client.name=viewer", "--log",
             os.path.join(workdir, "viewer-%s.jsonl" % tag)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if scenario != "none":
            attacker = Attacker(scenario, port)
            attacker.start()
        viewer.wait(timeout=seconds + 30)
    finally:
        if attacker:
            attacker.stop()
        if viewer:
            netlab_lab.stop(viewer, 10)
        netlab_lab.stop(server, 10)
        err.close()
    viewer_bps, encoded_bps, idr = [], [], []
    t0 = None
    with open(log_file) as f:
        for line in f:
            e = json.loads(line)
            t0 = t0 or e["t_us"]
            if (e["t_us"] - t0) / 1e6 < WARMUP_S:
                continue
            if e["event"] == "path" and e["peer"].endswith('"viewer"'):
                viewer_bps.append(sum(e["sent_layer_bps"]))
            elif e["event"] == "rates":
                encoded_bps.append(sum(e["encoded_layer_bps"]))
                idr.append((e["t_us"], e["idr_requests"]))
    stats = json.load(open(stats_file))
    idr_per_s = ((idr[-1][1] - idr[0][1]) / ((idr[-1][0] - idr[0][0]) / 1e6)
                 if len(idr) > 1 and idr[-1][0] > idr[0][0] else float("nan"))
    mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
    return {
        "scenario": scenario, "budget_pct": budget,
        "viewer_mbps": mean(viewer_bps) / 1e6, "encoded_mbps": mean(encoded_bps) / 1e6,
        "forced_idr_per_s": idr_per_s, "attacker_joins": attacker.joins if attacker else 0,
        "recovery_deferred": stats.get("recovery_deferred"),
        "recovery_dropped_client": stats.get("recovery_dropped_client"),
        "idr_cost_bits": stats.get("idr_cost_bits"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
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
    if a.seconds < WARMUP_S + 4 or a.seconds > 120:
        ap.error("--seconds: %.0f..120" % (WARMUP_S + 4))
    rows = []
    with tempfile.TemporaryDirectory(prefix="pps-idr-") as workdir:
        for budget in [int(b) for b in a.budgets.split(",")]:
            base = None
            for scenario in a.scenarios.split(","):
                r = one_run(a.build, workdir, scenario, budget, a.seconds, a.settings)
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
