# SPDX-License-Identifier: MIT
"""pps-peers' runner and analysis: ppstream beside GStreamer plain TCP,
SRT and WebRTC, same lab, same source, same measurement (the method is in
docs/PEERS.md). Each system runs alone in a fresh lab through its wrapper;
pps-peer-score reads the timecodes of the pictures each receiver showed and
scores them against the regenerated source; the figures are recomputed from
a run's files (run.json, scores.tsv, the receiver's logs), so a change of
method applies to old runs too (--report-only)."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

from . import metrics, plots, process, wrappers
from .cells import elephant_throughputs
from .errors import Failure
from .files import read_tsv
from .lab import Lab, capacity_series, linkem_epoch_realtime_us, parse_steps, step_downs, step_trace_write
from .report import fmt
from .sweep import traffic_result

PROGRAM = "pps-peers"
DASH = "\u2013"  # what the table shows for a figure not measured
PORT = 7400
FPS = 30
PERIOD_US = 1e6 / FPS
PATTERN = "smpte"
# The patterns every system here can send: ppstream's capture and the
# GStreamer peers take any videotestsrc pattern (pps-peer-score regenerates
# metrics.PSNR_PATTERNS), WebRTC's sender page draws these three.
PATTERNS = ("ball", "smpte", "snow")
SOURCE_SIZE = "640x480"
GST_ELEMENTS = ("x264enc", "h264parse", "mpegtsmux", "tsdemux", "avdec_h264", "tcpserversink", "tcpclientsrc", "srtsink", "srtsrc")
# Left out of the scores: the receiver's join (first keyframe) and the end,
# where a frame still in flight would count as never shown.
SKIP_START_S = 2.0
SKIP_END_S = 1.0
# A picture replaced less than three quarters of a 60 Hz display's refresh
# later was not on it (the quarter is for the jitter of presentation times).
FLASH_US = 0.75 * 1e6 / 60
DEFAULT_PEER_KBPS = 1800

SCENARIOS = {
    # The TOMCCAP section 7 path: 10 Mbit/s, 50 ms RTT, drop-tail queue of one
    # bandwidth-delay product, 20 long-lived cubic flows.
    "paper": {"up": ["--rate", "10mbit", "--delay", "25ms", "--queue", "auto", "--aqm", "droptail", "--congestion", "cubic"], "elephants": 20},
    "idle": {"up": ["--rate", "10mbit", "--delay", "25ms", "--queue", "auto", "--aqm", "droptail", "--congestion", "cubic"], "elephants": 0},
    # Capacity steps (Mbit/s:seconds), 60-packet drop-tail, 50 ms RTT, noisy content.
    "steps": {"up": ["--delay", "25ms", "--queue", "60", "--aqm", "droptail", "--congestion", "cubic"], "elephants": 0,
              "steps": "8:10, 2:10, 0.8:10, 4:10", "pattern": "snow"},
}
STEP_LEAD_S = 2.0  # the first step lasts this much longer: lab up to stream start
# The cross traffic outlasts the run by this much (WebRTC's receiver starts its
# run once its browser is up and has the offer, a few seconds in); then the
# run waits for it to end, so that iperf3 writes its result inside the lab.
TRAFFIC_TAIL_S = 10
TRAFFIC_EXIT_GRACE_S = 30
# Lab set-up, start-up, tear-down and scoring per run, roughly (estimate_s();
# 12-15 s per 10-s idle run in a smoke test).
PER_RUN_OVERHEAD_S = 10

# name -> (label, kind, settings): the rows of the comparison, each run by
# its wrapper (ppstream, or the peer of settings' transport). ppstream rows use the asap playout policy
# (a picture is shown as soon as its window is decoded) so that, like the
# peers' receivers, nothing is held back on purpose; the default row is the
# client as a user starts it (its default playout policy), the fixed row the
# first version's default (capture time + 200 ms) for reference.
SYSTEMS = {
    "ppstream-minbuf": ("ppstream minbuf(1,3), asap, cubic", "ppstream", {"mode": "minbuf", "policy": "asap", "congestion": "cubic"}),
    "ppstream-tcp": ("ppstream tcp, asap, cubic", "ppstream", {"mode": "tcp", "policy": "asap", "congestion": "cubic"}),
    "ppstream-minbuf-fixed": ("ppstream minbuf(1,3), fixed 200 ms, cubic", "ppstream", {"mode": "minbuf", "policy": "fixed", "tolerance_ms": 200, "congestion": "cubic"}),
    # The server's own congestion control and rate control (bbr, tcp-friendly).
    "ppstream-default": ("ppstream, default settings", "ppstream", {"mode": "minbuf", "policy": None}),
    # The default row's stream through pps-relay (publisher and relay on the
    # sender's side, a loopback hop): what a relay adds on the same path.
    "ppstream-relay": ("ppstream through pps-relay, default settings", "ppstream", {"mode": "minbuf", "policy": None, "relay": 1}),
    # The default row with the stream on two or three connections of the
    # client (client.copies): the table gives the stream's Mbit/s and share,
    # and what every copy brought on the wire beside them.
    "ppstream-copies2": ("ppstream, default settings, 2 copies", "ppstream", {"mode": "minbuf", "policy": None, "copies": 2}),
    "ppstream-copies3": ("ppstream, default settings, 3 copies", "ppstream", {"mode": "minbuf", "policy": None, "copies": 3}),
    "gst-tcp": ("GStreamer TCP (x264 zerolatency)", "peer", {"transport": "tcp"}),
    "srt": ("SRT 120 ms (x264 zerolatency)", "peer", {"transport": "srt"}),
    # Two headless Chromiums, browser defaults (VP8, GCC, NACK/RTX): its own rate, no --peer-kbps.
    "webrtc": ("WebRTC (Chromium, VP8, GCC)", "webrtc", {}),
}
SYSTEM_ORDER = list(SYSTEMS)
SCENARIO_ORDER = ["idle", "paper", "steps"]
# The system the must-show verdicts are about (ppstream as a user starts it)
# and the peers it is held against, each in the same run of pps-peers.
SUBJECT = "ppstream-default"
VERDICT_PEERS = ("gst-tcp", "srt", "webrtc")
# The must-show's bars (verdicts()).
SHOWN_MIN_PCT = 99.0
P95_PEER_SHOWN_MIN_PCT = 90.0
IDLE_P50_ABOVE_OWD_MS = 15.0
IDLE_P50_PATTERNS = ("ball", "smpte")
SHARE_MIN = 0.8
# ppstream's wire bytes are given beside its stream's where they are this
# much more (its copies; the records' framing).
WIRE_ABOVE_STREAM = 1.05


def parse_patterns(text, systems=()):
    """--pattern's comma-separated list -> the patterns in order, no
    repeats; ValueError for a name pps-peer-score cannot regenerate or,
    with WebRTC among @systems, one its page does not draw."""
    names = []
    for name in (n.strip() for n in (text or "").split(",")):
        if name and name not in names:
            names.append(name)
    if not names:
        raise ValueError("no pattern named")
    known = PATTERNS if "webrtc" in systems else metrics.PSNR_PATTERNS
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not one of {', '.join(known)}")
    return names


def pattern_key(pattern):
    """Sort key: the PATTERNS in order, then the others by name."""
    return (PATTERNS.index(pattern), "") if pattern in PATTERNS else (len(PATTERNS), pattern or "")


def one_way_delay_ms(scenario):
    """The one-way delay of @scenario's lab (its --delay), or None."""
    up = SCENARIOS.get(scenario, {}).get("up", [])
    if "--delay" not in up:
        return None
    value = up[up.index("--delay") + 1]
    return float(value[:-2]) if value.endswith("ms") else float(value.rstrip("s")) * 1000.0


