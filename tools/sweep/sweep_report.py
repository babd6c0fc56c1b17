# SPDX-License-Identifier: MIT
"""pps-sweep's measurements: one cell's analysis (from the client log, the
server's counters, iperf3's per-flow results and pps-linkem's per-packet log),
the sweep summary (summary.json, summary.csv, groups.csv), the plots, and the
Markdown report with the papers' published figures beside ours.

Metrics follow TOMCCAP 2008 section 7.1: the latency distribution counts
*entire* windows whose last byte arrived within a tolerance, over the windows
the sender transmitted; windows the sender dropped whole are reported apart
(Table III). Friendliness follows Time-lined TCP (004) section 6.2: F is the
stream's throughput over the mean of the competing TCP flows, S the largest
over the smallest throughput of all flows at the bottleneck.
"""
import bisect
import contextlib
import csv
import json
import math
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "netlab"))
import netlab_lab  # noqa: E402  (tools/netlab, copied beside pps-netlab in the build tree)
import run_metrics  # noqa: E402  (beside this module)
from run_metrics import PSNR_PATTERNS  # noqa: E402,F401  (pps-sweep asks this module)

TOLERANCES_MS = (100, 160, 200, 300, 400, 500, 1000)
CURVE_MS = list(range(0, 1501, 10))
SHARE_TOLERANCE_MS = {"drd-ecn": 300, "droptail": 500}
TRANSPORT_ORDER = ("tcp", "minbuf(1,0)", "minbuf(1,3)", "minbuf(2,0)")
AXES = ("transport", "window_frames", "flows", "rtt_ms", "rate_mbit", "queue", "congestion", "pattern", "trace", "server_set",
        "playout")
SCENARIO_AXES = ("window_frames", "flows", "rtt_ms", "rate_mbit", "queue", "congestion", "pattern", "trace", "server_set",
                 "playout")
LINUX_TCP_RTO_MIN_MS = 200.0

# TOMCCAP 2008, 10 Mbit/s, 50 ms RTT, drop-tail (section 7.2).
PAPER_TABLE_II = {  # throughput of the video flow, window 2 frames (the paper's units)
    20: {"tcp": (0.76, 0.11), "minbuf(1,0)": (0.60, 0.05), "minbuf(1,3)": (0.72, 0.04)},
    40: {"tcp": (0.56, 0.04), "minbuf(1,0)": (0.47, 0.04), "minbuf(1,3)": (0.54, 0.03)},
}
PAPER_TABLE_III = {  # % of windows dropped by the sender, 20 flows
    4: {"tcp": (45, 3), "minbuf(1,0)": (28, 2), "minbuf(1,3)": (27, 2)},
    2: {"tcp": (58, 5), "minbuf(1,0)": (37, 2), "minbuf(1,3)": (34, 3)},
}
PAPER_FIGURES = [
    # (window, flows, tolerance, {transport: percent}, the paper's words)
    (4, 20, 500, {"tcp": 40, "minbuf(1,0)": 80, "minbuf(1,3)": 80},
     "Fig. 8: 80% of windows arrive in less than 500 ms for MIN_BUF flows, only 40% for TCP (20 flows, window 4)"),
    (2, 20, 400, {"minbuf(1,0)": 80, "minbuf(1,3)": 80},
     "Fig. 9: with MIN_BUF, 80% arrive within 300-400 ms (20 flows, window 2)"),
]


# ---------------------------------------------------------------- small helpers


def mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


def sd(xs):
    xs = [x for x in xs if x is not None]
    return statistics.stdev(xs) if len(xs) > 1 else (0.0 if xs else None)


