# SPDX-License-Identifier: MIT
"""pps-netlab's base layer: its constants, the units of its options, and the
process helpers (finding the lab programs beside the script, running short
commands, commands in a namespace, waiting for and stopping pids that are
not its children). Standard library only."""

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys

from ..errors import LabError, UsageError

PROGRAM = "pps-netlab"
DEV = "pps0"
MAX_LABS = 256

PPS_DEFAULT_NAME = "lab"
PPS_DEFAULT_RATE = "10mbit"
PPS_DEFAULT_DELAY = "25ms"
PPS_DEFAULT_QUEUE = "auto"  # one bandwidth-delay product
PPS_DEFAULT_AQM = "droptail"
PPS_DEFAULT_CONGESTION = "cubic"
PPS_DEFAULT_DURATION_S = 600
PPS_DEFAULT_TRAFFIC_DURATION_S = 60
PPS_DEFAULT_MICE_BYTES = 20000
PPS_DEFAULT_MICE_INTERVAL = "1s"
CONGESTION_CHOICES = ("cubic", "reno", "bbr")

# Bounded waits: how long a lab or a server may take to become ready.
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
# pps-linkem's own bound outlives the lab's by this much, in case the supervisor is killed.
LINKEM_GRACE_S = 30
LINKEM_RT_PRIORITY = 20


def log(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- units


def parse_seconds(text, what):
    """'30', '30s', '500ms', '2m' -> seconds (float, > 0)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", str(text))
    if not m:
        raise UsageError(f"{what}: '{text}' is not a duration (e.g. 30, 30s, 500ms, 2m)")
    value = float(m.group(1)) * {None: 1, "s": 1, "ms": 1e-3, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if value <= 0:
        raise UsageError(f"{what}: '{text}' must be > 0")
    return value


def parse_rate_bps(text, what):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(|bit|bps|k|kbit|kbps|m|mbit|mbps|g|gbit|gbps)", str(text).strip().lower())
    if not m:
        raise UsageError(f"{what}: '{text}' is not a rate (e.g. 10mbit, 800kbit)")
    scale = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)[:1]]
    value = float(m.group(1)) * scale
    if value < 1:
        raise UsageError(f"{what}: '{text}' must be > 0")
    return int(round(value))


# ---------------------------------------------------------------- tools and processes


def tool_path(name):
    """Finds a lab program: $PPS_<NAME>; beside the pps-netlab that runs (as
    called: an installed link sits in the programs' bindir); in the build
    tree (linkem/, traffic/ beside the script); on PATH."""
    variable = "PPS_" + name.upper().replace("PPS-", "").replace("-", "_")
    env = os.environ.get(variable)
    if env:
        return env
    script = sys.modules["__main__"].__file__
    called, real = os.path.dirname(os.path.abspath(script)), os.path.dirname(os.path.realpath(script))
    for candidate in (
        os.path.join(called, name),
        os.path.join(real, name),
        os.path.join(real, "linkem", name),
        os.path.join(real, "traffic", name),
    ):
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return os.path.normpath(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise LabError(f"cannot find {name} (build it, or set {variable})")


def self_argv(*args):
    """The command that runs this pps-netlab again with @args (the supervisor
    and the traffic runner are its hidden commands _supervise, _traffic), by
    the path it was called with, so that it finds the same programs."""
    return [sys.executable, os.path.abspath(sys.modules["__main__"].__file__)] + [str(a) for a in args]


def run(cmd, check=True, quiet=False):
    """Runs a short command (ip, sysctl). Raises LabError with its stderr when it fails."""
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise LabError(f"{shlex.join(cmd)}: {result.stderr.strip() or 'exit ' + str(result.returncode)}")
    if not quiet and result.returncode != 0:
        log(f"{shlex.join(cmd)}: {result.stderr.strip()}")
    return result


def netns_cmd(ns, cmd):
    # `ip netns exec` setns()es and execs in place: the pid we get is the program's.
    return ["ip", "netns", "exec", ns] + list(cmd)


def netns_exists(ns):
    return os.path.exists(os.path.join("/var/run/netns", ns))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def pid_matches(pid, needle):
    """Guards against pid reuse: the process's command line must mention @needle."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return needle.encode() in f.read()
    except OSError:
        return False


def wait_pid_exit(pid, timeout_s):
    """Waits for any process (not only a child) to exit, on a pidfd: no polling loop."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable) or not pid_alive(pid)
    finally:
        os.close(fd)


def stop_pid(pid, needle, timeout_s=STOP_TIMEOUT_S, sig=signal.SIGTERM, group=False):
    """SIGTERM (the process or its group), wait, then SIGKILL. True if it is gone."""
    if not pid or not pid_alive(pid) or not pid_matches(pid, needle):
        return True
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return True
    if wait_pid_exit(pid, timeout_s):
        return True
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    return wait_pid_exit(pid, 2.0)
