# SPDX-License-Identifier: MIT
"""The importable side of the network lab, shared by every Python caller
(pps-sweep, pps-fanout, pps-peers, pps-protolat-bench, pps-gst-lab,
pps-browser-lab and the netlab tests): the one `Lab` context manager over
pps-netlab's command line (docs/NETLAB.md, "Using a lab from another
program") and the capacity-step traces.

    with Lab(netlab, "exp1", ["--rate", "10mbit", "--delay", "25ms"], 60) as lab:
        argv = lab.exec_argv("snd", ["pps-server", ...])

The lab is always torn down on leaving the block (exception or signal included);
every pps-netlab command has a bound. Standard library only.
"""
import contextlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys

EXIT_SKIP = 77
COMMAND_TIMEOUT_S = 90.0
STATE_ROOT = os.environ.get("PPS_NETLAB_STATE", "/run/ppstream-netlab")
MTU_BYTES = 1500  # one mahimahi delivery opportunity


class LabError(Exception):
    """A pps-netlab command failed (its stderr is in the message)."""


class NotPermitted(Exception):
    """pps-netlab exited 77: no root or no /dev/net/tun."""


class Lab:
    """One named lab: `up` on entry (or by hand), `down` on exit, whatever
    happens; the programs started in it with `start` are stopped first.
    With @skip_if_not_permitted (the test suites), entering a lab where
    pps-netlab exits 77 prints "SKIP: ..." and exits 77 as well."""

    def __init__(self, netlab, name, up_args=(), duration_s=None, skip_if_not_permitted=False):
        self.netlab = netlab
        self.name = name
        self.up_args = [str(a) for a in up_args]
        self.duration_s = duration_s
        self.skip_if_not_permitted = skip_if_not_permitted
        self.is_up = False
        self.info = None
        self.procs = []
        self.down_result = None  # the CompletedProcess of the last `pps-netlab down`
        self.down_output = ""

    def run(self, *args, check=True, timeout_s=COMMAND_TIMEOUT_S):
        """Runs one pps-netlab command (`run("traffic", lab.name, ...)`)."""
        cmd = [self.netlab] + [str(a) for a in args]
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
                           start_new_session=True)
        if check and r.returncode == EXIT_SKIP:
            raise NotPermitted(r.stderr.strip())
        if check and r.returncode != 0:
            raise LabError(f"{shlex.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def up(self, args=None):
        args = self.up_args if args is None else [str(a) for a in args]
        if self.duration_s is not None and "--duration" not in args:
            args = args + ["--duration", "%ds" % int(math.ceil(self.duration_s))]
        self.is_up = True  # even a failed `up` may leave something for `down`
        r = self.run("up", "--name", self.name, *args)
        self.info = json.loads(self.run("info", self.name).stdout)
        return r

    def down(self):
        """Stops the programs started in the lab, then `pps-netlab down`."""
        for proc in self.procs:
            stop(proc)
        self.procs = []
        if self.is_up:
            self.down_result = self.run("down", self.name, check=False)
            self.down_output = self.down_result.stdout
            self.is_up = False
        return self.down_output

    def __enter__(self):
        try:
            self.up()
        except NotPermitted as error:
            self.down()
            if self.skip_if_not_permitted:
                print(f"SKIP: {error}", flush=True)
                sys.exit(EXIT_SKIP)
            raise
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def start(self, side, argv, wait_ready=False, **popen_kw):
        """Starts @argv on @side (stopped by `down`); its Popen. With
        @wait_ready, returns once the program printed its "ready" line (the
        pps-probe and pps-protolat servers do once they listen)."""
        if wait_ready:
            popen_kw.setdefault("stdout", subprocess.PIPE)
            popen_kw.setdefault("text", True)
        proc = subprocess.Popen(self.exec_argv(side, argv), **popen_kw)
        self.procs.append(proc)
        if wait_ready:
            line = proc.stdout.readline()
            if not line.startswith("ready"):
                stop(proc)
                raise LabError(f"{argv[0]} on {side} did not get ready: {line!r}")
        return proc

    def run_in(self, side, argv, timeout_s=60):
        """Runs @argv on @side to its end; its stdout. LabError if it fails."""
        r = subprocess.run(self.exec_argv(side, argv), capture_output=True, text=True, timeout=timeout_s)
        if r.returncode != 0:
            raise LabError(f"{argv[0]} on {side} failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout

    def track(self, proc):
        """Adds a Popen started otherwise (e.g. `traffic --wait`) to what `down` stops."""
        self.procs.append(proc)
        return proc

    def sides(self):
        """'snd' and the receiver sides: 'rcv' (one receiver) or 'rcv1'..'rcvN'."""
        return list((self.info or {}).get("addr", {}))

    def addr(self, side):
        return self.info["addr"][side]

    def exec_argv(self, side, argv):
        return [self.netlab, "exec", self.name, side] + [str(a) for a in argv]

    def state_dir(self):
        return os.path.join(STATE_ROOT, self.name)

    def traffic_argv(self, elephants, duration_s, congestion="cubic", receiver=None, wait=True):
        argv = [self.netlab, "traffic", self.name, "--elephants", str(elephants), "--congestion", congestion,
                "--duration", "%gs" % duration_s]
        if receiver:
            argv += ["--receiver", receiver]
        return argv + (["--wait"] if wait else [])


# ---------------------------------------------------------------- capacity steps


def parse_steps(text):
    """'8:10, 2:10, 0.8:10, 4:10' (Mbit/s : seconds) -> [(rate_bps, seconds), ...]."""
    steps = []
    for part in (p.strip() for p in str(text).split(",")):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)", part)
        if not m:
            raise ValueError(f"step '{part}': expected RATE_MBIT:SECONDS, e.g. 0.8:10")
        rate_bps, seconds = float(m.group(1)) * 1e6, float(m.group(2))
        if rate_bps < 50e3 or seconds < 0.5:
            raise ValueError(f"step '{part}': at least 0.05 Mbit/s for at least 0.5 s")
        steps.append((rate_bps, seconds))
    if not steps:
        raise ValueError("no steps")
    return steps


def step_schedule(steps, lead_s=0.0):
    """[(start_s, end_s, rate_bps)] from the trace's epoch: the first step is
    lengthened by @lead_s, the time between the link coming up and the stream."""
    out, t = [], 0.0
    for i, (rate, seconds) in enumerate(steps):
        length = seconds + (lead_s if i == 0 else 0.0)
        out.append((t, t + length, rate))
        t += length
    return out


def step_trace_lines(steps, lead_s=0.0):
    """The mahimahi trace of a step schedule: one line per 1500-byte delivery
    opportunity (ms). Deterministic: opportunity k of a step leaves at
    floor(start + k x 12000 / rate) ms, so the same steps give the same file.
    The last line is the period (pps-linkem repeats the trace)."""
    lines = []
    for start_s, end_s, rate in step_schedule(steps, lead_s):
        gap_ms = MTU_BYTES * 8 / rate * 1e3
        start_ms, end_ms = start_s * 1e3, end_s * 1e3
        k = 0
        while True:
            t = start_ms + k * gap_ms
            if t >= end_ms:
                break
            lines.append(int(math.floor(t)))
            k += 1
    total_ms = int(round(step_schedule(steps, lead_s)[-1][1] * 1e3))
    if not lines or lines[-1] < total_ms:
        lines.append(total_ms)  # the period: the trace's end, not its last opportunity
    return lines


def step_trace_write(path, steps, lead_s=0.0):
    lines = step_trace_lines(steps, lead_s)
    with open(path + ".tmp", "w") as f:
        f.write("".join(f"{ms}\n" for ms in lines))
    os.replace(path + ".tmp", path)
    return path


def capacity_series(steps, lead_s, epoch_realtime_us, t_from_us, t_to_us):
    """The link capacity over [t_from, t_to] (CLOCK_REALTIME us) as step points
    [(t_us, rate_bps)], the trace repeating with its period."""
    sched = step_schedule(steps, lead_s)
    period_us = sched[-1][1] * 1e6
    points = []
    if period_us <= 0:
        return points
    cycle = math.floor((t_from_us - epoch_realtime_us) / period_us)
    while True:
        base = epoch_realtime_us + cycle * period_us
        if base > t_to_us:
            break
        for start_s, _, rate in sched:
            t = base + start_s * 1e6
            if t > t_to_us:
                break
            points.append((max(t, t_from_us), rate))
        cycle += 1
    return points


def step_downs(steps, lead_s, epoch_realtime_us, t_from_us, t_to_us):
    """CLOCK_REALTIME us of every step to a lower rate inside [t_from, t_to]."""
    pts = capacity_series(steps, lead_s, epoch_realtime_us, t_from_us - 1, t_to_us)
    return [t for (t, r), (_, prev) in zip(pts[1:], pts[:-1]) if r < prev and t_from_us <= t <= t_to_us]


def linkem_epoch_realtime_us(stats_path):
    """pps-linkem's epoch (its trace's time zero) on CLOCK_REALTIME, from its --stats file."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(stats_path) as f:
            return json.load(f)["epoch_realtime_ns"] / 1e3
    return None


# ---------------------------------------------------------------- programs in a lab


def open_port_fifo(path):
    """A FIFO for `pps-server --port-file`: the server writes its bound port
    there once it listens, so a driver waits for that event, not for time."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.mkfifo(path, 0o600)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def read_port(fifo_fd, proc, timeout_s):
    """The port the server wrote to the FIFO; LabError if it exits first or
    says nothing within @timeout_s."""
    import select
    import time

    deadline = time.monotonic() + timeout_s
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        raise LabError("the server exited before listening") from None
    data = b""
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fifo_fd, pidfd], [], [], deadline - time.monotonic())
            if fifo_fd in readable:
                chunk = os.read(fifo_fd, 64)
                data += chunk
                if b"\n" in data or not chunk:
                    break
            elif pidfd in readable:
                raise LabError("the server exited before listening")
    finally:
        os.close(pidfd)
    text = data.decode(errors="replace").strip()
    if not text.isdigit():
        raise LabError(f"the server did not report a port within {timeout_s:.0f} s")
    return int(text)


def wait_exit(proc, timeout_s):
    """Waits for a child on its pidfd, with a bound: True if it exited."""
    import select

    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        proc.wait()
        return True
    try:
        readable, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
    finally:
        os.close(fd)
    if readable:
        proc.wait()
        return True
    return False


def stop(proc, timeout_s=5.0, sig=signal.SIGTERM):
    """@sig (SIGTERM unless said), a bounded wait, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    if not wait_exit(proc, timeout_s):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        wait_exit(proc, timeout_s)


def wait_file(path, proc, timeout_s):
    """Waits for @path to have content (a --port-file, a "ready" line sent to
    a file): True once it has; False if @proc exits first or after @timeout_s."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)  # the poll interval: a file written by another process
    return False


def server_has_option(server, option):
    """Whether this pps-server's --help lists @option (e.g. its per-second --log)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        r = subprocess.run([server, "--help"], capture_output=True, text=True, timeout=10)
        return re.search(r"^\s*" + re.escape(option) + r"\b", r.stdout + r.stderr, re.M) is not None
    return False


def read_json(path, default=None):
    with contextlib.suppress(OSError, ValueError):
        with open(path) as f:
            return json.load(f)
    return default
