# SPDX-License-Identifier: MIT
"""pps-protolat-bench's runs and analysis: the protocol-latency experiments
of IWQoS 2002 section 4 (and TOMCCAP 2008 sections 4.1 and 5.1) in the lab.

For every bandwidth x RTT x ECN setting a lab (drop-tail queue without ECN,
DRD with ECN on both ends), and for every repetition each stream
configuration (tcp, minbuf(1,0), minbuf(1,3), minbuf(2,0)) in a random
order, each against the papers' cross-traffic schedule scaled to the run
length. numpy reads the receiver's log."""
import csv
import json
import os
import random
import signal
import subprocess
import sys
import time

from . import metrics, plots
from .lab import Lab
from .paper import PAPER_D200, PAPER_D500, PAPER_MEAN_MS, PAPER_NT
from .report import fmt

CONFIGS = {
    # name: (mode, A, B, paper label)
    "tcp": ("tcp", 1, 0, "std"),
    "m10": ("minbuf", 1, 0, "m10"),
    "m13": ("minbuf", 1, 3, "m13"),
    "m20": ("minbuf", 2, 0, "m20"),
}
LABELS = {"tcp": "TCP", "m10": "MIN_BUF(1,0)", "m13": "MIN_BUF(1,3)", "m20": "MIN_BUF(2,0)"}


# Cross-traffic schedule of IWQoS 2002 section 4.1 as fractions of its 80 s.
SCHEDULE = {"elephants": (5 / 80, 60 / 80), "mice": (20 / 80, 75 / 80), "cbr": (40 / 80, 75 / 80)}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def parse_rate_mbit(text):
    t = text.lower().replace("bit", "").replace("bps", "")
    mult = {"k": 1e-3, "m": 1.0, "g": 1e3}
    if t and t[-1] in mult:
        return float(t[:-1]) * mult[t[-1]]
    return float(t) / 1e6


def setting_up(lab, rate, delay_ms, aqm, ecn, duration_s, extra):
    """(Re)brings up the one lab of the benchmark (lab.Lab) for a setting."""
    lab.run("down", lab.name, check=False)  # a lab of that name left by a killed run
    lab.up(["--rate", rate, "--delay", "%gms" % delay_ms, "--aqm", aqm, "--ecn", "on" if ecn else "off",
            "--duration", "%ds" % duration_s] + list(extra))


def cross_traffic_flows(args, rate_mbit, duration_s):
    """The IWQoS 2002 section 4.1 schedule scaled to the run, as lab.traffic's flows."""
    def when(kind):
        s, e = SCHEDULE[kind]
        return "@%.1f-%.1f" % (s * duration_s, e * duration_s)
    flows = {}
    if args.elephants:
        flows["elephants"] = "%d%s" % (args.elephants, when("elephants"))
    if args.mice_effective:
        flows["mice"] = "%d%s" % (args.mice_effective, when("mice"))
    if args.cbr:
        flows["cbr"] = "%.3fmbit%s" % (0.10 * rate_mbit, when("cbr"))
    return flows


def one_run(lab, args, cfg, rate_mbit, rtt_ms, ecn, rep, rundir):
    mode, a, b, _ = CONFIGS[cfg]
    os.makedirs(rundir, exist_ok=True)
    stats = os.path.join(rundir, "sender.json")
    rlog = os.path.join(rundir, "recv.csv")
    samples = os.path.join(rundir, "samples.csv")
    snd_addr = lab.addr("snd")
    port = 5400 + (rep % 50)
    sender_argv = [args.protolat, "send", "--port", port, "--mode", mode, "--a", a, "--b", b,
                   "--congestion", args.congestion, "--batch", args.batch, "--duration-s", args.duration,
                   "--stats", stats]
    if args.samples:
        sender_argv += ["--samples", samples]
    if ecn:
        sender_argv.append("--ecn")
    if args.thin:
        sender_argv.append("--thin")
    # "ready PORT": no sleeping to wait for the listener
    snd = lab.start("snd", sender_argv, wait_ready=True)
    rcv = lab.start("rcv", [args.protolat, "recv", "--connect", "%s:%d" % (snd_addr, port), "--log", rlog],
                    stdout=subprocess.PIPE, text=True)
    flows = cross_traffic_flows(args, rate_mbit, args.duration)
    traffic = lab.traffic(args.duration, reverse=args.reverse, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **flows) if flows else None
    snd.wait(timeout=args.duration + 60)
    rcv.wait(timeout=60)
    if traffic:
        # The schedule ends with the run; waiting for it keeps runs from overlapping.
        out, err = traffic.communicate(timeout=args.duration + 60)
        with open(os.path.join(rundir, "traffic.txt"), "w") as f:
            f.write(out + err)
    lab.procs = []
    return analyse_run(args, cfg, rate_mbit, rtt_ms, ecn, rep, rundir)


