# SPDX-License-Identifier: MIT
"""Shared fixture of the netlab tests: a uniquely named lab that is always
torn down (normal exit, failure, or SIGTERM from meson's timeout), and
helpers to run programs on either side.

Programs come from the build tree through the environment meson sets:
PPS_NETLAB, PPS_LINKEM, PPS_PROBE, PPS_MICE, and the lab's package through
PYTHONPATH. Exit status 77 means skipped.
"""

import os
import shutil
import signal
import sys

from ppslab import lab
from ppslab.errors import EXIT_SKIP as SKIP
from ppslab.lab import read_linkem_log  # noqa: F401  (the tests take it from here)
from ppslab.netlab import traffic
from ppslab.netlab.state import STATE_ROOT  # noqa: F401

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
    (ppslab.lab) named for this test, bounded to 120 s and always torn
    down; exit 77 where pps-netlab is not permitted."""
    sigterm_as_exit()
    return lab.Lab(NETLAB, f"t{tag}-{os.getpid()}", up_args, duration_s=120, skip_if_not_permitted=True)


def wait_listening(a_lab, side, port, timeout_s=10):
    """Waits for a TCP listener on @side:@port (iperf3 prints nothing to
    wait on), with a bound (pps-netlab's own wait)."""
    if not traffic.wait_listening(a_lab.info["netns"][side], port, timeout_s=timeout_s):
        raise RuntimeError(f"nothing listens on {side}:{port}")