def percentile(sorted_xs, p):
    if not sorted_xs:
        return None
    k = (len(sorted_xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def within_pct(latencies, tolerance_ms):
    return 100.0 * sum(1 for x in latencies if x <= tolerance_ms) / len(latencies) if latencies else None


def fmt(v, spec=".1f", none="-"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


def read_json(path, default=None):
    with contextlib.suppress(OSError, ValueError):
        with open(path) as f:
            return json.load(f)
    return default


def scenario_of(cell):
    # Cells of sweeps older than the closed loop have no pattern/trace/server_set: "".
    return tuple(cell.get(a, "") for a in SCENARIO_AXES)


def extras_name(d):
    """The source/trace/server axes of a scenario, where set: ', steps, snow, server_set noadapt'."""
    out = ""
    for a in ("trace", "pattern"):
        if d.get(a):
            out += f", {d[a]}"
    if d.get("server_set"):
        out += f", server_set {d['server_set']}"
    if d.get("playout"):
        out += f", playout {d['playout']}"
    return out


def scenario_name(sc, short=False):
    d = dict(zip(SCENARIO_AXES, sc))
    link = f"trace {d['trace']}" if d.get("trace") else f"{d['rate_mbit']:g} Mbit/s"
    text = (f"window {d['window_frames']}, {d['flows']} flows, {link}, {d['rtt_ms']:g} ms, "
            f"{'DRD+ECN' if d['queue'] == 'drd-ecn' else 'drop-tail'}, {d['congestion']}{extras_name(dict(d, trace=''))}")
    if short:
        text = f"w{d['window_frames']} f{d['flows']} {d['queue']} {d['congestion']}{extras_name(d).replace(', ', ' ')}"
    return text


def scenario_tag(sc):
    d = dict(zip(SCENARIO_AXES, sc))
    extra = "".join(f"-{d[a]}" for a in ("trace", "pattern", "server_set", "playout") if d.get(a))
    return (f"w{d['window_frames']}-f{d['flows']}-{d['rate_mbit']:g}mbit-{d['rtt_ms']:g}ms-{d['queue']}-"
            f"{d['congestion']}{extra}").replace(".", "p")


def fmt_s(g):
    """Separation index of a group: mean over runs where every flow got something."""
    text = fmt(g.get("separation_index"), ".1f")
    starved = g.get("runs_with_starved_flow")
    if starved and text == "-":
        return f"\u221e ({starved}/{g['runs']} runs)"
    if starved:
        return text + f" (\u221e in {starved}/{g['runs']} runs)"
    return text


def transport_key(t):
    return TRANSPORT_ORDER.index(t) if t in TRANSPORT_ORDER else len(TRANSPORT_ORDER)


# ---------------------------------------------------------------- one cell


def read_client_log(path):
    windows, frames, summary = [], [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            kind = e.get("type")
            if kind == "window":
                windows.append(e)
            elif kind == "frame":
                frames.append(e)
            elif kind == "summary":
                summary = e
    if summary is None:
        raise ValueError(f"{path}: no summary event (client cut short?)")
    return windows, frames, summary


def read_linkem_fwd(path):
    """pps-linkem's per-packet log -> sorted fwd delivery times and sojourns (ns, monotonic), drops."""
    deliveries, sojourns, drops = [], [], []
    epoch = None
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                if epoch is None and "epoch_monotonic_ns=" in line:
                    epoch = int(line.split("epoch_monotonic_ns=")[1].split()[0])
                continue
            parts = line.split("\t")
            if len(parts) < 7 or parts[0] != "fwd":
                continue
            if parts[4] != "-":
                deliveries.append(int(parts[4]))
                sojourns.append(int(parts[5]))
            elif parts[1].startswith("drop"):
                drops.append(int(parts[2]))
    if epoch is None:
        raise ValueError(f"{path}: no epoch line")
    order = sorted(range(len(deliveries)), key=deliveries.__getitem__)
    return epoch, [deliveries[i] + epoch for i in order], [sojourns[i] for i in order], [d + epoch for d in drops]


def elephant_throughputs(path, t0_s, t1_s):
    """Per-flow throughput (bit/s) of the iperf3 elephants over [t0, t1] s from
    iperf3's start (1-s intervals wholly inside), or over the whole run."""
    data = read_json(path)
    if not data:
        return None
    per_stream = {}
    for interval in data.get("intervals", []):
        for s in interval.get("streams", []):
            if s["start"] >= t0_s - 0.5 and s["end"] <= t1_s + 0.5:
                b, secs = per_stream.get(s["socket"], (0, 0.0))
                per_stream[s["socket"]] = (b + s["bytes"], secs + s["seconds"])
    rates = [b * 8 / secs for b, secs in per_stream.values() if secs > 0]
    if not rates:
        rates = [s["receiver"]["bits_per_second"] for s in data.get("end", {}).get("streams", []) if "receiver" in s]
    return rates or None


def analyse_cell(celldir, cell, cfg, measured, keep_linkem_log=False):
    """Everything summary.json needs about one cell; writes windows.csv and frames.csv beside the raw logs."""
    windows, frames, summary = read_client_log(os.path.join(celldir, "client.jsonl"))
    server = read_json(os.path.join(celldir, "server.json"), {})
    lab = read_json(os.path.join(celldir, "lab.json"), {})
    linkem = read_json(os.path.join(celldir, "linkem.json"), {})
    times = measured["times"]
    fps = 30.0
    W = cell["window_frames"]
    window_wait_ms = W / fps * 1000.0
    prop_ms = lab.get("link", {}).get("fwd", {}).get("delay_ns", cell["rtt_ms"] / 2 * 1e6) / 1e6

    # Bottleneck queue seen by each window's last byte: the sojourn of the
    # forward packet delivered last before the client logged the window complete.
    queue_at = None
    linkem_log = os.path.join(celldir, "linkem.log")
    drops_fwd = None
    if os.path.exists(linkem_log):
        _, delivered, sojourn, drops = read_linkem_fwd(linkem_log)
        drops_fwd = len(drops)
        offset = times["realtime_minus_monotonic_ns"]

        def queue_at(complete_us):  # noqa: F811
            t = complete_us * 1000 - offset + 500_000  # + the TUN-to-socket path
            i = bisect.bisect_right(delivered, t) - 1
            return sojourn[i] / 1e6 if i >= 0 else None

    rows = []
    for w in windows:
        q = None
        if w["status"] != "dropped" and w.get("complete_us") and queue_at:
            q = queue_at(w["complete_us"])
        rows.append({"window": w["window"], "first_capture_us": w.get("first_capture_us") or "",
                     "complete_us": w.get("complete_us") or "", "latency_ms": "" if w.get("latency_ms") is None else w["latency_ms"],
                     "status": w["status"], "adus_sent": w.get("adus_sent", ""), "adus_total": w.get("adus_total", ""),
                     "bytes": w.get("bytes", 0), "queue_ms": "" if q is None else round(q, 3)})
    with open(os.path.join(celldir, "windows.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["window"])
        wr.writeheader()
        wr.writerows(rows)
    with open(os.path.join(celldir, "frames.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["frame", "window", "capture_us", "latency_ms", "temporal_layers", "quality_layers", "shown", "reason"])
        for e in frames:
            wr.writerow([e["frame"], e["window"], e["capture_us"], "" if e.get("latency_ms") is None else e["latency_ms"],
                         e.get("temporal_layers", 0), e.get("quality_layers", 0), int(bool(e.get("shown"))), e.get("reason", "")])
    if not keep_linkem_log and os.path.exists(linkem_log):
        os.unlink(linkem_log)

    transmitted = [r for r in rows if r["status"] != "dropped" and r["latency_ms"] != ""]
    lat = sorted(float(r["latency_ms"]) for r in transmitted)
    client_stats = (server.get("clients") or [{}])[0]
    sent_windows = sum(client_stats.get(k, 0) for k in ("windows_complete", "windows_partial", "windows_dropped", "windows_overflow"))
    sender_dropped = client_stats.get("windows_dropped", 0) + client_stats.get("windows_overflow", 0)
    seconds = server.get("seconds") or cfg["duration_s"]
    thr_bps = client_stats.get("adu_bytes_sent", 0) * 8 / seconds if seconds else None
    offered_bps = sum(server.get("layer_bytes", [])) * 8 / seconds if seconds else None

    def cpu(ru):
        if ru is None or math.isnan(ru.ru_utime):
            return None
        return ru.ru_utime + ru.ru_stime

    server_cpu_s = (server.get("cpu_user_s", 0) + server.get("cpu_system_s", 0)) if server else cpu(measured["server_rusage"])
    client_cpu_s = cpu(measured["client_rusage"])
    client_s = (times.get("client_end_unix", 0) - times.get("client_start_unix", 0)) or None

    # Friendliness (004 section 6.2) over the stream's lifetime.
    F = S = mean_elephant = None
    elephants = None
    if cell["flows"] > 0 and os.path.exists(os.path.join(celldir, "elephants.json")):
        t0 = times["client_start_unix"] - times["traffic_start_unix"]
        t1 = times["server_end_unix"] - times["traffic_start_unix"]
        elephants = elephant_throughputs(os.path.join(celldir, "elephants.json"), t0, t1)
        stream_bps = summary.get("bits_per_second") or thr_bps
        if elephants and stream_bps:
            mean_elephant = sum(elephants) / len(elephants)
            F = stream_bps / mean_elephant if mean_elephant else None
            everyone = elephants + [stream_bps]
            S = max(everyone) / min(everyone) if min(everyone) > 0 else None

    # Latency shares of the transmitted windows: window wait (W frames at
    # 30 frames/s), one-way propagation, bottleneck queue at the last byte
    # (pps-linkem), and the rest, which is the sender's: encoding, the
    # application's window queue, the socket buffer, waiting for cwnd, and
    # loss recovery (retransmissions and RTOs, counted by the server).
    shares = None
    with_q = [r for r in transmitted if r["queue_ms"] != ""]
    if with_q:
        def split(rs):
            if not rs:
                return None
            lat_m = mean(float(r["latency_ms"]) for r in rs)
            q_m = mean(float(r["queue_ms"]) for r in rs)
            return {"windows": len(rs), "latency_ms": lat_m, "window_wait_ms": window_wait_ms,
                    "propagation_ms": prop_ms, "bottleneck_queue_ms": q_m,
                    "sender_ms": lat_m - window_wait_ms - prop_ms - q_m}
        tol = SHARE_TOLERANCE_MS.get(cell["queue"], 300)
        shares = {"all": split(with_q), "late": split([r for r in with_q if float(r["latency_ms"]) > tol]),
                  "late_tolerance_ms": tol}
        # Loss recovery's part of the sender share, estimated from the server's
        # counters: a retransmission holds the rest of its window back about one
        # RTT, an RTO about RTO_min + RTT; spread over the transmitted windows.
        rtt_ms = 2 * prop_ms + (shares["all"]["bottleneck_queue_ms"] or 0)
        retrans = client_stats.get("retrans_pkts", 0)
        rto = client_stats.get("rto_events", 0)
        est = ((retrans - rto) * rtt_ms + rto * (LINUX_TCP_RTO_MIN_MS + rtt_ms)) / max(1, len(with_q))
        shares["loss_recovery_est_ms"] = min(est, max(0.0, shares["all"]["sender_ms"]))

    # Issue 10's per-run figures, computed from the client's frame events (not
    # its summary), the server's --log where it exists, the trace's steps.
    run_part, steps_info = issue10_metrics(celldir, cell, cfg, times, mean_elephant)

    shown = [f for f in frames if f.get("shown")]
    not_shown_reasons = {}
    for f in frames:
        if not f.get("shown"):
            not_shown_reasons[f.get("reason", "?")] = not_shown_reasons.get(f.get("reason", "?"), 0) + 1
    flat = {
        "windows_client": len(rows),
        "windows_transmitted": len(transmitted),
        "window_latency_p50_ms": percentile(lat, 50),
        "window_latency_p95_ms": percentile(lat, 95),
        "window_latency_mean_ms": mean(lat),
    }
    for t in TOLERANCES_MS:
        flat[f"within_{t}ms_pct"] = within_pct(lat, t)
    flat.update({
        "server_windows": sent_windows,
        "sender_dropped_windows": sender_dropped,
        "sender_dropped_pct": 100.0 * sender_dropped / sent_windows if sent_windows else None,
        "server_throughput_bps": thr_bps,
        "offered_bps": offered_bps,
        "client_goodput_bps": summary.get("bits_per_second"),
        "retrans_pkts": client_stats.get("retrans_pkts"),
        "rto_events": client_stats.get("rto_events"),
        "writes": client_stats.get("writes"),
        "wakeups": client_stats.get("wakeups"),
        "server_cpu_s": server_cpu_s,
        "server_cpu_pct": 100.0 * server_cpu_s / seconds if server_cpu_s is not None and seconds else None,
        "client_cpu_s": client_cpu_s,
        "client_cpu_pct": 100.0 * client_cpu_s / client_s if client_cpu_s is not None and client_s else None,
        "elephants_bps": elephants,
        "elephant_mean_bps": mean_elephant,
        "friendliness_ratio": F,
        "separation_index": S,
        "bottleneck_drops_fwd": drops_fwd,
        "bottleneck_marked_fwd": linkem.get("fwd", {}).get("marked_pkts"),
        "bottleneck_sojourn_p50_ms": (linkem.get("fwd", {}).get("sojourn_p50_ns") or 0) / 1e6 if linkem else None,
        "bottleneck_sojourn_p95_ms": (linkem.get("fwd", {}).get("sojourn_p95_ns") or 0) / 1e6 if linkem else None,
        "frames_shown": len(shown),
        "frames_not_shown_reasons": not_shown_reasons,
    })
    # Ours, from the frame events (run_metrics); the client's own summary stays in client_summary.
    flat.update(run_part)
    return {"metrics": flat, "client_summary": summary, "server": server, "shares": shares, "steps": steps_info,
            "client_exit": measured.get("client_exit"), "times": times, "server_set": measured.get("server_set"), "lab": {k: lab.get(k) for k in ("link", "rtt_ms", "ecn", "congestion", "sysctl")}}


def issue10_metrics(celldir, cell, cfg, times, mean_elephant):
    """The run_metrics figures of one cell (recomputed by `report`, so a change
    of method applies to old runs too) and its capacity steps."""
    steps_info = cell_steps(celldir, cell, cfg, times)
    run = run_metrics.run_metrics(os.path.join(celldir, "client.jsonl"), os.path.join(celldir, "server.jsonl"),
                                  steps_info["step_downs_us"] if steps_info else (), os.path.join(celldir, "scores.tsv"),
                                  mean_elephant)
    return {
        "frames_shown_pct": run["frames_shown_pct"],
        "frame_latency_p50_ms": run["frame_latency_p50_ms"],
        "frame_latency_p95_ms": run["frame_latency_p95_ms"],
        "frame_latency_p99_ms": run["frame_latency_p99_ms"],
        "frames_expected": run["frames_expected"],
        "longest_freeze_ms": run["longest_freeze_ms"],
        "longest_freeze_outside_steps_ms": run["longest_freeze_outside_steps_ms"],
        "total_frozen_ms": run["total_frozen_ms"],
        "freezes_over_500ms": run["freezes_over_500ms"],
        "freezes_over_500ms_after_step": run["freezes_over_500ms_after_step"],
        "received_bps": run["received_bps"],
        "throughput_share": run["throughput_share"],
        "psnr_y_mean": run.get("psnr_y_mean"),
        "ssim_y_mean": run.get("ssim_y_mean"),
        "server_log": run.get("server_log"),
        "estimate_bps_mean": first_client(run, "estimate_bps_mean"),
        "queue_delay_ms_mean": first_client(run, "queue_delay_ms_mean"),
        "encoded_layer_bps_mean": run.get("encoded_layer_bps_mean"),
    }, steps_info


def first_client(run, key):
    clients = run.get("clients") or {}
    return clients[sorted(clients)[0]].get(key) if clients else None


def cell_steps(celldir, cell, cfg, times):
    """A trace cell's capacity steps on CLOCK_REALTIME (pps-linkem's epoch from
    its stats file): the capacity series and the step-down instants. None otherwise."""
    if not cell.get("trace") or cell["trace"] not in cfg.get("traces", {}):
        return None
    epoch_us = netlab_lab.linkem_epoch_realtime_us(os.path.join(celldir, "linkem.json"))
    if epoch_us is None:
        return None
    steps = netlab_lab.parse_steps(cfg["traces"][cell["trace"]]["steps"])
    lead = times.get("trace_lead_s", 0.0)
    t_from = times.get("client_start_unix", epoch_us / 1e6) * 1e6
    t_to = times.get("client_end_unix", t_from / 1e6 + cfg["duration_s"]) * 1e6
    return {"steps": cfg["traces"][cell["trace"]]["steps"], "lead_s": lead, "epoch_realtime_us": epoch_us,
            "stream_start_after_epoch_s": (times.get("server_start_unix", 0) * 1e6 - epoch_us) / 1e6,
            "capacity": netlab_lab.capacity_series(steps, lead, epoch_us, t_from, t_to),
            "step_downs_us": netlab_lab.step_downs(steps, lead, epoch_us, t_from, t_to)}


def cell_line(record):
    c, m = record["cell"], record["metrics"]
    return (f"{c['id']}: {m['windows_transmitted']} windows, within 300/500 ms {fmt(m['within_300ms_pct'])}/"
            f"{fmt(m['within_500ms_pct'])}%, p95 {fmt(m['window_latency_p95_ms'], '.0f')} ms, sender-dropped "
            f"{fmt(m['sender_dropped_pct'])}%, {fmt((m['server_throughput_bps'] or 0) / 1e6, '.2f')} Mbit/s, "
            f"F {fmt(m['friendliness_ratio'], '.2f')}, retrans {m['retrans_pkts']}, RTOs {m['rto_events']}; "
            f"frames shown {fmt(m.get('frames_shown_pct'))}%, frame p50/p95/p99 {fmt(m.get('frame_latency_p50_ms'), '.0f')}/"
            f"{fmt(m.get('frame_latency_p95_ms'), '.0f')}/{fmt(m.get('frame_latency_p99_ms'), '.0f')} ms, longest freeze "
            f"{fmt(m.get('longest_freeze_ms'), '.0f')} ms, frozen {fmt((m.get('total_frozen_ms') or 0) / 1e3, '.1f')} s")


# ---------------------------------------------------------------- the sweep


def load_cells(out):
    with open(os.path.join(out, "plan.json")) as f:
        plan = json.load(f)
    records = []
    for c in plan["cells"]:
        r = read_json(os.path.join(out, "cells", c["id"], "cell.json"))
        if r and r.get("status") == "ok":
            records.append(r)
    return plan, records


def window_latencies(out, cid):
    lat = []
    with open(os.path.join(out, "cells", cid, "windows.csv")) as f:
        for r in csv.DictReader(f):
            if r["status"] != "dropped" and r["latency_ms"] != "":
                lat.append(float(r["latency_ms"]))
    return lat


def frame_latencies(out, cid):
    lat = []
    with open(os.path.join(out, "cells", cid, "frames.csv")) as f:
        for r in csv.DictReader(f):
            if r["shown"] == "1" and r["latency_ms"] != "":
                lat.append(float(r["latency_ms"]))
    return lat


def aggregate(out, records):
    """One group per matrix point (all axes but the repetition): pooled windows, means over repetitions."""
    groups = {}
    for r in records:
        key = tuple(r["cell"].get(a, "") for a in AXES)
        groups.setdefault(key, []).append(r)
    tcp_thr, tcp_goodput = {}, {}
    for key, rs in groups.items():
        if key[0] == "tcp":
            tcp_thr[key[1:]] = mean(r["metrics"]["server_throughput_bps"] for r in rs)
            tcp_goodput[key[1:]] = mean(r["metrics"]["client_goodput_bps"] for r in rs)
    result = []
    for key, rs in groups.items():
        g = dict(zip(AXES, key))
        g["runs"] = len(rs)
        lat = sorted(x for r in rs for x in window_latencies(out, r["cell"]["id"]))
        g["windows_transmitted"] = len(lat)
        for t in TOLERANCES_MS:
            g[f"within_{t}ms_pct"] = within_pct(lat, t)
        g["curve_pct"] = [within_pct(lat, t) for t in CURVE_MS]
        g["window_latency_p50_ms"] = percentile(lat, 50)
        g["window_latency_p95_ms"] = percentile(lat, 95)
        for name in ("sender_dropped_pct", "server_throughput_bps", "client_goodput_bps", "offered_bps", "frames_shown_pct",
                     "frame_latency_p50_ms", "frame_latency_p95_ms", "friendliness_ratio", "separation_index",
                     "server_cpu_pct", "client_cpu_pct", "elephant_mean_bps", "bottleneck_sojourn_p50_ms", "bottleneck_sojourn_p95_ms",
                     "frame_latency_p99_ms", "longest_freeze_ms", "longest_freeze_outside_steps_ms", "total_frozen_ms",
                     "received_bps", "throughput_share", "psnr_y_mean"):
            vals = [r["metrics"].get(name) for r in rs]
            g[name] = mean(vals)
            g[name + "_sd"] = sd([v for v in vals if v is not None])
        g["retrans_pkts"] = sum(r["metrics"]["retrans_pkts"] or 0 for r in rs)
        g["rto_events"] = sum(r["metrics"]["rto_events"] or 0 for r in rs)
        # Two ratios to tcp: of the ADU bytes the server wrote (the paper's
        # sender throughput) and of the bytes the client received (the
        # stream's share of the bottleneck, what friendliness is about).
        base = tcp_thr.get(key[1:])
        g["sent_vs_tcp"] = g["server_throughput_bps"] / base if base and g["server_throughput_bps"] is not None else None
        base = tcp_goodput.get(key[1:])
        g["throughput_vs_tcp"] = g["client_goodput_bps"] / base if base and g["client_goodput_bps"] is not None else None
        # A flow that got nothing makes S infinite (004 section 6.2's max/min):
        # count those runs instead of averaging them away.
        g["runs_with_starved_flow"] = sum(1 for r in rs if any(b <= 0 for b in (r["metrics"].get("elephants_bps") or [])))
        shares = [r["shares"] for r in rs if r.get("shares")]
        g["shares"] = None
        if shares:
            def pooled(part):
                items = [s[part] for s in shares if s.get(part)]
                if not items:
                    return None
                n = sum(i["windows"] for i in items)
                return {k: (sum(i[k] * i["windows"] for i in items) / n if k != "windows" else n) for k in items[0]}
            g["shares"] = {"all": pooled("all"), "late": pooled("late"), "late_tolerance_ms": shares[0]["late_tolerance_ms"],
                           "loss_recovery_est_ms": mean(s["loss_recovery_est_ms"] for s in shares)}
        g["cells"] = [r["cell"]["id"] for r in rs]
        result.append(g)
    result.sort(key=lambda g: (scenario_of(g), transport_key(g["transport"])))
    return result


CSV_SKIP = ("elephants_bps", "frames_not_shown_reasons", "encoded_layer_bps_mean")


def write_tables(out, records, groups):
    cells = []
    for r in records:
        row = dict(r["cell"])
        row.update({k: v for k, v in r["metrics"].items() if k not in CSV_SKIP})
        cells.append(row)
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        if cells:
            w = csv.DictWriter(f, fieldnames=list(cells[0]))
            w.writeheader()
            w.writerows(cells)
    gkeys = [k for k in (groups[0] if groups else {}) if k not in ("curve_pct", "shares", "cells")]
    with open(os.path.join(out, "groups.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=gkeys, extrasaction="ignore")
        w.writeheader()
        w.writerows(groups)


# ---------------------------------------------------------------- plots


def plots(out, plan, records, groups):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = {}
    scenarios = sorted({scenario_of(g) for g in groups})
    colors = {"tcp": "tab:red", "minbuf(1,0)": "tab:blue", "minbuf(1,3)": "tab:green", "minbuf(2,0)": "tab:purple"}

    # Figs. 8-9: % of transmitted windows within each tolerance, one line per transport.
    for sc in scenarios:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for g in (g for g in groups if scenario_of(g) == sc):
            ax.plot(CURVE_MS, g["curve_pct"], label=f"{g['transport']} ({g['runs']} runs)", color=colors.get(g["transport"]))
        d = dict(zip(SCENARIO_AXES, sc))
        for (pw, pf, ptol, pvals, _) in PAPER_FIGURES:
            if d["window_frames"] == pw and d["flows"] == pf and d["queue"] == "droptail" and d["rate_mbit"] == 10 and d["rtt_ms"] == 50:
                for t, v in pvals.items():
                    # Fig. 9's text gives a range, 300-400 ms, for its 80%.
                    xs = [300, 400] if pw == 2 else [ptol]
                    ax.plot(xs, [v] * len(xs), marker="x", ms=9, color=colors.get(t), ls="-", lw=2.5, alpha=0.8)
                ax.plot([], [], marker="x", color="grey", ls="none", label="paper (TOMCCAP Fig. %d)" % (8 if pw == 4 else 9))
        ax.set_xlabel("latency tolerance (ms)")
        ax.set_ylabel("% of transmitted windows in time")
        ax.set_xlim(0, 1500)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(scenario_name(sc), fontsize=9)
        fig.tight_layout()
        name = f"tolerance-{scenario_tag(sc)}.png"
        fig.savefig(os.path.join(pdir, name), dpi=100)
        plt.close(fig)
        made.setdefault("tolerance", []).append((sc, name))

    # Table II / Table III as bars: throughput normalized to tcp, sender-dropped windows.
    for what, key, ylabel, fname in (("throughput", "throughput_vs_tcp", "stream throughput (received) / tcp's", "throughput.png"),
                                     ("dropped", "sender_dropped_pct", "windows dropped by the sender (%)", "dropped.png")):
        transports = sorted({g["transport"] for g in groups}, key=transport_key)
        fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(scenarios) + 2), 4.2))
        width = 0.8 / max(1, len(transports))
        paper_labelled = False
        for i, t in enumerate(transports):
            xs, ys, es = [], [], []
            for j, sc in enumerate(scenarios):
                g = next((g for g in groups if scenario_of(g) == sc and g["transport"] == t), None)
                if g and g[key] is not None:
                    xs.append(j + (i - (len(transports) - 1) / 2) * width)
                    ys.append(g[key])
                    es.append(g.get(key + "_sd") or 0 if key == "sender_dropped_pct" else 0)
            ax.bar(xs, ys, width, yerr=es if any(es) else None, label=t, color=colors.get(t))
            # The paper's value for the same setting, where it published one.
            for j, sc in enumerate(scenarios):
                d = dict(zip(SCENARIO_AXES, sc))
                if d["queue"] != "droptail" or d["rate_mbit"] != 10 or d["rtt_ms"] != 50:
                    continue
                paper = None
                if key == "throughput_vs_tcp" and d["window_frames"] == 2 and t in PAPER_TABLE_II.get(d["flows"], {}):
                    paper = PAPER_TABLE_II[d["flows"]][t][0] / PAPER_TABLE_II[d["flows"]]["tcp"][0]
                if key == "sender_dropped_pct" and d["flows"] == 20 and t in PAPER_TABLE_III.get(d["window_frames"], {}):
                    paper = PAPER_TABLE_III[d["window_frames"]][t][0]
                if paper is not None:
                    ax.plot([j + (i - (len(transports) - 1) / 2) * width], [paper], marker="_", ms=18, mew=2.5, color="black",
                            label="paper" if not paper_labelled else None)
                    paper_labelled = True
        if key == "throughput_vs_tcp":
            ax.axhline(0.9, color="grey", ls="--", lw=0.8)
        else:
            ax.axhline(10, color="grey", ls="--", lw=0.8)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([scenario_name(sc, short=True).replace(" ", "\n", 2) for sc in scenarios], fontsize=7)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, fname), dpi=100)
        plt.close(fig)
        made[what] = fname

    # Frame latency CDF (frames shown), one figure per scenario.
    for sc in scenarios:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for g in (g for g in groups if scenario_of(g) == sc):
            lat = sorted(x for cid in g["cells"] for x in frame_latencies(out, cid))
            if lat:
                ax.plot(lat, [100.0 * (i + 1) / len(lat) for i in range(len(lat))], label=g["transport"], color=colors.get(g["transport"]))
        ax.set_xlabel("frame latency, capture to display (ms)")
        ax.set_ylabel("% of frames shown")
        ax.set_xlim(0, 1500)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(scenario_name(sc) + f" (playout {plan['config']['playout']})", fontsize=9)
        fig.tight_layout()
        name = f"frame-cdf-{scenario_tag(sc)}.png"
        fig.savefig(os.path.join(pdir, name), dpi=100)
        plt.close(fig)
        made.setdefault("frame_cdf", []).append((sc, name))

    # The chosen cell: window latency and layers shown over time.
    chosen = choose_timeline(plan, records)
    if chosen:
        cid = chosen["cell"]["id"]
        wins, frs = [], []
        with open(os.path.join(out, "cells", cid, "windows.csv")) as f:
            wins = list(csv.DictReader(f))
        with open(os.path.join(out, "cells", cid, "frames.csv")) as f:
            frs = list(csv.DictReader(f))
        caps = [int(w["first_capture_us"]) for w in wins if w["first_capture_us"]]
        t0 = min(caps) if caps else 0
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
        ok = [w for w in wins if w["status"] != "dropped" and w["latency_ms"] != "" and w["first_capture_us"]]
        a1.plot([(int(w["first_capture_us"]) - t0) / 1e6 for w in ok], [float(w["latency_ms"]) for w in ok], ".", ms=3, label="window latency")
        q = [w for w in ok if w["queue_ms"] != ""]
        if q:
            a1.plot([(int(w["first_capture_us"]) - t0) / 1e6 for w in q], [float(w["queue_ms"]) for w in q], ".", ms=2, color="tab:orange", label="bottleneck queue at its last byte")
        dropped = [w for w in wins if w["status"] == "dropped" and w["first_capture_us"]]
        a1.plot([(int(w["first_capture_us"]) - t0) / 1e6 for w in dropped], [0] * len(dropped), "|", color="tab:red", ms=8, label="dropped by the sender")
        tol = SHARE_TOLERANCE_MS.get(chosen["cell"]["queue"], 300)
        a1.axhline(tol, color="grey", ls="--", lw=0.8)
        a1.set_ylabel("ms")
        a1.legend(fontsize=7, loc="upper right")
        a1.grid(alpha=0.3)
        # Per window: the frames shown (of W) and the most quality layers among them.
        per_window = {}
        for f in frs:
            pw = per_window.setdefault(int(f["window"]), {"t": int(f["capture_us"]), "shown": 0, "q": 0})
            pw["t"] = min(pw["t"], int(f["capture_us"]))
            if f["shown"] == "1":
                pw["shown"] += 1
                pw["q"] = max(pw["q"], int(f["quality_layers"]))
        ws = sorted(per_window.values(), key=lambda v: v["t"])
        wx = [(v["t"] - t0) / 1e6 for v in ws]
        a2.step(wx, [v["shown"] for v in ws], where="post", lw=0.9, label="frames shown of the window")
        a2.step(wx, [v["q"] + 0.08 for v in ws], where="post", lw=0.9, label="quality layers shown (max)")
        a2.set_ylabel("per window")
        a2.set_xlabel("capture time (s)")
        a2.legend(fontsize=7, loc="upper right")
        a2.grid(alpha=0.3)
        fig.suptitle(f"{chosen['cell']['transport']}, " + scenario_name(scenario_of(chosen["cell"])) + f", run {chosen['cell']['rep']}", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, "timeline.png"), dpi=100)
        plt.close(fig)
        made["timeline"] = "timeline.png"
        made["timeline_cell"] = cid
    return made


def run_plots(out, plan, records):
    """Each cell's over-time plot, cells/ID/timeline.png (run_metrics.plot_timeline)."""
    made = {}
    for r in records:
        cid = r["cell"]["id"]
        celldir = os.path.join(out, "cells", cid)
        steps = r.get("steps") or {}
        title = f"{cid}: {r['cell']['transport']}, " + scenario_name(scenario_of(r["cell"]))
        with contextlib.suppress(OSError, ValueError, KeyError):
            png = run_metrics.plot_timeline(os.path.join(celldir, "timeline.png"), title, os.path.join(celldir, "client.jsonl"),
                                            os.path.join(celldir, "server.jsonl"), steps.get("capacity"), steps.get("step_downs_us", ()))
            if png:
                made[cid] = os.path.relpath(png, out)
    return made


def choose_timeline(plan, records):
    if not records:
        return None
    want = {}
    for word in (plan["config"].get("timeline") or "").split():
        if "=" in word:
            k, v = word.split("=", 1)
            want[k] = v
    for r in sorted(records, key=lambda r: r["cell"]["id"]):
        if all(str(r["cell"].get(k)) == v for k, v in want.items()):
            return r
    return records[0]


# ---------------------------------------------------------------- report


def find_group(groups, **kw):
    for g in groups:
        if all(g.get(k) == v for k, v in kw.items()):
            return g
    return None


def targets(groups):
    """Issue 7's targets on the paper scenario (10 Mbit/s, 50 ms, 20 flows, window 2, cubic)."""
    base = dict(window_frames=2, flows=20, rtt_ms=50, rate_mbit=10, congestion="cubic")
    rows = []

    def verdict(value, ok):
        if value is None:
            return "not measured"
        return "met" if ok else "**missed**"

    for queue in ("drd-ecn", "droptail"):
        m13 = find_group(groups, transport="minbuf(1,3)", queue=queue, **base)
        tcp = find_group(groups, transport="tcp", queue=queue, **base)
        label = "DRD+ECN" if queue == "drd-ecn" else "drop-tail 1 BDP"
        if queue == "drd-ecn":
            v = m13 and m13["within_300ms_pct"]
            rows.append((label, "minbuf(1,3) windows within 300 ms", ">= 95%", fmt(v) + "%" if v is not None else "-", verdict(v, v is not None and v >= 95), queue, 300))
        else:
            v = m13 and m13["within_500ms_pct"]
            rows.append((label, "minbuf(1,3) windows within 500 ms", ">= 80%", fmt(v) + "%" if v is not None else "-", verdict(v, v is not None and v >= 80), queue, 500))
            a, b = (m13 and m13["within_300ms_pct"]), (tcp and tcp["within_300ms_pct"])
            ratio = (a / b if b else math.inf) if a is not None and b is not None else None
            rows.append((label, "within 300 ms, minbuf(1,3) / tcp", ">= 2x", f"{fmt(a)}% / {fmt(b)}% = {fmt(ratio, '.2f')}x" if ratio is not None else "-",
                         verdict(ratio, ratio is not None and ratio >= 2), queue, 300))
        v = m13 and m13["sender_dropped_pct"]
        rows.append((label, "minbuf(1,3) sender-dropped windows", "<= 10% (paper 34%)", fmt(v) + "%" if v is not None else "-", verdict(v, v is not None and v <= 10), queue, None))
        v = m13 and m13["throughput_vs_tcp"]
        v2 = m13 and m13["sent_vs_tcp"]
        rows.append((label, "minbuf(1,3) throughput / tcp's (received; ADU bytes sent in brackets)", ">= 0.9",
                     f"{fmt(v, '.2f')} ({fmt(v2, '.2f')})" if v is not None else "-", verdict(v, v is not None and v >= 0.9), queue, None))
    return rows


def shares_table(g):
    s = g.get("shares")
    if not s or not s.get("all"):
        return []
    lines = []
    for part, title in (("all", "all transmitted windows"), ("late", f"windows later than {s['late_tolerance_ms']} ms")):
        p = s.get(part)
        if not p:
            lines.append(f"| {g['transport']} | {title} | 0 | - | - | - | - | - | - |")
            continue
        loss = s["loss_recovery_est_ms"] if part == "all" else None
        sender_q = p["sender_ms"] - loss if loss is not None else None
        lines.append(f"| {g['transport']} | {title} | {p['windows']} | {fmt(p['latency_ms'], '.0f')} | {fmt(p['window_wait_ms'], '.0f')} | "
                     f"{fmt(p['propagation_ms'], '.0f')} | {fmt(p['bottleneck_queue_ms'], '.0f')} | {fmt(p['sender_ms'], '.0f')} | "
                     f"{fmt(loss, '.0f')} / {fmt(sender_q, '.0f')} |")
    return lines


def report(out, markdown=None, plots_dir=None):
    plan, records = load_cells(out)
    for r in records:
        with contextlib.suppress(OSError, ValueError, KeyError):
            part, steps = issue10_metrics(os.path.join(out, "cells", r["cell"]["id"]), r["cell"], plan["config"],
                                          r.get("times") or {}, r["metrics"].get("elephant_mean_bps"))
            r["metrics"].update(part)
            r["steps"] = steps
    groups = aggregate(out, records)
    write_tables(out, records, groups)
    made = plots(out, plan, records, groups) if records else {}
    if records:
        made["runs"] = run_plots(out, plan, records)
    summary = {
        "plan": {k: plan.get(k) for k in ("preset", "command", "created", "machine", "fps")},
        "config": {k: v for k, v in plan["config"].items() if k != "text"},
        "cells_planned": len(plan["cells"]),
        "cells_done": len(records),
        "cells": [{"cell": r["cell"], **r["metrics"], "client_summary": r["client_summary"], "shares": r.get("shares"),
                   "steps": {k: v for k, v in (r.get("steps") or {}).items() if k != "capacity"} or None} for r in records],
        "groups": groups,
        "targets": [dict(zip(("queue_variant", "target", "wanted", "measured", "verdict"), t[:5])) for t in targets(groups)],
        "issue10_checks": issue10_checks(records),
        "plots": made,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    link_prefix = "plots/"
    if markdown:
        plots_dir = plots_dir or os.path.join(os.path.dirname(os.path.abspath(markdown)), "benchmarks")
        os.makedirs(plots_dir, exist_ok=True)
        for name in os.listdir(os.path.join(out, "plots")):
            shutil.copyfile(os.path.join(out, "plots", name), os.path.join(plots_dir, name))
        link_prefix = os.path.relpath(plots_dir, os.path.dirname(os.path.abspath(markdown))) + "/"
    text = markdown_report(out, plan, records, groups, made, link_prefix, markdown)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown_report(out, plan, records, groups, made, "plots/", None))
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)
    return text


def markdown_report(out, plan, records, groups, made, link, markdown_path):
    cfg = plan["config"]
    m = plan.get("machine", {})
    L = []
    L.append("<!-- SPDX-License-Identifier: MIT -->")
    L.append("<!-- Generated by `pps-sweep report`; edit tools/sweep/sweep_report.py, not this file. -->")
    L.append("# Benchmarks: latency-tolerance sweeps")
    L.append("")
    L.append("Application-level results of priority-progress streaming over TCP and MIN_BUF TCP in the network lab "
             "(docs/NETLAB.md), measured the way TOMCCAP 2008 section 7 measures them. Every cell is one real "
             "`pps-server` and one real `pps-client` with long-lived cubic iperf3 elephants sharing the bottleneck.")
    L.append("")
    L.append("## How this page was made")
    L.append("")
    L.append("```sh")
    L.append("meson setup build && ninja -C build")
    L.append(f"sudo build/tools/sweep/pps-sweep --preset {plan.get('preset') or 'paper'} --out sweep-paper   # resumable: run it again after an interruption")
    target = os.path.relpath(markdown_path, os.getcwd()) if markdown_path else "docs/BENCHMARKS.md"
    L.append(f"build/tools/sweep/pps-sweep report sweep-paper --markdown {target}   # this page and docs/benchmarks/*.png")
    L.append("```")
    L.append("")
    L.append(f"- Sweep: `{plan.get('command', '')}`, started {plan.get('created', '?')}; {len(records)} of {len(plan['cells'])} cells done; "
             f"seed {cfg['seed']} (cell order); {cfg['duration_s']:g} s of streaming per cell after {cfg['warmup_s']:g} s of cross traffic; "
             f"{cfg['repetitions']} repetitions; client playout `{cfg['playout']}`.")
    L.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs; {m.get('os', '')}; kernel `{m.get('uname', '?')}`; "
             f"ppstream `{m.get('git', '?')}`; Python {m.get('python', '?')}. The host's default congestion control is "
             f"`{m.get('default_congestion', '?')}`; every flow here names its own (the stream: the `congestion` axis; elephants: cubic).")
    shared = [r["cell"]["id"] for r in records if (r.get("times") or {}).get("other_labs_at_start") or (r.get("times") or {}).get("other_labs_at_end")]
    if any("other_labs_at_start" in (r.get("times") or {}) for r in records):
        L.append(f"- Other network labs were up on the machine during {len(shared)} of {len(records)} cells "
                 "(cell.json `times.other_labs_*`); their CPU load can shift timing.")
    sets = ", ".join(f"`{k}={v}`" for k, v in cfg.get("server_set", {}).items()) or "none"
    L.append(f"- Server settings beyond the axes: {sets}; everything else is config/server.ini's default "
             f"(30 frames/s, 3 temporal x 2 quality layers, `pps.latency_budget_ms` 250).")
    L.append("- Queue variants: **drop-tail** = FIFO of one bandwidth-delay product, ECN off; **DRD+ECN** = DRD marking "
             f"from {cfg.get('lab', {}).get('drd_min_bdp', '1')} BDP and dropping above {cfg.get('lab', {}).get('drd_congest_bdp', '2')} BDP "
             "(the papers' drdmin/drdcongest), ECN negotiated by the stream and every elephant.")
    L.append("- Window latency = arrival of a window's last byte at the client minus its first frame's capture time. "
             "\"Within T\" = entire transmitted windows within T over windows the sender transmitted (the papers' "
             "metric); windows the sender dropped whole are counted apart (Table III).")
    L.append("")

    trows = targets(groups)
    L.append("## Targets (paper scenario: 10 Mbit/s, 50 ms RTT, 20 flows, window 2)")
    L.append("")
    L.append("| queue | target | wanted | measured | verdict |")
    L.append("|---|---|---|---|---|")
    for t in trows:
        L.append(f"| {t[0]} | {t[1]} | {t[2]} | {t[3]} | {t[4]} |")
    L.append("")
    missed_queues = sorted({t[5] for t in trows if t[4] == "**missed**"})
    if missed_queues:
        L.append("### Where the latency goes (missed targets)")
        L.append("")
        L.append("Mean window latency split into: the **window wait** (W frames at 30 frames/s before a window is complete), "
                 "**propagation** (one-way delay of the lab), the **bottleneck queue** (pps-linkem's sojourn of the forward "
                 "packet delivered just before the window's last byte reached the client, from its per-packet log), and the "
                 "**sender** share, the rest: encoding, the window queue in the server, the socket buffer, waiting for cwnd, "
                 "and loss recovery. The last column splits the sender share into loss recovery, estimated from the server's "
                 "counters (each retransmission holds its window back one RTT, each RTO 200 ms + RTT), and the remainder (sender queue).")
        L.append("")
        for q in missed_queues:
            L.append(f"**{('DRD+ECN' if q == 'drd-ecn' else 'drop-tail 1 BDP')}** (window 2, 20 flows):")
            L.append("")
            L.append("| transport | windows | n | mean ms | window wait | propagation | bottleneck queue | sender | loss recovery (est.) / sender queue |")
            L.append("|---|---|---|---|---|---|---|---|---|")
            for g in groups:
                if g["queue"] == q and g["window_frames"] == 2 and g["flows"] == 20 and g["rate_mbit"] == 10 and g["rtt_ms"] == 50 and g["congestion"] == "cubic":
                    L += shares_table(g)
            L.append("")
            for g in groups:
                if g["queue"] == q and g["window_frames"] == 2 and g["flows"] == 20 and g["transport"] == "minbuf(1,3)" and g["rate_mbit"] == 10 and g["rtt_ms"] == 50 and g["congestion"] == "cubic":
                    L.append(f"minbuf(1,3) counters over {g['runs']} runs: {g['retrans_pkts']} retransmitted packets, {g['rto_events']} RTOs; "
                             f"bottleneck sojourn (all flows) p50 {fmt(g['bottleneck_sojourn_p50_ms'], '.0f')} ms, p95 {fmt(g['bottleneck_sojourn_p95_ms'], '.0f')} ms; "
                             f"sender-dropped windows {fmt(g['sender_dropped_pct'])}%; stream {fmt((g['client_goodput_bps'] or 0) / 1e6, '.2f')} Mbit/s received of "
                             f"{fmt((g['offered_bps'] or 0) / 1e6, '.2f')} Mbit/s offered by the encoder (all layers), "
                             f"fair share {g['rate_mbit'] / (g['flows'] + 1):.2f} Mbit/s ({g['flows'] + 1} flows).")
                    L.append("")
                    late = (g.get("shares") or {}).get("late")
                    if late:
                        parts = {"window wait": late["window_wait_ms"], "propagation": late["propagation_ms"],
                                 "bottleneck queue": late["bottleneck_queue_ms"], "sender": late["sender_ms"]}
                        big = max(parts, key=parts.get)
                        tol = g["shares"]["late_tolerance_ms"]
                        budget = float(cfg.get("server_set", {}).get("pps.latency_budget_ms", 250))
                        L.append(f"Of the minbuf(1,3) windows later than {tol} ms ({late['windows']} of {g['windows_transmitted']}), the largest share "
                                 f"is the {big}: {parts[big]:.0f} of {late['latency_ms']:.0f} ms on average. The server keeps sending a "
                                 f"window until its first frame's capture time + `pps.latency_budget_ms` ({budget:.0f} ms); the last "
                                 f"byte of a window sent up to that deadline arrives about {budget + late['propagation_ms'] + late['bottleneck_queue_ms']:.0f} ms "
                                 f"after capture (deadline + propagation + this queue), "
                                 + ("beyond" if budget + late["propagation_ms"] + late["bottleneck_queue_ms"] > tol else "within")
                                 + f" the {tol} ms tolerance.")
                        L.append("")

    L.append("## The papers' figures beside ours (drop-tail, 10 Mbit/s, 50 ms RTT)")
    L.append("")
    L.append("| paper | window | flows | tolerance | transport | paper | ours |")
    L.append("|---|---|---|---|---|---|---|")
    for (pw, pf, ptol, pvals, words) in PAPER_FIGURES:
        for t, v in pvals.items():
            g = find_group(groups, transport=t, window_frames=pw, flows=pf, queue="droptail", rate_mbit=10, rtt_ms=50, congestion="cubic")
            ours = fmt(g and g[f"within_{ptol}ms_pct"]) + "%" if g else "not run"
            if pw == 2:
                ours += f" (300 ms: {fmt(g['within_300ms_pct'])}%)" if g else ""
            L.append(f"| Fig. {8 if pw == 4 else 9} | {pw} | {pf} | {ptol} ms | {t} | {v}% | {ours} |")
    L.append("")
    for (_, _, _, _, words) in PAPER_FIGURES:
        L.append(f"- {words}.")
    L.append("")
    L.append("**Table II** (throughput of the stream, window 2; the paper's values are absolute, in its units, likely Mbit/s, "
             "\u00b1 over 5 runs; ours: ADU bytes the server wrote per second (the paper's sender throughput) and bytes the "
             "client received per second; / tcp = received, relative to tcp in the same setting):")
    L.append("")
    L.append("| transport | flows | paper | paper / tcp | ours sent Mbit/s | ours received Mbit/s | ours / tcp: received (sent) | F (stream / mean elephant) | S (max/min) |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for flows in (20, 40):
        for t in ("tcp", "minbuf(1,0)", "minbuf(1,3)"):
            p = PAPER_TABLE_II[flows][t]
            g = find_group(groups, transport=t, window_frames=2, flows=flows, queue="droptail", rate_mbit=10, rtt_ms=50, congestion="cubic")
            sent = f"{fmt(g['server_throughput_bps'] / 1e6, '.2f')} \u00b1 {fmt((g['server_throughput_bps_sd'] or 0) / 1e6, '.2f')}" if g and g["server_throughput_bps"] else "not run"
            got = f"{fmt(g['client_goodput_bps'] / 1e6, '.2f')} \u00b1 {fmt((g['client_goodput_bps_sd'] or 0) / 1e6, '.2f')}" if g and g["client_goodput_bps"] else "-"
            L.append(f"| {t} | {flows} | {p[0]:.2f} \u00b1 {p[1]:.2f} | {p[0] / PAPER_TABLE_II[flows]['tcp'][0]:.2f} | {sent} | {got} | "
                     f"{fmt(g and g['throughput_vs_tcp'], '.2f')} ({fmt(g and g['sent_vs_tcp'], '.2f')}) | {fmt(g and g['friendliness_ratio'], '.2f')} | {fmt_s(g) if g else '-'} |")
    L.append("")
    L.append("**Table III** (windows dropped by the sender, % of windows generated, 20 flows):")
    L.append("")
    L.append("| transport | window | paper | ours |")
    L.append("|---|---|---|---|")
    for w in (4, 2):
        for t in ("tcp", "minbuf(1,0)", "minbuf(1,3)"):
            p = PAPER_TABLE_III[w][t]
            g = find_group(groups, transport=t, window_frames=w, flows=20, queue="droptail", rate_mbit=10, rtt_ms=50, congestion="cubic")
            ours = f"{fmt(g['sender_dropped_pct'])} \u00b1 {fmt(g['sender_dropped_pct_sd'])}%" if g and g["sender_dropped_pct"] is not None else "not run"
            L.append(f"| {t} | {w} | {p[0]} \u00b1 {p[1]}% | {ours} |")
    L.append("")

    L.append("## Every setting")
    L.append("")
    L.append("Pooled over repetitions (latency columns pool the windows of all runs; the others are means over runs). "
             "sent = ADU bytes the server wrote per second, recv = bytes the client received per second, / tcp of recv; F = friendliness ratio, S = separation index "
             "(004 section 6.2; \u221e = some elephant got nothing during the stream, Morris's regime of more flows than a tenth of the queue in packets); "
             "CPU = % of one core, server (encoder included) / client.")
    L.append("")
    L.append("| setting | transport | runs | windows | in 100 / 200 / 300 / 500 / 1000 ms (%) | p50 / p95 ms | sender-dropped % | sent / recv Mbit/s | / tcp | F | S | frames shown % | frame p95 ms | retrans / RTOs | CPU % |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for g in groups:
        within = " / ".join(fmt(g[f"within_{t}ms_pct"], ".0f") for t in (100, 200, 300, 500, 1000))
        L.append(f"| {scenario_name(scenario_of(g), short=True)} {g['rate_mbit']:g}M {g['rtt_ms']:g}ms | {g['transport']} | {g['runs']} | {g['windows_transmitted']} | {within} | "
                 f"{fmt(g['window_latency_p50_ms'], '.0f')} / {fmt(g['window_latency_p95_ms'], '.0f')} | {fmt(g['sender_dropped_pct'])} | "
                 f"{fmt((g['server_throughput_bps'] or 0) / 1e6, '.2f')} / {fmt((g['client_goodput_bps'] or 0) / 1e6, '.2f')} | {fmt(g['throughput_vs_tcp'], '.2f')} | {fmt(g['friendliness_ratio'], '.2f')} | "
                 f"{fmt_s(g)} | {fmt(g['frames_shown_pct'], '.0f')} | {fmt(g['frame_latency_p95_ms'], '.0f')} | "
                 f"{g['retrans_pkts']} / {g['rto_events']} | {fmt(g['server_cpu_pct'], '.0f')} / {fmt(g['client_cpu_pct'], '.0f')} |")
    L.append("")

    L += per_run_section(records, made, markdown_path)
    if made:
        L.append("## Plots")
        L.append("")
        L.append("Windows within each latency tolerance (TOMCCAP Figs. 8-9; crosses: the paper's published points):")
        L.append("")
        for sc, name in made.get("tolerance", []):
            L.append(f"![{scenario_name(sc)}]({link}{name})")
        L.append("")
        L.append(f"Sender throughput normalized to tcp (Table II) and windows dropped by the sender (Table III):")
        L.append("")
        L.append(f"![throughput]({link}{made['throughput']}) ![dropped]({link}{made['dropped']})")
        L.append("")
        L.append("Frame latency CDF (frames shown):")
        L.append("")
        for sc, name in made.get("frame_cdf", []):
            L.append(f"![{scenario_name(sc)}]({link}{name})")
        L.append("")
        if made.get("timeline"):
            L.append(f"Latency and layers over time, cell `{made['timeline_cell']}`:")
            L.append("")
            L.append(f"![timeline]({link}{made['timeline']})")
            L.append("")
    reasons = {}
    for r in records:
        for k, v in (r["metrics"].get("frames_not_shown_reasons") or {}).items():
            reasons.setdefault(r["cell"]["transport"], {}).setdefault(k, 0)
            reasons[r["cell"]["transport"]][k] += v
    if reasons:
        kinds = sorted({k for d in reasons.values() for k in d})
        L.append("## Frames not shown")
        L.append("")
        L.append("By the client's reason, summed over all cells (playout policy `%s`):" % cfg["playout"])
        L.append("")
        L.append("| transport | frames | " + " | ".join(kinds) + " |")
        L.append("|---|---|" + "---|" * len(kinds))
        for t in sorted(reasons, key=transport_key):
            total = sum(r["metrics"]["frames_shown"] for r in records if r["cell"]["transport"] == t) + sum(reasons[t].values())
            L.append(f"| {t} | {total} | " + " | ".join(str(reasons[t].get(k, 0)) for k in kinds) + " |")
        L.append("")
    L.append(SWEEP_HELP)
    return "\n".join(L)


def per_run_section(records, made, markdown_path):
    """Issue 10's figures for every run, and its must-show checks where a run matches."""
    if not records:
        return []
    L = ["## Per run: frames, latency, freezes, rates", ""]
    L.append("From the client's frame events (not its summary): frames shown of the 30 frames/s capture grid, frame latency "
             "(capture to display) p50/p95/p99, the longest gap between shown frames (freeze), the longest once the freezes "
             "starting within 1 s after a capacity step down are set aside, the total frozen time (gaps > 100 ms); received = "
             "bytes the client received per second; share = received over the mean elephant's (same run); PSNR-Y of the "
             "pictures shown (pps-peer-score, when `psnr = true`); estimate = the server's mean "
             "path estimate (its `--log`, when the server has one).")
    L.append("")
    L.append("| cell | frames shown % | p50 / p95 / p99 ms | longest freeze ms | outside steps ms | frozen s | received Mbit/s | share | PSNR dB | estimate Mbit/s | plot |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(records, key=lambda r: r["cell"]["id"]):
        m = r["metrics"]
        cid = r["cell"]["id"]
        plot = (made.get("runs") or {}).get(cid)
        link = f"[timeline]({plot})" if plot and not markdown_path else ("cells/" + cid + "/timeline.png" if plot else "-")
        est = m.get("estimate_bps_mean")
        L.append(f"| {cid} | {fmt(m.get('frames_shown_pct'))} | {fmt(m.get('frame_latency_p50_ms'), '.0f')} / "
                 f"{fmt(m.get('frame_latency_p95_ms'), '.0f')} / {fmt(m.get('frame_latency_p99_ms'), '.0f')} | "
                 f"{fmt(m.get('longest_freeze_ms'), '.0f')} | {fmt(m.get('longest_freeze_outside_steps_ms'), '.0f')} | "
                 f"{fmt((m.get('total_frozen_ms') or 0) / 1e3 if m.get('total_frozen_ms') is not None else None, '.1f')} | "
                 f"{fmt((m.get('received_bps') or 0) / 1e6 if m.get('received_bps') else None, '.2f')} | {fmt(m.get('throughput_share'), '.2f')} | "
                 f"{fmt(m.get('psnr_y_mean'), '.2f')} | {fmt(est / 1e6 if est else None, '.2f')} | {link} |")
    L.append("")
    checks = issue10_checks(records)
    if checks:
        L.append("### Issue 10 must-show checks")
        L.append("")
        L.append("| cell | check | wanted | measured | verdict |")
        L.append("|---|---|---|---|---|")
        for c in checks:
            L.append(f"| {c['cell']} | {c['check']} | {c['wanted']} | {c['measured']} | {c['verdict']} |")
        L.append("")
    return L


def issue10_checks(records):
    """The issue's must-show bounds, on the runs that match its scenarios: a
    trace (capacity steps), 20 cubic flows at 10 Mbit/s and 50 ms."""
    out = []

    def add(r, check, wanted, value, ok, spec=".1f", unit=""):
        out.append({"cell": r["cell"]["id"], "check": check, "wanted": wanted,
                    "measured": (fmt(value, spec) + unit) if value is not None else "-",
                    "verdict": "not measured" if value is None else ("met" if ok else "**missed**")})

    for r in sorted(records, key=lambda r: r["cell"]["id"]):
        c, m = r["cell"], r["metrics"]
        steps = bool(c.get("trace"))
        flows20 = c["flows"] == 20 and c["rate_mbit"] == 10 and c["rtt_ms"] == 50 and not steps and c["queue"] == "droptail"
        if not (steps or flows20):
            continue
        v = m.get("frames_shown_pct")
        add(r, "frames shown", ">= 95%", v, v is not None and v >= 95, unit="%")
        v = m.get("frame_latency_p95_ms")
        add(r, "frame latency p95", "<= 400 ms", v, v is not None and v <= 400, ".0f", " ms")
        if steps:
            v = m.get("longest_freeze_outside_steps_ms")
            add(r, "no freeze > 500 ms except within 1 s after a step down", "<= 500 ms", v, v is not None and v <= 500, ".0f", " ms")
        else:
            v = m.get("throughput_share")
            add(r, "stream throughput / mean elephant's", ">= 0.8", v, v is not None and v >= 0.8, ".2f")
    return out


SWEEP_HELP = """## pps-sweep in brief

```
pps-sweep [run] --preset quick|paper|full | --config FILE  [--out DIR] [--reps N] [--duration S] [--seed N] [--dry-run]
pps-sweep --resume DIR            # finish an interrupted sweep (or give the same --out again)
pps-sweep report DIR [--markdown FILE] [--plots-dir DIR]
pps-sweep presets                 # the presets, their size and run time
```

A sweep file (tools/sweep/presets/*.ini) has `[sweep]` (duration_s, warmup_s, repetitions, seed, playout,
timeline = the cell of the over-time plot), `[server]` and `[client]` (`--set` keys for every cell),
`[lab]` (drd_min_bdp, drd_congest_bdp, queue) and one or more `[matrix NAME]` sections whose keys are
the axes, each a comma-separated list: `transport` (tcp, minbuf(A,B)), `window_frames`, `flows`
(cubic elephants), `rtt_ms`, `rate_mbit`, `queue` (droptail, drd-ecn; or `ecn = off, on`),
`congestion` (the stream's: cubic, reno, bbr), and `pattern` (source.pattern), `trace`
(a `[trace NAME]` section: `steps = RATE_MBIT:SECONDS, ...`, the link's capacity over time) and
`server_set` (`default` or a `[server_set NAME]` section of server `--set` keys); `[sweep] psnr =
true` scores the pictures shown with pps-peer-score; `--server-set KEY=VALUE` adds a server setting
to every cell. Presets: quick, paper, full, steps, steps-tiny, mustshow, benchmarks, playout, congestion-alone. The sweep runs the union of the matrices' cross
products times the repetitions, in an order shuffled with the seed. Each cell: a lab (`pps-netlab
up`), the elephants and `warmup_s` of them alone, then pps-server in the sender namespace and
pps-client in the receiver namespace for `duration_s`; every wait is bounded and the lab is torn
down whatever happens (Ctrl-C included: the sweep then says how to resume).

Files: `plan.json` (matrix, seed, run order, machine), `cells/ID/` (client.jsonl, server.json,
server.err, client.err, lab.json, linkem.json, elephants.json (iperf3), windows.csv (with the
bottleneck queue at each window's last byte), frames.csv, cell.json, timeline.png; server.jsonl when
the server has `--log`, link.trace for trace cells, scores.tsv with psnr), `summary.json`, `summary.csv`
(one row per cell), `groups.csv` (one row per setting), `report.md`, `plots/`.
"""
