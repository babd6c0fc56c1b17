# SPDX-License-Identifier: MIT
"""Numbers as the reports print them, and the sweep's report: summary.json,
report.md (docs/BENCHMARKS.md with --markdown) with the papers' published
figures beside ours, the per-run and must-show tables, and, when a sweep ran
server builds side by side, their comparison cell by cell."""
import contextlib
import csv
import json
import math
import os
import re
import shutil

from .errors import UsageError
from .files import public_command, read_json
from .cells import aggregate, load_cells, run_figures, scenario_name, scenario_of, transport_key, write_tables
from .matrix import base_id, build_names, cell_id
from .metrics import analysed_span_us, mean, percentile
from .paper import PAPER_FIGURES, PAPER_TABLE_II, PAPER_TABLE_III
from .plots import plots, run_av_plots, run_plots


def fmt(v, spec=".1f", none="-"):
    """@v formatted with @spec (a format() spec), @none for None and NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    if spec.endswith("d") and isinstance(v, float):
        v = int(v)
    return format(v, spec)


def md_table(header, rows):
    """A Markdown table: @header a list of column titles, @rows lists of cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def fmt_s(g):
    """Separation index of a group: mean over runs where every flow got something."""
    text = fmt(g.get("separation_index"), ".1f")
    starved = g.get("runs_with_starved_flow")
    if starved and text == "-":
        return f"\u221e ({starved}/{g['runs']} runs)"
    if starved:
        return text + f" (\u221e in {starved}/{g['runs']} runs)"
    return text



def cell_line(record):
    c, m = record["cell"], record["metrics"]
    return (f"{c['id']}: {m['windows_transmitted']} windows, within 300/500 ms {fmt(m['within_300ms_pct'])}/"
            f"{fmt(m['within_500ms_pct'])}%, p95 {fmt(m['window_latency_p95_ms'], '.0f')} ms, sender-dropped "
            f"{fmt(m['sender_dropped_pct'])}%, {fmt((m['server_throughput_bps'] or 0) / 1e6, '.2f')} Mbit/s, "
            f"F {fmt(m['friendliness_ratio'], '.2f')}, retrans {m['retrans_pkts']}, RTOs {m['rto_events']}; "
            f"frames shown {fmt(m.get('frames_shown_pct'))}%, frame p50/p95/p99 {fmt(m.get('frame_latency_p50_ms'), '.0f')}/"
            f"{fmt(m.get('frame_latency_p95_ms'), '.0f')}/{fmt(m.get('frame_latency_p99_ms'), '.0f')} ms, longest freeze "
            f"{fmt(m.get('longest_freeze_ms'), '.0f')} ms, frozen {fmt((m.get('total_frozen_ms') or 0) / 1e3, '.1f')} s"
            + (f"; audio played {fmt(m.get('audio_played_pct'))}%, mouth-to-ear p50/p95/p99 "
               f"{fmt(m.get('mouth_to_ear_p50_ms'), '.0f')}/{fmt(m.get('mouth_to_ear_p95_ms'), '.0f')}/"
               f"{fmt(m.get('mouth_to_ear_p99_ms'), '.0f')} ms" if has_audio(m) else ""))


def has_audio(m):
    """Whether a run's figures include an audio track."""
    return m.get("audio_slots") is not None



# ---------------------------------------------------------------- server builds side by side

# What the comparison of server builds shows per cell: (title, metric, format).
BUILD_COMPARED = (
    ("frames shown %", "frames_shown_pct", ".1f"),
    ("frame latency p50 ms", "frame_latency_p50_ms", ".0f"),
    ("frame latency p95 ms", "frame_latency_p95_ms", ".0f"),
    ("longest freeze ms", "longest_freeze_ms", ".0f"),
    ("throughput share", "throughput_share", ".2f"),
    ("PSNR-Y dB", "psnr_y_mean", ".2f"),
)