def analyse_run(args, cfg, rate_mbit, rtt_ms, ecn, rep, rundir):
    import numpy as np
    data = np.genfromtxt(os.path.join(rundir, "recv.csv"), delimiter=",", skip_header=1, dtype=np.int64)
    if data.size == 0:
        data = np.zeros((0, 4), dtype=np.int64)
    data = data.reshape(-1, 4)
    with open(os.path.join(rundir, "sender.json")) as f:
        snd = json.load(f)
    lat_ms = (data[:, 2] - data[:, 1]) / 1e6
    t_recv = (data[:, 2] - data[0, 2]) / 1e9 if len(data) else np.zeros(0)
    np.save(os.path.join(rundir, "lat_ms.npy"), lat_ms.astype(np.float32))
    np.save(os.path.join(rundir, "t_recv_s.npy"), t_recv.astype(np.float32))
    bytes_rx = int(data[:, 3].sum()) if len(data) else 0
    thr_mbit = bytes_rx * 8 / 1e6 / float(snd["duration_s"])
    mb_sent = snd["bytes"] / 1e6
    row = dict(rate_mbit=rate_mbit, rtt_ms=rtt_ms, ecn=int(ecn), rep=rep, config=cfg, packets=len(lat_ms),
               within160=float((lat_ms <= 160).mean()) if len(lat_ms) else float("nan"),
               within200=float((lat_ms <= 200).mean()) if len(lat_ms) else float("nan"),
               within500=float((lat_ms <= 500).mean()) if len(lat_ms) else float("nan"),
               mean_ms=float(lat_ms.mean()) if len(lat_ms) else float("nan"),
               p50_ms=nan_if_none(metrics.percentile(lat_ms.tolist(), 50)),
               p95_ms=nan_if_none(metrics.percentile(lat_ms.tolist(), 95)),
               p99_ms=nan_if_none(metrics.percentile(lat_ms.tolist(), 99)),
               throughput_mbit=thr_mbit,
               cpu_s=snd["user_s"] + snd["sys_s"],
               cpu_s_per_mb=(snd["user_s"] + snd["sys_s"]) / mb_sent if mb_sent > 0 else float("nan"),
               writes=snd["writes"], wakeups=snd["wakeups"], wakeups_idle=snd["wakeups_idle"],
               retrans_pkts=snd["retrans_pkts"], rto_events=snd["rto_events"], max_backoff=snd["max_backoff"],
               ecn_negotiated=int(snd["ecn_negotiated"]), max_over_bound_pkts=snd["max_over_bound_pkts"],
               overshoot_pkts=snd["overshoot_pkts"], cwnd_mean_pkts=snd["cwnd_mean_pkts"],
               srtt_mean_ms=snd["srtt_mean_us"] / 1000.0, partial_writes=snd["partial_writes"],
               dir=rundir)
    row["held_hist"] = snd["held_hist"]
    return row


