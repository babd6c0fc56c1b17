# SPDX-License-Identifier: MIT
"""One wrapper per system the lab compares, one interface, the way
Pantheon's src/wrappers/ do: the runners (pps-peers, pps-sweep, pps-fanout,
pps-gst-lab, pps-browser-lab) start, stop and read every system alike, and
the analysis stays apart from both.

A wrapper holds one run of its system in a run folder (@rundir):

    w = get("srt")(build, rundir, kbps=1500)
    w.start(lab, duration_s)      # the sender on `snd`, then a receiver per side
    w.wait(timeout_s)             # the receivers' end
    w.stop()                      # whatever still runs, receivers first
    w.results()                   # the receiver's figures, from its files

`start_sender(lab, duration_s)` returns the address receivers connect to and
`start_receiver(lab, address, duration_s, side, tag)` starts one receiver, so
two wrappers can share a sender (pps-client beside the browser viewer). A
receiver's files are named with its @tag (client-TAG.jsonl; no tag, no
suffix). `display_times(scores)` maps pps-peer-score's rows (the pictures a
receiver showed, in order) to the times they were shown; results() and
display_times() read only files, so a report can be made again from a run
folder without a lab.
"""
import os
import time

from .. import process

REGISTRY = {}


def register(cls):
    REGISTRY[cls.name] = cls
    return cls


def get(name):
    """The wrapper class of the system @name (ppstream, gst-tcp, srt, webrtc, browser, ppssink, ppssrc)."""
    from . import browser, gst_tcp, ppssink, ppssrc, ppstream, srt, webrtc  # noqa: F401  (they register themselves)
    return REGISTRY[name]


class Wrapper:
    name = ""   # the registry's key
    label = ""  # what tables call it

    def __init__(self, build, rundir, **settings):
        self.build = build
        self.rundir = rundir
        self.settings = settings
        self.senders = []    # programs.Program
        self.receivers = []  # programs.Program, in the order of start()'s sides
        self.address = None
        self.start_us = self.end_us = None

    def path(self, stem, ext, tag=None):
        """A file of this run: RUNDIR/STEM.EXT, or STEM-TAG.EXT for a tagged receiver."""
        return os.path.join(self.rundir, f"{stem}-{tag}.{ext}" if tag else f"{stem}.{ext}")

    def start_sender(self, lab, duration_s):
        raise NotImplementedError

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        raise NotImplementedError

    def start(self, lab, duration_s, sides=("rcv",), tags=None):
        """The sender, then one receiver per side (its files named by @tags)."""
        self.address = self.start_sender(lab, duration_s)
        for side, tag in zip(sides, tags or [None] * len(sides)):
            self.start_receiver(lab, self.address, duration_s, side, tag)
        return self

    def receiver_started(self, program):
        self.receivers.append(program)
        if self.start_us is None:
            self.start_us = int(program.start_unix * 1e6)
        return program

    def wait(self, timeout_s):
        """Waits for every receiver to end (@timeout_s in all); True if they did."""
        deadline = time.monotonic() + timeout_s
        ended = all(r.exited(max(0.0, deadline - time.monotonic())) for r in self.receivers)
        if ended and self.receivers:
            self.end_us = int(max(r.end_unix for r in self.receivers) * 1e6)
        return ended

    def stop(self):
        """Stops what still runs: the receivers, then the senders."""
        for p in self.receivers + self.senders:
            p.stop(**self.stop_kw(p))

    def stop_kw(self, program):
        """How @program is stopped (a signal and a bound): SIGTERM, 5 s."""
        return {}

    def results(self, tag=None):
        """The receiver's own figures: frames_shown_pct, frame_latency_p50_ms,
        frame_latency_p95_ms, longest_freeze_ms, bits_per_second (None where
        the receiver does not measure one)."""
        raise NotImplementedError

    def display_times(self, scores, tag=None):
        """CLOCK_REALTIME us at which each scored picture (pps-peer-score's
        rows, in the y4m's order) was shown; None where unknown."""
        raise NotImplementedError

    def failed(self):
        """Why the run failed (a receiver's exit status and last words), or None."""
        for r in self.receivers:
            if r.returncode not in (0, None):
                return f"{os.path.basename(r.argv[0])} exited {r.returncode}: {process.tail(r.stderr_path, 5)}"
        return None
