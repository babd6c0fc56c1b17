# SPDX-License-Identifier: MIT
"""The one `Lab` context manager over pps-netlab's command line, the
capacity-step traces, and pps-linkem's files.

    with Lab(netlab, "exp1", ["--rate", "10mbit", "--delay", "25ms"], 60) as lab:
        argv = lab.exec_argv("snd", ["pps-server", ...])

The lab is always torn down on leaving the block (exception or signal
included); every pps-netlab command has a bound. Standard library only.
"""
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys

from . import process
from .errors import EXIT_SKIP, LabError, NotPermitted
from .netlab.state import lab_names, state_dir

COMMAND_TIMEOUT_S = 90.0
MTU_BYTES = 1500  # one mahimahi delivery opportunity


class Lab:
    """One named lab: `up` on entry (or by hand), `down` on exit, whatever
    happens; the programs started in it with `start` (or handed to `track`)
    are stopped first. With @skip_if_not_permitted (the test suites),
    entering a lab where pps-netlab exits 77 prints "SKIP: ..." and exits 77
    as well."""

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
            process.stop(proc)
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
                process.stop(proc)
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
        """pps-netlab's state directory of this lab (cross-traffic results, pps-linkem's output)."""
        return state_dir(self.name)

    def traffic_argv(self, duration_s, elephants=None, mice=None, cbr=None, congestion="cubic", receiver=None,
                     reverse=False, wait=True):
        """`pps-netlab traffic` with these flows: a count or a schedule each
        (N[@START[-STOP]], RATE[@START[-STOP]] for cbr)."""
        argv = [self.netlab, "traffic", self.name, "--duration", "%gs" % duration_s, "--congestion", congestion]
        for option, value in (("--elephants", elephants), ("--mice", mice), ("--cbr", cbr), ("--receiver", receiver)):
            if value:
                argv += [option, str(value)]
        return argv + (["--reverse"] if reverse else []) + (["--wait"] if wait else [])

    def traffic(self, duration_s, elephants=None, mice=None, cbr=None, congestion="cubic", receiver=None,
                reverse=False, wait=True, stdout=None, stderr=None, **popen_kw):
        """Starts cross traffic. With @wait, a Popen of `traffic --wait` that
        ends with the traffic and prints its results (@stdout, @stderr: as for
        process.popen), stopped by `down`; without, the traffic runs in the
        lab's background (`down` ends it) and this returns once it started."""
        argv = self.traffic_argv(duration_s, elephants, mice, cbr, congestion, receiver, reverse, wait)
        if not wait:
            return self.run(*argv[1:])
        return self.track(process.popen(argv, stdout=stdout, stderr=stderr, start_new_session=True, **popen_kw))

    def save_state(self, dest):
        """Copies the lab's state directory (cross-traffic results, pps-linkem's
        output), which `down` removes."""
        if os.path.isdir(self.state_dir()):
            shutil.copytree(self.state_dir(), dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock", "*.pid"))


def other_labs(own):
    """The labs up on this machine besides @own (a shared machine's load)."""
    return [n for n in lab_names() if n != own]


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


# ---------------------------------------------------------------- pps-linkem's files


def linkem_epoch_realtime_us(stats_path):
    """pps-linkem's epoch (its trace's time zero) on CLOCK_REALTIME, from its --stats file."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(stats_path) as f:
            return json.load(f)["epoch_realtime_ns"] / 1e3
    return None


def read_linkem_log(path, direction=None):
    """pps-linkem's per-packet log (--log): (epoch_monotonic_ns, rows), each
    row a dict of its columns (dir, event, then integers, None for '-'); only
    the rows of @direction ('fwd', 'rev') when given."""
    epoch = None
    rows = []
    header = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                if epoch is None and "epoch_monotonic_ns=" in line:
                    epoch = int(line.split("epoch_monotonic_ns=")[1].split()[0])
                continue
            fields = line.split("\t")
            if header is None:
                header = fields
                continue
            if direction and fields[0] != direction:
                continue
            row = dict(zip(header, fields))
            for key in header[2:]:
                row[key] = int(row[key]) if row.get(key, "-") != "-" else None
            rows.append(row)
    return epoch, rows
