# SPDX-License-Identifier: MIT
"""Shared fixture of the netlab tests: a uniquely named lab that is always
torn down (normal exit, failure, or SIGTERM from meson's timeout), and
helpers to run programs on either side.

Programs come from the build tree through the environment meson sets:
PPS_NETLAB, PPS_LINKEM, PPS_PROBE, PPS_MICE. Exit status 77 means skipped.
"""

import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import netlab_lab  # noqa: E402  (tools/netlab)

SKIP = netlab_lab.EXIT_SKIP
NETLAB = os.environ.get("PPS_NETLAB", "pps-netlab")
LINKEM = os.environ.get("PPS_LINKEM", "pps-linkem")
PROBE = os.environ.get("PPS_PROBE", "pps-probe")
MICE = os.environ.get("PPS_MICE", "pps-mice")


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def require_lab_permission(need_iperf3=False):
    if os.geteuid() != 0:
        skip("needs root (network namespaces, TUN devices)")
    if not os.path.exists("/dev/net/tun"):
        skip("no /dev/net/tun")
    if need_iperf3 and not shutil.which("iperf3"):
        skip("iperf3 is not installed")


def sigterm_as_exit():
    """meson stops a test that overruns with SIGTERM: unwind so `finally` cleans up."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))


class Check:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = 0

    def __call__(self, condition, message):
        print(("ok   " if condition else "FAIL ") + message, flush=True)
        if not condition:
            self.failures += 1
        return condition

    def exit(self):
        sys.exit(1 if self.failures else 0)


def Lab(tag, *up_args):
    """`with Lab("rtt", "--rate", "10mbit") as lab:` the shared lab
    (tools/netlab/netlab_lab.py) named for this test, bounded to 120 s and
    always torn down; exit 77 where pps-netlab is not permitted."""
    sigterm_as_exit()
    return netlab_lab.Lab(NETLAB, f"t{tag}-{os.getpid()}", up_args, duration_s=120,
                          skip_if_not_permitted=True)


def wait_listening(lab, side, port, timeout_s=10):
    """Waits for a TCP listener on @side:@port (iperf3 prints nothing to
    wait on): polls `ss`, with a bound."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if lab.run_in(side, ["ss", "-Hltn", f"sport = :{port}"]).strip():
            return
        time.sleep(0.02)  # the poll interval: ss is the only sign of the listener
    raise RuntimeError(f"nothing listens on {side}:{port}")


def read_linkem_log(path):
    """pps-linkem's per-packet log: (epoch_monotonic_ns, list of dict rows)."""
    epoch = None
    rows = []
    header = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                if "epoch_monotonic_ns=" in line:
                    epoch = int(line.split("epoch_monotonic_ns=")[1].split()[0])
                continue
            fields = line.split("\t")
            if header is None:
                header = fields
                continue
            row = dict(zip(header, fields))
            for key in header[2:]:
                row[key] = int(row[key]) if row[key] != "-" else None
            rows.append(row)
    return epoch, rows