def build_comparison(plan, records):
    """The cells of a sweep with server builds, one row per cell the builds
    share: [{"cell": base id, "builds": {name: metrics}}], in the run's order,
    and a last row of means over the cells every build finished."""
    builds = build_names(plan["config"])
    if not builds:
        return []
    by_cell = {}
    for r in records:
        by_cell.setdefault(base_id(r["cell"]), {})[r["cell"].get("build")] = r["metrics"]
    rows = []
    for c in plan["cells"]:
        if c.get("build") == builds[0] and base_id(c) in by_cell:
            rows.append({"cell": base_id(c), "builds": {b: by_cell[base_id(c)].get(b) for b in builds}})
    whole = [r for r in rows if all(r["builds"][b] for b in builds)]
    if whole:
        rows.append({"cell": f"mean of {len(whole)} cell{'s' if len(whole) > 1 else ''}", "builds": {
            b: {key: mean(r["builds"][b].get(key) for r in whole) for _, key, _ in BUILD_COMPARED} for b in builds}})
    return rows


def build_comparison_section(plan, records):
    """Markdown: per cell, each metric for every build and the difference of
    each later build from the first (the builds' order on the command line)."""
    builds = build_names(plan["config"])
    rows = build_comparison(plan, records)
    if not builds:
        return []
    first, later = builds[0], builds[1:]
    diff = ", ".join(f"{b} - {first}" for b in later)
    L = ["## Server builds side by side", ""]
    L.append("Every cell ran once with each build's pps-server and pps-client, the builds interleaved cell by cell ("
             + ", ".join(f"`{name}` = {path}" for name, path in plan["config"]["server_builds"]) + "). Each column: "
             + " / ".join(builds) + f", then in brackets {diff}. Frames shown, latency and freezes from the client's "
             "frame events; share = received over the mean elephant's (cells with cross traffic); PSNR where the sweep scores pictures.")
    L.append("")

    def cell(metrics_by_build, key, spec):
        values = [(metrics_by_build.get(b) or {}).get(key) for b in builds]
        text = " / ".join(fmt(v, spec) for v in values)
        if values[0] is not None and any(v is not None for v in values[1:]):
            text += " (" + ", ".join("-" if v is None else format(v - values[0], "+" + spec) for v in values[1:]) + ")"
        return text

    table = [[r["cell"]] + [cell(r["builds"], key, spec) for _, key, spec in BUILD_COMPARED] for r in rows]
    if not table:
        table = [["no cell finished with every build"] + [""] * len(BUILD_COMPARED)]
    L += md_table(["cell"] + [title for title, _, _ in BUILD_COMPARED], table)
    L.append("")
    return L


# ---------------------------------------------------------------- the sweep's report


def find_group(groups, **kw):
    for g in groups:
        if all(g.get(k) == v for k, v in kw.items()):
            return g
    return None


