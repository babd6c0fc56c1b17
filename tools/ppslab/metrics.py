# SPDX-License-Identifier: MIT
"""Statistics and one run's figures, shared by every runner (pps-sweep,
pps-fanout, pps-peers, the attack table) and the tests.

percentile() is the client's own definition (nearest rank: the value of rank
ceil(p/100 x n) of the n sorted values, rank 1 at least), so a figure computed
here from the client's events agrees with the one in its summary.

The per-run figures (docs/NETLAB.md, "Per-run figures") come from the
client's JSON Lines `frame` and `window` events, the server's per-second
`--log` (when the server has it), the link's capacity steps and
pps-peer-score's PSNR:
- frames expected: the 30 frames/s capture grid over the analysed span; the
  span runs from the first frame the client heard of + skip_start_s to the
  last one - skip_end_s (join and the frames still in flight at the end);
- frames shown (%): distinct frames shown with a capture time in the span / expected;
- frame latency: display - capture of the frames shown (p50/p95/p99);
- freeze: the gap between consecutive shown frames' display times; total frozen
  time is the sum of gaps longer than 100 ms, the longest freeze the largest gap;
  freezes within 1 s after a step down of the link's capacity are excused:
  longest_freeze_outside_steps_ms is the largest gap once the part of it that
  lies inside such a 1-s span is taken out (a freeze from 0.2 s to 2.0 s after
  a step down counts 1.0 s there).
With asap playout a window's frames are shown together, so gaps of a few frame
periods are common and the 100-ms threshold counts them: compare total frozen
time between runs with the same playout. Nothing here relies on the client's
own summary figures, but for audio where its log has no `audio` events.

Audio (the client's `audio`, `audio_late` and `audio_skipped` events; a
stream without audio has none and every audio figure is None):
- slots: the audio slots the client played out with a capture time in the
  analysed span, each played (as sent), recovered (Opus in-band FEC from the
  next frame) or concealed (Opus packet-loss concealment); played,
  recovered and concealed % are shares of the slots and sum to 100 (the
  client's own audio_concealed_pct counts the recovered ones as well);
- late %: the frames that arrived after their slot (`audio_late`, their seq
  inside the span's) over the slots, as the client counts it; skipped: the
  frames the jitter buffer skipped;
- mouth-to-ear p50/p95/p99: ear - capture of every slot (nearest rank);
- playout delay: mean and standard deviation (the population's, as the
  client) of the jitter buffer's delay of each slot;
- A/V skew: at each video frame shown in the span, its latency minus the
  mouth-to-ear of the last audio slot heard before it (if that slot is at
  most 200 ms older: the client's rule), p50 and the p95 of its magnitude.
Standard library only.
"""
import bisect
import math
import os
import statistics
import subprocess

from .files import read_jsonl, read_tsv

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


# ---------------------------------------------------------------- statistics


def percentile(values, p):
    """Nearest-rank percentile @p (0-100) of @values (any order), as
    client/pps-stats.c computes it; None when there are none."""
    if not values:
        return None
    v = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(v)))
    return v[rank - 1]


def mean(xs):
    """The mean of the values that are numbers (None and NaN left out); None if none are."""
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


def sd(xs):
    """Sample standard deviation (0 for one value, None for none)."""
    xs = [x for x in xs if x is not None]
    return statistics.stdev(xs) if len(xs) > 1 else (0.0 if xs else None)


def within_pct(values, bound):
    """% of @values at or below @bound (None when there are none)."""
    return 100.0 * sum(1 for x in values if x <= bound) / len(values) if values else None


def ci95(values):
    """(mean, half-width of the 95% confidence interval) by Student's t; NaNs left out."""
    vals = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return float("nan"), float("nan")
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, 0.0
    s = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}.get(len(vals), 1.96)
    return m, t * s / math.sqrt(len(vals))


# ---------------------------------------------------------------- freezes


def freeze_figures(displays_us, step_downs_us=()):
    """Freezes from the display times of the pictures shown (sorted, us):
    the gaps [(start_us, gap_us)], the frozen time (gaps > 100 ms), the
    longest gap, the longest once the 1 s after each step down is set aside,
    and the gaps over 500 ms (those that a step down explains counted apart)."""
    gaps = [(a, b - a) for a, b in zip(displays_us, displays_us[1:])]
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
    return {
        "gaps": gaps,
        "frozen_us": sum(g for _, g in gaps if g > FREEZE_GAP_MS * 1000),
        "longest_us": max((g for _, g in gaps), default=0),
        "longest_outside_steps_us": max((outside_steps(a, g) for a, g in gaps), default=0),
        "over_500ms": len(long_gaps),
        "over_500ms_after_step": len(long_gaps) - len(outside),
    }


