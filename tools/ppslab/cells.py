# SPDX-License-Identifier: MIT
"""pps-sweep's measurements: one cell's analysis (from the client log, the
server's counters, iperf3's per-flow results and pps-linkem's per-packet
log), and the sweep's groups (one per setting, repetitions pooled) with
summary.csv and groups.csv.

Metrics follow TOMCCAP 2008 section 7.1: the latency distribution counts
*entire* windows whose last byte arrived within a tolerance, over the windows
the sender transmitted; windows the sender dropped whole are reported apart
(Table III). Friendliness follows Time-lined TCP (004) section 6.2: F is the
stream's throughput over the mean of the competing TCP flows, S the largest
over the smallest throughput of all flows at the bottleneck.
"""
import bisect
import csv
import json
import math
import os

from . import metrics
from .files import read_json
from .lab import capacity_series, linkem_epoch_realtime_us, parse_steps, read_linkem_log, step_downs
from .matrix import CELL_AXES
from .metrics import mean, percentile, sd, within_pct

TOLERANCES_MS = (100, 160, 200, 300, 400, 500, 1000)
CURVE_MS = list(range(0, 1501, 10))
SHARE_TOLERANCE_MS = {"drd-ecn": 300, "droptail": 500}
TRANSPORT_ORDER = ("tcp", "minbuf(1,0)", "minbuf(1,3)", "minbuf(2,0)")
# A setting: every cell field but the transport and the repetition (the
# server build included: each build's cells are a setting of their own).
SCENARIO_AXES = ("window_frames", "flows", "rtt_ms", "rate_mbit", "queue", "congestion", "pattern", "trace", "server_set",
                 "playout", "loss_pct", "reverse_flows", "build")
LINUX_TCP_RTO_MIN_MS = 200.0
# The audio figures a group averages over its runs (None in runs without audio).
AUDIO_GROUP_FIGURES = ("audio_played_pct", "audio_recovered_pct", "audio_concealed_pct", "audio_late_pct",
                       "mouth_to_ear_p50_ms", "mouth_to_ear_p95_ms", "mouth_to_ear_p99_ms", "audio_delay_mean_ms",
                       "audio_delay_std_ms", "av_skew_abs_p95_ms")


# ---------------------------------------------------------------- settings


def scenario_of(cell):
    # Cells of sweeps older than the closed loop have no pattern/trace/server_set: "";
    # the build is there only in sweeps with server builds.
    return tuple(cell.get(a, "") for a in SCENARIO_AXES if a != "build" or cell.get("build"))


