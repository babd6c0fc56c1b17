#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-peers: ppstream beside GStreamer plain TCP and SRT, same lab, same
source, same measurement (the method is in docs/PEERS.md).

    pps-peers --scenario paper|idle|steps|all --duration 30 --out DIR

steps (the capacity-steps scenario): the bottleneck's capacity steps 8 -> 2 -> 0.8 -> 4 Mbit/s,
10 s each (the mahimahi trace is written into each run's folder from the same
steps, so every system meets the identical trace), 60-packet drop-tail, 50 ms
RTT, no cross traffic, noisy content (snow; --pattern to change).

Each system runs alone in a fresh lab (10 Mbit/s, 50 ms RTT, drop-tail queue
of 1 BDP, cubic; paper: 20 cubic iperf3 flows started 5 s before the stream;
ppstream-default keeps the server's default congestion control, bbr under its
tcp-friendly rate control, the other ppstream systems set cubic),
one after another. Every system streams ppstream's test source (videotestsrc
smpte, 640x480, 30 frames/s, pixel timecodes). Per run, the pictures the
receiver shows go to a y4m file; pps-peer-score reads their timecodes and
scores them against the regenerated source. Then DIR/results.json,
DIR/peers.md (the table) and DIR/peers-latency-cdf.png are rebuilt from every
scenario found in DIR, so `--scenario idle` and `--scenario paper` runs
complement each other.

Exit status: 0 done, 1 a run failed, 2 usage, 77 no root or /dev/net/tun or a
GStreamer element is missing.
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "netlab"))
sys.dont_write_bytecode = True
import netlab_lab  # noqa: E402  (the shared lab, process helpers and step traces; tools/netlab)
BUILD = os.path.normpath(os.path.join(HERE, "..", ".."))
NETLAB = os.environ.get("PPS_NETLAB", os.path.join(BUILD, "tools", "netlab", "pps-netlab"))
SERVER = os.environ.get("PPS_SERVER", os.path.join(BUILD, "server", "pps-server"))
CLIENT = os.environ.get("PPS_CLIENT", os.path.join(BUILD, "client", "pps-client"))
PEER_SEND = os.environ.get("PPS_PEER_SEND", os.path.join(HERE, "pps-peer-send"))
PEER_RECV = os.environ.get("PPS_PEER_RECV", os.path.join(HERE, "pps-peer-recv"))
PEER_SCORE = os.environ.get("PPS_PEER_SCORE", os.path.join(HERE, "pps-peer-score"))

SKIP = 77
PORT = 7400
FPS = 30
PERIOD_US = 1e6 / FPS
PATTERN = "smpte"
GST_ELEMENTS = ("x264enc", "h264parse", "mpegtsmux", "tsdemux", "avdec_h264", "tcpserversink", "tcpclientsrc", "srtsink", "srtsrc")
# Left out of the scores: the receiver's join (first keyframe) and the end,
# where a frame still in flight would count as never shown.
SKIP_START_S = 2.0
SKIP_END_S = 1.0
FROZEN_GAP_US = 100000  # a picture held longer than 3 frame periods is a freeze
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

# name -> (label, kind, settings). ppstream rows use the asap playout policy
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
    "gst-tcp": ("GStreamer TCP (x264 zerolatency)", "peer", {"transport": "tcp"}),
    "srt": ("SRT 120 ms (x264 zerolatency)", "peer", {"transport": "srt"}),
}
SYSTEM_ORDER = list(SYSTEMS)
SCENARIO_ORDER = ["idle", "paper", "steps"]


class Stop(Exception):
    pass


def log(msg):
    print(f"pps-peers: {msg}", file=sys.stderr, flush=True)


def on_signal(signum, frame):
    raise Stop(f"signal {signum}")


def check_permissions():
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


def now_us():
    return int(time.time() * 1e6)


