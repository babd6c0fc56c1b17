# SPDX-License-Identifier: MIT
"""One run's figures and over-time plot, shared by pps-sweep, pps-fanout and
the netlab step test: computed from the client's JSON Lines `frame`
and `window` events, the server's per-second `--log` (when the server has
it), the link's capacity steps and pps-peer-score's PSNR.

Definitions (docs/NETLAB.md, "Per-run figures"):
- frames expected: the 30 frames/s capture grid over the analysed span; the
  span runs from the first frame the client heard of + skip_start_s to the
  last one - skip_end_s (join and the frames still in flight at the end);
- frames shown (%): distinct frames shown with a capture time in the span / expected;
- frame latency: display - capture of the frames shown (p50/p95/p99);
- freeze: the gap between consecutive shown frames' display times; total frozen
  time is the sum of gaps longer than 100 ms, the longest freeze the largest gap;
  the step test excuses freezes within 1 s after a step down of the link's capacity:
  longest_freeze_outside_steps_ms is the largest gap once the part of it that
  lies inside such a 1-s span is taken out (a freeze from 0.2 s to 2.0 s after
  a step down counts 1.0 s there).
With asap playout a window's frames are shown together, so gaps of a few frame
periods are common and the 100-ms threshold counts them: compare total frozen
time between runs with the same playout.
Nothing here relies on the client's own summary figures. Standard library,
except plot_timeline (matplotlib).
"""
import bisect
import contextlib
import json
import math
import os

FPS = 30.0
FREEZE_GAP_MS = 100.0
LONG_FREEZE_MS = 500.0
STEP_GRACE_S = 1.0
DEFAULT_SKIP_START_S = 1.0
DEFAULT_SKIP_END_S = 1.0
# videotestsrc patterns pps-peer-score regenerates picture for picture. snow
# too: its generator is seeded once per process, so the regenerated noise is
# the sender's (pps-peer-score's reference checks held on a steps run).
PSNR_PATTERNS = ("ball", "smpte", "snow", "bar", "pinwheel")


def read_jsonl(path):
    """Every JSON object in a JSON Lines file ([] if there is no file); a line
    cut short by a kill is skipped."""
    out = []
    with contextlib.suppress(OSError):
        with open(path) as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    e = json.loads(line)
                    if isinstance(e, dict):
                        out.append(e)
    return out


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def client_events(path):
    """client.jsonl -> (frames, windows) lists of events."""
    frames, windows = [], []
    for e in read_jsonl(path):
        if e.get("type") == "frame":
            frames.append(e)
        elif e.get("type") == "window":
            windows.append(e)
    return frames, windows


def analysed_span_us(frames, skip_start_s=DEFAULT_SKIP_START_S, skip_end_s=DEFAULT_SKIP_END_S):
    caps = [f["capture_us"] for f in frames if f.get("capture_us")]
    if not caps:
        return None
    return min(caps) + skip_start_s * 1e6, max(caps) - skip_end_s * 1e6