def scenario_sort_key(sc):
    """A sort key for scenario tuples: axes absent from a cell read "" (or
    None) while numeric ones (loss_pct, reverse_flows) hold numbers, so each
    value is compared as (is-a-number, value)."""
    return tuple((0, "") if v is None else (0, v) if isinstance(v, str) else (1, v) for v in sc)


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
    if d.get("loss_pct"):
        out += f", loss {d['loss_pct']:g}%"
    if d.get("reverse_flows"):
        out += f", {d['reverse_flows']} reverse flows"
    if d.get("build"):
        out += f", build {d['build']}"
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
    if d.get("loss_pct"):
        extra += f"-loss{d['loss_pct']:g}"
    if d.get("reverse_flows"):
        extra += f"-rev{d['reverse_flows']}"
    if d.get("build"):
        extra += f"-{d['build']}"
    return (f"w{d['window_frames']}-f{d['flows']}-{d['rate_mbit']:g}mbit-{d['rtt_ms']:g}ms-{d['queue']}-"
            f"{d['congestion']}{extra}").replace(".", "p")


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
    """pps-linkem's per-packet log -> its epoch, the forward deliveries in
    time order and their sojourns (ns, monotonic), and the forward drops."""
    epoch, rows = read_linkem_log(path, "fwd")
    if epoch is None:
        raise ValueError(f"{path}: no epoch line")
    delivered = sorted(((r["delivery_ns"] + epoch, r["sojourn_ns"]) for r in rows if r["delivery_ns"] is not None),
                       key=lambda d: d[0])
    drops = [r["arrival_ns"] + epoch for r in rows if r["delivery_ns"] is None and r["event"].startswith("drop")]
    return epoch, [d for d, _ in delivered], [s for _, s in delivered], drops


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

        def sojourn_at(complete_us):
            t = complete_us * 1000 - offset + 500_000  # + the TUN-to-socket path
            i = bisect.bisect_right(delivered, t) - 1
            return sojourn[i] / 1e6 if i >= 0 else None
        queue_at = sojourn_at

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
    # The video connection's counters: with audio on a connection of its own,
    # the server lists that one as a client too (audio_only).
    client_stats = metrics.video_client(server)
    sent_windows = sum(client_stats.get(k, 0) for k in ("windows_complete", "windows_partial", "windows_dropped", "windows_overflow"))
    sender_dropped = client_stats.get("windows_dropped", 0) + client_stats.get("windows_overflow", 0)
    seconds = server.get("duration_s") or cfg["duration_s"]
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
        stream_bps = summary.get("received_bps") or thr_bps
        if elephants and stream_bps:
            mean_elephant = sum(elephants) / len(elephants)
            F = stream_bps / mean_elephant if mean_elephant else None
            everyone = elephants + [stream_bps]
            S = max(everyone) / min(everyone) if min(everyone) > 0 else None
    # The reverse path's elephants (receiver to sender), over the same span.
    reverse_mean = None
    if cell.get("reverse_flows") and os.path.exists(os.path.join(celldir, "reverse-elephants.json")):
        start = times.get("reverse_traffic_start_unix", times["client_start_unix"])
        rev = elephant_throughputs(os.path.join(celldir, "reverse-elephants.json"), times["client_start_unix"] - start,
                                   times["server_end_unix"] - start)
        reverse_mean = sum(rev) / len(rev) if rev else None

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

    # The per-run figures, computed from the client's frame events (not
    # its summary), the server's --log where it exists, the trace's steps.
    run_part, steps_info = run_figures(celldir, cell, cfg, times, mean_elephant)

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
        "client_goodput_bps": summary.get("received_bps"),
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
        "reverse_elephant_mean_bps": reverse_mean,
        "friendliness_ratio": F,
        "separation_index": S,
        "bottleneck_drops_fwd": drops_fwd,
        "bottleneck_marked_fwd": linkem.get("fwd", {}).get("marked_pkts"),
        "bottleneck_sojourn_p50_ms": (linkem.get("fwd", {}).get("sojourn_p50_ns") or 0) / 1e6 if linkem else None,
        "bottleneck_sojourn_p95_ms": (linkem.get("fwd", {}).get("sojourn_p95_ns") or 0) / 1e6 if linkem else None,
        # The reverse path (ACKs, the client's records, reverse elephants) and random loss, each way.
        "reverse_sojourn_p95_ms": (linkem.get("rev", {}).get("sojourn_p95_ns") or 0) / 1e6 if linkem else None,
        "reverse_queue_drops": linkem.get("rev", {}).get("dropped_queue_pkts"),
        "link_lost_fwd_pkts": linkem.get("fwd", {}).get("lost_pkts"),
        "link_lost_rev_pkts": linkem.get("rev", {}).get("lost_pkts"),
        "frames_shown": len(shown),
        "frames_not_shown_reasons": not_shown_reasons,
        # The congestion control each connection of the stream ran (the server's
        # counters), the audio connection's where audio has one.
        "stream_congestion": client_stats.get("congestion"),
        "audio_congestion": metrics.audio_client(server).get("congestion"),
    })
    flat.update(metrics.server_audio(server))
    # Ours, from the frame events (metrics.run_metrics); the client's own summary stays in client_summary.
    flat.update(run_part)
    return {"metrics": flat, "client_summary": summary, "server": server, "shares": shares, "steps": steps_info,
            "client_exit": measured.get("client_exit"), "times": times, "server_set": measured.get("server_set"),
            "client_set": measured.get("client_set"), "congestion": measured.get("congestion"),
            "lab": {k: lab.get(k) for k in ("link", "rtt_ms", "ecn", "congestion", "sysctl")}}


