# SPDX-License-Identifier: MIT
"""Shared fixture of the netlab tests: a uniquely named lab that is always
torn down (normal exit, failure, or SIGTERM from meson's timeout), and
helpers to run programs on either side.

Programs come from the build tree through the environment meson sets:
PPS_NETLAB, PPS_LINKEM, PPS_PROBE, PPS_MICE. Exit status 77 means skipped.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77
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


class Lab:
    """`with Lab("rtt", "--rate", "10mbit") as lab:` brings a lab up and always down."""

    def __init__(self, tag, *up_args):
        self.name = f"t{tag}-{os.getpid()}"
        self.up_args = list(up_args)
        self.info = None
        self.procs = []

    def __enter__(self):
        sigterm_as_exit()
        result = subprocess.run([NETLAB, "up", "--name", self.name, "--duration", "120"] + self.up_args, capture_output=True, text=True)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.returncode == SKIP:
            sys.exit(SKIP)
        if result.returncode != 0:
            self.down()
            raise RuntimeError(f"pps-netlab up failed ({result.returncode})")
        self.info = json.loads(subprocess.run([NETLAB, "info", self.name], capture_output=True, text=True, check=True).stdout)
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.down()
        return False

    def down(self):
        result = subprocess.run([NETLAB, "down", self.name], capture_output=True, text=True)
        sys.stdout.write(result.stdout)
        return result

    def addr(self, side):
        return self.info["addr"][side]

    def cmd(self, side, argv):
        return [NETLAB, "exec", self.name, side] + list(argv)

    def run(self, side, argv, timeout=60):
        result = subprocess.run(self.cmd(side, argv), capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} on {side} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def start(self, side, argv, wait_ready=False):
        """Starts a program on one side; with wait_ready, returns once it printed "ready"."""
        proc = subprocess.Popen(self.cmd(side, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        if wait_ready:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"{argv[0]} did not get ready: {line!r} {proc.stderr.read()}")
        return proc

    def wait_listening(self, side, port, timeout_s=10):
        """Bounded wait for a TCP listener (iperf3 says nothing we can wait on)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.run(side, ["ss", "-Hltn", f"sport = :{port}"]).strip():
                return
            time.sleep(0.02)
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