def frame_metrics(frames, step_downs_us=(), fps=FPS, skip_start_s=DEFAULT_SKIP_START_S, skip_end_s=DEFAULT_SKIP_END_S,
                  span_us=None):
    """The figures above, from `frame` events. @step_downs_us: CLOCK_REALTIME
    us of the link's steps to a lower capacity (trace runs)."""
    span = span_us or analysed_span_us(frames, skip_start_s, skip_end_s)
    empty = {"frames_expected": 0, "frames_shown": 0, "frames_shown_pct": None, "frame_latency_p50_ms": None,
             "frame_latency_p95_ms": None, "frame_latency_p99_ms": None, "longest_freeze_ms": None,
             "total_frozen_ms": None, "frozen_pct": None, "freezes_over_500ms": 0, "freezes_over_500ms_after_step": 0,
             "longest_freeze_outside_steps_ms": None, "span_s": 0.0}
    if not span or span[1] <= span[0]:
        return empty
    t0, t1 = span
    period_us = 1e6 / fps
    expected = int(math.floor((t1 - t0) / period_us)) + 1
    shown = {}
    for f in frames:
        if f.get("shown") and f.get("display_us") and t0 <= f["capture_us"] <= t1:
            key = f.get("frame", f["capture_us"])
            if key not in shown or f["display_us"] < shown[key][1]:
                shown[key] = (f["capture_us"], f["display_us"])
    lat = [(d - c) / 1000.0 for c, d in shown.values()]
    displays = sorted(d for _, d in shown.values())
    gaps = [(a, b - a) for a, b in zip(displays, displays[1:])]
    downs = sorted(step_downs_us)

    def outside_steps(start_us, gap_us):
        """The part of the gap [start, start + gap] outside every [step down, + 1 s]."""
        end_us = start_us + gap_us
        excused = 0.0
        for t in downs[max(0, bisect.bisect_right(downs, start_us) - 1):]:
            if t > end_us:
                break
            excused += max(0.0, min(end_us, t + STEP_GRACE_S * 1e6) - max(start_us, t))
        return gap_us - excused

    long_gaps = [(a, g) for a, g in gaps if g > LONG_FREEZE_MS * 1000]
    outside = [g for a, g in long_gaps if outside_steps(a, g) > LONG_FREEZE_MS * 1000]
    short_or_outside = [outside_steps(a, g) for a, g in gaps]
    frozen_us = sum(g for _, g in gaps if g > FREEZE_GAP_MS * 1000)
    display_span = (displays[-1] - displays[0]) if len(displays) > 1 else 0
    return {
        "frames_expected": expected,
        "frames_shown": len(shown),
        "frames_shown_pct": 100.0 * min(len(shown), expected) / expected if expected else None,
        "frame_latency_p50_ms": percentile(lat, 50),
        "frame_latency_p95_ms": percentile(lat, 95),
        "frame_latency_p99_ms": percentile(lat, 99),
        "longest_freeze_ms": max((g for _, g in gaps), default=0) / 1000.0 if displays else None,
        "total_frozen_ms": frozen_us / 1000.0,
        "frozen_pct": 100.0 * frozen_us / display_span if display_span else None,
        "freezes_over_500ms": len(long_gaps),
        "freezes_over_500ms_after_step": len(long_gaps) - len(outside),
        "longest_freeze_outside_steps_ms": max(short_or_outside, default=0) / 1000.0 if displays else None,
        "span_s": (t1 - t0) / 1e6,
    }


