#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Attacks on loopback, one run each: what a hostile peer does to pps-server
and its other viewers, and what a hostile server does to pps-client.

Server attacks (each beside one honest headless pps-client, the "viewer",
that streams for the whole run over the server's transport; the attack runs
in the middle half):
  baseline       no attack (the reference for the viewer's figures)
  garbage        connections sending 4 KiB of random bytes (every other one after
                 the version byte 1), up to 50 a second
  oversize       connections sending a record header of length 65535, up to 50 a second
  slowloris      16 connections (4 addresses x 4) sending a HELLO one byte a second,
                 re-opened when the server closes them
  half-open      64 silent connections (16 addresses x 4, as many as the per-address
                 limit lets in), all re-opened every 4.5 s
  slow-readers   14 clients (14 addresses) that say HELLO and never read (4 KiB
                 receive buffer); the attack lasts evict_after_s + 4 s so that
                 eviction falls inside it (they cannot see it: the BYE and FIN
                 wait behind their closed window, so they stay away)
  slow-readers-cycle
                 the same, each leaving and re-connecting evict_after_s + 1 s
                 after it joined
  churner        join (HELLO), read 0.5 s, leave, in a loop (pps-idr-amplification's)
  ping-flood-1, ping-flood-4
                 after HELLO (and AUTH where the server has a token), CLOCK_PING
                 records as fast as the socket takes them, the pongs read away;
                 one connection, or four from one address
  tls-baseline, tls-half-open, tls-ping-flood-1, tls-ping-flood-4
                 the same with the server on TLS and the viewer over TLS
  wss-ping-flood-1, wss-ping-flood-4
                 wss:// WebSocket upgrades, then ping frames as fast as the socket
                 takes them, no HELLO (the viewer: a TLS pps-client)
  connect-flood  64 silent connections from 16 addresses (127.0.0.2..17, 4 each,
                 inside the per-address limit), each re-opened the moment the
                 server drops it (pps-connect-flood, C, the build's
                 tools/traffic/); 10 newcomers try during it; the connects a
                 second it reached are reported
  tls-connect-flood, token-connect-flood
                 the same against a TLS server, and against one with an access
                 token (the viewer and newcomers on TLS, or holding the token)
  connect-flood-speak, tls-connect-flood-speak, token-connect-flood-speak
                 the same three, each connection sending one byte once made
                 (the wire's version byte; against TLS a handshake record's
                 first) and nothing more: the server's kernel hands a
                 connection over at its first bytes, a silent one a second later
  connect-churn, tls-connect-churn, token-connect-churn
                 16 addresses x 64 connections in flight, each closed (a reset)
                 the moment it is made and opened again (pps-connect-flood
                 --cycle): connects as fast as the attacker makes them,
                 whatever the server keeps
  token-baseline no attack, server with an access token
  token-guess-1, token-guess-4
                 HELLO, a wrong AUTH, BYE, again, as fast as the server answers,
                 4 connections from one address or 16 from four: wrong guesses
                 answered a second per address (over the attack, after its first
                 second), and the honest token holders (newcomers) meanwhile
Attackers connect from 127.0.0.2 and up (distinct hosts to the server), the
viewer and the newcomers from 127.0.0.1. During each attack 4 fresh
pps-clients ("newcomers") try to stream for 2 s each, spread over the attack
(two at a time at most: with the viewer, under max_clients_per_address).

Client attacks (a hostile server; the client runs with --duration SECONDS):
  id-jump             STREAM_INFO, WINDOW_END 1, WINDOW_END 4294967294
  frame-jump          a proxy in front of the real server adding 2^30 to every
                      ADU's frame number after 2 s
  stream-info-4096    STREAM_INFO of 4096x4096 pictures
  stream-info-16384   STREAM_INFO of 16384x16384 pictures
  tiny-windows        STREAM_INFO, then valid empty consecutive windows as fast as
                      TCP carries them for 10 s
  silent              STREAM_INFO, then nothing (the client: --duration 20)
  silent-reconnect    the same with --reconnect (--duration 15): the connections
                      the hostile server sees

Figures: the server's state, exit status, RSS and open descriptors (/proc)
before the attack and after it (once its descriptors are back, 5 s at most),
its --stats-json counters, the bytes its stderr grew by during the attack (and
a minute); the viewer's frames shown per second, frame latency p95 and longest
gap during the attack window; newcomers that got a stream; for the client
attacks the client's exit status, time to exit, log size and peak RSS.
Results go to OUT/attacks.json, and OUT/ATTACKS.md is made from that JSON
(--render JSON redoes only that). Standard library only; every process and
socket is bounded in time and removed whatever happens.

  flock -x /tmp/pps-measure.lock tools/pps-attack-table.py build --out docs

Soak: the server attacks in quick rotation, two at a time, against one
server (TLS and an access token; --plain: no TLS, no wss flood) of a build,
meant for a sanitizer build, beside one honest viewer; it reports any
sanitizer line in the server's stderr (loudly), the viewer's figures, and the
server's RSS and descriptors before the attacks, at their end and after 5 s
of quiet:

  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
  ninja -C build-asan
  flock -x /tmp/pps-measure.lock tools/pps-attack-table.py soak --seconds 120 --build build-asan

(LeakSanitizer takes the tests' suppressions, tests/lsan.supp; for whole
allocation stacks in a report, rerun with
ASAN_OPTIONS=fast_unwind_on_malloc=0, which slows the server several times.)

Benchmarks print figures; they do not pass or fail.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from ppslab import attacktable, programs
from ppslab.errors import Failure
from ppslab.version import add_version_option


def soak(argv):
    ap = argparse.ArgumentParser(prog="pps-attack-table.py soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="meson build directory (a sanitizer build)")
    ap.add_argument("--seconds", type=float, default=120, help="attack time; default 120")
    ap.add_argument("--slot", type=float, default=5, help="seconds between turns; default 5")
    ap.add_argument("--warm", type=float, default=1, metavar="SECONDS",
                    help="before the baseline, every attacker once for this long (0: none); default 1")
    ap.add_argument("--plain", action="store_true", help="the server without TLS")
    ap.add_argument("--connect-flood", metavar="PROGRAM",
                    help="pps-connect-flood to use (default: the build's tools/traffic/)")
    ap.add_argument("--out", help="write soak.json and SOAK.md in this directory")
    a = ap.parse_args(argv)
    if not 10 <= a.seconds <= 3600 or not 1 <= a.slot <= 60 or not 0 <= a.warm <= 60:
        ap.error("--seconds: 10..3600, --slot: 1..60, --warm: 0..60")
    build = programs.Build(a.build, **({"connect_flood": a.connect_flood} if a.connect_flood else {}))
    build.require("server", "client", "connect_flood")
    command = " ".join(["tools/pps-attack-table.py", "soak"] + argv)
    # ASAN_OPTIONS=fast_unwind_on_malloc=0 gives whole allocation stacks (the
    # fast unwinder stops in libraries without frame pointers, GLib's among
    # them) but slows the server several times over, enough to change what the
    # attacks do to it: the caller chooses. The programs started inherit these.
    os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    # The tests' suppressions: GLib's library constructor keeps 16 KiB for
    # the life of the process.
    supp = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "tests", "lsan.supp")
    if os.path.exists(supp):
        os.environ.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.normpath(supp))
    with tempfile.TemporaryDirectory(prefix="pps-soak-") as workdir:
        r = attacktable.soak_run(build, workdir, a.seconds, "plain" if a.plain else "tls", a.slot,
                                 a.warm, progress=lambda s: print(s, file=sys.stderr, flush=True))
    r.update(command=command, date=time.strftime("%Y-%m-%d %H:%M %Z"),
             commit=programs.tree_version() or "?")
    text = attacktable.render_soak(r, command)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "soak.json"), "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
        with open(os.path.join(a.out, "SOAK.md"), "w") as f:
            f.write(text)
    print(text, end="")
    if r["sanitizer_lines"]:
        print("pps-attack-table soak: SANITIZER REPORT in the server's stderr (%d lines)"
              % len(r["sanitizer_lines"]), file=sys.stderr)
    return 0