def targets(groups):
    """The targets on the paper scenario (10 Mbit/s, 50 ms, 20 flows, window 2, cubic)."""
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
            part, steps = run_figures(os.path.join(out, "cells", r["cell"]["id"]), r["cell"], plan["config"],
                                          r.get("times") or {}, r["metrics"].get("elephant_mean_bps"))
            r["metrics"].update(part)
            r["steps"] = steps
    groups = aggregate(out, records, build_names(plan["config"]))
    write_tables(out, records, groups)
    made = plots(out, plan, records, groups) if records else {}
    if records:
        made["runs"] = run_plots(out, plan, records)
        made["av"] = run_av_plots(out, records)
    summary = {
        "plan": {k: plan.get(k) for k in ("preset", "command", "created", "machine", "fps")},
        "config": {k: v for k, v in plan["config"].items() if k != "text"},
        "cells_planned": len(plan["cells"]),
        "cells_done": len(records),
        "cells": [{"cell": r["cell"], **r["metrics"], "client_summary": r["client_summary"], "shares": r.get("shares"),
                   "steps": {k: v for k, v in (r.get("steps") or {}).items() if k != "capacity"} or None} for r in records],
        "groups": groups,
        "targets": [dict(zip(("queue_variant", "target", "wanted", "measured", "verdict"), t[:5])) for t in targets(groups)],
        "closed_loop_checks": must_show_checks(records),
        "server_builds": plan["config"].get("server_builds") or [],
        "build_comparison": build_comparison(plan, records),
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
    L.append("<!-- Generated by `pps-sweep report`; edit tools/ppslab/report.py, not this file. -->")
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
    L.append(f"sudo build/tools/pps-sweep --preset {plan.get('preset') or 'paper'} --out sweep-paper   # resumable: run it again after an interruption")
    target = os.path.relpath(markdown_path, os.getcwd()) if markdown_path else "docs/BENCHMARKS.md"
    L.append(f"build/tools/pps-sweep report sweep-paper --markdown {target}   # this page and docs/benchmarks/*.png")
    L.append("```")
    L.append("")
    L.append(f"- Sweep: `{public_command(plan.get('command', ''))}`, started {plan.get('created', '?')}; {len(records)} of {len(plan['cells'])} cells done; "
             f"seed {cfg['seed']} (cell order); {cfg['duration_s']:g} s of streaming per cell after {cfg['warmup_s']:g} s of cross traffic; "
             f"{cfg['repetitions']} repetitions; client playout `{cfg['playout']}`.")
    L.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs; {m.get('os', '')}; kernel `{m.get('uname', '?')}`; "
             f"ppstream of that date (its commit is in the sweep's plan.json); Python {m.get('python', '?')}. The host's default congestion control is "
             f"`{m.get('default_congestion', '?')}`; every flow here names its own (the stream: the `congestion` axis unless a "
             "server_set says otherwise; elephants, forward and reverse: cubic; the client's sockets: the lab routes' congctl, cubic)"
             + congestion_seen(records) + ".")
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

    L += build_comparison_section(plan, records)
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
    L += audio_section(plan, records, made, markdown_path)
    if made:
        L.append("## Plots")
        L.append("")
        L.append("Windows within each latency tolerance (TOMCCAP Figs. 8-9; crosses: the paper's published points):")
        L.append("")
        for sc, name in made.get("tolerance", []):
            L.append(f"![{scenario_name(sc)}]({link}{name})")
        L.append("")
        L.append("Sender throughput normalized to tcp (Table II) and windows dropped by the sender (Table III):")
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
    """The per-run figures of every run, and the must-show checks where a run matches."""
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
    checks = must_show_checks(records)
    if checks:
        L.append("### Closed-loop checks (bounds on the capacity steps, 20 flows and the idle path)")
        L.append("")
        L.append("| cell | check | wanted | measured | verdict |")
        L.append("|---|---|---|---|---|")
        for c in checks:
            L.append(f"| {c['cell']} | {c['check']} | {c['wanted']} | {c['measured']} | {c['verdict']} |")
        L.append("")
    return L


# ---------------------------------------------------------------- audio beside video

NO_AUDIO = "\u2014"  # an audio column of a run without audio


def congestion_seen(records):
    """What the server's counters say the stream's connections ran, where they say it."""
    seen = sorted({(r["metrics"].get("stream_congestion"), r["metrics"].get("audio_congestion")) for r in records
                   if r["metrics"].get("stream_congestion")}, key=str)
    if not seen:
        return ""
    parts = [f"`{video}`" + (f" (its audio connection `{audio}`)" if audio else "") for video, audio in seen]
    return "; the server's counters show the stream on " + ", ".join(parts)


def baseline_sets(cfg):
    """The server_set names whose section turns the audio off (audio.source = off):
    the runs that the ones with audio are compared with."""
    return [name for name, sets in (cfg.get("server_sets") or {}).items()
            if str(sets.get("audio.source", "")).strip() == "off"]