def received_series(windows, t0_us, bin_s=1.0):
    """Bytes the client received per second, by window completion time: [(t_s, bit/s)]."""
    bins = {}
    for w in windows:
        t = w.get("complete_us")
        if t and w.get("bytes"):
            k = int((t - t0_us) // (bin_s * 1e6))
            bins[k] = bins.get(k, 0) + w["bytes"]
    return [(k * bin_s, b * 8 / bin_s) for k, b in sorted(bins.items()) if k >= 0]


def server_log(path):
    """The server's --log: {'path': {client: [events]}, 'rates': [events]};
    empty when the file does not exist (a server without --log)."""
    out = {"path": {}, "rates": []}
    for e in read_jsonl(path):
        if e.get("event") == "path":
            out["path"].setdefault(e.get("client", 0), []).append(e)
        elif e.get("event") == "rates":
            out["rates"].append(e)
    return out


def server_log_metrics(log):
    """Means over the run of the server's view, per client (first client if one)."""
    per_client = {}
    for cid, evs in log["path"].items():
        def m(key):
            xs = [e[key] for e in evs if isinstance(e.get(key), (int, float))]
            return sum(xs) / len(xs) if xs else None
        per_client[cid] = {
            "estimate_bps_mean": m("estimate_bps"), "delivery_rate_bps_mean": m("delivery_rate_bps"),
            "queue_delay_ms_mean": (m("queue_delay_us") or 0) / 1e3 if m("queue_delay_us") is not None else None,
            "min_rtt_ms": min((e["min_rtt_us"] for e in evs if e.get("min_rtt_us")), default=0) / 1e3 or None,
            "dropped_windows": max((e.get("dropped_windows") or 0 for e in evs), default=0),
            "retrans_pkts": max((e.get("retrans_pkts") or 0 for e in evs), default=0),
            "cap_states": sorted({e.get("cap_state") for e in evs if e.get("cap_state")}),
            "sent_layer_bps_mean": layer_means([e.get("sent_layer_bps") for e in evs]),
        }
    rates = log["rates"]
    return {
        "server_log": bool(per_client or rates),
        "clients": per_client,
        "encoded_layer_bps_mean": layer_means([e.get("encoded_layer_bps") for e in rates]),
        "idr_requests": max((e.get("idr_requests") or 0 for e in rates), default=None) if rates else None,
    }


def layer_means(rows):
    rows = [r for r in rows if isinstance(r, list) and r]
    if not rows:
        return None
    n = max(len(r) for r in rows)
    return [sum(r[i] for r in rows if i < len(r)) / len(rows) for i in range(n)]


def psnr_metrics(scores_path, span_us=None):
    """Mean PSNR-Y/SSIM-Y of the pictures shown, from pps-peer-score's TSV (docs/PEERS.md)."""
    with contextlib.suppress(OSError):
        with open(scores_path) as f:
            lines = f.read().splitlines()
        if not lines:
            return {"psnr_y_mean": None, "ssim_y_mean": None}
        head = lines[0].split("\t")
        psnr, ssim = [], []
        for line in lines[1:]:
            r = dict(zip(head, line.split("\t")))
            if r.get("timecode_ok") != "1" or not r.get("psnr_y"):
                continue
            if span_us and not span_us[0] <= int(r["capture_us"]) <= span_us[1]:
                continue
            psnr.append(float(r["psnr_y"]))
            if r.get("ssim_y"):
                ssim.append(float(r["ssim_y"]))
        return {"psnr_y_mean": sum(psnr) / len(psnr) if psnr else None, "ssim_y_mean": sum(ssim) / len(ssim) if ssim else None,
                "psnr_pictures": len(psnr)}
    return {"psnr_y_mean": None, "ssim_y_mean": None}


def run_metrics(client_jsonl, server_jsonl=None, step_downs_us=(), scores_tsv=None, elephant_mean_bps=None):
    """Everything above for one client of one run."""
    frames, windows = client_events(client_jsonl)
    span = analysed_span_us(frames)
    m = frame_metrics(frames, step_downs_us, span_us=span)
    if span:
        got = sum(w.get("bytes", 0) for w in windows if w.get("complete_us") and span[0] <= w["complete_us"] <= span[1])
        m["received_bps"] = got * 8 / ((span[1] - span[0]) / 1e6) if span[1] > span[0] else None
    else:
        m["received_bps"] = None
    # Throughput share against cross traffic: the stream's received bytes/s over
    # the mean elephant's, both from the same run (004 section 6.2's F).
    m["throughput_share"] = m["received_bps"] / elephant_mean_bps if elephant_mean_bps and m["received_bps"] else None
    if server_jsonl and os.path.exists(server_jsonl):
        m.update(server_log_metrics(server_log(server_jsonl)))
    else:
        m["server_log"] = False
    if scores_tsv and os.path.exists(scores_tsv):
        m.update(psnr_metrics(scores_tsv, span))
    return m


# ---------------------------------------------------------------- the over-time plot


def plot_timeline(png, title, client_jsonl, server_jsonl=None, capacity=None, step_downs_us=(), client_id=None, t0_us=None):
    """Three panels over time (s from the first capture): frame latency of the
    frames shown and the freezes; the rates (link capacity of a trace run,
    received, the server's estimate and delivery rate, the layers sent and the
    encoder's layer rates); nothing is drawn that was not measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames, windows = client_events(client_jsonl)
    caps = [f["capture_us"] for f in frames if f.get("capture_us")]
    if not caps:
        return None
    t0 = t0_us or min(caps)
    log = server_log(server_jsonl) if server_jsonl else {"path": {}, "rates": []}
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2]})
    shown = sorted((f["capture_us"], f["display_us"]) for f in frames if f.get("shown") and f.get("display_us"))
    a1.plot([(c - t0) / 1e6 for c, _ in shown], [(d - c) / 1e3 for c, d in shown], ".", ms=2, label="frame latency (shown)")
    displays = sorted(d for _, d in shown)
    first = True
    for a, b in zip(displays, displays[1:]):
        if b - a > LONG_FREEZE_MS * 1000:
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
    rx = received_series(windows, t0)
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
