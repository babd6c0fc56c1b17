#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-fanout: heterogeneous clients of one encode. One pps-server
in the sender namespace of a multi-receiver lab (`pps-netlab up --receivers N`),
one pps-client in each receiver namespace, each receiver behind its own
pps-linkem link with its own rate, delay and queue; figures per client.

    pps-fanout --rates 0.5,2,8 --out DIR                 the issue's three clients
    pps-fanout --rates 0.5,2,8 --delays 25ms --queue auto --duration 30 --pattern smpte --psnr --out DIR
    pps-fanout report DIR                                 report.md, results.json and plots again

Per client (run_metrics, the same definitions as pps-sweep): frames shown,
frame latency p50/p95/p99, longest freeze and total frozen time, received
bit/s, PSNR-Y (--psnr, pps-peer-score); the server's per-second --log per
client when the server has it. Outputs in DIR: run.json, lab.json,
client-rcvK.jsonl, linkem-rcvK.json, server.json(l), results.json, report.md,
timeline-rcvK.png, latency.png. Run as root with /usr/bin/python3 (matplotlib).
A benchmark: it prints figures, it does not pass or fail on them.
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "netlab"))
sys.dont_write_bytecode = True
import netlab_lab  # noqa: E402
import run_metrics  # noqa: E402

PROGRAM = "pps-fanout"
FPS = 30
SERVER_READY_TIMEOUT_S = 20.0
EXIT_GRACE_S = 30.0
LAB_SLACK_S = 90.0
PPS_DEFAULT_RATES = "0.5,2,8"


class Interrupted(Exception):
    pass


def log(msg):
    print(f"{PROGRAM}: {msg}", file=sys.stderr, flush=True)


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def parse_transport(text):
    t = text.strip().lower().replace(" ", "")
    if t == "tcp":
        return {"transport.mode": "tcp"}
    m = re.fullmatch(r"minbuf\((\d+),(\d+)\)", t)
    if not m:
        raise SystemExit(f"{PROGRAM}: --transport: tcp or minbuf(A,B)")
    return {"transport.mode": "minbuf", "transport.minbuf_a": m.group(1), "transport.minbuf_b": m.group(2)}


