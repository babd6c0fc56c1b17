# SPDX-License-Identifier: MIT
"""pps-call-lab's runner and report: a call through a relay in the network
lab. pps-relay in the sender namespace of a multi-receiver lab (`pps-netlab
up --receivers N`), one participant per receiver namespace, each behind its
own pps-linkem link whose forward direction is the participant's downlink
and whose reverse direction its uplink; each participant is one `pps-call`
(its source published to the relay as ROOM/NAME, every other participant
viewed from there). Figures per direction (metrics.run_metrics, the same
definitions as pps-sweep): what SENDER's viewers at RECEIVER showed. Outputs
in OUT: run.json, lab.json, relay.err, NAME/ (each participant's logs:
PEER.jsonl, PEER.y4m while scoring), call-NAME.err, results.json, report.md."""
import json
import os
import re
import shlex
import sys

from . import metrics, process, programs
from .errors import EXIT_INTERRUPTED, EXIT_SKIP, Failure, Interrupted, NotPermitted, UsageError
from .files import public_command, read_json
from .lab import Lab
from .netlab.state import require_permission
from .netlab.lifecycle import per_receiver_path
from .report import fmt

PROGRAM = "pps-call-lab"
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")
FPS = 30
EXIT_GRACE_S = 30.0
LAB_SLACK_S = 90.0
ROOM = "call"
# The must-show's bars per direction.
SHOWN_MIN_PCT = 95.0
P95_MAX_MS = 300.0


def log(msg):
    print(f"{PROGRAM}: {msg}", file=sys.stderr, flush=True)


def rate_arg(r):
    """'8' -> '8mbit'; '800kbit' stays."""
    return r if re.search(r"[a-z]", r) else r + "mbit"


def queue_text(runinfo):
    """How the report names the queues."""
    qb = runinfo.get("queue_bytes")
    if qb == "auto":
        return "queues 1 BDP of bytes (small packets count by their size)"
    if qb:
        return f"queues {qb} bytes"
    return f"queues {runinfo['queue']} (1 BDP when auto, in 1500-byte packets)"


def split_values(text, n, what):
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise UsageError(f"--{what}: {len(values)} values for {n} participants (give 1 or {n})")
    return values


def run(build, args):
    """One call: the lab, the relay, a pps-call per participant, then the report."""
    build.require("netlab", "relay", "server", "client", "call")
    call_program = build.call
    n = args.participants
    if not 2 <= n <= len(NAMES):
        raise UsageError(f"--participants: 2..{len(NAMES)}")
    downs = split_values(args.down, n, "down")
    ups = split_values(args.up, n, "up")
    delays = split_values(args.delays, n, "delays")
    try:
        require_permission()
    except NotPermitted as error:
        log(str(error))
        return EXIT_SKIP
    names = list(NAMES[:n])
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    process.raise_on_signals()
    psnr = args.psnr and args.pattern in metrics.PSNR_PATTERNS and build.has("peer_score")
    up = ["--receivers", n, "--rate", ",".join(rate_arg(r) for r in downs), "--rev-rate", ",".join(rate_arg(r) for r in ups),
          "--delay", ",".join(delays), "--queue", args.queue, "--aqm", "droptail", "--ecn", "off", "--congestion", "cubic",
          "--stats", os.path.join(out, "linkem.json")]
    if args.queue_bytes:
        up += ["--queue-bytes", args.queue_bytes]
    name = args.lab_name or "call%d" % (os.getpid() % 10000)
    runinfo = {"command": " ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]]), "participants": names,
               "down": downs, "up": ups, "delays": delays, "queue": args.queue, "queue_bytes": args.queue_bytes, "duration_s": args.duration,
               "pattern": args.pattern, "psnr": bool(psnr), "room": ROOM,
               "congestion": "the streams: the server's default (bbr); the lab's routes: cubic"}
    relay = None
    calls = []
    try:
        with Lab(build.netlab, name, up, args.duration + LAB_SLACK_S) as lab:
            with open(os.path.join(out, "lab.json"), "w") as f:
                json.dump(lab.info, f, indent=1)
            relay = programs.Server(build.relay, lab.addr("snd"), out, lab=lab, side="snd", tag="relay",
                                    duration_s=args.duration + EXIT_GRACE_S, quiet=False,
                                    stderr=os.path.join(out, "relay.err"))
            for k, who in enumerate(names, 1):
                os.makedirs(os.path.join(out, who), exist_ok=True)
                argv = [call_program, f"{relay.address}/{ROOM}", "--name", who, "--duration", "%g" % args.duration,
                        "--display", "none", "--log-dir", os.path.join(out, who),
                        "--set", f"source.pattern={args.pattern}", "--set", f"source.fps={FPS}"]
                for other in names:
                    if other != who:
                        argv += ["--peer", other]
                if psnr:
                    argv += ["--output-dir", os.path.join(out, who)]
                for item in args.server_set or []:
                    argv += ["--set", item]
                for item in args.client_set or []:
                    argv += ["--client-set", item]
                calls.append(programs.Program(argv, lab, f"rcv{k}", stderr=os.path.join(out, f"call-{who}.err")))
            runinfo["start_unix"] = min(c.start_unix for c in calls)
            for c in calls:
                if not c.exited(args.duration + EXIT_GRACE_S):
                    raise Failure(f"{c.argv[0]} did not stop at its --duration")
            runinfo["call_exit"] = {who: c.returncode for who, c in zip(names, calls)}
            runinfo["end_unix"] = max(c.end_unix for c in calls)
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
        for c in calls:
            c.stop()
        if relay is not None:
            relay.stop()
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(runinfo, f, indent=1)
    if psnr:
        for viewer in names:
            for sender in names:
                y4m = os.path.join(out, viewer, f"{sender}.y4m")
                if sender != viewer and os.path.exists(y4m):
                    metrics.peer_score(build.peer_score, args.pattern, y4m,
                                       os.path.join(out, viewer, f"scores-{sender}.tsv"))
                    os.unlink(y4m)
    sys.stdout.write(report(out))
    return 0 if all(v == 0 for v in runinfo.get("call_exit", {}).values()) else 1


