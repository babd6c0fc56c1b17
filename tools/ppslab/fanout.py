# SPDX-License-Identifier: MIT
"""pps-fanout's runner and report: heterogeneous clients of one encode. One
pps-server in the sender namespace of a multi-receiver lab (`pps-netlab up
--receivers N`), one pps-client in each receiver namespace, each receiver
behind its own pps-linkem link; figures per client (metrics.run_metrics, the
same definitions as pps-sweep). Outputs in OUT: run.json, lab.json,
client-rcvK.jsonl, linkem-rcvK.json, server.json(l), results.json, report.md,
timeline-rcvK.png, latency.png."""
import json
import os
import re
import shlex
import sys

from . import metrics, plots, process, programs
from .errors import EXIT_INTERRUPTED, EXIT_SKIP, Failure, Interrupted, NotPermitted, UsageError
from .files import public_command, read_json
from .lab import Lab
from .matrix import transport_sets
from .netlab.state import require_permission
from .netlab.lifecycle import per_receiver_path
from .report import fmt
from .wrappers.ppstream import Ppstream

PROGRAM = "pps-fanout"
FPS = 30
EXIT_GRACE_S = 30.0
LAB_SLACK_S = 90.0
PPS_DEFAULT_RATES = "0.5,2,8"


def log(msg):
    print(f"{PROGRAM}: {msg}", file=sys.stderr, flush=True)


def run(build, args):
    """One run: the lab, the server and the clients, then the report."""
    build.require("netlab", "server", "client")
    sets = {"source.pattern": args.pattern, "source.fps": FPS}
    try:
        sets.update(transport_sets(args.transport))
        require_permission()
    except UsageError as error:
        raise UsageError(f"--transport: {error}") from None
    except NotPermitted as error:
        log(str(error))
        return EXIT_SKIP
    rates = [r.strip() for r in args.rates.split(",") if r.strip()]
    n = len(rates)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    process.raise_on_signals()
    # The stream keeps the server's default congestion control (bbr, under its
    # tcp-friendly rate control); --server-set transport.congestion=cubic to change.
    for item in args.server_set or []:
        key, _, value = item.partition("=")
        sets[key.strip()] = value.strip()
    client_sets = {}
    for item in getattr(args, "client_set", None) or []:
        key, _, value = item.partition("=")
        client_sets[key.strip()] = value.strip()
    psnr = args.psnr and args.pattern in metrics.PSNR_PATTERNS and build.has("peer_score")
    up = ["--receivers", n, "--rate", ",".join(r if re.search(r"[a-z]", r) else r + "mbit" for r in rates),
          "--delay", args.delays, "--queue", args.queue, "--aqm", "droptail", "--ecn", "off", "--congestion", "cubic",
          "--stats", os.path.join(out, "linkem.json")]
    name = args.lab_name or "fan%d" % (os.getpid() % 10000)
    has_log = programs.has_option(build.server, "--log")
    runinfo = {"command": " ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]]), "rates": rates, "delays": args.delays,
               "queue": args.queue, "duration_s": args.duration, "pattern": args.pattern, "server_set": sets,
               "client_set": client_sets,
               "congestion": "the stream: " + sets.get("transport.congestion", "the server's default (bbr)") + "; the lab's routes: cubic", "psnr": bool(psnr),
               "server_log": has_log, "playout": args.playout, "relay": getattr(args, "relay", 0)}
    if runinfo["relay"]:
        build.require("relay")
    system = Ppstream(build, out, sets=sets, server_log=True, client_extra_s=EXIT_GRACE_S, policy=args.playout, output=psnr,
                      client_sets=client_sets,
                      relay=runinfo["relay"])
    try:
        with Lab(build.netlab, name, up, args.duration + LAB_SLACK_S) as lab:
            with open(os.path.join(out, "lab.json"), "w") as f:
                json.dump(lab.info, f, indent=1)
            sides = [f"rcv{k}" if n > 1 else "rcv" for k in range(1, n + 1)]
            system.start(lab, args.duration, sides=sides, tags=[f"rcv{k}" for k in range(1, n + 1)])
            runinfo["server_start_unix"] = system.server.start_unix
            runinfo["receivers"] = [{"side": f"rcv{k}", "addr": lab.addr(side), "rate": rates[k - 1],
                                     "start_unix": client.start_unix}
                                    for k, (side, client) in enumerate(zip(sides, system.receivers), 1)]
            if not system.server.exited(args.duration + EXIT_GRACE_S):
                raise Failure("pps-server did not stop at its --duration")
            runinfo["server_end_unix"] = system.server.end_unix
            for c in system.receivers:
                c.exited(EXIT_GRACE_S)
            runinfo["client_exit"] = [c.returncode for c in system.receivers]
            runinfo["server_exit"] = system.server.returncode
    except Interrupted as error:
        log(f"interrupted ({error}); lab removed")
        return EXIT_INTERRUPTED
    except NotPermitted as error:
        log(f"{error}; skipping")
        return EXIT_SKIP
    except Failure as error:
        log(str(error))
        return 1
    finally:
        system.stop()
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(runinfo, f, indent=1)
    if psnr:
        for k in range(1, n + 1):
            y4m = os.path.join(out, f"shown-rcv{k}.y4m")
            if os.path.exists(y4m):
                metrics.peer_score(build.peer_score, args.pattern, y4m, os.path.join(out, f"scores-rcv{k}.tsv"))
                os.unlink(y4m)
    sys.stdout.write(report(out))
    return 0 if runinfo.get("server_exit") == 0 else 1