class Lab(netlab_lab.Lab):
    """A fresh lab per run, always torn down (pps-netlab down), whatever happens:
    the shared netlab_lab.Lab, exiting 77 where not permitted."""

    def __init__(self, name, up_args, duration_s):
        super().__init__(NETLAB, name, up_args, duration_s)

    def __enter__(self):
        try:
            return super().__enter__()
        except netlab_lab.NotPermitted:
            raise SystemExit(SKIP) from None
        except netlab_lab.LabError as error:
            raise RuntimeError(f"pps-netlab up failed: {error}") from None

    def start(self, side, argv, stdout=subprocess.DEVNULL, stderr=None):
        return super().start(side, argv, stdout=stdout, stderr=stderr, text=True)

    def traffic(self, elephants, duration_s):
        subprocess.run([NETLAB, "traffic", self.name, "--elephants", str(elephants), "--congestion", "cubic", "--duration", str(int(duration_s))], check=True, capture_output=True, timeout=30)

    def save_state(self, dest):
        """Cross-traffic results (iperf3 JSON) live in the lab's state
        directory, which `down` removes."""
        sdir = os.path.join("/run/ppstream-netlab", self.name)
        if os.path.isdir(sdir):
            shutil.copytree(sdir, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock", "*.pid"))


def run_ppstream(lab, settings, rdir, duration_s, pattern=PATTERN):
    snd = lab.addr("snd")
    port_file = os.path.join(rdir, "server.port")
    server_err = open(os.path.join(rdir, "server.err"), "w")
    server = lab.start("snd", [SERVER, "--listen", f"{snd}:{PORT}", "--port-file", port_file, "--quiet", "--duration", str(int(duration_s + 30)), "--stats-json", os.path.join(rdir, "server.json"),
                               "--set", f"source.pattern={pattern}", "--set", f"source.fps={FPS}", "--set", f"transport.mode={settings['mode']}", "--set", "transport.minbuf_a=1", "--set", "transport.minbuf_b=3"]
                      + (["--set", "transport.congestion=" + settings["congestion"]] if settings.get("congestion") else []), stderr=server_err)
    if not netlab_lab.wait_file(port_file, server, 15):
        raise RuntimeError(f"pps-server not listening after 15 s (exit status {server.poll()})")
    start_us = now_us()
    client = lab.start("rcv", [CLIENT, f"{snd}:{PORT}", "--display", "none", "--quiet", "--duration", str(duration_s), "--log", os.path.join(rdir, "client.jsonl"), "--output", os.path.join(rdir, "shown.y4m")] + (["--policy", settings["policy"]] if settings["policy"] else []) + (["--set", "playout.tolerance_ms=%d" % settings["tolerance_ms"]] if settings.get("tolerance_ms") else []) + ["--set", "client.clock=shared"],
                       stderr=open(os.path.join(rdir, "client.err"), "w"))
    rc = client.wait(timeout=duration_s + 30)
    end_us = now_us()
    netlab_lab.stop(server, 10, signal.SIGINT)
    server_err.close()
    if rc != 0:
        raise RuntimeError(f"pps-client exited {rc}: {open(os.path.join(rdir, 'client.err')).read().strip()}")
    return start_us, end_us


def run_peer(lab, settings, rdir, duration_s, kbps, pattern=PATTERN):
    snd = lab.addr("snd")
    t = settings["transport"]
    ready = os.path.join(rdir, "sender.ready")
    sender = lab.start("snd", [PEER_SEND, "--sink", t, "--listen", f"{snd}:{PORT}", "--kbps", str(kbps), "--duration", str(int(duration_s + 30)), "--stats-json", os.path.join(rdir, "sender.json"), "--set", f"source.pattern={pattern}", "--set", f"source.fps={FPS}"],
                       stdout=open(ready, "w"), stderr=open(os.path.join(rdir, "sender.err"), "w"))
    if not netlab_lab.wait_file(ready, sender, 15):
        raise RuntimeError(f"sender not ready after 15 s (exit status {sender.poll()})")
    start_us = now_us()
    recv = lab.start("rcv", [PEER_RECV, "--source", t, "--connect", f"{snd}:{PORT}", "--duration", str(duration_s), "--fps", str(FPS), "--output", os.path.join(rdir, "shown.y4m"), "--frames", os.path.join(rdir, "frames.tsv"), "--stats-json", os.path.join(rdir, "receiver.json")],
                     stderr=open(os.path.join(rdir, "receiver.err"), "w"))
    rc = recv.wait(timeout=duration_s + 30)
    end_us = now_us()
    netlab_lab.stop(sender, 10, signal.SIGINT)
    if rc != 0:
        raise RuntimeError(f"pps-peer-recv exited {rc}: {open(os.path.join(rdir, 'receiver.err')).read().strip()}")
    return start_us, end_us


def score(rdir, pattern=PATTERN):
    with open(os.path.join(rdir, "scores.tsv"), "w") as out:
        r = subprocess.run([PEER_SCORE, "--pattern", pattern, os.path.join(rdir, "shown.y4m")], stdout=out, stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"pps-peer-score failed: {r.stderr.strip()}")
    return read_tsv(os.path.join(rdir, "scores.tsv"))


def read_tsv(path):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line]


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def display_times(kind, rdir, scores):
    """Time each shown picture appeared, in the y4m's order (CLOCK_REALTIME us).

    ppstream: the client's JSONL `frame` events with shown=true, matched to
    the picture by the capture time its timecode carries (the same value the
    server logged); peers: pps-peer-recv's receive time of the decoded picture.
    """
    if kind == "ppstream":
        shown = {}
        with open(os.path.join(rdir, "client.jsonl")) as f:
            for line in f:
                ev = json.loads(line)
                if ev.get("type") == "frame" and ev.get("shown"):
                    shown[ev["capture_us"]] = ev["display_us"]
        return [shown.get(int(s["capture_us"])) if s["timecode_ok"] == "1" else None for s in scores]
    frames = read_tsv(os.path.join(rdir, "frames.tsv"))
    return [int(f["recv_us"]) for f in frames[: len(scores)]]