def directions(runinfo):
    """(sender, receiver, sender's index, receiver's index) for every ordered pair."""
    names = runinfo["participants"]
    return [(s, r, i, j) for i, s in enumerate(names) for j, r in enumerate(names) if s != r]


def report(out):
    with open(os.path.join(out, "run.json")) as f:
        runinfo = json.load(f)
    names = runinfo["participants"]
    rows = []
    for sender, receiver, i, j in directions(runinfo):
        cj = os.path.join(out, receiver, f"{sender}.jsonl")
        m = metrics.run_metrics(cj, None, (), os.path.join(out, receiver, f"scores-{sender}.tsv")) \
            if os.path.exists(cj) else {}
        stats_up = read_json(per_receiver_path(os.path.join(out, "linkem.json"), i + 1, len(names))) or {}
        stats_down = read_json(per_receiver_path(os.path.join(out, "linkem.json"), j + 1, len(names))) or {}
        m.update({"sender": sender, "receiver": receiver,
                  "uplink_bps": stats_up.get("settings", {}).get("rev", {}).get("rate_bps"),
                  "downlink_bps": stats_down.get("settings", {}).get("fwd", {}).get("rate_bps")})
        rows.append(m)
    checks = call_checks(rows)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"run": runinfo, "directions": rows, "checks": checks}, f, indent=1)
    links = ", ".join(f"{who} {d}/{u} Mbit/s down/up, {dl} one way" for who, d, u, dl in
                      zip(names, runinfo["down"], runinfo["up"], runinfo["delays"]))
    L = [f"# pps-call-lab: a {len(names)}-party call through pps-relay", "",
         f"`{public_command(runinfo['command'])}`; {runinfo['duration_s']:g} s; pattern {runinfo['pattern']}; "
         f"every participant one `pps-call` in its own namespace, the relay on the far side of every link; "
         f"links: {links}; {queue_text(runinfo)}, drop-tail; congestion control: {runinfo['congestion']}.", "",
         "| direction | sender's uplink Mbit/s | receiver's downlink Mbit/s | frames shown % | p50 / p95 / p99 ms | longest freeze ms | received Mbit/s | PSNR dB |",
         "|---|---|---|---|---|---|---|---|"]
    for m in rows:
        L.append(f"| {m['sender']} → {m['receiver']} | {fmt((m['uplink_bps'] or 0) / 1e6, '.2f')} | "
                 f"{fmt((m['downlink_bps'] or 0) / 1e6, '.2f')} | {fmt(m.get('frames_shown_pct'))} | "
                 f"{fmt(m.get('frame_latency_p50_ms'), '.0f')} / {fmt(m.get('frame_latency_p95_ms'), '.0f')} / "
                 f"{fmt(m.get('frame_latency_p99_ms'), '.0f')} | {fmt(m.get('longest_freeze_ms'), '.0f')} | "
                 f"{fmt((m.get('received_bps') or 0) / 1e6, '.2f')} | {fmt(m.get('psnr_y_mean'), '.2f')} |")
    L += ["", "Frame latency: a picture's capture at the sender to its display at the receiver (one clock: one host).", "",
          "The voice, each direction (the receiver's audio slots in the same span: played as sent, the rest recovered by "
          "FEC or concealed; mouth-to-ear: the tick's capture to its playout; A/V skew: tick against flash):", "",
          "| direction | audio played % | concealed % | mouth-to-ear p50 / p95 ms | playout delay mean ± sd ms | A/V skew abs p95 ms |",
          "|---|---|---|---|---|---|"]
    for m in rows:
        L.append(f"| {m['sender']} → {m['receiver']} | {fmt(m.get('audio_played_pct'))} | {fmt(m.get('audio_concealed_pct'))} | "
                 f"{fmt(m.get('mouth_to_ear_p50_ms'), '.0f')} / {fmt(m.get('mouth_to_ear_p95_ms'), '.0f')} | "
                 f"{fmt(m.get('audio_delay_mean_ms'), '.0f')} ± {fmt(m.get('audio_delay_std_ms'), '.1f')} | "
                 f"{fmt(m.get('av_skew_abs_p95_ms'), '.0f')} |")
    L += ["",
          "| check | wanted | measured | verdict |", "|---|---|---|---|"]
    for c in checks:
        L.append(f"| {c['check']} | {c['wanted']} | {c['measured']} | {c['verdict']} |")
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write(text)
    return text


def call_checks(rows):
    out = []

    def add(check, wanted, measured, ok):
        out.append({"check": check, "wanted": wanted, "measured": measured,
                    "verdict": "not measured" if ok is None else ("met" if ok else "**missed**")})

    for m in rows:
        d = f"{m['sender']} → {m['receiver']}"
        v = m.get("frames_shown_pct")
        add(f"{d} frames shown", f">= {SHOWN_MIN_PCT:g}%", fmt(v) + "%", None if v is None else v >= SHOWN_MIN_PCT)
        v = m.get("frame_latency_p95_ms")
        add(f"{d} frame latency p95", f"<= {P95_MAX_MS:g} ms", fmt(v, ".0f") + " ms", None if v is None else v <= P95_MAX_MS)
    return out