def run_variant(system, run):
    """The folder name of @system's run number @run (1, 2, ...): the
    system's name for the first, SYSTEM-runK for the others (--runs)."""
    return system if run == 1 else f"{system}-run{run}"


def is_main_variant(r):
    """@r is one of its system's runs (any --runs index), not an
    --extra-peer-kbps variant."""
    return r.get("variant", r["system"]) in (r["system"], run_variant(r["system"], r.get("run") or 1))


def stream_bps(r):
    """@r's stream rate: ppstream's windows' bytes once (result_of()), else
    every byte received (older results and the peers)."""
    return r.get("stream_bits_per_second") or r["bits_per_second"]


def cells_by_run(results, systems=None):
    """(scenario, pattern, run, {system: result}) for each cell of @results
    (its systems' own runs, not the --extra-peer-kbps variants; only
    @systems if given), in scenario, pattern and run order."""
    cells = {}
    for r in results:
        if is_main_variant(r) and (systems is None or r["system"] in systems):
            cells.setdefault((r["scenario"], r.get("pattern"), r.get("run") or 1), {})[r["system"]] = r
    order = sorted(cells, key=lambda k: (SCENARIO_ORDER.index(k[0]) if k[0] in SCENARIO_ORDER else 99, pattern_key(k[1]), k[2]))
    return [k + (cells[k],) for k in order]


def run_dir(out, scenario, pattern, variant):
    """A run's folder: OUT/SCENARIO/PATTERN/VARIANT (a folder per pattern, so
    that runs of different patterns keep each other's results)."""
    return os.path.join(out, scenario, pattern, variant)


def find_runs(out):
    """The run folders in OUT that hold run.json and scores.tsv:
    OUT/SCENARIO/PATTERN/VARIANT, and OUT/SCENARIO/VARIANT as made before
    runs had a folder per pattern (their pattern is in run.json)."""
    def complete(d):
        return os.path.exists(os.path.join(d, "run.json")) and os.path.exists(os.path.join(d, "scores.tsv"))

    found = []
    for scenario in SCENARIO_ORDER:
        sdir = os.path.join(out, scenario)
        for name in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
            d = os.path.join(sdir, name)
            if complete(d):
                found.append(d)
            elif os.path.isdir(d):
                found += [os.path.join(d, v) for v in sorted(os.listdir(d)) if complete(os.path.join(d, v))]
    return found


def log(msg):
    print(f"{PROGRAM}: {msg}", file=sys.stderr, flush=True)