def analyse(kind, rdir, start_us, end_us, scores, step_downs_us=()):
    times = display_times(kind, rdir, scores)
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
        new = ref not in shown_refs
        shown_refs.add(ref)
        lat_ms.append((t - cap) / 1000.0)
        if s["psnr_y"]:
            psnr.append(float(s["psnr_y"]))
            ssim.append(float(s["ssim_y"]))
        events.append((t, ref, new))
    # Freezes: gaps between consecutive new pictures (by display time) longer
    # than FROZEN_GAP_US count in full; a repeated or older picture is no change.
    frozen_us, last_new, newest = 0, None, -1
    gaps = []
    for t, ref, new in sorted(events):
        if ref <= newest:
            continue
        newest = ref
        if last_new is not None and t - last_new > FROZEN_GAP_US:
            frozen_us += t - last_new
        if last_new is not None:
            gaps.append((last_new, t - last_new))
        last_new = t

    def outside_steps(a, g):
        # The part of a freeze outside the 1 s after each step down (run_metrics' rule).
        return g - sum(max(0.0, min(a + g, d + 1e6) - max(a, d)) for d in step_downs_us)
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
        "frozen_pct": 100.0 * frozen_us / span_us if span_us else 100.0,
        "total_frozen_ms": frozen_us / 1000.0,
        "longest_freeze_ms": max((g for _, g in gaps), default=0) / 1000.0,
        "longest_freeze_outside_steps_ms": max((outside_steps(a, g) for a, g in gaps), default=0) / 1000.0,
        "latency_ms": {"p50": percentile(lat_ms, 50), "p95": percentile(lat_ms, 95), "p99": percentile(lat_ms, 99), "max": max(lat_ms) if lat_ms else None},
        "psnr_y_mean": sum(psnr) / len(psnr) if psnr else None,
        "ssim_y_mean": sum(ssim) / len(ssim) if ssim else None,
    }
    with open(os.path.join(rdir, "latency_ms.json"), "w") as f:
        json.dump(lat_ms, f)
    return result


def bits_per_second(kind, rdir):
    """ppstream: the client's summary (payload of the records received);
    peers: the bytes the receiver's source element delivered (MPEG-TS, i.e.
    TCP payload or SRT payload) over its run."""
    if kind == "ppstream":
        with open(os.path.join(rdir, "client.jsonl")) as f:
            for line in f:
                ev = json.loads(line)
                if ev.get("type") == "summary":
                    return ev["bits_per_second"]
        return None
    with open(os.path.join(rdir, "receiver.json")) as f:
        rx = json.load(f)
    return 8.0 * rx["bytes_received"] / rx["seconds"] if rx["seconds"] else None


