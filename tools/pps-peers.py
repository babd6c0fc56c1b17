#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-peers: ppstream beside GStreamer plain TCP, SRT and WebRTC (two
headless Chromiums), same lab, same source picture, same measurement (the
method is in docs/PEERS.md).

    pps-peers --scenario paper|idle|steps|all[,...] --pattern ball,smpte,snow --duration 30 --out DIR

Each scenario runs with each pattern (--pattern: a comma-separated list;
default: the scenario's own, smpte, snow for steps), each system in turn;
a run's files go to DIR/SCENARIO/PATTERN/SYSTEM, so runs of other
scenarios and patterns stay. --runs N runs each scenario x pattern N times,
every system once per round (run K > 1 in DIR/SCENARIO/PATTERN/SYSTEM-runK,
its rows and verdicts marked "run K"; runs numbered above N that an earlier
invocation left for those systems are removed). --dry-run prints the runs and
a rough length.

steps (the capacity-steps scenario): the bottleneck's capacity steps 8 -> 2 -> 0.8 -> 4 Mbit/s,
10 s each (the mahimahi trace is written into each run's folder from the same
steps, so every system meets the identical trace), 60-packet drop-tail, 50 ms
RTT, no cross traffic, noisy content (snow; --pattern to change).

--peer-kbps auto gives the GStreamer peers what ppstream minbuf(1,3) (or,
without it among --systems, ppstream's default settings) averaged in the same
scenario and pattern. Each system runs alone in a fresh lab (10 Mbit/s, 50 ms RTT, drop-tail queue
of 1 BDP, cubic; paper: 20 cubic iperf3 flows started 5 s before the stream;
ppstream-default keeps the server's default congestion control, bbr under its
tcp-friendly rate control, the other ppstream systems set cubic),
one after another. Every system streams ppstream's test source (videotestsrc
smpte, ball or snow, 640x480, 30 frames/s, pixel timecodes; WebRTC's page draws the same
kind of picture with the same timecode). Per run, the pictures the
receiver shows go to a y4m file; pps-peer-score reads their timecodes and
scores them against the regenerated source (WebRTC's receiving page reads
the timecode of each frame it presents itself; no PSNR). Then DIR/results.json,
DIR/peers.md (the tables), DIR/peers-latency-cdf.png and, for steps,
DIR/peers-steps-timeline-PATTERN.png are rebuilt from every
scenario and pattern found in DIR, so `--scenario idle` and `--scenario paper` runs
complement each other. peers.md holds the matrix (a row per scenario x
pattern x system) and the verdicts of the must-show, item by item, for
ppstream's default settings against GStreamer TCP, SRT and WebRTC in each
scenario x pattern (generated from the results; docs/PEERS.md).

Exit status: 0 done, 1 a run failed (WebRTC's without Chromium, chromedriver
or python3-selenium), 2 usage, 77 no root or /dev/net/tun or a GStreamer
element is missing.
"""

import argparse
import os
import sys

from ppslab import peers, process, programs
from ppslab.errors import EXIT_SKIP, Interrupted, NotPermitted
from ppslab.lab import parse_steps
from ppslab.version import add_version_option


def build_from_environment():
    """The build this script is in; $PPS_NETLAB, $PPS_SERVER, $PPS_CLIENT,
    $PPS_PEER_SEND, $PPS_PEER_RECV, $PPS_PEER_SCORE name programs elsewhere."""
    return programs.Build(**{name: os.environ.get("PPS_" + name.upper())
                             for name in ("netlab", "server", "client", "peer_send", "peer_recv", "peer_score")})


def main():
    ap = argparse.ArgumentParser(prog=peers.PROGRAM, description="ppstream vs GStreamer TCP vs SRT vs WebRTC in the network lab (docs/PEERS.md)")
    add_version_option(ap, peers.PROGRAM)
    ap.add_argument("--scenario", default="all", help="paper, idle, steps or all, or a comma-separated list of them; all = idle and paper (default); steps = capacity steps 8/2/0.8/4 Mbit/s")
    ap.add_argument("--pattern", help="source pattern(s) for every system, comma-separated (e.g. ball,smpte,snow): each scenario runs with each (default: smpte; snow in steps)")
    ap.add_argument("--steps-duration", type=int, help="seconds per run in the steps scenario (default: --duration; 40 covers the four 10-s steps)")
    ap.add_argument("--dry-run", action="store_true", help="print the runs and a rough length, run nothing")
    ap.add_argument("--steps", help="steps scenario: RATE_MBIT:SECONDS,... (default 8:10,2:10,0.8:10,4:10)")
    ap.add_argument("--duration", type=int, default=30, help="seconds per run (default 30)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--systems", default=",".join(peers.SYSTEM_ORDER), help="comma-separated subset of " + ",".join(peers.SYSTEM_ORDER))
    ap.add_argument("--peer-kbps", default="auto", help="x264 bitrate of the GStreamer peers (WebRTC sets its own): N, or auto = what ppstream minbuf(1,3) averaged in the same scenario (default)")
    ap.add_argument("--extra-peer-kbps", type=int, action="append", default=[], help="run both peers again at this bitrate too (results in SYSTEM-Nk folders); repeatable; with --systems \"\" only these runs")
    ap.add_argument("--runs", type=int, default=1, help="run each scenario x pattern this many times, every system once per round (rows and verdicts per run; default 1)")
    ap.add_argument("--warmup", type=int, default=5, help="seconds of cross traffic before the stream starts (default 5)")
    ap.add_argument("--keep-video", action="store_true", help="keep the shown.y4m files (about 14 MB per second)")
    ap.add_argument("--report-only", action="store_true", help="rebuild results.json, the table and the plot from DIR")
    args = ap.parse_args()

    build = build_from_environment()
    if args.report_only:
        sys.stdout.write(peers.report(build, args.out))
        return 0
    systems = [s for s in args.systems.split(",") if s]
    if any(s not in peers.SYSTEMS for s in systems) or args.duration < 5 or (args.steps_duration or 5) < 5:
        ap.error("--systems: unknown name, or --duration / --steps-duration under 5 s")
    if not 1 <= args.runs <= 20:
        ap.error("--runs: 1 to 20")
    scenarios = []
    for name in (n.strip() for n in args.scenario.split(",")):
        # all = idle and paper, as in the first version; steps runs when named.
        for s in (["idle", "paper"] if name == "all" else [name]):
            if s not in peers.SCENARIOS:
                ap.error(f"--scenario: {name}: not paper, idle, steps or all")
            if s not in scenarios:
                scenarios.append(s)
    patterns = None
    if args.pattern:
        try:
            patterns = peers.parse_patterns(args.pattern, systems)
        except ValueError as error:
            ap.error(f"--pattern: {error}")
    durations = {"steps": args.steps_duration} if args.steps_duration else {}
    if args.steps:
        try:
            parse_steps(args.steps)
        except ValueError as error:
            ap.error(f"--steps: {error}")
        peers.SCENARIOS["steps"]["steps"] = args.steps
    if args.peer_kbps != "auto" and not args.peer_kbps.isdigit():
        ap.error("--peer-kbps: N or auto")
    if args.dry_run:
        for scenario in scenarios:
            for pattern in patterns or [peers.SCENARIOS[scenario].get("pattern", peers.PATTERN)]:
                print(f"{scenario} {pattern} {durations.get(scenario, args.duration)} s: {' '.join(peers.run_order(systems))}"
                      + (f", {args.runs} times" if args.runs > 1 else "")
                      + "".join(f" (+ peers at {k} kbit/s)" for k in args.extra_peer_kbps))
        est = peers.estimate_s(scenarios, patterns, systems, args.duration, args.warmup, durations, len(args.extra_peer_kbps), args.runs)
        print(f"about {est / 60:.0f} minutes ({peers.PER_RUN_OVERHEAD_S} s per run besides its duration, warm-up and cross traffic's tail)")
        return 0
    reason = peers.check_permissions()
    if reason:
        print(f"SKIP: {reason}", flush=True)
        return EXIT_SKIP
    process.raise_on_signals()
    os.makedirs(args.out, exist_ok=True)
    try:
        status = peers.run_all(build, args, systems, scenarios, patterns, durations)
    except Interrupted as e:
        peers.log(f"stopped ({e}); labs torn down")
        return 1
    except NotPermitted as e:
        print(f"SKIP: {e}", flush=True)
        return EXIT_SKIP
    sys.stdout.write(peers.report(build, args.out))
    return status


if __name__ == "__main__":
    sys.exit(main())
