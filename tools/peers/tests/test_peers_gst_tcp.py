# SPDX-License-Identifier: MIT
"""netlab suite: the GStreamer-TCP peer path end to end on an idle lab.

pps-peer-send (ppstream's test source, x264, mpegtsmux, tcpserversink) in the
sender's namespace, pps-peer-recv in the receiver's, 5 s; at least 90% of the
decoded pictures must carry a readable pixel timecode, and their latencies
must be plausible. Exit 77 without root, /dev/net/tun or a GStreamer element.
The lab is torn down on every path (finally; SIGTERM from meson unwinds).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

NETLAB = os.environ["PPS_NETLAB"]
SEND = os.environ["PPS_PEER_SEND"]
RECV = os.environ["PPS_PEER_RECV"]
ELEMENTS = ("x264enc", "h264parse", "mpegtsmux", "tsdemux", "avdec_h264", "tcpserversink", "tcpclientsrc")


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(77)


def main():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, TUN devices)")
    if not os.path.exists("/dev/net/tun"):
        skip("no /dev/net/tun")
    for e in ELEMENTS:
        if subprocess.run(["gst-inspect-1.0", e], capture_output=True).returncode != 0:
            skip(f"GStreamer element {e} is missing")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    name = f"tpeer{os.getpid() % 100000}"
    procs = []
    tmp = tempfile.mkdtemp(prefix="pps-peers-test-")
    try:
        r = subprocess.run([NETLAB, "up", "--name", name, "--rate", "10mbit", "--delay", "25ms", "--duration", "60"], capture_output=True, text=True, timeout=30)
        if r.returncode == 77:
            skip(r.stdout.strip() or "lab not permitted")
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        snd = subprocess.run([NETLAB, "addr", name, "snd"], capture_output=True, text=True, check=True).stdout.strip()
        sender = subprocess.Popen([NETLAB, "exec", name, "snd", SEND, "--sink", "tcp", "--listen", f"{snd}:7400", "--kbps", "1500", "--duration", "20", "--set", "source.pattern=smpte"], stdout=subprocess.PIPE, text=True)
        procs.append(sender)
        if sender.stdout.readline().strip() != "ready":
            print("FAIL sender did not get ready", flush=True)
            return 1
        frames = os.path.join(tmp, "frames.tsv")
        recv = subprocess.Popen([NETLAB, "exec", name, "rcv", RECV, "--source", "tcp", "--connect", f"{snd}:7400", "--duration", "5", "--output", os.path.join(tmp, "shown.y4m"), "--frames", frames])
        procs.append(recv)
        rc = recv.wait(timeout=20)
        with open(frames) as f:
            rows = [line.split("\t") for line in f.read().splitlines()[1:]]
        with_tc = [r for r in rows if r[2] == "1"]
        latencies = sorted((int(r[1]) - int(r[4])) / 1000 for r in with_tc)
        failures = 0
        for ok, msg in (
            (rc == 0, f"receiver exit status {rc}"),
            (len(rows) >= 60, f"{len(rows)} pictures decoded in 5 s (>= 60)"),
            (len(with_tc) >= 0.9 * max(1, len(rows)), f"{len(with_tc)} of {len(rows)} pictures with a timecode (>= 90%)"),
            (bool(latencies) and 25 < latencies[len(latencies) // 2] < 1000, f"median glass-to-glass {latencies[len(latencies) // 2] if latencies else 0:.1f} ms (25..1000)"),
        ):
            print(("ok   " if ok else "FAIL ") + msg, flush=True)
            failures += not ok
        return 1 if failures else 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        subprocess.run([NETLAB, "down", name], capture_output=True, timeout=30)
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