def check_permissions():
    """Why the comparison cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN devices)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    if not shutil.which("gst-inspect-1.0"):
        return "gst-inspect-1.0 is not installed"
    missing = [e for e in GST_ELEMENTS if subprocess.run(["gst-inspect-1.0", e], capture_output=True).returncode != 0]
    if missing:
        return "GStreamer elements missing: " + " ".join(missing) + " (scripts/install-deps.sh)"
    return None


def wrapper_of(build, system, rdir, kbps=None, pattern=PATTERN):
    """The wrapper that runs (or reads the run of) the row @system."""
    _, kind, settings = SYSTEMS[system]
    if kind == "webrtc":
        return wrappers.get("webrtc")(build, rdir, pattern=pattern, fps=FPS)
    if kind == "peer":
        return wrappers.get("gst-tcp" if settings["transport"] == "tcp" else "srt")(
            build, rdir, kbps=kbps, pattern=pattern, fps=FPS, port=PORT)
    sets = {"source.pattern": pattern, "source.fps": FPS, "transport.mode": settings["mode"],
            "transport.minbuf_a": 1, "transport.minbuf_b": 3}
    if settings.get("congestion"):
        sets["transport.congestion"] = settings["congestion"]
    # Every picture the client shows, once, in order: what pps-peer-recv writes
    # for the GStreamer peers (the real-time y4m, the client's default, leaves
    # out pictures shown for less than a frame time).
    client_sets = {"client.clock": "shared", "display.output_timing": "every"}
    if settings.get("tolerance_ms"):
        client_sets["playout.tolerance_ms"] = settings["tolerance_ms"]
    if settings.get("copies"):
        client_sets["client.copies"] = settings["copies"]
    return wrappers.get("ppstream")(build, rdir, sets=sets, port=PORT, server_extra_s=30, policy=settings["policy"],
                                    client_sets=client_sets, output=True, stop_signal=signal.SIGINT,
                                    relay=settings.get("relay", 0))


def run_one(build, scenario, system, out, duration_s, warmup_s, kbps, keep_video, variant=None, pattern=None, run_index=1):
    label, kind, settings = SYSTEMS[system]
    sc = dict(SCENARIOS[scenario])
    pattern = pattern or sc.get("pattern", PATTERN)
    rdir = run_dir(out, scenario, pattern, variant or system)
    shutil.rmtree(rdir, ignore_errors=True)
    os.makedirs(rdir)
    lead_s = None
    if sc.get("steps"):
        # The same steps, the same file, for every system (lab.step_trace_lines is deterministic).
        steps = parse_steps(sc["steps"])
        lead_s = (warmup_s if sc["elephants"] else 0) + STEP_LEAD_S
        trace = step_trace_write(os.path.join(rdir, "link.trace"), steps, lead_s)
        sc["up"] = sc["up"] + ["--trace", trace, "--rev-rate", "%gmbit" % (max(r for r, _ in steps) / 1e6)]
    sc["up"] = sc["up"] + ["--stats", os.path.join(rdir, "linkem.json")]
    name = f"peers{os.getpid() % 10000}"
    lab_bound_s = warmup_s + duration_s + 90
    log(f"{scenario}, {pattern}{f', run {run_index}' if run_index > 1 else ''}: {system} ({label}){f' at {kbps} kbit/s' if kind == 'peer' else ''}")
    run_ = wrapper_of(build, system, rdir, kbps, pattern)
    with Lab(build.netlab, name, sc["up"], lab_bound_s) as lab:
        with open(os.path.join(rdir, "lab.json"), "w") as f:
            json.dump(lab.info, f, indent=2)
        traffic = traffic_start_us = None
        if sc["elephants"]:
            traffic_start_us = int(time.time() * 1e6)
            traffic = lab.traffic(warmup_s + duration_s + TRAFFIC_TAIL_S, elephants=sc["elephants"],
                                  stdout=os.path.join(rdir, "traffic.txt"), stderr=subprocess.STDOUT)
            time.sleep(warmup_s)  # let the flows fill the queue first
        try:
            run_.start(lab, duration_s)
            if not run_.wait(duration_s + 30):
                raise Failure(f"the receiver did not end within {duration_s + 30} s")
        finally:
            run_.stop()
        if run_.failed():
            raise Failure(run_.failed())
        if traffic is not None:
            # The elephants' iperf3 result, for the throughput share (result_of()).
            if process.wait_exit(traffic, warmup_s + duration_s + TRAFFIC_TAIL_S + TRAFFIC_EXIT_GRACE_S):
                src = traffic_result(lab, False)
                if src and os.path.exists(src):
                    shutil.copyfile(src, os.path.join(rdir, "elephants.json"))
            else:
                log(f"{scenario}: {system}: the cross traffic did not end; no throughput share")
        lab.save_state(os.path.join(rdir, "lab-state"))
    with open(os.path.join(rdir, "netlab-down.txt"), "w") as f:
        f.write(lab.down_output or "")
    if kind == "webrtc":
        run_.scores()  # the page read the timecodes; the pictures stay in it
    else:
        score(build, rdir, pattern)
    run = {"scenario": scenario, "system": system, "variant": variant or system, "run": run_index, "kind": kind, "settings": settings, "peer_kbps": kbps if kind == "peer" else None, "duration_s": duration_s, "start_us": run_.start_us, "end_us": run_.end_us,
           "pattern": pattern, "steps": sc.get("steps"), "trace_lead_s": lead_s, "traffic_start_us": traffic_start_us,
           "one_way_delay_ms": one_way_delay_ms(scenario), "elephants": sc["elephants"]}
    with open(os.path.join(rdir, "run.json"), "w") as f:
        json.dump(run, f, indent=2)
    result = result_of(build, rdir)
    if not keep_video and os.path.exists(os.path.join(rdir, "shown.y4m")):
        os.unlink(os.path.join(rdir, "shown.y4m"))
    lat = result["latency_ms"]
    log(f"  p50 {fmt(lat['p50'], '.0f', DASH)} p95 {fmt(lat['p95'], '.0f', DASH)} ms, shown {result['frames_shown_pct']:.1f}%, frozen {result['frozen_pct']:.1f}%, PSNR {fmt(result['psnr_y_mean'], '.2f', DASH)} dB, {fmt((result['bits_per_second'] or 0) / 1e6, '.2f', DASH)} Mbit/s")
    return result


def score(build, rdir, pattern=PATTERN):
    """pps-peer-score of the pictures shown -> scores.tsv."""
    r = metrics.peer_score(build.peer_score, pattern, os.path.join(rdir, "shown.y4m"), os.path.join(rdir, "scores.tsv"), timeout=600)
    if r.returncode != 0:
        raise Failure(f"pps-peer-score failed: {r.stderr.strip()}")
    return read_tsv(os.path.join(rdir, "scores.tsv"))


def analyse(system, rdir, start_us, end_us, scores, step_downs_us=()):
    """The run's figures from its scored pictures and the times @system (a
    wrapper) showed them: frames shown of the capture grid between start +
    2 s and end - 1 s, glass-to-glass latency, freezes, PSNR and SSIM."""
    times = system.display_times(scores)
    t0, t1 = start_us + SKIP_START_S * 1e6, end_us - SKIP_END_S * 1e6
    # Source picture n was captured at anchor_cap + (n - anchor_ref) periods
    # (pps-peer-score's mapping); count on that grid, so that jitter in the
    # logged capture times cannot move a picture across the window's edges.
    anchor = next((s for s in scores if s["timecode_ok"] == "1" and s["ref_frame"] != "-1"), None)

    def captured_at(ref):
        return int(anchor["capture_us"]) + (ref - int(anchor["ref_frame"])) * PERIOD_US

    if anchor:
        first = math.ceil(int(anchor["ref_frame"]) + (t0 - int(anchor["capture_us"])) / PERIOD_US)
        last = math.ceil(int(anchor["ref_frame"]) + (t1 - int(anchor["capture_us"])) / PERIOD_US)
        expected = last - first
    else:
        expected = int(round((t1 - t0) / PERIOD_US))
    shown_refs, lat_ms, psnr, ssim, events = set(), [], [], [], []
    matched = tc_ok = checks = checks_won = 0
    for s, t in zip(scores, times):
        if s["ref_check"] != "-1":
            checks += 1
            checks_won += s["ref_check"] == "1"
        if s["timecode_ok"] != "1":
            continue
        tc_ok += 1
        if t is None:
            continue
        matched += 1
        ref = int(s["ref_frame"])
        if ref < 0 or not t0 <= captured_at(ref) < t1:
            continue
        cap = int(s["capture_us"])
        shown_refs.add(ref)
        lat_ms.append((t - cap) / 1000.0)
        if s["psnr_y"]:
            psnr.append(float(s["psnr_y"]))
            ssim.append(float(s["ssim_y"]))
        events.append((t, ref))
    # Freezes: gaps between consecutive new pictures (by display time); a
    # repeated or older picture is no change.
    displays, newest = [], -1
    for t, ref in sorted(events):
        if ref > newest:
            newest = ref
            displays.append(t)
    # Pictures on screen for less than one refresh of a 60 Hz display before
    # the next new one (a burst): no screen shows them. WebRTC's page only
    # counts the frames its 60 Hz screen presented; this holds the other
    # systems to the same.
    flashed = sum(1 for a, b in zip(displays, displays[1:]) if b - a < FLASH_US)
    fz = metrics.freeze_figures(displays, step_downs_us)
    span_us = (events[-1][0] - events[0][0]) if events else 0
    result = {
        "pictures_decoded": len(scores),
        "pictures_with_timecode": tc_ok,
        "pictures_matched_to_display_time": matched,
        "reference_checks": checks,
        "reference_checks_won": checks_won,
        "window_us": [int(t0), int(t1)],
        "frames_expected": expected,
        "frames_shown": len(shown_refs),
        "frames_shown_pct": 100.0 * len(shown_refs) / expected if expected else 0,
        "frames_flashed": flashed,
        "frames_seen_pct": 100.0 * max(0, len(shown_refs) - flashed) / expected if expected else 0,
        "frozen_pct": 100.0 * fz["frozen_us"] / span_us if span_us else 100.0,
        "total_frozen_ms": fz["frozen_us"] / 1000.0,
        "longest_freeze_ms": fz["longest_us"] / 1000.0,
        "longest_freeze_outside_steps_ms": fz["longest_outside_steps_us"] / 1000.0,
        "latency_ms": {"p50": metrics.percentile(lat_ms, 50), "p95": metrics.percentile(lat_ms, 95), "p99": metrics.percentile(lat_ms, 99), "max": max(lat_ms) if lat_ms else None},
        "psnr_y_mean": sum(psnr) / len(psnr) if psnr else None,
        "ssim_y_mean": sum(ssim) / len(ssim) if ssim else None,
    }
    with open(os.path.join(rdir, "latency_ms.json"), "w") as f:
        json.dump(lat_ms, f)
    return result


def result_of(build, rdir, out=None):
    """Everything in the table, recomputed from a run's files (run.json,
    scores.tsv, the receiver's logs), so a change of method applies to old
    runs through --report-only. rundir: the folder, relative to @out."""
    with open(os.path.join(rdir, "run.json")) as f:
        run = json.load(f)
    system = wrapper_of(build, run["system"], rdir)
    result = analyse(system, rdir, run["start_us"], run["end_us"], read_tsv(os.path.join(rdir, "scores.tsv")), run_step_downs(rdir, run))
    result.update(run)
    result["pattern"] = run.get("pattern") or SCENARIOS.get(run["scenario"], {}).get("pattern", PATTERN)
    if result.get("one_way_delay_ms") is None:
        result["one_way_delay_ms"] = one_way_delay_ms(run["scenario"])
    if result.get("elephants") is None:
        result["elephants"] = SCENARIOS.get(run["scenario"], {}).get("elephants", 0)
    result["rundir"] = os.path.relpath(rdir, out) if out else rdir
    result["run"] = run.get("run") or 1
    result["label"] = SYSTEMS[run["system"]][0] + (f", run {result['run']}" if result["run"] > 1 else "")
    own = system.results()
    result["bits_per_second"] = own["bits_per_second"]
    # The stream's own rate (ppstream: its windows' bytes once, whatever
    # its copies brought besides): what --peer-kbps auto gives the peers and
    # what the share and PSNR items hold it to.
    result["stream_bits_per_second"] = own.get("stream_bits_per_second") or own["bits_per_second"]
    if run["kind"] == "webrtc":
        # WebRTC lowers its frame rate and size instead of dropping: its getStats.
        result["received_fps"], result["received_sizes"] = own["received_fps"], own["received_sizes"]
        result["frames_redrawn"] = own["redrawn"]
    else:
        # The others send every picture at the source's size: new pictures shown per second.
        window_s = (result["window_us"][1] - result["window_us"][0]) / 1e6
        result["received_fps"] = result["frames_shown"] / window_s if window_s > 0 else None
        result["received_sizes"] = {SOURCE_SIZE: 1}
    result["elephant_mean_bps"], result["wire_share"] = throughput_share(rdir, result)
    result["throughput_share"] = (result["stream_bits_per_second"] / result["elephant_mean_bps"]
                                  if result["elephant_mean_bps"] and result["stream_bits_per_second"] else None)
    with open(os.path.join(rdir, "result.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result


def throughput_share(rdir, result):
    """(the mean elephant's bit/s over the run's analysis window, the
    system's bit/s (the table's Mbit/s) over that): pps-sweep's
    throughput_share; (None, None) without cross traffic or its result."""
    path = os.path.join(rdir, "elephants.json")
    if not result.get("traffic_start_us") or not os.path.exists(path):
        return None, None
    t0, t1 = ((t - result["traffic_start_us"]) / 1e6 for t in result["window_us"])
    rates = elephant_throughputs(path, t0, t1)
    if not rates:
        return None, None
    mean_bps = sum(rates) / len(rates)
    return mean_bps, (result["bits_per_second"] / mean_bps if result["bits_per_second"] and mean_bps else None)


def run_capacity(rdir, run):
    """A steps run's capacity over [start, end] (CLOCK_REALTIME us), from pps-linkem's epoch."""
    epoch = linkem_epoch_realtime_us(os.path.join(rdir, "linkem.json"))
    if not run.get("steps") or epoch is None:
        return None, ()
    steps = parse_steps(run["steps"])
    lead = run.get("trace_lead_s") or 0.0
    return (capacity_series(steps, lead, epoch, run["start_us"], run["end_us"]),
            step_downs(steps, lead, epoch, run["start_us"], run["end_us"]))


def run_step_downs(rdir, run):
    return run_capacity(rdir, run)[1]


def result_order(r):
    return (SCENARIO_ORDER.index(r["scenario"]) if r["scenario"] in SCENARIO_ORDER else len(SCENARIO_ORDER),
            pattern_key(r.get("pattern")), SYSTEM_ORDER.index(r["system"]), r.get("peer_kbps") or 0, r.get("run") or 1)


def collect(build, out):
    """Every run's result in OUT, by scenario, pattern, system."""
    return sorted((result_of(build, rdir, out) for rdir in find_runs(out)), key=result_order)