def audio_cells(m):
    """The audio columns of one run (NO_AUDIO where it has no audio)."""
    def f(key, spec):
        return fmt(m.get(key), spec, none=NO_AUDIO)
    delay = NO_AUDIO
    if m.get("audio_delay_mean_ms") is not None:
        delay = f"{fmt(m['audio_delay_mean_ms'], '.0f')} \u00b1 {fmt(m.get('audio_delay_std_ms'), '.0f', none=NO_AUDIO)}"
    return [f"{f('mouth_to_ear_p50_ms', '.0f')} / {f('mouth_to_ear_p95_ms', '.0f')} / {f('mouth_to_ear_p99_ms', '.0f')}",
            f("audio_played_pct", ".1f"), f"{f('audio_recovered_pct', '.1f')} / {f('audio_concealed_pct', '.1f')}",
            f("audio_late_pct", ".1f"), delay, f("av_skew_abs_p95_ms", ".0f")]


AUDIO_HEADER = ["mouth-to-ear p50 / p95 / p99 ms", "played %", "recovered / concealed %", "late %",
                "playout delay ms (mean \u00b1 sd)", "\\|A/V skew\\| p95 ms"]
VIDEO_HEADER = ["frames shown %", "frame p50 / p95 ms", "longest freeze ms", "share", "PSNR dB"]


def video_cells(m):
    return [fmt(m.get("frames_shown_pct")),
            f"{fmt(m.get('frame_latency_p50_ms'), '.0f')} / {fmt(m.get('frame_latency_p95_ms'), '.0f')}",
            fmt(m.get("longest_freeze_ms"), ".0f"), fmt(m.get("throughput_share"), ".2f"), fmt(m.get("psnr_y_mean"), ".2f")]


def audio_section(plan, records, made, markdown_path):
    """Audio beside video, run by run, and each run with audio against the
    same cell without (a server_set with audio.source = off), when some run
    has audio or the sweep has such a baseline; nothing otherwise (a sweep
    from before the audio track)."""
    baselines = baseline_sets(plan["config"])
    if not records or not (baselines or any(has_audio(r["metrics"]) for r in records)):
        return []
    L = ["## Audio beside video", ""]
    L.append("From the client's `audio` events (its summary where the log has none), over the video's analysed span: "
             "mouth-to-ear = the time a slot is heard minus its capture (nearest rank); played / recovered (Opus FEC) / "
             "concealed (Opus PLC) = shares of the slots (they sum to 100); late = frames that arrived after their slot, "
             "over the slots; playout delay = the jitter buffer's delay, mean \u00b1 sd; |A/V skew| p95 = at each "
             f"frame shown, its latency minus the mouth-to-ear of the audio heard then. {NO_AUDIO} = no audio in that run. "
             "CC = the congestion control the server's counters show on the video / audio connection.")
    L.append("")
    L += md_table(["cell"] + VIDEO_HEADER + AUDIO_HEADER + ["CC", "plot"], [
        [r["cell"]["id"]] + video_cells(r["metrics"]) + audio_cells(r["metrics"])
        + [" / ".join(x for x in (r["metrics"].get("stream_congestion"), r["metrics"].get("audio_congestion")) if x) or "-",
           av_plot_link(r, made, markdown_path)]
        for r in sorted(records, key=lambda r: r["cell"]["id"])])
    L.append("")
    rows = audio_against_baseline(records, baselines)
    if rows:
        L.append("### Video with audio against without")
        L.append("")
        L.append(f"Each run against the same cell with `server_set` {', '.join(f'`{b}`' for b in baselines)} (no audio): "
                 "the video's figures, and in brackets the difference from that run (frames shown: higher is better; "
                 "latency and freeze: lower is better).")
        L.append("")
        table = []
        for cell, name, m, base in rows:
            def d(key, spec):
                v, b = m.get(key), base.get(key)
                text = fmt(v, spec)
                if v is not None and b is not None:
                    text += f" ({format(v - b, '+' + spec)})"
                return text
            table.append([cell, name, d("frames_shown_pct", ".1f"), d("frame_latency_p50_ms", ".0f"),
                          d("frame_latency_p95_ms", ".0f"), d("longest_freeze_ms", ".0f"), d("throughput_share", ".2f")])
        L += md_table(["cell", "server_set", "frames shown %", "frame p50 ms", "frame p95 ms", "longest freeze ms", "share"], table)
        L.append("")
    return L