def run_one(scenario, system, out, duration_s, warmup_s, kbps, keep_video, variant=None, pattern=None):
    label, kind, settings = SYSTEMS[system]
    rdir = os.path.join(out, scenario, variant or system)
    shutil.rmtree(rdir, ignore_errors=True)
    os.makedirs(rdir)
    sc = dict(SCENARIOS[scenario])
    pattern = pattern or sc.get("pattern", PATTERN)
    lead_s = None
    if sc.get("steps"):
        # The same steps, the same file, for every system (netlab_lab.step_trace_lines is deterministic).
        steps = netlab_lab.parse_steps(sc["steps"])
        lead_s = (warmup_s if sc["elephants"] else 0) + STEP_LEAD_S
        trace = netlab_lab.step_trace_write(os.path.join(rdir, "link.trace"), steps, lead_s)
        sc["up"] = sc["up"] + ["--trace", trace, "--rev-rate", "%gmbit" % (max(r for r, _ in steps) / 1e6)]
    sc["up"] = sc["up"] + ["--stats", os.path.join(rdir, "linkem.json")]
    name = f"peers{os.getpid() % 10000}"
    lab_bound_s = warmup_s + duration_s + 90
    log(f"{scenario}: {system} ({label}){'' if kind == 'ppstream' else f' at {kbps} kbit/s'}")
    with Lab(name, sc["up"], lab_bound_s) as lab:
        with open(os.path.join(rdir, "lab.json"), "w") as f:
            json.dump(lab.info, f, indent=2)
        if sc["elephants"]:
            lab.traffic(sc["elephants"], warmup_s + duration_s + 20)
            time.sleep(warmup_s)  # let the flows fill the queue first
        if kind == "ppstream":
            start_us, end_us = run_ppstream(lab, settings, rdir, duration_s, pattern)
        else:
            start_us, end_us = run_peer(lab, settings, rdir, duration_s, kbps, pattern)
        lab.save_state(os.path.join(rdir, "lab-state"))
    with open(os.path.join(rdir, "netlab-down.txt"), "w") as f:
        f.write(lab.down_output or "")
    score(rdir, pattern)
    run = {"scenario": scenario, "system": system, "variant": variant or system, "kind": kind, "settings": settings, "peer_kbps": kbps if kind == "peer" else None, "duration_s": duration_s, "start_us": start_us, "end_us": end_us,
           "pattern": pattern, "steps": sc.get("steps"), "trace_lead_s": lead_s}
    with open(os.path.join(rdir, "run.json"), "w") as f:
        json.dump(run, f, indent=2)
    result = result_of(rdir)
    if not keep_video:
        os.unlink(os.path.join(rdir, "shown.y4m"))
    lat = result["latency_ms"]
    log(f"  p50 {fmt(lat['p50'])} p95 {fmt(lat['p95'])} ms, shown {result['frames_shown_pct']:.1f}%, frozen {result['frozen_pct']:.1f}%, PSNR {fmt(result['psnr_y_mean'], 2)} dB, {fmt((result['bits_per_second'] or 0) / 1e6, 2)} Mbit/s")
    return result