MATRIX_HEADER = ("| scenario | pattern | system | frames shown | on screen >= 1/60 s | latency p50 / p95 / p99 (ms) | longest freeze (outside steps) ms "
                 "| PSNR-Y (dB) | Mbit/s | share | received fps | received size |")


def matrix_table(results):
    """The markdown table of the whole matrix: a row per scenario x pattern x system."""
    lines = [MATRIX_HEADER, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lat = r["latency_ms"]
        stream = stream_bps(r)
        rate = f"{stream / 1e6:.2f}" if stream else DASH
        share = fmt(r.get("throughput_share"), ".2f", DASH)
        if stream and r["bits_per_second"] and r["bits_per_second"] > WIRE_ABOVE_STREAM * stream:
            rate += f" ({r['bits_per_second'] / 1e6:.2f} on the wire)"
            if r.get("wire_share"):
                share += f" ({r['wire_share']:.2f})"
        if r["kind"] == "peer":
            rate += f" (x264 {r['peer_kbps']} kbit/s)"
        elif r["kind"] == "webrtc":
            rate += " (GCC)"
        freeze = fmt(r.get("longest_freeze_ms"), ".0f", DASH)
        if r.get("steps"):
            freeze += f" ({fmt(r.get('longest_freeze_outside_steps_ms'), '.0f', DASH)})"
        lines.append(
            f"| {r['scenario']} | {r.get('pattern') or DASH} | {r['label']} | {r['frames_shown_pct']:.1f}% | {seen_text(r)} | "
            f"{fmt(lat['p50'], '.0f', DASH)} / {fmt(lat['p95'], '.0f', DASH)} / {fmt(lat['p99'], '.0f', DASH)} | {freeze} | "
            f"{fmt(r['psnr_y_mean'], '.2f', DASH)} | {rate} | {share} | "
            f"{fmt(r.get('received_fps'), '.1f', DASH)} | {sizes_text(r.get('received_sizes'))} |")
    return "\n".join(lines) + "\n"


def seen_text(r):
    """Frames shown that stayed on screen for at least one 60 Hz refresh, %:
    for ppstream (its playout's display times) and WebRTC (the frames its
    screen presented); the GStreamer peers' times are when their appsink
    (sync=false) got each picture, not a display's, so there is none."""
    if r["kind"] == "peer" or r.get("frames_seen_pct") is None:
        return DASH
    return f"{r['frames_seen_pct']:.1f}%"


def sizes_text(sizes):
    """'640x480', or the two sizes held longest with their shares of the samples."""
    if not sizes:
        return DASH
    total = sum(sizes.values())
    top = sorted(sizes.items(), key=lambda kv: -kv[1])
    if len(top) == 1:
        return top[0][0]
    return ", ".join(f"{size} {100.0 * n / total:.0f}%" for size, n in top[:2])


# ---------------------------------------------------------------- the must-show verdicts


def short(system):
    return {"ppstream-default": "ppstream", "gst-tcp": "GStreamer TCP", "srt": "SRT", "webrtc": "WebRTC"}.get(system, system)


def verdicts(results, subject=SUBJECT, peers=VERDICT_PEERS):
    """The must-show, item by item, per scenario x pattern cell of @results
    (each system's own run, not the --extra-peer-kbps variants): a list of
    {scenario, pattern, item, measured, verdict} with verdict 'met', 'missed'
    or 'not measured' (a run missing or a figure absent).

    - shown: @subject's frames shown >= every peer's and >= SHOWN_MIN_PCT;
    - p95: its p95 <= the p95 of every peer that showed >= P95_PEER_SHOWN_MIN_PCT;
    - idle p50 (no cross traffic, no steps; ball and smpte): p50 <= the
      path's one-way delay + IDLE_P50_ABOVE_OWD_MS;
    - share (cross traffic): its throughput share >= SHARE_MIN of the mean elephant's;
    - PSNR (cross traffic): its PSNR-Y >= SRT's, at the rate SRT was given.

    With --runs, each run number is a cell of its own (the systems' runs of
    the same number ran one after another), its rows carrying "run"."""
    out = []
    for scenario, pattern, run, cell in cells_by_run(results):
        me = cell.get(subject)
        missing = [short(p) for p in peers if p not in cell]

        def row(item, measured, verdict):
            out.append({"scenario": scenario, "pattern": pattern, "run": run, "item": item, "measured": measured, "verdict": verdict})

        if me is None:
            row("all", f"no {short(subject)} run", "not measured")
            continue
        there = [cell[p] for p in peers if p in cell]
        absent = f"; no {', '.join(missing)} run" if missing else ""
        # frames shown
        best = max((p["frames_shown_pct"] for p in there), default=None)
        measured = f"{me['frames_shown_pct']:.1f}% vs " + (", ".join(f"{short(p['system'])} {p['frames_shown_pct']:.1f}%" for p in there) or "no peer") + absent
        ok = me["frames_shown_pct"] >= SHOWN_MIN_PCT and (best is None or me["frames_shown_pct"] >= best)
        row(f"frames shown >= every peer's and >= {SHOWN_MIN_PCT:g}%", measured, "missed" if not ok else ("not measured" if missing else "met"))
        # p95
        mine = me["latency_ms"]["p95"]
        held = [p for p in there if p["frames_shown_pct"] >= P95_PEER_SHOWN_MIN_PCT]
        under = [p for p in there if p["frames_shown_pct"] < P95_PEER_SHOWN_MIN_PCT]
        measured = f"{fmt(mine, '.0f', DASH)} ms vs " + (", ".join(f"{short(p['system'])} {fmt(p['latency_ms']['p95'], '.0f', DASH)}" for p in held) or "no peer at >= 90%")
        if under:
            measured += " (" + ", ".join(f"{short(p['system'])} {p['frames_shown_pct']:.1f}% shown" for p in under) + ": not held against)"
        measured += absent
        if mine is None or any(p["latency_ms"]["p95"] is None for p in held):
            verdict = "not measured"
        elif any(mine > p["latency_ms"]["p95"] for p in held):
            verdict = "missed"
        else:
            verdict = "not measured" if missing else "met"
        row(f"p95 <= every peer's showing >= {P95_PEER_SHOWN_MIN_PCT:g}%", measured, verdict)
        # idle p50
        if not me.get("elephants") and not me.get("steps") and pattern in IDLE_P50_PATTERNS:
            owd, p50 = me.get("one_way_delay_ms"), me["latency_ms"]["p50"]
            if owd is None or p50 is None:
                row(f"idle p50 <= one-way delay + {IDLE_P50_ABOVE_OWD_MS:g} ms", f"p50 {fmt(p50, '.0f', DASH)} ms", "not measured")
            else:
                bar = owd + IDLE_P50_ABOVE_OWD_MS
                row(f"idle p50 <= one-way delay + {IDLE_P50_ABOVE_OWD_MS:g} ms", f"p50 {p50:.0f} ms vs {bar:g} ms ({owd:g} + {IDLE_P50_ABOVE_OWD_MS:g})",
                    "met" if p50 <= bar else "missed")
        if me.get("elephants"):
            share = me.get("throughput_share")
            wire = ""
            if me.get("wire_share") and share and me["wire_share"] > WIRE_ABOVE_STREAM * share:
                wire = f"; {me['wire_share']:.2f} on the wire"
            row(f"throughput share >= {SHARE_MIN:g} of the mean elephant's",
                f"{fmt(share, '.2f', DASH)} ({fmt((stream_bps(me) or 0) / 1e6, '.2f', DASH)} vs {fmt((me.get('elephant_mean_bps') or 0) / 1e6, '.2f', DASH)} Mbit/s{wire})",
                "not measured" if share is None else ("met" if share >= SHARE_MIN else "missed"))
            srt = cell.get("srt")
            if srt is None or me["psnr_y_mean"] is None or srt["psnr_y_mean"] is None:
                row("PSNR-Y >= SRT's at SRT's rate", f"{fmt(me['psnr_y_mean'], '.2f', DASH)} dB vs SRT {fmt(srt['psnr_y_mean'] if srt else None, '.2f', DASH)}", "not measured")
            else:
                row("PSNR-Y >= SRT's at SRT's rate",
                    f"{me['psnr_y_mean']:.2f} dB at {fmt((stream_bps(me) or 0) / 1e6, '.2f', DASH)} Mbit/s vs SRT {srt['psnr_y_mean']:.2f} dB (x264 {srt['peer_kbps']} kbit/s)",
                    "met" if me["psnr_y_mean"] >= srt["psnr_y_mean"] else "missed")
    return out


# What a relay may add (relay_verdicts()): frames shown within this many
# points of the direct run's, p50 within the added hop's one-way delay (0:
# the hop is the sender's loopback) plus this.
RELAY_SHOWN_POINTS = 1.0
RELAY_P50_ABOVE_MS = 5.0
RELAY_HOP_OWD_MS = 0.0


def relay_verdicts(results, direct=SUBJECT, relayed="ppstream-relay"):
    """Per scenario x pattern cell where both ran: the stream through the
    relay against the same stream served directly (frames shown, p50), as
    verdicts() rows."""
    out = []
    for scenario, pattern, run, cell in cells_by_run(results, (direct, relayed)):
        d, r = cell.get(direct), cell.get(relayed)
        if d is None or r is None:
            continue

        def row(item, measured, verdict):
            out.append({"scenario": scenario, "pattern": pattern, "run": run, "item": item, "measured": measured, "verdict": verdict})

        ds, rs = d["frames_shown_pct"], r["frames_shown_pct"]
        row(f"relay: frames shown within {RELAY_SHOWN_POINTS:g} point of direct",
            f"{rs:.1f}% via relay vs {ds:.1f}% direct", "met" if rs >= ds - RELAY_SHOWN_POINTS else "missed")
        dp, rp = d["latency_ms"]["p50"], r["latency_ms"]["p50"]
        item = f"relay: p50 <= direct + hop's one-way delay ({RELAY_HOP_OWD_MS:g}) + {RELAY_P50_ABOVE_MS:g} ms"
        if dp is None or rp is None:
            row(item, f"{fmt(rp, '.0f', DASH)} vs {fmt(dp, '.0f', DASH)} ms", "not measured")
        else:
            row(item, f"{rp:.0f} ms via relay vs {dp:.0f} ms direct (p95 {fmt(r['latency_ms']['p95'], '.0f', DASH)} vs "
                      f"{fmt(d['latency_ms']['p95'], '.0f', DASH)})",
                "met" if rp <= dp + RELAY_HOP_OWD_MS + RELAY_P50_ABOVE_MS else "missed")
    return out


def verdict_table(rows, what="ppstream, default settings, vs peers"):
    """The verdicts as a markdown table, then a count per verdict."""
    lines = [f"| scenario | pattern | must-show item | measured ({what}) | verdict |", "|---|---|---|---|---|"]
    for v in rows:
        mark = "**missed**" if v["verdict"] == "missed" else v["verdict"]
        scenario = v["scenario"] + (f", run {v['run']}" if (v.get("run") or 1) > 1 else "")
        lines.append(f"| {scenario} | {v['pattern'] or DASH} | {v['item']} | {v['measured']} | {mark} |")
    counts = {}
    for v in rows:
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    lines.append("")
    lines.append(", ".join(f"{counts[k]} {k}" for k in ("met", "missed", "not measured") if k in counts) + f" of {len(rows)} items.")
    return "\n".join(lines) + "\n"


def verdict_tally(rows):
    """With --runs: per scenario x pattern x item, how many runs met it,
    missed it, did not measure it (a markdown table); "" with one run."""
    if all((v.get("run") or 1) == 1 for v in rows):
        return ""
    tally = {}
    for v in rows:
        counts = tally.setdefault((v["scenario"], v["pattern"], v["item"]), {})
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    lines = ["| scenario | pattern | must-show item | runs: met / missed / not measured |", "|---|---|---|---|"]
    for (scenario, pattern, item), counts in tally.items():
        lines.append(f"| {scenario} | {pattern or DASH} | {item} | "
                     f"{counts.get('met', 0)} / {counts.get('missed', 0)} / {counts.get('not measured', 0)} |")
    return "\n".join(lines) + "\n"


def write_table(out, results):
    """OUT/peers.md: the matrix, then the verdicts (with --runs, their tally
    per item); its text."""
    rows = verdicts(results)
    text = matrix_table(results) + "\n" + verdict_table(rows)
    tally = verdict_tally(rows)
    if tally:
        text += "\nPer item over the runs:\n\n" + tally
    relayed = relay_verdicts(results)
    if relayed:
        text += "\nThrough pps-relay (publisher and relay on the sender's side):\n\n" + \
            verdict_table(relayed, "ppstream through pps-relay vs served directly")
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write(text)
    return text


def report(build, out):
    """results.json, peers.md and the plots from every run in OUT; the tables."""
    results = collect(build, out)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"results": results, "verdicts": verdicts(results), "relay_verdicts": relay_verdicts(results),
                   "machine": dict(zip(("sysname", "nodename", "release", "version", "machine"), os.uname())),
                   "written": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, f, indent=2)
    table = write_table(out, results)
    if results:
        plots.peers_latency_cdf(out, results, SCENARIO_ORDER, sorted({r.get("pattern") for r in results}, key=pattern_key))
        steps = [r for r in results if r["scenario"] == "steps"]
        for pattern in sorted({r.get("pattern") for r in steps}, key=pattern_key):
            plots.peers_steps_timeline(out, steps_series(build, out, [r for r in steps if r.get("pattern") == pattern]),
                                       f"peers-steps-timeline-{pattern}.png", pattern)
    return table