def run_figures(celldir, cell, cfg, times, mean_elephant):
    """The metrics.run_metrics figures of one cell (recomputed by `report`, so a change
    of method applies to old runs too) and its capacity steps."""
    steps_info = cell_steps(celldir, cell, cfg, times)
    run = metrics.run_metrics(os.path.join(celldir, "client.jsonl"), os.path.join(celldir, "server.jsonl"),
                                  steps_info["step_downs_us"] if steps_info else (), os.path.join(celldir, "scores.tsv"),
                                  mean_elephant)
    video_id = metrics.video_client(read_json(os.path.join(celldir, "server.json"), {})).get("client")
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
        "wire_share": run.get("wire_share"),
        "psnr_y_mean": run.get("psnr_y_mean"),
        "ssim_y_mean": run.get("ssim_y_mean"),
        "server_log": run.get("server_log"),
        "estimate_bps_mean": first_client(run, "estimate_bps_mean", video_id),
        "queue_delay_ms_mean": first_client(run, "queue_delay_ms_mean", video_id),
        "encoded_layer_bps_mean": run.get("encoded_layer_bps_mean"),
        **{key: run.get(key) for key in metrics.AUDIO_FIGURES + ("audio_from",)},
    }, steps_info


def first_client(run, key, client_id=None):
    """@key of the server's --log figures of @client_id (the video connection),
    or of its first client."""
    clients = run.get("clients") or {}
    if client_id in clients:
        return clients[client_id].get(key)
    return clients[sorted(clients)[0]].get(key) if clients else None


def cell_steps(celldir, cell, cfg, times):
    """A trace cell's capacity steps on CLOCK_REALTIME (pps-linkem's epoch from
    its stats file): the capacity series and the step-down instants. None otherwise."""
    if not cell.get("trace") or cell["trace"] not in cfg.get("traces", {}):
        return None
    epoch_us = linkem_epoch_realtime_us(os.path.join(celldir, "linkem.json"))
    if epoch_us is None:
        return None
    steps = parse_steps(cfg["traces"][cell["trace"]]["steps"])
    lead = times.get("trace_lead_s", 0.0)
    t_from = times.get("client_start_unix", epoch_us / 1e6) * 1e6
    t_to = times.get("client_end_unix", t_from / 1e6 + cfg["duration_s"]) * 1e6
    return {"steps": cfg["traces"][cell["trace"]]["steps"], "lead_s": lead, "epoch_realtime_us": epoch_us,
            "stream_start_after_epoch_s": (times.get("server_start_unix", 0) * 1e6 - epoch_us) / 1e6,
            "capacity": capacity_series(steps, lead, epoch_us, t_from, t_to),
            "step_downs_us": step_downs(steps, lead, epoch_us, t_from, t_to)}


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


def aggregate(out, records, builds=()):
    """One group per matrix point (all axes but the repetition): pooled windows,
    means over repetitions; in the order of the settings, @builds' order (the
    server builds as the command line gave them), the transports'."""
    groups = {}
    for r in records:
        key = tuple(r["cell"].get(a, "") for a in CELL_AXES)
        groups.setdefault(key, []).append(r)
    tcp_thr, tcp_goodput = {}, {}
    for key, rs in groups.items():
        if key[0] == "tcp":
            tcp_thr[key[1:]] = mean(r["metrics"]["server_throughput_bps"] for r in rs)
            tcp_goodput[key[1:]] = mean(r["metrics"]["client_goodput_bps"] for r in rs)
    result = []
    for key, rs in groups.items():
        g = dict(zip(CELL_AXES, key))
        if not g["build"]:
            del g["build"]  # a sweep without server builds: its groups as before
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
                     "received_bps", "throughput_share", "psnr_y_mean") + AUDIO_GROUP_FIGURES:
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
    def order(g):
        sc = scenario_of(g)
        if g.get("build") in builds:
            sc = sc[:-1] + (list(builds).index(g["build"]),)
        return scenario_sort_key(sc), transport_key(g["transport"])

    result.sort(key=order)
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
