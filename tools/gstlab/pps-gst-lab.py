#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The GStreamer elements in the lab, beside the programs they wrap.

Per run: a pps-netlab lab (10 Mbit/s, 50 ms RTT, 1-BDP drop-tail, cubic), 20
cubic elephants from the sender's side started --warmup seconds before the
stream, and one of three pairs for --duration seconds:

  programs   pps-server            -> pps-client
  ppssink    gst-launch ... ppssink -> pps-client
  ppssrc     pps-server            -> gst-launch ppssrc ... ! fakesink sync=true

Both senders encode the same picture (videotestsrc smpte scrolling 2 px per
frame, 640x480 at 30 frames/s, pixel timecode on) with the same defaults.
Figures come from the receiver's JSON Lines summary (pps-client --log,
ppssrc log-file): frames shown, frame latency p50/p95, longest freeze, rate.
Pairs alternate within each repetition, so a busy moment of a shared machine
falls on all three alike. A benchmark: it prints figures, it passes nothing.

    sudo flock -x /tmp/pps-measure.lock build/tools/gstlab/pps-gst-lab --reps 2 --duration 20
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "netlab"))
import netlab_lab  # noqa: E402

PAIRS = ("programs", "ppssink", "ppssrc")
PICTURE = "video/x-raw,width=640,height=480,framerate=30/1"


def wait_for(path, pattern, proc, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(path) as f:
        raise RuntimeError("no '%s' from %s:\n%s" % (pattern, proc.args, f.read()[-2000:]))


def stop(proc, how=signal.SIGINT, timeout_s=15):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(how)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_pair(args, pair, rep, outdir):
    name = "gstlab%d" % os.getpid()
    build = args.build
    netlab = os.path.join(build, "tools", "netlab", "pps-netlab")
    env = dict(os.environ, GST_PLUGIN_PATH=os.path.join(build, "gst"),
               GST_REGISTRY=os.path.join(build, "gst", "registry.bin"))
    tag = "%s-%d" % (pair, rep)
    log = os.path.join(outdir, tag + ".jsonl")
    sender = receiver = traffic = None
    lab_s = args.warmup + args.duration + 30
    with netlab_lab.Lab(netlab, name, ["--rate", "10mbit", "--delay", "25ms", "--queue", "auto",
                                       "--aqm", "droptail", "--ecn", "off", "--congestion",
                                       "cubic"], lab_s) as lab:
        snd = lab.info["addr"]["snd"]
        try:
            traffic = subprocess.Popen(lab.traffic_argv(20, args.warmup + args.duration + 5),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
            time.sleep(args.warmup)
            err = os.path.join(outdir, tag + ".sender.err")
            if pair == "ppssink":
                argv = ["gst-launch-1.0", "-m", "-e", "videotestsrc", "is-live=true",
                        "pattern=smpte", "horizontal-speed=2", "!", PICTURE, "!", "ppssink",
                        "listen=%s:0" % snd, "timecode=true", "congestion=cubic"]
                sender = subprocess.Popen(lab.exec_argv("snd", argv), env=env,
                                          stdout=open(err, "w"), stderr=subprocess.STDOUT,
                                          start_new_session=True)
                port = int(wait_for(err, r"pps-listening.*port=\(uint\)(\d+)", sender, 30)
                           .group(1))
            else:
                port_file = os.path.join(outdir, tag + ".port")
                argv = [os.path.join(build, "server", "pps-server"), "--listen", "%s:0" % snd,
                        "--port-file", port_file, "--set", "source.pattern=smpte",
                        "--set", "transport.congestion=cubic", "-q"]
                sender = subprocess.Popen(lab.exec_argv("snd", argv), stdout=subprocess.DEVNULL,
                                          stderr=open(err, "w"), start_new_session=True)
                deadline = time.monotonic() + 30
                while not (os.path.exists(port_file) and os.path.getsize(port_file)):
                    if sender.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("pps-server did not start: " + open(err).read())
                    time.sleep(0.05)
                port = int(open(port_file).read())
            address = "%s:%d" % (snd, port)
            err = os.path.join(outdir, tag + ".receiver.err")
            if pair == "ppssrc":
                argv = ["gst-launch-1.0", "-e", "ppssrc", "location=" + address,
                        "log-file=" + log, "!", "fakesink", "sync=true"]
                receiver = subprocess.Popen(lab.exec_argv("rcv", argv), env=env,
                                            stdout=subprocess.DEVNULL, stderr=open(err, "w"),
                                            start_new_session=True)
                time.sleep(args.duration)
                stop(receiver)
            else:
                argv = [os.path.join(build, "client", "pps-client"), address, "--display",
                        "none", "--log", log, "--duration", str(args.duration), "-q"]
                receiver = subprocess.Popen(lab.exec_argv("rcv", argv),
                                            stdout=subprocess.DEVNULL, stderr=open(err, "w"),
                                            start_new_session=True)
                receiver.wait(timeout=args.duration + 30)
        finally:
            stop(receiver)
            stop(sender)
            stop(traffic, signal.SIGTERM)
    with open(log) as f:
        summary = [json.loads(ln) for ln in f if '"type":"summary"' in ln]
    if len(summary) != 1:
        raise RuntimeError("%s: no summary in %s" % (tag, log))
    return summary[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", ".."),
                    help="meson build directory (default: the one this script is in)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of stream per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of cross traffic first")
    ap.add_argument("--out", help="folder for the logs (default: a temporary one)")
    args = ap.parse_args()
    outdir = args.out or tempfile.mkdtemp(prefix="pps-gst-lab-")
    os.makedirs(outdir, exist_ok=True)
    results = {p: [] for p in PAIRS}
    try:
        for rep in range(args.reps):
            for pair in PAIRS:
                s = run_pair(args, pair, rep, outdir)
                results[pair].append(s)
                print("%-9s rep %d: shown %5.1f%%  p50 %6.1f ms  p95 %6.1f ms  freeze %6.0f ms"
                      "  %.2f Mbit/s" % (pair, rep, s["frames_shown_pct"],
                                         s["frame_latency_p50_ms"], s["frame_latency_p95_ms"],
                                         s["freeze_longest_ms"], s["bits_per_second"] / 1e6),
                      flush=True)
    except netlab_lab.NotPermitted as e:
        print("skipped: %s" % e)
        return 77
    print("\nmean over %d runs of %g s (logs in %s):" % (args.reps, args.duration, outdir))
    base = results["programs"]
    for pair in PAIRS:
        rs = results[pair]
        shown = statistics.mean(r["frames_shown_pct"] for r in rs)
        p50 = statistics.mean(r["frame_latency_p50_ms"] for r in rs)
        p95 = statistics.mean(r["frame_latency_p95_ms"] for r in rs)
        rel = ""
        if pair != "programs":
            rel = "  (vs programs: shown %+.1f%%, p50 %+.1f%%)" % (
                100 * (shown / statistics.mean(r["frames_shown_pct"] for r in base) - 1),
                100 * (p50 / statistics.mean(r["frame_latency_p50_ms"] for r in base) - 1))
        print("%-9s shown %5.1f%%  p50 %6.1f ms  p95 %6.1f ms%s" % (pair, shown, p50, p95, rel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