def summarise(rows, out):
    import numpy as np
    groups = {}
    for r in rows:
        groups.setdefault((r["rate_mbit"], r["rtt_ms"], r["ecn"], r["config"]), []).append(r)
    tcp_thr = {(r["rate_mbit"], r["rtt_ms"], r["ecn"], r["rep"]): r["throughput_mbit"]
               for r in rows if r["config"] == "tcp"}
    summary = []
    for key in sorted(groups):
        rate, rtt, ecn, cfg = key
        rs = groups[key]
        lat = np.concatenate([np.load(os.path.join(r["dir"], "lat_ms.npy")) for r in rs]) if rs else np.zeros(0)
        nts = [r["throughput_mbit"] / tcp_thr[(rate, rtt, ecn, r["rep"])]
               for r in rs if tcp_thr.get((rate, rtt, ecn, r["rep"]))]
        cpu_tcp = [x["cpu_s_per_mb"] for x in rows if x["config"] == "tcp" and x["rate_mbit"] == rate
                   and x["rtt_ms"] == rtt and x["ecn"] == ecn]
        mean_m, mean_ci = metrics.ci95([r["mean_ms"] for r in rs])
        nt_m, nt_ci = metrics.ci95(nts)
        cpu_m, _ = metrics.ci95([r["cpu_s_per_mb"] for r in rs])
        held = np.sum([r["held_hist"] for r in rs], axis=0).tolist()
        s = dict(rate_mbit=rate, rtt_ms=rtt, ecn=ecn, config=cfg, label=LABELS[cfg], runs=len(rs),
                 packets=int(len(lat)),
                 within160=float((lat <= 160).mean()) if len(lat) else None,
                 within200=float((lat <= 200).mean()) if len(lat) else None,
                 within500=float((lat <= 500).mean()) if len(lat) else None,
                 mean_ms=mean_m, mean_ms_ci95=mean_ci,
                 p50_ms=metrics.percentile(lat.tolist(), 50),
                 p95_ms=metrics.percentile(lat.tolist(), 95),
                 p99_ms=metrics.percentile(lat.tolist(), 99),
                 throughput_mbit=metrics.ci95([r["throughput_mbit"] for r in rs])[0],
                 normalized_throughput=nt_m, normalized_throughput_ci95=nt_ci,
                 cpu_s_per_mb=cpu_m,
                 cpu_vs_tcp=(cpu_m / metrics.ci95(cpu_tcp)[0]) if cpu_tcp else None,
                 retrans_pkts=sum(r["retrans_pkts"] for r in rs), rto_events=sum(r["rto_events"] for r in rs),
                 max_over_bound_pkts=max(r["max_over_bound_pkts"] for r in rs),
                 overshoot_pkts=sum(r["overshoot_pkts"] for r in rs),
                 wakeups_per_write=(sum(r["wakeups"] for r in rs) / max(1, sum(r["writes"] for r in rs))),
                 ecn_negotiated_runs=sum(r["ecn_negotiated"] for r in rs),
                 held_hist_pkts=held,
                 paper_d200=PAPER_D200.get(int(rate), {}).get(int(rtt), {}).get(cfg) if not ecn else None,
                 paper_d500=PAPER_D500.get(int(rate), {}).get(int(rtt), {}).get(cfg) if not ecn else None,
                 paper_mean_ms=PAPER_MEAN_MS.get(int(rate), {}).get(int(rtt), {}).get(cfg) if not ecn else None,
                 paper_nt=PAPER_NT.get(int(rate), {}).get(int(rtt), {}).get(cfg) if not ecn else None)
        summary.append(s)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    keys = [k for k in summary[0] if k != "held_hist_pkts"] if summary else []
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys + ["held_p50_pkts", "held_p99_pkts"])
        w.writeheader()
        for s in summary:
            h = np.array(s["held_hist_pkts"], dtype=float)
            c = np.cumsum(h) / h.sum() if h.sum() else np.zeros_like(h)
            row = {k: s[k] for k in keys}
            row["held_p50_pkts"] = int(np.searchsorted(c, 0.5)) if h.sum() else ""
            row["held_p99_pkts"] = int(np.searchsorted(c, 0.99)) if h.sum() else ""
            w.writerow(row)
    return summary


def write_table(summary, out, cmdline):
    lines = ["# Protocol latency (IWQoS 2002 Tables 1-3 layout)", "",
             "Command: `%s`" % cmdline, "",
             "ours / paper. D160/D200/D500: fraction of packets within 160/200/500 ms (pooled over runs); "
             "mean: mean of per-run means +- 95% CI; NT: throughput normalized to tcp in the same repetition "
             "(mean +- 95% CI); CPU/MB: sender user+sys seconds per MB written; held p50/p99: packets in the "
             "kernel at write time. The paper has no ECN tables (its Figures 8-10), hence '-'.", ""]
    hdr = ("| Mbit/s | RTT ms | ECN | type | D160 | D200 (paper) | D500 (paper) | mean ms (paper) | p50 | p95 | p99 "
           "| NT (paper) | CPU s/MB (x tcp) | retrans | RTOs | held p50/p99 |")
    lines += [hdr, "|" + "---|" * hdr.count("|")[:-1] if False else "|" + "---|" * (hdr.count("|") - 1)]
    import numpy as np
    for s in sorted(summary, key=lambda s: (-s["rate_mbit"], -s["rtt_ms"], s["ecn"], list(CONFIGS).index(s["config"]))):
        h = np.array(s["held_hist_pkts"], dtype=float)
        c = np.cumsum(h) / h.sum() if h.sum() else None
        held = "%d/%d" % (np.searchsorted(c, 0.5), np.searchsorted(c, 0.99)) if c is not None else "-"
        lines.append("| %g | %g | %s | %s | %s | %s (%s) | %s (%s) | %s+-%s (%s) | %s | %s | %s | %s+-%s (%s) | %s (%s) | %d | %d | %s |" % (
            s["rate_mbit"], s["rtt_ms"], "on" if s["ecn"] else "off", CONFIGS[s["config"]][3],
            fmt(s["within160"], ".3f"), fmt(s["within200"], ".3f"), fmt(s["paper_d200"], ".2f"),
            fmt(s["within500"], ".3f"), fmt(s["paper_d500"], ".2f"),
            fmt(s["mean_ms"], ".1f"), fmt(s["mean_ms_ci95"], ".1f"), fmt(s["paper_mean_ms"], ".1f"),
            fmt(s["p50_ms"], ".0f"), fmt(s["p95_ms"], ".0f"), fmt(s["p99_ms"], ".0f"),
            fmt(s["normalized_throughput"], ".2f"), fmt(s["normalized_throughput_ci95"], ".2f"),
            fmt(s["paper_nt"], ".2f"), fmt(s["cpu_s_per_mb"], ".4f"), fmt(s["cpu_vs_tcp"], ".2f"),
            s["retrans_pkts"], s["rto_events"], held))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    return text