# ---------------------------------------------------------------- one run of the client

CLIENT_EVENT_TYPES = ("frame", "window", "audio", "audio_late", "audio_skipped", "summary")


def client_log(path):
    """client.jsonl -> {type: [events]} for each of CLIENT_EVENT_TYPES (a
    client without audio: no audio events)."""
    out = {kind: [] for kind in CLIENT_EVENT_TYPES}
    for e in read_jsonl(path):
        if e.get("type") in out:
            out[e["type"]].append(e)
    return out


def client_events(path):
    """client.jsonl -> (frames, windows) lists of events."""
    log = client_log(path)
    return log["frame"], log["window"]


def client_summary(path):
    """The client's last `summary` event, or None (a client cut short)."""
    s = [e for e in read_jsonl(path) if e.get("type") == "summary"]
    return s[-1] if s else None


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
    fz = freeze_figures(displays, step_downs_us)
    display_span = (displays[-1] - displays[0]) if len(displays) > 1 else 0
    return {
        "frames_expected": expected,
        "frames_shown": len(shown),
        "frames_shown_pct": 100.0 * min(len(shown), expected) / expected if expected else None,
        "frame_latency_p50_ms": percentile(lat, 50),
        "frame_latency_p95_ms": percentile(lat, 95),
        "frame_latency_p99_ms": percentile(lat, 99),
        "longest_freeze_ms": fz["longest_us"] / 1000.0 if displays else None,
        "total_frozen_ms": fz["frozen_us"] / 1000.0,
        "frozen_pct": 100.0 * fz["frozen_us"] / display_span if display_span else None,
        "freezes_over_500ms": fz["over_500ms"],
        "freezes_over_500ms_after_step": fz["over_500ms_after_step"],
        "longest_freeze_outside_steps_ms": fz["longest_outside_steps_us"] / 1000.0 if displays else None,
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


# ---------------------------------------------------------------- audio

AUDIO_HOWS = ("played", "recovered", "concealed")
# client/pps-stats.c: audio counts as playing, for A/V skew, while its last
# slot is this recent.
AUDIO_ACTIVE_US = 200_000
# The figures of an audio track, all None for a stream without one.
AUDIO_FIGURES = ("audio_slots", "audio_played_pct", "audio_recovered_pct", "audio_concealed_pct", "audio_late_pct",
                 "audio_late", "audio_skipped", "mouth_to_ear_p50_ms", "mouth_to_ear_p95_ms", "mouth_to_ear_p99_ms",
                 "audio_delay_mean_ms", "audio_delay_std_ms", "av_skew_p50_ms", "av_skew_abs_p95_ms")


def no_audio():
    """The audio figures of a run without audio: every one None, and where
    they came from ("": nowhere)."""
    return dict(dict.fromkeys(AUDIO_FIGURES), audio_from="")


def _pct(part, whole):
    return 100.0 * part / whole if whole else None


def _number(x):
    """@x if it is a number (not None, NaN, a bool or a string), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or (isinstance(x, float) and math.isnan(x)):
        return None
    return x


def audio_from_summary(summary):
    """The audio figures from the client's summary (its `summary` event or
    its --stats-json), for a log without per-slot events; no_audio() when the
    summary has no audio fields (a stream without audio, a client from before
    the audio track). The shares are recomputed from its counts, so that
    concealed % leaves out the recovered slots as it does from the events."""
    out = no_audio()
    summary = summary or {}
    slots = _number(summary.get("audio_slots"))
    if not slots:
        return out
    out.update({
        "audio_slots": slots,
        "audio_played_pct": _pct(_number(summary.get("audio_played")) or 0, slots),
        "audio_recovered_pct": _pct(_number(summary.get("audio_recovered")) or 0, slots),
        "audio_concealed_pct": _pct(_number(summary.get("audio_concealed")) or 0, slots),
        "audio_late": _number(summary.get("audio_late")),
        "audio_skipped": _number(summary.get("audio_skipped")),
        "audio_from": "summary",
    })
    out["audio_late_pct"] = _number(summary.get("audio_late_pct"))
    if out["audio_late_pct"] is None and out["audio_late"] is not None:
        out["audio_late_pct"] = _pct(out["audio_late"], slots)
    for key in ("mouth_to_ear_p50_ms", "mouth_to_ear_p95_ms", "mouth_to_ear_p99_ms", "audio_delay_mean_ms",
                "audio_delay_std_ms", "av_skew_p50_ms", "av_skew_abs_p95_ms"):
        out[key] = _number(summary.get(key))
    return out


def av_skews(slots, frames, span_us=None):
    """[(display_us, skew_ms)]: at each frame shown (capture time in @span_us
    when given), its latency minus the mouth-to-ear of the last audio slot
    heard at or before its display, if that slot is at most AUDIO_ACTIVE_US
    older; in the frames' order."""
    heard = sorted((a["ear_us"], a["ear_us"] - a["capture_us"]) for a in slots
                   if a.get("ear_us") and a.get("capture_us"))
    ears = [t for t, _ in heard]
    out = []
    for f in frames:
        if not (f.get("shown") and f.get("display_us") and f.get("capture_us")):
            continue
        if span_us and not span_us[0] <= f["capture_us"] <= span_us[1]:
            continue
        i = bisect.bisect_right(ears, f["display_us"]) - 1
        if i < 0 or f["display_us"] - ears[i] >= AUDIO_ACTIVE_US:
            continue
        out.append((f["display_us"], (f["display_us"] - f["capture_us"] - heard[i][1]) / 1000.0))
    return out


