# SPDX-License-Identifier: MIT
"""The reports' figures (matplotlib, imported inside each function so that a
tool without plots never needs it): one run over time (latency, rates,
layers), the sweep's tolerance curves, bars and CDFs, pps-fanout's and
pps-peers' latency figures, pps-protolat-bench's CDFs and time lines."""
import bisect
import contextlib
import csv
import json
import os

from . import metrics
from .files import read_json
from .cells import (CURVE_MS, SCENARIO_AXES, SHARE_TOLERANCE_MS, frame_latencies, scenario_name, scenario_of,
                    scenario_sort_key,
                    scenario_tag, transport_key)
from .paper import PAPER_FIGURES, PAPER_TABLE_II, PAPER_TABLE_III


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ---------------------------------------------------------------- one run over time


def plot_timeline(png, title, client_jsonl, server_jsonl=None, capacity=None, step_downs_us=(), client_id=None, t0_us=None):
    """Three panels over time (s from the first capture): frame latency of the
    frames shown and the freezes; the rates (link capacity of a trace run,
    received, the server's estimate and delivery rate, the layers sent and the
    encoder's layer rates); nothing is drawn that was not measured."""
    plt = pyplot()
    frames, windows = metrics.client_events(client_jsonl)
    caps = [f["capture_us"] for f in frames if f.get("capture_us")]
    if not caps:
        return None
    t0 = t0_us or min(caps)
    log = metrics.server_log(server_jsonl) if server_jsonl else {"path": {}, "rates": []}
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2]})
    shown = sorted((f["capture_us"], f["display_us"]) for f in frames if f.get("shown") and f.get("display_us"))
    a1.plot([(c - t0) / 1e6 for c, _ in shown], [(d - c) / 1e3 for c, d in shown], ".", ms=2, label="frame latency (shown)")
    displays = sorted(d for _, d in shown)
    first = True
    for a, b in zip(displays, displays[1:]):
        if b - a > metrics.LONG_FREEZE_MS * 1000:
            a1.axvspan((a - t0) / 1e6, (b - t0) / 1e6, color="tab:red", alpha=0.15, lw=0, label="freeze > 500 ms (display time)" if first else None)
            first = False
    a1.set_ylabel("ms")
    a1.set_yscale("symlog", linthresh=1000)
    a1.grid(alpha=0.3)
    for t in step_downs_us:
        for ax in (a1, a2, a3):
            ax.axvline((t - t0) / 1e6, color="grey", ls=":", lw=0.8)
    a1.legend(fontsize=7, loc="upper right")

    if capacity:
        xs = [(t - t0) / 1e6 for t, _ in capacity]
        ys = [r / 1e6 for _, r in capacity]
        end = max((f.get("display_us") or f["capture_us"]) for f in frames)
        a2.step(xs + [(end - t0) / 1e6], ys + ys[-1:], where="post", color="black", lw=1.5, label="link capacity")
    rx = metrics.received_series(windows, t0)
    if rx:
        a2.plot([t + 0.5 for t, _ in rx], [b / 1e6 for _, b in rx], color="tab:blue", lw=1, label="received (client)")
    paths = log["path"]
    if paths:
        cid = client_id if client_id in paths else sorted(paths)[0]
        evs = paths[cid]
        ts = [(e["t_us"] - t0) / 1e6 for e in evs]
        for key, color in (("estimate_bps", "tab:green"), ("delivery_rate_bps", "tab:olive")):
            a2.plot(ts, [(e.get(key) or 0) / 1e6 for e in evs], color=color, lw=1, label=key.replace("_bps", "") + " (server)")
        layers = [e.get("sent_layer_bps") or [] for e in evs]
        n = max((len(x) for x in layers), default=0)
        if n:
            stacks = [[(x[i] if i < len(x) else 0) / 1e6 for x in layers] for i in range(n)]
            a3.stackplot(ts, *stacks, labels=[f"sent q{i}" for i in range(n)], alpha=0.6)
    rates = log["rates"]
    if rates:
        ts = [(e["t_us"] - t0) / 1e6 for e in rates]
        enc = [e.get("encoded_layer_bps") or [] for e in rates]
        n = max((len(x) for x in enc), default=0)
        cum = [0.0] * len(enc)
        for i in range(n):
            cum = [c + ((x[i] if i < len(x) else 0) / 1e6) for c, x in zip(cum, enc)]
            a3.plot(ts, cum, lw=1, ls="--", label=f"encoded q0..q{i} (cumulative)")
    if not paths and not rates:
        a3.text(0.5, 0.5, "no server --log in this run", ha="center", va="center", transform=a3.transAxes, fontsize=8, color="grey")
    a2.set_ylabel("Mbit/s")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=7, loc="upper right")
    a3.set_ylabel("layers, Mbit/s")
    a3.set_xlabel("time since the first capture (s)")
    a3.grid(alpha=0.3)
    if a3.get_legend_handles_labels()[0]:
        a3.legend(fontsize=6, loc="upper right", ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return png


AUDIO_STYLES = {"played": ("tab:orange", "."), "recovered": ("tab:green", "^"), "concealed": ("tab:red", "x")}


def seq_times_s(ear, slots_seq, seqs):
    """Capture times (s, as @ear's) of audio frames known only by their seq
    (late, skipped): from the nearest slot's, a slot period per seq apart."""
    known = sorted(zip(slots_seq, (t for t, *_ in ear)))
    if len(known) < 2:
        return []
    periods = sorted((t2 - t1) / (s2 - s1) for (s1, t1), (s2, t2) in zip(known, known[1:]) if s2 > s1)
    period = periods[len(periods) // 2] if periods else 0.02
    keys = [k for k, _ in known]
    out = []
    for seq in seqs:
        k = bisect.bisect_left(keys, seq)
        i = min((j for j in (k - 1, k) if 0 <= j < len(keys)), key=lambda j: abs(keys[j] - seq))
        out.append(known[i][1] + (seq - keys[i]) * period)
    return out


def plot_av_timeline(png, title, client_jsonl, step_downs_us=(), t0_us=None):
    """Audio beside video over time (s from the first capture), from the
    client's JSON Lines log: the frame latency of the frames shown and the
    mouth-to-ear of every audio slot (played, recovered, concealed; frames
    that came late or were skipped as ticks), then the audio's playout delay
    and the A/V skew at each frame shown. None when the log has no audio."""
    log = metrics.client_log(client_jsonl)
    slots = [a for a in log["audio"] if a.get("capture_us") is not None and a.get("ear_us") is not None]
    if not slots:
        return None
    plt = pyplot()
    caps = [f["capture_us"] for f in log["frame"] if f.get("capture_us")] + [a["capture_us"] for a in slots]
    t0 = t0_us or min(caps)
    ear, skew = metrics.audio_series(log, t0)
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    shown = sorted((f["capture_us"], f["display_us"]) for f in log["frame"] if f.get("shown") and f.get("display_us"))
    a1.plot([(c - t0) / 1e6 for c, _ in shown], [(d - c) / 1e3 for c, d in shown], ".", ms=2, color="tab:blue",
            label="video: frame latency (shown)")
    for how, (color, marker) in AUDIO_STYLES.items():
        pts = [(t, e) for t, e, h, _ in ear if (h if h in AUDIO_STYLES else "concealed") == how]
        if pts:
            a1.plot([t for t, _ in pts], [e for _, e in pts], marker, ms=2 if how == "played" else 4, color=color,
                    label=f"audio: mouth-to-ear, {how} ({len(pts)})")
    displays = sorted(d for _, d in shown)
    first = True
    for a, b in zip(displays, displays[1:]):
        if b - a > metrics.LONG_FREEZE_MS * 1000:
            a1.axvspan((a - t0) / 1e6, (b - t0) / 1e6, color="tab:red", alpha=0.12, lw=0,
                       label="video freeze > 500 ms (display time)" if first else None)
            first = False
    slot_seqs = [a.get("seq") for a in sorted(slots, key=lambda a: a["capture_us"])]
    if all(isinstance(x, int) for x in slot_seqs):
        for kind, color in (("audio_late", "tab:purple"), ("audio_skipped", "black")):
            ts = seq_times_s(ear, slot_seqs, [e["seq"] for e in log[kind] if isinstance(e.get("seq"), int)])
            if ts:
                a1.plot(ts, [0.03] * len(ts), "|", ms=12, mew=1.5, color=color, transform=a1.get_xaxis_transform(),
                        label=f"audio frame {kind.split('_')[1]} ({len(ts)})")
    a1.set_ylabel("capture to eye / ear (ms)")
    highest = max([(d - c) / 1e3 for c, d in shown] + [e for _, e, _, _ in ear])
    if highest > 1500:
        a1.set_yscale("symlog", linthresh=1000)  # linear up to 1 s, the long stalls compressed
    else:
        a1.set_ylim(0, highest * 1.1)
    a1.grid(alpha=0.3)
    a1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    delay = [(t, d) for t, _, _, d in ear if d is not None]
    if delay:
        a2.plot([t for t, _ in delay], [d for _, d in delay], lw=1, color="tab:orange", label="audio playout delay")
    if skew:
        a2.plot([t for t, _ in skew], [x for _, x in skew], ".", ms=2, color="tab:gray",
                label="A/V skew at each frame shown (video - audio latency)")
    a2.axhline(0, color="black", lw=0.6)
    a2.set_ylabel("ms")
    a2.set_xlabel("time since the first capture (s)")
    a2.grid(alpha=0.3)
    if a2.get_legend_handles_labels()[0]:
        a2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for t in step_downs_us:
        for ax in (a1, a2):
            ax.axvline((t - t0) / 1e6, color="grey", ls=":", lw=0.8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return png


# ---------------------------------------------------------------- pps-sweep


def plots(out, plan, records, groups):
    """The sweep's figures in OUT/plots; {what: file name(s)}."""
    plt = pyplot()

    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = {}
    scenarios = sorted({scenario_of(g) for g in groups}, key=scenario_sort_key)
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
        wx, shown, layers = window_steps(frs, t0)
        # Both are small whole numbers and often equal: the layers line is
        # dashed over the other, at its true height.
        a2.step(wx, shown, where="post", lw=0.9, label="frames shown of the window")
        a2.step(wx, layers, where="post", lw=1.2, ls="--", label="quality layers shown (max)")
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
    """Each cell's over-time plot, cells/ID/timeline.png (plot_timeline)."""
    made = {}
    for r in records:
        cid = r["cell"]["id"]
        celldir = os.path.join(out, "cells", cid)
        steps = r.get("steps") or {}
        title = f"{cid}: {r['cell']['transport']}, " + scenario_name(scenario_of(r["cell"]))
        with contextlib.suppress(OSError, ValueError, KeyError):
            # The video connection's path events (with audio on a connection of its own the server logs both).
            video_id = metrics.video_client(read_json(os.path.join(celldir, "server.json"), {})).get("client")
            png = plot_timeline(os.path.join(celldir, "timeline.png"), title, os.path.join(celldir, "client.jsonl"),
                                os.path.join(celldir, "server.jsonl"), steps.get("capacity"), steps.get("step_downs_us", ()),
                                client_id=video_id)
            if png:
                made[cid] = os.path.relpath(png, out)
    return made


def run_av_plots(out, records):
    """Each cell's audio-beside-video plot, cells/ID/av-timeline.png
    (plot_av_timeline), for the cells whose client played audio."""
    made = {}
    for r in records:
        cid = r["cell"]["id"]
        celldir = os.path.join(out, "cells", cid)
        title = f"{cid}: audio beside video\n" + scenario_name(scenario_of(r["cell"]))
        with contextlib.suppress(OSError, ValueError, KeyError):
            png = plot_av_timeline(os.path.join(celldir, "av-timeline.png"), title, os.path.join(celldir, "client.jsonl"),
                                   (r.get("steps") or {}).get("step_downs_us", ()))
            if png:
                made[cid] = os.path.relpath(png, out)
    return made


def window_steps(frames, t0_us):
    """Per window of a cell's frames.csv rows @frames, in capture order: its
    first capture time in seconds after @t0_us, the frames shown (of W) and
    the most quality layers among them, as the timeline draws them."""
    per_window = {}
    for f in frames:
        pw = per_window.setdefault(int(f["window"]), {"t": int(f["capture_us"]), "shown": 0, "q": 0})
        pw["t"] = min(pw["t"], int(f["capture_us"]))
        if f["shown"] == "1":
            pw["shown"] += 1
            pw["q"] = max(pw["q"], int(f["quality_layers"]))
    ws = sorted(per_window.values(), key=lambda v: v["t"])
    return [(v["t"] - t0_us) / 1e6 for v in ws], [v["shown"] for v in ws], [v["q"] for v in ws]


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


# ---------------------------------------------------------------- pps-fanout


def fanout_latency(out, runinfo, rows):
    """pps-fanout's latency.png: frame latency of every client over time."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    t0 = None
    for m in rows:
        frames, _ = metrics.client_events(os.path.join(out, f"client-{m['side']}.jsonl"))
        shown = sorted((f["capture_us"], f["display_us"]) for f in frames if f.get("shown") and f.get("display_us"))
        if not shown:
            continue
        t0 = t0 or shown[0][0]
        ax.plot([(c - t0) / 1e6 for c, _ in shown], [(d - c) / 1e3 for c, d in shown], ".", ms=2,
                label=f"{m['side']} ({(m['capacity_bps'] or 0) / 1e6:g} Mbit/s): shown {'-' if m['frames_shown_pct'] is None else format(m['frames_shown_pct'], '.0f')}%")
    ax.set_yscale("symlog", linthresh=1000)
    ax.set_xlabel("capture time (s)")
    ax.set_ylabel("frame latency (ms)")
    ax.axhline(400, color="grey", ls="--", lw=0.8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"one encode, {len(rows)} clients, pattern {runinfo['pattern']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "latency.png"), dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------- pps-peers


PEER_STYLES = {"ppstream-minbuf": ("C0", "-"), "ppstream-tcp": ("C1", "-"), "ppstream-minbuf-fixed": ("C0", ":"),
               "ppstream-default": ("C4", "-"), "ppstream-copies2": ("C5", "-"), "ppstream-copies3": ("C6", "-"), "gst-tcp": ("C3", "--"), "srt": ("C2", "--"), "webrtc": ("C1", "-.")}
PEER_SCENARIO_TITLES = {"paper": "paper: 10 Mbit/s, 50 ms RTT, 20 cubic flows, drop-tail 1 BDP",
                        "idle": "idle: 10 Mbit/s, 50 ms RTT, no cross traffic",
                        "steps": "steps: 8/2/0.8/4 Mbit/s x 10 s, 60-pkt drop-tail, 50 ms RTT"}


def peers_latency_cdf(out, results, scenario_order, patterns=None):
    """pps-peers' peers-latency-cdf.png: a panel per scenario (columns) and
    pattern (rows), each system's latency CDF over the frames expected.
    @patterns: the rows' order (default: the patterns in @results)."""
    plt = pyplot()
    scenarios = [s for s in scenario_order if any(r["scenario"] == s for r in results)]
    patterns = patterns or sorted({r.get("pattern") for r in results}, key=lambda p: p or "")
    fig, axes = plt.subplots(len(patterns), len(scenarios), figsize=(6.5 * len(scenarios), 4.5 * len(patterns)), squeeze=False)
    for row, pattern in zip(axes, patterns):
        for ax, scenario in zip(row, scenarios):
            drawn = False
            for r in results:
                if r["scenario"] != scenario or r.get("pattern") != pattern:
                    continue
                rdir = os.path.join(out, r.get("rundir") or os.path.join(scenario, r.get("variant", r["system"])))
                with open(os.path.join(rdir, "latency_ms.json")) as f:
                    lat = sorted(json.load(f))
                if not lat:
                    continue
                # The CDF over frames expected: frames never shown keep it below 1.
                n = max(r["frames_expected"], len(lat))
                color, style = PEER_STYLES.get(r["system"], ("k", "-"))
                label = r["label"] + (f", {r['peer_kbps']} kbit/s" if r["kind"] == "peer" else "")
                if r.get("variant", r["system"]) != r["system"]:
                    style = ":"
                ax.step(lat, [(i + 1) / n for i in range(len(lat))], where="post", color=color, linestyle=style, label=label)
                drawn = True
            ax.set_xscale("log")
            ax.set_xlabel("glass-to-glass latency (ms, log scale)")
            ax.set_ylabel("fraction of frames captured")
            ax.set_title(PEER_SCENARIO_TITLES.get(scenario, scenario) + (f"; {pattern}" if pattern else ""), fontsize=9)
            ax.set_ylim(0, 1.02)
            ax.grid(True, which="both", alpha=0.3)
            if drawn:
                ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "peers-latency-cdf.png")
    fig.savefig(path, dpi=90 if len(patterns) > 1 else 110)
    plt.close(fig)
    return path


def peers_steps_timeline(out, series, name="peers-steps-timeline.png", pattern=None):
    """pps-peers' @name (peers-steps-timeline-PATTERN.png): glass-to-glass
    latency of every system over the run, beside the link's capacity, on the
    steps scenario (the same trace for all). @series: peers.steps_series()."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    cap_drawn = False
    for one in series:
        r, run, pts = one["result"], one["run"], one["points"]
        t0 = run["start_us"]
        color, style = PEER_STYLES.get(r["system"], ("k", "-"))
        a1.plot([(c - t0) / 1e6 for c, _ in pts], [(t - c) / 1e3 for c, t in pts], ".", ms=2, color=color,
                label=r["label"] + (f", {r['peer_kbps']} kbit/s" if r["kind"] == "peer" else ""))
        cap, downs = one["capacity"], one["step_downs"]
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
    fig.suptitle("steps: each system alone on the same capacity trace (60-pkt drop-tail, 50 ms RTT)" + (f"; {pattern}" if pattern else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- pps-protolat-bench


def protolat(rows, summary, out, configs, labels):
    """pps-protolat-bench's cdf-*.png (latency CDF, log axis, like IWQoS Fig.
    5) and timeline-*.png (latency over receive time, like Fig. 3)."""
    plt = pyplot()
    import numpy as np
    settings = sorted({(s["rate_mbit"], s["rtt_ms"], s["ecn"]) for s in summary})
    for rate, rtt, ecn in settings:
        tag = "%gmbit-%gms-%s" % (rate, rtt, "ecn" if ecn else "noecn")
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for cfg in configs:
            rs = [r for r in rows if (r["rate_mbit"], r["rtt_ms"], r["ecn"], r["config"]) == (rate, rtt, ecn, cfg)]
            if not rs:
                continue
            lat = np.sort(np.concatenate([np.load(os.path.join(r["dir"], "lat_ms.npy")) for r in rs]))
            if not len(lat):
                continue
            y = np.arange(1, len(lat) + 1) / len(lat)
            step = max(1, len(lat) // 4000)
            ax.plot(np.maximum(lat[::step], 1.0), y[::step], label=labels[cfg])
        for x in (160, 200, 500):
            ax.axvline(x, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("protocol latency (ms)")
        ax.set_ylabel("fraction of packets")
        ax.set_title("Latency CDF, %g Mbit/s, RTT %g ms, %s" % (rate, rtt, "ECN + DRD" if ecn else "drop-tail"))
        ax.legend(loc="lower right")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "cdf-%s.png" % tag), dpi=110)
        plt.close(fig)

        fig, axes = plt.subplots(len(configs), 1, figsize=(8, 2.2 * len(configs)), sharex=True)
        for ax, cfg in zip(axes, configs):
            rs = [r for r in rows if (r["rate_mbit"], r["rtt_ms"], r["ecn"], r["config"], r["rep"]) ==
                  (rate, rtt, ecn, cfg, 0)]
            if rs:
                lat = np.load(os.path.join(rs[0]["dir"], "lat_ms.npy"))
                t = np.load(os.path.join(rs[0]["dir"], "t_recv_s.npy"))
                ax.plot(t, lat, ",", ms=1)
            for y in (160, 500):
                ax.axhline(y, color="grey", lw=0.8, ls="--")
            ax.set_ylim(0, 2000)
            ax.set_ylabel("ms")
            ax.set_title(labels[cfg], fontsize=9)
        axes[-1].set_xlabel("receive time (s)")
        fig.suptitle("Protocol latency over time, %g Mbit/s, RTT %g ms, %s (repetition 0)" %
                     (rate, rtt, "ECN + DRD" if ecn else "drop-tail"), fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "timeline-%s.png" % tag), dpi=110)
        plt.close(fig)