def main():
    if sys.argv[1:2] == ["soak"]:
        return soak(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_option(ap, "pps-attack-table")
    ap.add_argument("build", nargs="?", help="meson build directory")
    ap.add_argument("--seconds", type=float, default=12,
                    help="run length (the attack holds its middle half); default 12")
    ap.add_argument("--only", help="attacks to run, comma-separated, of: "
                    + ", ".join(attacktable.SERVER_ATTACKS + attacktable.CLIENT_ATTACKS)
                    + " (a server attack brings its baseline)")
    ap.add_argument("--runs", type=int, default=1, metavar="N",
                    help="run the list N times over, in turn (1..20; default 1): the tables "
                    "show the first round, a run-to-run section the median and range of each")
    ap.add_argument("--runs-only", metavar="LIST",
                    help="after the first round, only these attacks (comma-separated; their "
                    "baselines come along)")
    ap.add_argument("--out", help="write attacks.json and ATTACKS.md in this directory")
    ap.add_argument("--connect-flood", metavar="PROGRAM",
                    help="pps-connect-flood to use (default: the build's tools/traffic/)")
    ap.add_argument("--render", metavar="JSON",
                    help="only make the Markdown table from a results JSON (to stdout or --out)")
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            doc = json.load(f)
    else:
        if not a.build:
            ap.error("BUILD_DIR is needed (or --render JSON)")
        if not 8 <= a.seconds <= 120:
            ap.error("--seconds: 8..120")
        if not 1 <= a.runs <= 20:
            ap.error("--runs: 1..20")
        def chosen(option, value, names):
            """The attacks of @names that @value lists (comma-separated), with
            the baselines of the server attacks among them, in @names' order."""
            wanted = value.split(",")
            unknown = [n for n in wanted if n not in names]
            if unknown:
                ap.error("%s: not among the attacks: %s" % (option, ", ".join(unknown)))
            wanted += [attacktable.baseline_of(n) for n in wanted if n in attacktable.SERVER_ATTACKS]
            return [n for n in names if n in wanted]

        names = attacktable.SERVER_ATTACKS + attacktable.CLIENT_ATTACKS
        if a.only:
            names = chosen("--only", a.only, names)
        again = chosen("--runs-only", a.runs_only, names) if a.runs_only else names
        doc = {"command": " ".join(["tools/pps-attack-table.py"] + sys.argv[1:]),
               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": programs.tree_version() or "?",
               "machine": os.uname().sysname + " " + os.uname().release,
               "cpus": os.cpu_count(), "seconds": a.seconds,
               "load_start": list(os.getloadavg()), "results": []}
        build = programs.Build(a.build, **({"connect_flood": a.connect_flood} if a.connect_flood else {}))
        with tempfile.TemporaryDirectory(prefix="pps-attack-") as workdir:
            for round_no, name in ((k, n) for k in range(a.runs) for n in (again if k else names)):
                started = time.monotonic()
                try:
                    run = attacktable.server_run if name in attacktable.SERVER_ATTACKS else attacktable.client_run
                    r = run(build, workdir, name, a.seconds)
                except (Failure, OSError, subprocess.SubprocessError) as e:
                    print("%s: could not run: %s" % (name, e), file=sys.stderr)
                    continue
                r["run_s"] = time.monotonic() - started
                r["round"] = round_no
                doc["results"].append(r)
                print("%-18s %s" % (name, json.dumps({k: v for k, v in r.items()
                                                      if k not in ("newcomers",)})),
                      flush=True)
        doc["load_end"] = list(os.getloadavg())
    text = attacktable.render(doc)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        if not a.render:
            with open(os.path.join(a.out, "attacks.json"), "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
        with open(os.path.join(a.out, "ATTACKS.md"), "w") as f:
            f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
