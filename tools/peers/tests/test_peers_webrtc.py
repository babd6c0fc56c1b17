# SPDX-License-Identifier: MIT
"""netlab suite: the WebRTC peer path end to end on an idle lab, through
pps-peers' own wrapper (ppslab.wrappers.webrtc).

A headless Chromium in each namespace, the SDP through files, 5 s of frames:
at least 90% of the frames the receiving page presented must carry a
readable pixel timecode, their latencies must be plausible, and getStats
must have counted bytes. Exit 77 without root, /dev/net/tun, Chromium,
chromedriver or selenium. The lab is torn down on every path (the Lab
block; SIGTERM from meson unwinds), and the namespaces' processes with it.
"""

import os
import signal
import sys
import tempfile

from ppslab import programs, wrappers
from ppslab.errors import EXIT_SKIP
from ppslab.files import read_tsv
from ppslab.lab import Lab
from ppslab.wrappers import webrtc

NETLAB = os.environ["PPS_NETLAB"]


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(EXIT_SKIP)


def main():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, TUN devices)")
    if not os.path.exists("/dev/net/tun"):
        skip("no /dev/net/tun")
    if not webrtc.available():
        skip("chromium, chromedriver or /usr/bin/python3 is missing")
    if os.system("/usr/bin/python3 -c 'import selenium' 2>/dev/null") != 0:
        skip("python3-selenium is missing")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    build = programs.Build(netlab=NETLAB)
    with tempfile.TemporaryDirectory(prefix="pps-peers-test-") as tmp:
        with Lab(NETLAB, f"twrtc{os.getpid() % 100000}", ["--rate", "10mbit", "--delay", "25ms"], 120,
                 skip_if_not_permitted=True) as lab:
            system = wrappers.get("webrtc")(build, tmp, pattern="smpte")
            try:
                system.start(lab, 5)
                ended = system.wait(90)
            finally:
                system.stop()
        rc = system.receivers[0].returncode
        rows = read_tsv(system.path("frames", "tsv")) if os.path.exists(system.path("frames", "tsv")) else []
        with_tc = [r for r in rows if r["timecode_ok"] == "1"]
        latencies = sorted((int(r["display_us"]) - int(r["capture_us"])) / 1000 for r in with_tc)
        failures = 0
        for ok, msg in (
            (ended and rc == 0, f"receiver exit status {rc}"),
            (len(rows) >= 60, f"{len(rows)} frames presented in 5 s (>= 60)"),
            (len(with_tc) >= 0.9 * max(1, len(rows)), f"{len(with_tc)} of {len(rows)} frames with a timecode (>= 90%)"),
            (bool(latencies) and 25 < latencies[len(latencies) // 2] < 1000, f"median glass-to-glass {latencies[len(latencies) // 2] if latencies else 0:.1f} ms (25..1000)"),
            (system.results()["bits_per_second"] is not None, "getStats counted the bytes received"),
        ):
            print(("ok   " if ok else "FAIL ") + msg, flush=True)
            failures += not ok
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
