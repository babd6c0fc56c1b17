# SPDX-License-Identifier: MIT
"""netlab suite: the GStreamer-TCP peer path end to end on an idle lab,
through pps-peers' own wrapper (ppslab.wrappers.gst_tcp).

pps-peer-send (ppstream's test source, x264, mpegtsmux, tcpserversink) in the
sender's namespace, pps-peer-recv in the receiver's, 5 s; at least 90% of the
decoded pictures must carry a readable pixel timecode, and their latencies
must be plausible. Exit 77 without root, /dev/net/tun or a GStreamer element.
The lab is torn down on every path (the Lab block; SIGTERM from meson unwinds).
"""

import os
import signal
import subprocess
import sys
import tempfile

from ppslab import programs, wrappers
from ppslab.errors import EXIT_SKIP
from ppslab.files import read_tsv
from ppslab.lab import Lab

NETLAB = os.environ["PPS_NETLAB"]
ELEMENTS = ("x264enc", "h264parse", "mpegtsmux", "tsdemux", "avdec_h264", "tcpserversink", "tcpclientsrc")


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(EXIT_SKIP)


def main():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, TUN devices)")
    if not os.path.exists("/dev/net/tun"):
        skip("no /dev/net/tun")
    for e in ELEMENTS:
        if subprocess.run(["gst-inspect-1.0", e], capture_output=True).returncode != 0:
            skip(f"GStreamer element {e} is missing")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    build = programs.Build(netlab=NETLAB, peer_send=os.environ["PPS_PEER_SEND"], peer_recv=os.environ["PPS_PEER_RECV"])
    with tempfile.TemporaryDirectory(prefix="pps-peers-test-") as tmp:
        with Lab(NETLAB, f"tpeer{os.getpid() % 100000}", ["--rate", "10mbit", "--delay", "25ms"], 60,
                 skip_if_not_permitted=True) as lab:
            system = wrappers.get("gst-tcp")(build, tmp, kbps=1500, pattern="smpte")
            try:
                system.start(lab, 5)
                ended = system.wait(20)
            finally:
                system.stop()
        rc = system.receivers[0].returncode
        rows = read_tsv(system.path("frames", "tsv"))
        with_tc = [r for r in rows if r["timecode_ok"] == "1"]
        latencies = sorted((int(r["recv_us"]) - int(r["capture_us"])) / 1000 for r in with_tc)
        failures = 0
        for ok, msg in (
            (ended and rc == 0, f"receiver exit status {rc}"),
            (len(rows) >= 60, f"{len(rows)} pictures decoded in 5 s (>= 60)"),
            (len(with_tc) >= 0.9 * max(1, len(rows)), f"{len(with_tc)} of {len(rows)} pictures with a timecode (>= 90%)"),
            (bool(latencies) and 25 < latencies[len(latencies) // 2] < 1000, f"median glass-to-glass {latencies[len(latencies) // 2] if latencies else 0:.1f} ms (25..1000)"),
            (system.results()["bits_per_second"] is not None, "the receiver counted its bytes"),
        ):
            print(("ok   " if ok else "FAIL ") + msg, flush=True)
            failures += not ok
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