def av_plot_link(record, made, markdown_path):
    plot = (made.get("av") or {}).get(record["cell"]["id"])
    if not plot:
        return "-"
    return f"[A/V]({plot})" if not markdown_path else plot


def audio_against_baseline(records, baselines):
    """[(cell without its server_set, server_set, metrics, the baseline's metrics)]
    for every run whose cell also ran with a baseline server_set."""
    if not baselines:
        return []
    by_cell = {}
    for r in records:
        by_cell.setdefault(cell_id(dict(r["cell"], server_set="")), {})[r["cell"].get("server_set") or "default"] = r["metrics"]
    out = []
    for cell in sorted(by_cell):
        runs = by_cell[cell]
        base = next((runs[b] for b in baselines if b in runs), None)
        if base is None:
            continue
        for name in sorted(runs):
            if name not in baselines:
                out.append((cell, name, runs[name], base))
    return out


def must_show_checks(records):
    """The must-show bounds, on the runs that match their scenarios: a
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
pps-sweep run --preset NAME --server-build old=BUILD_DIR --server-build new=BUILD_DIR --out DIR   # two builds side by side
pps-sweep --resume DIR            # finish an interrupted sweep (or give the same --out again)
pps-sweep report DIR [--markdown FILE] [--plots-dir DIR]
pps-sweep presets                 # the presets, their size and run time
pps-sweep table DIR [--label SET=WORDS]   # its runs side by side per server_set, as DESIGN.md quotes them
```

A sweep file (tools/sweep/presets/*.ini) has `[sweep]` (duration_s, warmup_s, repetitions, seed, playout,
timeline = the cell of the over-time plot), `[server]` and `[client]` (`--set` keys for every cell),
`[lab]` (drd_min_bdp, drd_congest_bdp, queue) and one or more `[matrix NAME]` sections whose keys are
the axes, each a comma-separated list: `transport` (tcp, minbuf(A,B)), `window_frames`, `flows`
(cubic elephants), `rtt_ms`, `rate_mbit`, `queue` (droptail, drd-ecn; or `ecn = off, on`),
`congestion` (the stream's: cubic, reno, bbr), and `pattern` (source.pattern), `trace`
(a `[trace NAME]` section: `steps = RATE_MBIT:SECONDS, ...`, the link's capacity over time) and
`server_set` (`default` or a `[server_set NAME]` section of server `--set` keys), `loss_pct`
(random loss, % of the packets each direction: pps-linkem's loss probability) and `reverse_flows`
(cubic elephants from the receiver to the sender, on the path of the ACKs and the client's
records); `[sweep] psnr =
true` scores the pictures shown with pps-peer-score; `--server-set KEY=VALUE` adds a server setting
to every cell; `--server-build NAME=BUILD_DIR` (twice or more) runs every cell with each build's
pps-server and pps-client, interleaved cell by cell, and compares them cell by cell. Presets: quick, paper, full, steps, steps-tiny, mustshow, benchmarks, playout, congestion-alone, audio, b-frames, b-frames-steps, keyframes, keyframes-gop, deadlines, deadlines-steps, b-frames-ondrops, timeouts, share, drain, drain-steps, quality-layers, pacing-gain, pacing-gain-high, b-frames-cuts, tail, droppable. A
client with an audio track plays it on its clock (`audio.output = none` unless `[client]` says otherwise). The sweep runs the union of the matrices' cross
products times the repetitions, in an order shuffled with the seed. Each cell: a lab (`pps-netlab
up`), the elephants and `warmup_s` of them alone, then pps-server in the sender namespace and
pps-client in the receiver namespace for `duration_s`; every wait is bounded and the lab is torn
down whatever happens (Ctrl-C included: the sweep then says how to resume).

Files: `plan.json` (matrix, seed, run order, machine), `cells/ID/` (client.jsonl, server.json,
server.err, client.err, lab.json, linkem.json, elephants.json and reverse-elephants.json (iperf3),
windows.csv (with the bottleneck queue at each window's last byte), frames.csv, cell.json, timeline.png,
av-timeline.png where the client played audio; server.jsonl when
the server has `--log`, link.trace for trace cells, scores.tsv with psnr), `summary.json`, `summary.csv`
(one row per cell), `groups.csv` (one row per setting), `report.md`, `plots/`.
"""


