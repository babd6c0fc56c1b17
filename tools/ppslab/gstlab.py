# SPDX-License-Identifier: MIT
"""pps-gst-lab's runs: the GStreamer elements in the lab beside the programs
they wrap. Each run is a lab (10 Mbit/s, 50 ms RTT, 1-BDP drop-tail, cubic)
with 20 cubic elephants started a warm-up before one pair for the run's
duration, each pair a wrapper:

  programs   pps-server            -> pps-client     (wrappers.ppstream)
  ppssink    gst-launch ... ppssink -> pps-client     (wrappers.ppssink)
  ppssrc     pps-server            -> gst-launch ppssrc ... ! fakesink sync=true   (wrappers.ppssrc)

Figures come from the receiver's JSON Lines summary (pps-client --log,
ppssrc log-file)."""
import json
import os
import signal
import subprocess
import time

from . import wrappers
from .errors import Failure
from .lab import Lab

PAIRS = ("programs", "ppssink", "ppssrc")
WRAPPER = {"programs": "ppstream", "ppssink": "ppssink", "ppssrc": "ppssrc"}
ELEPHANTS = 20
LAB_UP = ["--rate", "10mbit", "--delay", "25ms", "--queue", "auto", "--aqm", "droptail", "--ecn", "off",
          "--congestion", "cubic"]


def run_pair(build, pair, rep, outdir, duration_s, warmup_s):
    """One run of @pair (its files in OUTDIR/PAIR-REP/); the receiver's summary."""
    tag = "%s-%d" % (pair, rep)
    rundir = os.path.join(outdir, tag)
    os.makedirs(rundir, exist_ok=True)
    system = wrappers.get(WRAPPER[pair])(build, rundir, sets={"source.pattern": "smpte", "transport.congestion": "cubic"},
                                         server_extra_s=None, stop_signal=signal.SIGINT)
    with Lab(build.netlab, "gstlab%d" % os.getpid(), LAB_UP, warmup_s + duration_s + 30) as lab:
        try:
            lab.traffic(warmup_s + duration_s + 5, elephants=ELEPHANTS, stderr=subprocess.DEVNULL)
            time.sleep(warmup_s)  # the elephants fill the queue first: a schedule
            system.start(lab, duration_s)
            system.wait(duration_s + 30)
        finally:
            system.stop()
    log = system.path("client", "jsonl")
    with open(log) as f:
        summary = [json.loads(ln) for ln in f if '"type":"summary"' in ln]
    if len(summary) != 1:
        raise Failure("%s: no summary in %s" % (tag, log))
    return summary[0]