def audio_metrics(log, span_us=None):
    """The audio figures of one client (docstring above) from its client_log:
    the per-slot events inside @span_us (the video's analysed span; the whole
    run without one), or the summary's figures when the log has no `audio`
    event but the summary counts slots; no_audio() for a run without audio."""
    slots = [a for a in log.get("audio", []) if a.get("capture_us") is not None and a.get("ear_us") is not None]
    if span_us:
        slots = [a for a in slots if span_us[0] <= a["capture_us"] <= span_us[1]]
    if not slots:
        summaries = log.get("summary") or []
        return audio_from_summary(summaries[-1] if summaries else None) if not log.get("audio") else no_audio()
    n = len(slots)
    hows = {h: sum(1 for a in slots if a.get("how") == h) for h in AUDIO_HOWS}
    # Anything but played and recovered is a slot the decoder made up.
    hows["concealed"] = n - hows["played"] - hows["recovered"]
    seqs = [a["seq"] for a in slots if isinstance(a.get("seq"), int)]
    lo, hi = (min(seqs), max(seqs)) if seqs else (None, None)

    def in_span(e):
        return lo is None or (isinstance(e.get("seq"), int) and lo <= e["seq"] <= hi)

    late = sum(1 for e in log.get("audio_late", []) if in_span(e))
    skipped = sum(1 for e in log.get("audio_skipped", []) if in_span(e))
    ear = [(a["ear_us"] - a["capture_us"]) / 1000.0 for a in slots]
    delay = [a["playout_delay_ms"] for a in slots if _number(a.get("playout_delay_ms")) is not None]
    delay_mean = sum(delay) / len(delay) if delay else None
    skew = [x for _, x in av_skews(slots, log.get("frame", []), span_us)]
    return {
        "audio_slots": n,
        "audio_played_pct": _pct(hows["played"], n),
        "audio_recovered_pct": _pct(hows["recovered"], n),
        "audio_concealed_pct": _pct(hows["concealed"], n),
        "audio_late_pct": _pct(late, n),
        "audio_late": late,
        "audio_skipped": skipped,
        "mouth_to_ear_p50_ms": percentile(ear, 50),
        "mouth_to_ear_p95_ms": percentile(ear, 95),
        "mouth_to_ear_p99_ms": percentile(ear, 99),
        "audio_delay_mean_ms": delay_mean,
        "audio_delay_std_ms": math.sqrt(max(0.0, sum(d * d for d in delay) / len(delay) - delay_mean ** 2)) if delay else None,
        "av_skew_p50_ms": percentile(skew, 50),
        "av_skew_abs_p95_ms": percentile([abs(x) for x in skew], 95),
        "audio_from": "events",
    }


def audio_series(log, t0_us):
    """For a plot: [(t_s of capture, mouth-to-ear ms, how, playout delay ms
    or None)] of every slot and [(t_s of display, A/V skew ms)] of the frames
    shown, from @t0_us."""
    slots = sorted((a for a in log.get("audio", []) if a.get("capture_us") is not None and a.get("ear_us") is not None),
                   key=lambda a: a["capture_us"])
    ear = [((a["capture_us"] - t0_us) / 1e6, (a["ear_us"] - a["capture_us"]) / 1000.0, a.get("how", "played"),
            _number(a.get("playout_delay_ms"))) for a in slots]
    skew = [((t - t0_us) / 1e6, x) for t, x in av_skews(slots, log.get("frame", []))]
    return ear, sorted(skew)