def steps_series(build, out, results):
    """What the steps time line draws for each run of the steps scenario:
    its latency points (capture time, display time), capacity and step downs."""
    series = []
    for r in results:
        if r["scenario"] != "steps":
            continue
        rdir = os.path.join(out, r["rundir"])
        with open(os.path.join(rdir, "run.json")) as f:
            run = json.load(f)
        scores = read_tsv(os.path.join(rdir, "scores.tsv"))
        times = wrapper_of(build, r["system"], rdir).display_times(scores)
        cap, downs = run_capacity(rdir, run)
        series.append({"result": r, "run": run, "capacity": cap, "step_downs": downs,
                       "points": sorted((int(s["capture_us"]), t) for s, t in zip(scores, times)
                                        if s["timecode_ok"] == "1" and t is not None)})
    return series


def rate_source(systems):
    """The ppstream row whose measured rate --peer-kbps auto gives the
    peers: minbuf(1,3) when it runs, else the default settings; None."""
    return next((s for s in ("ppstream-minbuf", "ppstream-default") if s in systems), None)


def run_order(systems):
    """@systems in running order: the rate source first (with --peer-kbps
    auto its rate sets the peers'), the rest as given."""
    first = rate_source(systems)
    return sorted(systems, key=lambda s: s != first)


def stale_runs(out, scenario, pattern, system, runs):
    """Removes @system's runs numbered above @runs in @scenario x @pattern
    (left by an earlier --runs), so that the report does not mix builds."""
    pdir = os.path.dirname(run_dir(out, scenario, pattern or SCENARIOS[scenario].get("pattern", PATTERN), system))
    prefix = system + "-run"
    for name in os.listdir(pdir) if os.path.isdir(pdir) else []:
        if name.startswith(prefix) and name[len(prefix):].isdigit() and int(name[len(prefix):]) > runs:
            shutil.rmtree(os.path.join(pdir, name), ignore_errors=True)