def nan_if_none(v):
    return float("nan") if v is None else v


def run_all(args, cmdline):
    """Every setting, repetition and configuration; runs.json, runs.csv, the
    summary, table.md and the plots in args.out."""
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    out = args.out or os.path.join(os.getcwd(), "protolat-%s" % time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    configs = [c.strip() for c in args.configs.split(",")]
    ecns = {"both": [False, True], "on": [True], "off": [False]}[args.ecn]
    settings = [(r, float(t), e) for r in args.rates.split(",") for t in args.rtts.split(",") for e in ecns]
    rng.shuffle(settings)
    log("seed %d, %d settings x %d reps x %d configs x %gs -> %s" % (seed, len(settings), args.reps, len(configs),
                                                                     args.duration, out))
    rows = []
    lab = Lab(args.netlab, args.lab_name)

    def cleanup(*_):
        lab.down()
        sys.exit(130)
    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    try:
        for rate, rtt, ecn in settings:
            rate_mbit = parse_rate_mbit(rate)
            bdp_pkts = max(4, int(rate_mbit * 1e6 * rtt / 1e3 / 8 / 1500))
            queue = max(8, int(args.queue_bdp * bdp_pkts))
            extra = ["--queue", str(queue)] + args.lab_arg
            if ecn:
                # IWQoS 2002 section 3.2: DRED min 1 BDP, congest 2 BDP (linkem's DRD has no max).
                extra = ["--drd-min", "1", "--drd-congest", "2"] + args.lab_arg
            log("lab: %s, RTT %g ms, %s, queue %d packets" % (rate, rtt, "DRD+ECN" if ecn else "drop-tail", queue))
            lab_s = int(args.reps * len(configs) * (args.duration + 30) + 120)
            setting_up(lab, rate, rtt / 2, "drd" if ecn else "droptail", ecn, lab_s, extra)
            mice = args.mice
            if mice is None:
                # pps-mice starts one 20 KB flow per mouse per second (pps-netlab's
                # --mice-interval 1s): K mice offer K * 20 KB/s; aim at 30% of the link.
                mice = min(128, max(1, int(round(0.30 * rate_mbit * 1e6 / 8 / 20e3))))
            args.mice_effective = mice
            for rep in range(args.reps):
                order = list(configs)
                rng.shuffle(order)
                for cfg in order:
                    rundir = os.path.join(out, "runs", "%s-%gms-%s-r%d-%s" % (rate, rtt, "ecn" if ecn else "noecn",
                                                                              rep, cfg))
                    log("run %s rep %d %s" % (cfg, rep, rundir))
                    row = one_run(lab, args, cfg, rate_mbit, rtt, ecn, rep, rundir)
                    rows.append(row)
                    log("  %s: D200 %.3f mean %.1f ms p99 %.0f ms %.2f Mbit/s cpu %.4f s/MB retrans %d rto %d" % (
                        cfg, row["within200"], row["mean_ms"], row["p99_ms"], row["throughput_mbit"],
                        row["cpu_s_per_mb"], row["retrans_pkts"], row["rto_events"]))
                    with open(os.path.join(out, "runs.json"), "w") as f:
                        json.dump(rows, f)
            lab.down()
    finally:
        lab.down()
    keys = [k for k in rows[0] if k != "held_hist"] if rows else []
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    summary = summarise(rows, out)
    print(write_table(summary, out, cmdline))
    plots.protolat(rows, summary, out, CONFIGS, LABELS)
    log("results in %s" % out)
    return 0


def analyse_only(out, cmdline):
    """Tables and plots again from OUT/runs.json."""
    with open(os.path.join(out, "runs.json")) as f:
        rows = json.load(f)
    summary = summarise(rows, out)
    print(write_table(summary, out, cmdline))
    plots.protolat(rows, summary, out, CONFIGS, LABELS)
    return 0