FIGURES_BEGIN, FIGURES_END = "<!-- figures:begin -->\n", "<!-- figures:end -->"


def write_section(text, title, path, sweep_dir):
    """Puts the section @title of the report @text (its heading down to the next
    one of the same level) into @path between its figures markers, led by the
    command that regenerates it; links into the sweep folder are dropped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.lstrip("#").strip() == title and l.startswith("#")), None)
    if start is None:
        raise UsageError(f"the report has no section {title!r}")
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    body = [re.sub(r"\[([^\]]*)\]\(cells/[^)]*\)", r"\1", l) for l in lines[start + 1:end]]
    plan = read_json(os.path.join(sweep_dir, "plan.json"))
    command = plan.get("command", "pps-sweep run ...")
    block = (FIGURES_BEGIN + f"Generated by `pps-sweep report DIR --markdown FILE --section '{title}'` from the sweep of "
             f"`{public_command(command)}` ({plan.get('created', '')[:10]}).\n\n" + "\n".join(body).strip() + "\n")
    with open(path) as f:
        doc = f.read()
    if FIGURES_BEGIN not in doc or FIGURES_END not in doc:
        raise UsageError(f"{path}: no {FIGURES_BEGIN.strip()} ... {FIGURES_END} markers")
    head, rest = doc.split(FIGURES_BEGIN, 1)
    _, tail = rest.split(FIGURES_END, 1)
    with open(path, "w") as f:
        f.write(head + block + FIGURES_END + tail)



def _path_name(row):
    """The path a summary.csv row ran on, in words: its cross traffic, random
    loss and capacity trace, or idle."""
    parts = []
    flows = int(row.get("flows") or 0)
    if flows:
        parts.append(f"{flows} cubic flows")
    loss = float(row.get("loss_pct") or 0)
    if loss > 0:
        parts.append(f"{loss:g}% random loss")
    reverse = int(row.get("reverse_flows") or 0)
    if reverse:
        parts.append(f"{reverse} reverse-path flows")
    if row.get("trace"):
        parts.append("capacity steps" if row["trace"] == "steps" else f"trace {row['trace']}")
    return ", ".join(parts) or "idle"


# Axes the path name, the content and the server_set do not already say: shown
# in the setting column when they vary within the sweep.
_OTHER_AXES = (("transport", "{}"), ("window_frames", "window {}"), ("rate_mbit", "{} Mbit/s"),
               ("rtt_ms", "{} ms"), ("queue", "{}"), ("congestion", "{}"), ("playout", "playout {}"),
               ("build", "build {}"))


def _summary_rows(folder):
    path = os.path.join(folder, "summary.csv")
    if not os.path.exists(path):
        raise UsageError(f"{folder}: no summary.csv (run pps-sweep report on it first)")
    with open(path) as f:
        return list(csv.DictReader(f))


def _scenarios(rows, labels):
    """The rows by scenario: (path, content, setting) -> the runs in
    repetition order, the setting naming the server_set (as @labels says) and
    the other axes that vary within the sweep."""
    def axis(r, k):
        # Under a trace the link's rate is the trace's, whatever rate_mbit says.
        return None if k == "rate_mbit" and r.get("trace") else r.get(k) or ""

    varying = [(k, fmt) for k, fmt in _OTHER_AXES if len({axis(r, k) for r in rows} - {None}) > 1]
    groups = {}
    for r in rows:
        words = [fmt.format(axis(r, k)) for k, fmt in varying if axis(r, k) is not None]
        if r.get("server_set"):
            words.append(labels.get(r["server_set"], r["server_set"]))
        key = (_path_name(r), r.get("pattern") or "", " ".join(words) or "default")
        groups.setdefault(key, []).append(r)
    for runs in groups.values():
        runs.sort(key=lambda r: int(r.get("rep") or 0))
    return groups


def _render(groups, titles, cell_text):
    """Markdown: a row per scenario, idle first and the capacity steps last;
    cell_text(runs, column index) gives each cell."""
    lines = ["| path | content | setting | " + " | ".join(titles) + " |",
             "|---|---|---|" + "---|" * len(titles)]
    last = None
    for key in sorted(groups, key=lambda k: (k[0] != "idle", "capacity steps" in k[0], k)):
        p, pattern, setting = key
        first = (p, pattern) != last
        last = (p, pattern)
        cells_ = [cell_text(groups[key], i) for i in range(len(titles))]
        lines.append(f"| {p if first else ''} | {pattern if first else ''} | {setting} | "
                     + " | ".join(cells_) + " |")
    return "\n".join(lines) + "\n"


def runs_table(folder, labels=None):
    """A Markdown table of a sweep's runs, one row per scenario (every axis
    but the repetition) and each run's figure separated by " / " (repetitions
    in order): what docs/DESIGN.md quotes for a side-by-side of settings.
    @labels maps a server_set's name to the words shown for it."""
    groups = _scenarios(_summary_rows(folder), labels or {})
    columns = (
        ("frames shown %", "frames_shown_pct", lambda v: f"{v:.1f}"),
        ("p50 ms", "frame_latency_p50_ms", lambda v: f"{v:.0f}"),
        ("p95 ms", "frame_latency_p95_ms", lambda v: f"{v:.0f}"),
        ("longest freeze ms", "longest_freeze_ms", lambda v: f"{v:.0f}"),
        ("share", "throughput_share", lambda v: f"{v:.2f}"),
        ("PSNR-Y dB", "psnr_y_mean", lambda v: f"{v:.2f}"),
        ("Mbit/s", "received_bps", lambda v: f"{v / 1e6:.2f}"),
    )
    rows = [r for g in groups.values() for r in g]

    def num(r, k):
        try:
            return float(r.get(k) or "nan")
        except ValueError:
            return float("nan")
    # Runs whose connections brought far more than their windows (copies of
    # the stream): what they took of the path is a column of its own.
    if any(num(r, "wire_share") > 1.25 * num(r, "throughput_share") for r in rows):
        columns = columns[:5] + (("share on the wire", "wire_share", lambda v: f"{v:.2f}"),) + columns[5:]

    def cell_text(runs, i):
        _, column, fmt = columns[i]
        return " / ".join("–" if r.get(column) in (None, "") else fmt(float(r[column])) for r in runs)

    return _render(groups, [c[0] for c in columns], cell_text)