def run(args):
    build = args.build or os.path.dirname(os.path.dirname(HERE))
    netlab = os.path.join(build, "tools", "netlab", "pps-netlab")
    server_exe = os.path.join(build, "server", "pps-server")
    client_exe = os.path.join(build, "client", "pps-client")
    score_exe = os.path.join(build, "tools", "peers", "pps-peer-score")
    for exe in (netlab, server_exe, client_exe):
        if not os.access(exe, os.X_OK):
            log(f"missing {exe} (build first)")
            return 2
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        log("needs root and /dev/net/tun; skipping")
        return 77
    rates = [r.strip() for r in args.rates.split(",") if r.strip()]
    n = len(rates)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # The stream keeps the server's default congestion control (bbr, under its
    # tcp-friendly rate control); --server-set transport.congestion=cubic to change.
    sets = {"source.pattern": args.pattern, "source.fps": FPS}
    sets.update(parse_transport(args.transport))
    for item in args.server_set or []:
        key, _, value = item.partition("=")
        sets[key.strip()] = value.strip()
    psnr = args.psnr and args.pattern in run_metrics.PSNR_PATTERNS and os.access(score_exe, os.X_OK)
    up = ["--receivers", n, "--rate", ",".join(r if re.search(r"[a-z]", r) else r + "mbit" for r in rates),
          "--delay", args.delays, "--queue", args.queue, "--aqm", "droptail", "--ecn", "off", "--congestion", "cubic",
          "--stats", os.path.join(out, "linkem.json")]
    name = args.lab_name or "fan%d" % (os.getpid() % 10000)
    has_log = netlab_lab.server_has_option(server_exe, "--log")
    runinfo = {"command": " ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]]), "rates": rates, "delays": args.delays,
               "queue": args.queue, "duration_s": args.duration, "pattern": args.pattern, "server_set": sets,
               "congestion": "the stream: " + sets.get("transport.congestion", "the server's default (bbr)") + "; the lab's routes: cubic", "psnr": bool(psnr),
               "server_log": has_log, "playout": args.playout}
    server = fifo_fd = None
    clients = []
    fifo = os.path.join(out, "port.fifo")
    try:
        with netlab_lab.Lab(netlab, name, up, args.duration + LAB_SLACK_S) as lab:
            with open(os.path.join(out, "lab.json"), "w") as f:
                json.dump(lab.info, f, indent=1)
            snd = lab.addr("snd")
            fifo_fd = netlab_lab.open_port_fifo(fifo)
            argv = [server_exe, "--listen", f"{snd}:0", "--port-file", fifo, "--quiet", "--duration", "%g" % args.duration,
                    "--stats-json", os.path.join(out, "server.json")]
            if has_log:
                argv += ["--log", os.path.join(out, "server.jsonl")]
            for k, v in sets.items():
                argv += ["--set", f"{k}={v}"]
            runinfo["server_start_unix"] = time.time()
            server = subprocess.Popen(lab.exec_argv("snd", argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(out, "server.err"), "w"), start_new_session=True)
            port = netlab_lab.read_port(fifo_fd, server, SERVER_READY_TIMEOUT_S)
            runinfo["receivers"] = []
            for k in range(1, n + 1):
                side = f"rcv{k}" if n > 1 else "rcv"
                cargv = [client_exe, f"{snd}:{port}", "--display", "none", "--quiet", "--duration", "%g" % (args.duration + EXIT_GRACE_S),
                         "--log", os.path.join(out, f"client-rcv{k}.jsonl"), "--policy", args.playout]
                if psnr:
                    cargv += ["--output", os.path.join(out, f"shown-rcv{k}.y4m")]
                clients.append(subprocess.Popen(lab.exec_argv(side, cargv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                stderr=open(os.path.join(out, f"client-rcv{k}.err"), "w"), start_new_session=True))
                runinfo["receivers"].append({"side": f"rcv{k}", "addr": lab.addr(side), "rate": rates[k - 1],
                                             "start_unix": time.time()})
            if not netlab_lab.wait_exit(server, args.duration + EXIT_GRACE_S):
                raise netlab_lab.LabError("pps-server did not stop at its --duration")
            runinfo["server_end_unix"] = time.time()
            for c in clients:
                netlab_lab.wait_exit(c, EXIT_GRACE_S)
            runinfo["client_exit"] = [c.returncode for c in clients]
            runinfo["server_exit"] = server.returncode
    except Interrupted as error:
        log(f"interrupted ({error}); lab removed")
        return 130
    except netlab_lab.NotPermitted as error:
        log(f"{error}; skipping")
        return 77
    except netlab_lab.LabError as error:
        log(str(error))
        return 1
    finally:
        for p in clients + [server]:
            netlab_lab.stop(p)
        if fifo_fd is not None:
            os.close(fifo_fd)
            os.unlink(fifo)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(runinfo, f, indent=1)
    if psnr:
        for k in range(1, n + 1):
            y4m = os.path.join(out, f"shown-rcv{k}.y4m")
            if os.path.exists(y4m):
                with open(os.path.join(out, f"scores-rcv{k}.tsv"), "w") as f:
                    subprocess.run([score_exe, "--pattern", args.pattern, y4m], stdout=f, stderr=subprocess.DEVNULL, timeout=900)
                os.unlink(y4m)
    sys.stdout.write(report(out))
    return 0 if runinfo.get("server_exit") == 0 else 1


def client_id_of(server_jsonl, addr):
    """The server's client id for a receiver: its path events' peer address."""
    for e in run_metrics.read_jsonl(server_jsonl):
        if e.get("event") == "path" and str(e.get("peer", "")).rsplit(":", 1)[0] == addr:
            return e.get("client")
    return None


def report(out):
    with open(os.path.join(out, "run.json")) as f:
        runinfo = json.load(f)
    slog = os.path.join(out, "server.jsonl")
    rows = []
    for r in runinfo.get("receivers", []):
        k = r["side"][3:]
        cj = os.path.join(out, f"client-rcv{k}.jsonl")
        m = run_metrics.run_metrics(cj, slog, (), os.path.join(out, f"scores-rcv{k}.tsv"))
        cid = client_id_of(slog, r["addr"]) if os.path.exists(slog) else None
        m["server_client"] = (m.get("clients") or {}).get(cid) if cid is not None else None
        m.pop("clients", None)
        stats = netlab_lab.read_json(per_rcv(os.path.join(out, "linkem.json"), k, len(runinfo["receivers"])))
        link = (stats or {}).get("settings", {}).get("fwd", {})
        m.update({"side": r["side"], "rate": r["rate"], "capacity_bps": link.get("rate_bps"), "rtt_ms": None,
                  "queue_pkts": link.get("queue_limit_pkts"), "bottleneck_drops": ((stats or {}).get("fwd") or {}).get("dropped_queue_pkts")})
        with open(os.path.join(out, "lab.json")) as f:
            lab = json.load(f)
        for rr in lab.get("receivers", []):
            if rr["side"] == r["side"]:
                m["rtt_ms"] = rr["rtt_ms"]
        rows.append(m)
        title = f"receiver {r['side']}: {r['rate']} Mbit/s, RTT {m['rtt_ms']:g} ms, {runinfo['pattern']}, " + \
                ", ".join(f"{a}={b}" for a, b in runinfo["server_set"].items() if a.startswith(("transport.mode", "adapt")))
        run_metrics.plot_timeline(os.path.join(out, f"timeline-rcv{k}.png"), title, cj, slog if cid is not None else None,
                                  [(r["start_unix"] * 1e6, m["capacity_bps"])] if m["capacity_bps"] else None, (), client_id=cid)
    checks = fanout_checks(rows)
    results = {"run": runinfo, "clients": rows, "checks": checks}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    latency_plot(out, runinfo, rows)
    L = ["# pps-fanout: clients of one encode behind different links", "",
         f"`{runinfo['command']}`; {runinfo['duration_s']:g} s; pattern {runinfo['pattern']}; playout {runinfo['playout']}; "
         f"server settings: " + ", ".join(f"`{a}={b}`" for a, b in runinfo["server_set"].items()) +
         f"; server --log: {'yes' if runinfo['server_log'] else 'no (this server has none)'}; congestion control: {runinfo['congestion']}.", "",
         "| receiver | link Mbit/s | RTT ms | queue pkts | frames shown % | p50 / p95 / p99 ms | longest freeze ms | frozen s | received Mbit/s | PSNR dB | estimate Mbit/s |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    f = run_metrics_fmt
    for m in rows:
        sc = m.get("server_client") or {}
        L.append(f"| {m['side']} | {f((m['capacity_bps'] or 0) / 1e6, '.2f')} | {f(m['rtt_ms'], '.0f')} | {m['queue_pkts']} | "
                 f"{f(m['frames_shown_pct'])} | {f(m['frame_latency_p50_ms'], '.0f')} / {f(m['frame_latency_p95_ms'], '.0f')} / "
                 f"{f(m['frame_latency_p99_ms'], '.0f')} | {f(m['longest_freeze_ms'], '.0f')} | {f((m['total_frozen_ms'] or 0) / 1e3, '.1f')} | "
                 f"{f((m['received_bps'] or 0) / 1e6, '.2f')} | {f(m.get('psnr_y_mean'), '.2f')} | "
                 f"{f((sc.get('estimate_bps_mean') or 0) / 1e6 if sc.get('estimate_bps_mean') else None, '.2f')} |")
    L += ["", "| check | wanted | measured | verdict |", "|---|---|---|---|"]
    for c in checks:
        L.append(f"| {c['check']} | {c['wanted']} | {c['measured']} | {c['verdict']} |")
    L += ["", "Plots: `latency.png` (frame latency of every client over time), `timeline-rcvK.png` (per client: latency, "
          "received rate beside the link's, the server's estimate and layers when it logs them).", ""]
    text = "\n".join(L)
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write(text)
    return text


def per_rcv(path, k, n):
    if n == 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}-rcv{k}{ext}"


def run_metrics_fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def fanout_checks(rows):
    out = []

    def add(check, wanted, measured, ok):
        out.append({"check": check, "wanted": wanted, "measured": measured,
                    "verdict": "not measured" if ok is None else ("met" if ok else "**missed**")})

    for m in rows:
        v = m["frames_shown_pct"]
        add(f"{m['side']} frames shown", ">= 95%", run_metrics_fmt(v) + "%", None if v is None else v >= 95)
        v = m["frame_latency_p95_ms"]
        add(f"{m['side']} frame latency p95", "<= 400 ms", run_metrics_fmt(v, ".0f") + " ms", None if v is None else v <= 400)
    by_cap = sorted(rows, key=lambda m: m["capacity_bps"] or 0)
    rx = [m["received_bps"] for m in by_cap]
    if all(x is not None for x in rx) and len(rx) > 1:
        add("delivered bitrate ordered by capacity", "increasing", " < ".join(run_metrics_fmt(x / 1e6, ".2f") for x in rx) + " Mbit/s",
            all(a < b for a, b in zip(rx, rx[1:])))
    lo, hi = by_cap[0].get("psnr_y_mean") if by_cap else None, by_cap[-1].get("psnr_y_mean") if by_cap else None
    add("fastest's PSNR - slowest's", ">= 3 dB", "-" if lo is None or hi is None else f"{hi - lo:.2f} dB",
        None if lo is None or hi is None else hi - lo >= 3)
    return out


def latency_plot(out, runinfo, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    t0 = None
    for m in rows:
        frames, _ = run_metrics.client_events(os.path.join(out, f"client-{m['side']}.jsonl"))
        shown = sorted((f["capture_us"], f["display_us"]) for f in frames if f.get("shown") and f.get("display_us"))
        if not shown:
            continue
        t0 = t0 or shown[0][0]
        ax.plot([(c - t0) / 1e6 for c, _ in shown], [(d - c) / 1e3 for c, d in shown], ".", ms=2,
                label=f"{m['side']} ({(m['capacity_bps'] or 0) / 1e6:g} Mbit/s): shown {run_metrics_fmt(m['frames_shown_pct'], '.0f')}%")
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


def main(argv):
    if argv and argv[0] == "report":
        ap = argparse.ArgumentParser(prog=f"{PROGRAM} report")
        ap.add_argument("dir")
        a = ap.parse_args(argv[1:])
        sys.stdout.write(report(a.dir))
        return 0
    ap = argparse.ArgumentParser(prog=PROGRAM, description="One pps-server, one pps-client per receiver namespace, each behind its own link.",
                                 epilog="Exit status: 0 done, 1 failed, 2 usage, 77 no root or /dev/net/tun, 130 interrupted.")
    ap.add_argument("--rates", default=PPS_DEFAULT_RATES, help="Mbit/s (or RATEkbit...) per receiver, comma-separated (default 0.5,2,8)")
    ap.add_argument("--delays", default="25ms", help="one-way delay per receiver (1 or N values; default 25ms = 50 ms RTT)")
    ap.add_argument("--queue", default="auto", help="queue per receiver in packets, or auto = 1 BDP (1 or N values)")
    ap.add_argument("--duration", type=float, default=30, help="seconds of streaming (default 30)")
    ap.add_argument("--pattern", default="smpte", help="source.pattern (default smpte)")
    ap.add_argument("--transport", default="minbuf(1,3)", help="tcp or minbuf(A,B) (default minbuf(1,3), the server's default)")
    ap.add_argument("--server-set", action="append", metavar="SECTION.KEY=VALUE", help="more pps-server --set; repeatable")
    ap.add_argument("--playout", default="asap", choices=("fixed", "asap", "adaptive"), help="client playout (default asap)")
    ap.add_argument("--psnr", action="store_true", help="score the pictures shown with pps-peer-score (PSNR-Y, SSIM-Y)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", help="meson build directory (default: the one this script is in)")
    ap.add_argument("--lab-name")
    args = ap.parse_args(argv)
    if args.duration < 5:
        ap.error("--duration: at least 5 s")
    return run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