def first_picture_s(client_jsonl):
    """Seconds from the client's start record to its first picture shown (None
    when it showed none): connecting, joining, the first IDR, decoding. The
    client's summary has it too (first_picture_ms); read from the events, it
    is there for runs older than that field as well."""
    start = first = None
    try:
        with open(client_jsonl) as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("type") == "start" and start is None:
                    start = e.get("time_us")
                elif e.get("type") == "frame" and e.get("shown") and e.get("display_us"):
                    first = e["display_us"] if first is None else min(first, e["display_us"])
    except OSError:
        return None
    return (first - start) / 1e6 if start and first else None


def report(out):
    with open(os.path.join(out, "run.json")) as f:
        runinfo = json.load(f)
    slog = os.path.join(out, "server.jsonl")
    rows = []
    for r in runinfo.get("receivers", []):
        k = r["side"][3:]
        cj = os.path.join(out, f"client-rcv{k}.jsonl")
        m = metrics.run_metrics(cj, slog, (), os.path.join(out, f"scores-rcv{k}.tsv"))
        cid = metrics.server_client_id(slog, r["addr"]) if os.path.exists(slog) else None
        m["server_client"] = (m.get("clients") or {}).get(cid) if cid is not None else None
        m.pop("clients", None)
        m["first_picture_s"] = first_picture_s(cj)
        stats = read_json(per_receiver_path(os.path.join(out, "linkem.json"), k, len(runinfo["receivers"])))
        link = (stats or {}).get("settings", {}).get("fwd", {})
        m.update({"side": r["side"], "rate": r["rate"], "capacity_bps": link.get("rate_bps"), "rtt_ms": None,
                  "queue_pkts": link.get("queue_limit_pkts"), "bottleneck_drops": ((stats or {}).get("fwd") or {}).get("dropped_queue_pkts")})
        with open(os.path.join(out, "lab.json")) as f:
            lab = json.load(f)
        for rr in lab.get("receivers", []):
            if rr["side"] == r["side"]:
                m["rtt_ms"] = rr["rtt_ms"]
        rows.append(m)
        rtt = f"RTT {m['rtt_ms']:g} ms" if m["rtt_ms"] is not None else "RTT unknown"
        title = f"receiver {r['side']}: {r['rate']} Mbit/s, {rtt}, {runinfo['pattern']}, " + \
                ", ".join(f"{a}={b}" for a, b in runinfo["server_set"].items() if a.startswith(("transport.mode", "adapt")))
        plots.plot_timeline(os.path.join(out, f"timeline-rcv{k}.png"), title, cj, slog if cid is not None else None,
                                  [(r["start_unix"] * 1e6, m["capacity_bps"])] if m["capacity_bps"] else None, (), client_id=cid)
    checks = fanout_checks(rows)
    results = {"run": runinfo, "clients": rows, "checks": checks}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    plots.fanout_latency(out, runinfo, rows)
    L = ["# pps-fanout: clients of one encode behind different links", "",
         f"`{public_command(runinfo['command'])}`; {runinfo['duration_s']:g} s; pattern {runinfo['pattern']}; playout {runinfo['playout']}; "
         f"{relay_words(runinfo.get('relay', 0))}; "
         f"server settings: " + ", ".join(f"`{a}={b}`" for a, b in runinfo["server_set"].items()) +
         "".join(f", client `{a}={b}`" for a, b in (runinfo.get("client_set") or {}).items()) +
         f"; server --log: {'yes' if runinfo['server_log'] else 'no (this server has none)'}; congestion control: {runinfo['congestion']}.", "",
         "| receiver | link Mbit/s | RTT ms | queue pkts | frames shown % | p50 / p95 / p99 ms | longest freeze ms | frozen s | first picture s | received Mbit/s | PSNR dB | estimate Mbit/s |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f = fmt
    for m in rows:
        sc = m.get("server_client") or {}
        L.append(f"| {m['side']} | {f((m['capacity_bps'] or 0) / 1e6, '.2f')} | {f(m['rtt_ms'], '.0f')} | {m['queue_pkts']} | "
                 f"{f(m['frames_shown_pct'])} | {f(m['frame_latency_p50_ms'], '.0f')} / {f(m['frame_latency_p95_ms'], '.0f')} / "
                 f"{f(m['frame_latency_p99_ms'], '.0f')} | {f(m['longest_freeze_ms'], '.0f')} | {f((m['total_frozen_ms'] or 0) / 1e3, '.1f')} | "
                 f"{f(m['first_picture_s'], '.2f')} | {f((m['received_bps'] or 0) / 1e6, '.2f')} | {f(m.get('psnr_y_mean'), '.2f')} | "
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


def relay_words(relay):
    """How the stream reached the clients."""
    if not relay:
        return "served by pps-server directly"
    return ("through pps-relay" if relay == 1 else f"through a tree of {relay} pps-relays") + \
        " (publisher and relays on the sender's side)"


def fanout_checks(rows):
    out = []

    def add(check, wanted, measured, ok):
        out.append({"check": check, "wanted": wanted, "measured": measured,
                    "verdict": "not measured" if ok is None else ("met" if ok else "**missed**")})

    for m in rows:
        v = m["frames_shown_pct"]
        add(f"{m['side']} frames shown", ">= 95%", fmt(v) + "%", None if v is None else v >= 95)
        v = m["frame_latency_p95_ms"]
        add(f"{m['side']} frame latency p95", "<= 400 ms", fmt(v, ".0f") + " ms", None if v is None else v <= 400)
    by_cap = sorted(rows, key=lambda m: m["capacity_bps"] or 0)
    rx = [m["received_bps"] for m in by_cap]
    if all(x is not None for x in rx) and len(rx) > 1:
        add("delivered bitrate ordered by capacity", "increasing", " < ".join(fmt(x / 1e6, ".2f") for x in rx) + " Mbit/s",
            all(a < b for a, b in zip(rx, rx[1:])))
    lo, hi = by_cap[0].get("psnr_y_mean") if by_cap else None, by_cap[-1].get("psnr_y_mean") if by_cap else None
    add("fastest's PSNR - slowest's", ">= 3 dB", "-" if lo is None or hi is None else f"{hi - lo:.2f} dB",
        None if lo is None or hi is None else hi - lo >= 3)
    return out