# A shown frame that reached the decoder this much later after its capture than
# the frame shown before it: the stream stalled between them (a retransmission
# holding what follows, or the sender behind), not the usual jitter.
STALL_JUMP_MS = 50.0


def cell_tail(celldir):
    """Where a cell's frame latency goes, from its client log (every shown
    frame's capture, arrival at the decoder and display), the bottleneck's
    counters and the server's: a dict of figures, None where a file or a
    figure is missing."""
    out = {}
    frames = []
    try:
        with open(os.path.join(celldir, "client.jsonl")) as f:
            for line in f:
                if '"type":"frame"' not in line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("shown") and r.get("received_us") and r.get("capture_us"):
                    frames.append(r)
    except OSError:
        return out
    # The span and the percentile rule of the summary's frame figures.
    span = analysed_span_us(frames)
    if span:
        frames = [r for r in frames if span[0] <= r["capture_us"] <= span[1]]
    frames.sort(key=lambda r: r["frame"])
    received = [(r["received_us"] - r["capture_us"]) / 1e3 for r in frames]
    shown = [r["latency_ms"] for r in frames if r.get("latency_ms") is not None]
    out["received_p50_ms"] = percentile(received, 50)
    out["received_p95_ms"] = percentile(received, 95)
    out["shown_p50_ms"] = percentile(shown, 50)
    out["shown_p95_ms"] = percentile(shown, 95)
    # Frames of the base frame rate against the droppable layer's (B frames
    # wait for the anchor after them).
    anchors = [x for r, x in zip(frames, received) if r.get("temporal_layers") == 1]
    top = [x for r, x in zip(frames, received) if (r.get("temporal_layers") or 0) > 1]
    # Frames shown with every quality layer the stream has (a cut enhancement
    # layer waits for its next IDR).
    layers = max((r.get("quality_layers") or 0 for r in frames), default=0)
    if frames and layers:
        out["all_layers_pct"] = 100.0 * sum(1 for r in frames if r.get("quality_layers") == layers) / len(frames)
    out["anchor_received_p50_ms"] = percentile(anchors, 50)
    out["b_received_p50_ms"] = percentile(top, 50)
    jumps = [b - a for a, b in zip(received, received[1:]) if b - a >= STALL_JUMP_MS]
    span_s = (frames[-1]["capture_us"] - frames[0]["capture_us"]) / 1e6 if len(frames) > 1 else 0
    out["stalls_per_s"] = len(jumps) / span_s if span_s > 0 else None
    out["stall_jump_p50_ms"] = percentile(jumps, 50)
    link = read_json(os.path.join(celldir, "linkem.json")) or {}
    fwd = link.get("fwd") or {}
    if fwd.get("arrived_pkts"):
        out["bottleneck_drop_pct"] = 100.0 * fwd.get("dropped_queue_pkts", 0) / fwd["arrived_pkts"]
    server = read_json(os.path.join(celldir, "server.json")) or {}
    # The stream's own connection: not an audio-only one, not a copy.
    video = [c for c in server.get("clients") or [] if not c.get("audio_only") and not c.get("copy")]
    duration = server.get("duration_s")
    if video and duration:
        out["video_retrans_per_s"] = video[0].get("retrans_pkts", 0) / duration
    return out