def server_audio(server):
    """The server's audio counters (--stats-json), summed over its sessions
    (the audio-only connection is one of them): audio_sent, audio_late,
    audio_overflow, audio_refused, and the encoder's audio_frames and
    audio_dropped; None for each one the server did not write (a server
    without audio, or one from before the counters)."""
    server = server or {}
    clients = server.get("clients") or []
    out = {}
    for key in ("audio_sent", "audio_late", "audio_overflow", "audio_refused"):
        values = [c[key] for c in clients if _number(c.get(key)) is not None]
        out["server_" + key] = sum(values) if values else None
    for key in ("audio_frames", "audio_dropped"):
        out["server_" + key] = _number(server.get(key))
    return out


def video_client(server):
    """The server's counters (--stats-json) of the client's video connection:
    the first client that is not an audio-only connection ({} if none)."""
    clients = (server or {}).get("clients") or []
    for c in clients:
        if not c.get("audio_only"):
            return c
    return {}


def audio_client(server):
    """The server's counters of the client's audio-only connection ({} if none)."""
    for c in (server or {}).get("clients") or []:
        if c.get("audio_only"):
            return c
    return {}


# ---------------------------------------------------------------- the server's --log


def server_log(path):
    """The server's --log: {'path': {client: [events]}, 'rates': [events]};
    empty when the file does not exist (a server without --log)."""
    out = {"path": {}, "rates": []}
    for e in read_jsonl(path):
        if e.get("type") == "path":
            out["path"].setdefault(e.get("client", 0), []).append(e)
        elif e.get("type") == "rates":
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
            "dropped_windows": max((e.get("windows_dropped") or 0 for e in evs), default=0),
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


def server_client_id(server_jsonl, addr):
    """The server's client id for a receiver: its path records' address. A
    client with audio connections of its own has several from one address:
    the one the video went to (layers sent), else the first."""
    first = None
    for e in read_jsonl(server_jsonl):
        if e.get("type") == "path" and str(e.get("address", "")).rsplit(":", 1)[0] == addr:
            if any(e.get("sent_layer_bps") or []):
                return e.get("client")
            if first is None:
                first = e.get("client")
    return first


def layer_means(rows):
    rows = [r for r in rows if isinstance(r, list) and r]
    if not rows:
        return None
    n = max(len(r) for r in rows)
    return [sum(r[i] for r in rows if i < len(r)) / len(rows) for i in range(n)]


# ---------------------------------------------------------------- pictures scored


# Shifts tried one buffer at a time: the checks only compare with the two
# neighbours, and an anchor two buffers off (ball beside 20 flows, once) needs
# two steps.
PEER_SCORE_SHIFTS = 4


def peer_score(program, pattern, y4m, scores_path, timeout=900):
    """pps-peer-score of @y4m into @scores_path (its TSV). Scored again with
    --shift, a buffer further each time, while most of its reference checks
    found the same neighbour of the anchored buffer better than it (a poor
    first picture misled the anchor: ball beside 20 flows was scored one and
    once two buffers off throughout), at most PEER_SCORE_SHIFTS times. Returns
    the last run's CompletedProcess (stderr captured)."""
    def run(extra):
        with open(scores_path, "w") as f:
            return subprocess.run([program, "--pattern", pattern, *extra, y4m], stdout=f,
                                  stderr=subprocess.PIPE, text=True, timeout=timeout)

    r = run([])
    shift = 0
    for _ in range(PEER_SCORE_SHIFTS):
        if r.returncode != 0:
            return r
        best = [row["ref_best"] for row in read_tsv(scores_path) if row.get("ref_best")]
        step = next((s for s in (-1, 1) if best and best.count(str(s)) * 2 > len(best)), 0)
        if not step:
            break
        shift += step
        r = run(["--shift", str(shift)])
    return r


def psnr_metrics(scores_path, span_us=None):
    """Mean PSNR-Y/SSIM-Y of the pictures shown, from pps-peer-score's TSV (docs/PEERS.md)."""
    try:
        with open(scores_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {"psnr_y_mean": None, "ssim_y_mean": None}
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


# ---------------------------------------------------------------- everything for one client


def run_metrics(client_jsonl, server_jsonl=None, step_downs_us=(), scores_tsv=None, elephant_mean_bps=None):
    """Everything above for one client of one run."""
    log = client_log(client_jsonl)
    frames, windows = log["frame"], log["window"]
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
    # The same with every byte the client's video connections brought (its
    # summary's received_bps): what the stream took of the path, copies
    # (client.copies) included.
    wire = (client_summary(client_jsonl) or {}).get("received_bps")
    m["wire_share"] = wire / elephant_mean_bps if elephant_mean_bps and wire else None
    if server_jsonl and os.path.exists(server_jsonl):
        m.update(server_log_metrics(server_log(server_jsonl)))
    else:
        m["server_log"] = False
    if scores_tsv and os.path.exists(scores_tsv):
        m.update(psnr_metrics(scores_tsv, span))
    m.update(audio_metrics(log, span))
    return m