def run_all(build, args, systems, scenarios, patterns=None, durations=None):
    """The runs of each scenario x pattern (None: the scenario's own) with
    each system, then the extra peer rates; 1 if a run failed. @durations:
    seconds per run by scenario (default args.duration)."""
    status = 0
    source = rate_source(systems)
    runs = getattr(args, "runs", 1) or 1
    for scenario in scenarios:
        duration_s = (durations or {}).get(scenario, args.duration)
        for pattern in patterns or [None]:
            # --runs: every system once, then again, so that run K of each
            # system meets the machine and the time of day the others' run K did.
            for system in systems:
                stale_runs(args.out, scenario, pattern, system, runs)
            for k in range(1, runs + 1):
                kbps = DEFAULT_PEER_KBPS if args.peer_kbps == "auto" else int(args.peer_kbps)
                for system in run_order(systems):
                    try:
                        r = run_one(build, scenario, system, args.out, duration_s, args.warmup, kbps, args.keep_video,
                                    run_variant(system, k), pattern=pattern, run_index=k)
                    except (Failure, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                        log(f"{scenario}, {pattern or 'default pattern'}, run {k}: {system} failed: {e}")
                        status = 1
                        continue
                    if system == source and args.peer_kbps == "auto" and r["stream_bits_per_second"]:
                        kbps = max(300, int(round(r["stream_bits_per_second"] / 1000 / 50)) * 50)
            for extra in args.extra_peer_kbps:
                for system in (s for s in SYSTEM_ORDER if SYSTEMS[s][1] == "peer"):
                    try:
                        run_one(build, scenario, system, args.out, duration_s, args.warmup, extra, args.keep_video, f"{system}-{extra}k", pattern=pattern)
                    except (Failure, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                        log(f"{scenario}, {pattern or 'default pattern'}: {system} at {extra} kbit/s failed: {e}")
                        status = 1
    return status


def estimate_s(scenarios, patterns, systems, duration_s, warmup_s, durations=None, extra_rates=0, runs=1):
    """A rough length of run_all in seconds: per run its duration, the
    warm-up and the cross traffic's tail where there is cross traffic, and
    PER_RUN_OVERHEAD_S of lab, start-up and scoring."""
    total = 0.0
    peers_n = sum(1 for s in SYSTEM_ORDER if SYSTEMS[s][1] == "peer")
    for scenario in scenarios:
        d = (durations or {}).get(scenario, duration_s)
        per = d + PER_RUN_OVERHEAD_S + (warmup_s + TRAFFIC_TAIL_S if SCENARIOS[scenario]["elephants"] else 0)
        total += per * len(patterns or [None]) * (len(systems) * runs + extra_rates * peers_n)
    return total