def tail_table(folder, labels=None):
    """Like runs_table, with where the latency goes: capture to the decoder
    (the sender and the network) against capture to the screen (and the
    client's catch-up after a stall), anchors against the droppable layer's
    frames, stalls, and the bottleneck's and the stream's losses."""
    groups = _scenarios(_summary_rows(folder), labels or {})
    tails = {id(r): cell_tail(os.path.join(folder, "cells", r.get("id") or ""))
             for runs in groups.values() for r in runs}

    def one(v, spec):
        return "–" if v in (None, "") else format(float(v), spec)

    columns = (
        ("frames shown %", lambda r, t: one(r.get("frames_shown_pct"), ".1f")),
        ("of them with every layer %", lambda r, t: one(t.get("all_layers_pct"), ".1f")),
        ("to the decoder p50, p95 ms",
         lambda r, t: f"{one(t.get('received_p50_ms'), '.0f')}, {one(t.get('received_p95_ms'), '.0f')}"),
        ("on screen p50, p95 ms",
         lambda r, t: f"{one(t.get('shown_p50_ms'), '.0f')}, {one(t.get('shown_p95_ms'), '.0f')}"),
        ("anchors, B frames at the decoder p50 ms",
         lambda r, t: f"{one(t.get('anchor_received_p50_ms'), '.0f')}, {one(t.get('b_received_p50_ms'), '.0f')}"),
        ("stalls /s", lambda r, t: one(t.get("stalls_per_s"), ".1f")),
        ("stall p50 ms", lambda r, t: one(t.get("stall_jump_p50_ms"), ".0f")),
        ("bottleneck drops %", lambda r, t: one(t.get("bottleneck_drop_pct"), ".1f")),
        ("video retransmissions /s", lambda r, t: one(t.get("video_retrans_per_s"), ".1f")),
    )

    def cell_text(runs, i):
        return " / ".join(columns[i][1](r, tails[id(r)]) for r in runs)

    return _render(groups, [c[0] for c in columns], cell_text)