def result_of(rdir):
    """Everything in the table, recomputed from a run's files (run.json,
    scores.tsv, the receiver's logs), so a change of method applies to old
    runs through --report-only."""
    with open(os.path.join(rdir, "run.json")) as f:
        run = json.load(f)
    result = analyse(run["kind"], rdir, run["start_us"], run["end_us"], read_tsv(os.path.join(rdir, "scores.tsv")), run_step_downs(rdir, run))
    result.update(run)
    result["label"] = SYSTEMS[run["system"]][0]
    result["bits_per_second"] = bits_per_second(run["kind"], rdir)
    with open(os.path.join(rdir, "result.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result


def run_capacity(rdir, run):
    """A steps run's capacity over [start, end] (CLOCK_REALTIME us), from pps-linkem's epoch."""
    epoch = netlab_lab.linkem_epoch_realtime_us(os.path.join(rdir, "linkem.json"))
    if not run.get("steps") or epoch is None:
        return None, ()
    steps = netlab_lab.parse_steps(run["steps"])
    lead = run.get("trace_lead_s") or 0.0
    return (netlab_lab.capacity_series(steps, lead, epoch, run["start_us"], run["end_us"]),
            netlab_lab.step_downs(steps, lead, epoch, run["start_us"], run["end_us"]))


def run_step_downs(rdir, run):
    return run_capacity(rdir, run)[1]


def fmt(v, digits=0):
    return "–" if v is None else f"{v:.{digits}f}"


def collect(out):
    results = []
    for scenario in SCENARIO_ORDER:
        sdir = os.path.join(out, scenario)
        found = []
        for variant in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
            rdir = os.path.join(sdir, variant)
            if os.path.exists(os.path.join(rdir, "run.json")) and os.path.exists(os.path.join(rdir, "scores.tsv")):
                found.append(result_of(rdir))
        found.sort(key=lambda r: (SYSTEM_ORDER.index(r["system"]), r.get("peer_kbps") or 0))
        results += found
    return results


def write_table(out, results):
    lines = [
        "| scenario | system | latency p50 / p95 / p99 (ms) | frames shown | frozen | longest freeze (outside steps) ms | PSNR-Y (dB) | SSIM-Y | Mbit/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lat = r["latency_ms"]
        rate = f"{r['bits_per_second'] / 1e6:.2f}" if r["bits_per_second"] else "–"
        if r["kind"] == "peer":
            rate += f" (x264 {r['peer_kbps']} kbit/s)"
        lines.append(
            f"| {r['scenario']} | {r['label']} | {fmt(lat['p50'])} / {fmt(lat['p95'])} / {fmt(lat['p99'])} | {r['frames_shown_pct']:.1f}% | {r['frozen_pct']:.1f}% | "
            f"{fmt(r.get('longest_freeze_ms'))}" + (f" ({fmt(r.get('longest_freeze_outside_steps_ms'))})" if r.get("steps") else "") +
            f" | {fmt(r['psnr_y_mean'], 2)} | {fmt(r['ssim_y_mean'], 3)} | {rate} |"
        )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write(text)
    return text


def plot(out, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = [s for s in SCENARIO_ORDER if any(r["scenario"] == s for r in results)]
    fig, axes = plt.subplots(1, len(scenarios), figsize=(6.5 * len(scenarios), 4.5), squeeze=False)
    styles = {"ppstream-minbuf": ("C0", "-"), "ppstream-tcp": ("C1", "-"), "ppstream-minbuf-fixed": ("C0", ":"), "ppstream-default": ("C4", "-"), "gst-tcp": ("C3", "--"), "srt": ("C2", "--")}
    for ax, scenario in zip(axes[0], scenarios):
        for r in results:
            if r["scenario"] != scenario:
                continue
            with open(os.path.join(out, scenario, r.get("variant", r["system"]), "latency_ms.json")) as f:
                lat = sorted(json.load(f))
            if not lat:
                continue
            # The CDF over frames expected: frames never shown keep it below 1.
            n = max(r["frames_expected"], len(lat))
            color, style = styles.get(r["system"], ("k", "-"))
            label = r["label"] + (f", {r['peer_kbps']} kbit/s" if r["kind"] == "peer" else "")
            if r.get("variant", r["system"]) != r["system"]:
                style = ":"
            ax.step(lat, [(i + 1) / n for i in range(len(lat))], where="post", color=color, linestyle=style, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("glass-to-glass latency (ms, log scale)")
        ax.set_ylabel("fraction of frames captured")
        title = {"paper": "paper: 10 Mbit/s, 50 ms RTT, 20 cubic flows, drop-tail 1 BDP", "idle": "idle: 10 Mbit/s, 50 ms RTT, no cross traffic",
                 "steps": "steps: 8/2/0.8/4 Mbit/s x 10 s, 60-pkt drop-tail, 50 ms RTT"}[scenario]
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "peers-latency-cdf.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    if any(r["scenario"] == "steps" for r in results):
        steps_timeline(out, [r for r in results if r["scenario"] == "steps"], styles, plt)
    return path


def steps_timeline(out, results, styles, plt):
    """Glass-to-glass latency of every system over the run, beside the link's
    capacity, on the steps scenario (the same trace for all)."""
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    cap_drawn = False
    for r in results:
        rdir = os.path.join(out, "steps", r.get("variant", r["system"]))
        with open(os.path.join(rdir, "run.json")) as f:
            run = json.load(f)
        scores = read_tsv(os.path.join(rdir, "scores.tsv"))
        times = display_times(r["kind"], rdir, scores)
        t0 = run["start_us"]
        pts = sorted((int(s["capture_us"]), t) for s, t in zip(scores, times) if s["timecode_ok"] == "1" and t is not None)
        color, style = styles.get(r["system"], ("k", "-"))
        a1.plot([(c - t0) / 1e6 for c, _ in pts], [(t - c) / 1e3 for c, t in pts], ".", ms=2, color=color,
                label=r["label"] + (f", {r['peer_kbps']} kbit/s" if r["kind"] == "peer" else ""))
        cap, downs = run_capacity(rdir, run)
        if cap and not cap_drawn:
            xs = [(t - t0) / 1e6 for t, _ in cap] + [(run["end_us"] - t0) / 1e6]
            ys = [b / 1e6 for _, b in cap]
            a2.step(xs, ys + ys[-1:], where="post", color="black")
            for d in downs:
                a1.axvline((d - t0) / 1e6, color="grey", ls=":", lw=0.8)
            cap_drawn = True
    a1.set_yscale("log")
    a1.set_ylabel("glass-to-glass latency (ms)")
    a1.axhline(400, color="grey", ls="--", lw=0.8)
    a1.grid(alpha=0.3, which="both")
    a1.legend(fontsize=7, markerscale=4)
    a2.set_ylabel("link Mbit/s")
    a2.set_xlabel("capture time since the receiver started (s)")
    a2.grid(alpha=0.3)
    fig.suptitle("steps: each system alone on the same capacity trace (60-pkt drop-tail, 50 ms RTT)", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "peers-steps-timeline.png"), dpi=100)
    plt.close(fig)


def report(out):
    results = collect(out)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"results": results, "machine": dict(zip(("sysname", "nodename", "release", "version", "machine"), os.uname())), "written": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, f, indent=2)
    table = write_table(out, results)
    if results:
        plot(out, results)
    return table


def main():
    ap = argparse.ArgumentParser(prog="pps-peers", description="ppstream vs GStreamer TCP vs SRT in the network lab (docs/PEERS.md)")
    ap.add_argument("--scenario", default="all", choices=["paper", "idle", "steps", "all"], help="all = idle and paper (default); steps = capacity steps 8/2/0.8/4 Mbit/s")
    ap.add_argument("--pattern", help="source pattern for every system (default: smpte; snow in steps)")
    ap.add_argument("--steps", help="steps scenario: RATE_MBIT:SECONDS,... (default 8:10,2:10,0.8:10,4:10)")
    ap.add_argument("--duration", type=int, default=30, help="seconds per run (default 30)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--systems", default=",".join(SYSTEM_ORDER), help="comma-separated subset of " + ",".join(SYSTEM_ORDER))
    ap.add_argument("--peer-kbps", default="auto", help="x264 bitrate of the peers: N, or auto = what ppstream minbuf(1,3) averaged in the same scenario (default)")
    ap.add_argument("--extra-peer-kbps", type=int, action="append", default=[], help="run both peers again at this bitrate too (results in SYSTEM-Nk folders); repeatable; with --systems \"\" only these runs")
    ap.add_argument("--warmup", type=int, default=5, help="seconds of cross traffic before the stream starts (default 5)")
    ap.add_argument("--keep-video", action="store_true", help="keep the shown.y4m files (about 14 MB per second)")
    ap.add_argument("--report-only", action="store_true", help="rebuild results.json, the table and the plot from DIR")
    args = ap.parse_args()

    if args.report_only:
        sys.stdout.write(report(args.out))
        return 0
    systems = [s for s in args.systems.split(",") if s]
    if any(s not in SYSTEMS for s in systems) or args.duration < 5:
        ap.error("--systems: unknown name, or --duration under 5 s")
    if args.steps:
        try:
            netlab_lab.parse_steps(args.steps)
        except ValueError as error:
            ap.error(f"--steps: {error}")
        SCENARIOS["steps"]["steps"] = args.steps
    if args.peer_kbps != "auto" and not args.peer_kbps.isdigit():
        ap.error("--peer-kbps: N or auto")
    reason = check_permissions()
    if reason:
        print(f"SKIP: {reason}", flush=True)
        return SKIP
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    os.makedirs(args.out, exist_ok=True)
    # all = idle and paper, as in the first version; steps runs on its own (--scenario steps).
    scenarios = ["idle", "paper"] if args.scenario == "all" else [args.scenario]
    status = 0
    try:
        for scenario in scenarios:
            kbps = DEFAULT_PEER_KBPS if args.peer_kbps == "auto" else int(args.peer_kbps)
            # ppstream minbuf first: in auto mode its rate sets the peers'.
            for system in sorted(systems, key=lambda s: s != "ppstream-minbuf"):
                try:
                    r = run_one(scenario, system, args.out, args.duration, args.warmup, kbps, args.keep_video, pattern=args.pattern)
                except (RuntimeError, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                    log(f"{scenario}: {system} failed: {e}")
                    status = 1
                    continue
                if system == "ppstream-minbuf" and args.peer_kbps == "auto" and r["bits_per_second"]:
                    kbps = max(300, int(round(r["bits_per_second"] / 1000 / 50)) * 50)
            for extra in args.extra_peer_kbps:
                for system in (s for s in SYSTEM_ORDER if SYSTEMS[s][1] == "peer"):
                    try:
                        run_one(scenario, system, args.out, args.duration, args.warmup, extra, args.keep_video, f"{system}-{extra}k", pattern=args.pattern)
                    except (RuntimeError, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                        log(f"{scenario}: {system} at {extra} kbit/s failed: {e}")
                        status = 1
    except Stop as e:
        log(f"stopped ({e}); labs torn down")
        return 1
    sys.stdout.write(report(args.out))
    return status


if __name__ == "__main__":
    sys.exit(main())
