# SPDX-License-Identifier: MIT
"""pps-attack-table's runs and table: attacks on loopback, one run each, what
a hostile peer does to pps-server and its other viewers (each beside one
honest headless pps-client, the viewer; the attack holds the middle half of
the run; 4 fresh pps-clients, the newcomers, try to stream during it), and
what a hostile server does to pps-client. The attackers are attacks.py's."""
import functools
import os
import secrets
import statistics
import subprocess
import time

from . import metrics, programs, report
from .attacks import (CONNECT_FLOODS, EVICT_AFTER_S, Attacker, FrameJumpProxy, HostileServer,
                      attacker_address, peak_rss_kib, proc_usage)
from .errors import Failure
from .records import listener, stream_info, window_end

NEWCOMERS = 4
NEWCOMER_S = 2.0
NEWCOMERS_AT_ONCE = 2
CONNECT_FLOOD_NEWCOMERS = 10
CONNECT_FLOOD_ATTACK_S = 14  # long enough for 10 newcomers, two at a time
TINY_WINDOWS_S = 10.0
SILENT_CLIENT_S = 20.0
SILENT_RECONNECT_S = 15.0


def spec(kind, transport="plain", token=False, connections=1, addresses=1, newcomers=NEWCOMERS,
         attack_s=None):
    """A server attack: the attacker's kind, the server's transport ("plain" or
    "tls"; the viewer and newcomers use the same), whether it has an access
    token, the attacker's connections over how many addresses, how many
    newcomers try during it and the attack's least length."""
    return {"kind": kind, "transport": transport, "token": token, "connections": connections,
            "addresses": addresses, "newcomers": newcomers, "attack_s": attack_s}


SERVER_SPECS = {
    "baseline": spec("baseline"),
    "garbage": spec("garbage"),
    "oversize": spec("oversize"),
    "slowloris": spec("slowloris"),
    "half-open": spec("half-open"),
    "slow-readers": spec("slow-readers", attack_s=EVICT_AFTER_S + 4),
    "slow-readers-cycle": spec("slow-readers-cycle", attack_s=EVICT_AFTER_S + 4),
    "churner": spec("churner"),
    "ping-flood-1": spec("ping-flood"),
    "ping-flood-4": spec("ping-flood", connections=4),
    "tls-baseline": spec("baseline", "tls"),
    "tls-half-open": spec("half-open", "tls"),
    "tls-ping-flood-1": spec("ping-flood", "tls"),
    "tls-ping-flood-4": spec("ping-flood", "tls", connections=4),
    "wss-ping-flood-1": spec("ws-ping-flood", "tls"),
    "wss-ping-flood-4": spec("ws-ping-flood", "tls", connections=4),
    "connect-flood": spec("connect-flood", newcomers=CONNECT_FLOOD_NEWCOMERS,
                          attack_s=CONNECT_FLOOD_ATTACK_S),
    "tls-connect-flood": spec("connect-flood", "tls", newcomers=CONNECT_FLOOD_NEWCOMERS,
                              attack_s=CONNECT_FLOOD_ATTACK_S),
    "connect-flood-speak": spec("connect-flood-speak", newcomers=CONNECT_FLOOD_NEWCOMERS,
                                attack_s=CONNECT_FLOOD_ATTACK_S),
    "tls-connect-flood-speak": spec("connect-flood-speak", "tls", newcomers=CONNECT_FLOOD_NEWCOMERS,
                                    attack_s=CONNECT_FLOOD_ATTACK_S),
    "connect-churn": spec("connect-churn", newcomers=CONNECT_FLOOD_NEWCOMERS,
                          attack_s=CONNECT_FLOOD_ATTACK_S),
    "tls-connect-churn": spec("connect-churn", "tls", newcomers=CONNECT_FLOOD_NEWCOMERS,
                              attack_s=CONNECT_FLOOD_ATTACK_S),
    "token-baseline": spec("baseline", token=True),
    "token-connect-flood": spec("connect-flood", token=True, newcomers=CONNECT_FLOOD_NEWCOMERS,
                                attack_s=CONNECT_FLOOD_ATTACK_S),
    "token-connect-flood-speak": spec("connect-flood-speak", token=True,
                                      newcomers=CONNECT_FLOOD_NEWCOMERS, attack_s=CONNECT_FLOOD_ATTACK_S),
    "token-connect-churn": spec("connect-churn", token=True, newcomers=CONNECT_FLOOD_NEWCOMERS,
                                attack_s=CONNECT_FLOOD_ATTACK_S),
    "token-guess-1": spec("token-guess", token=True, connections=4, addresses=1),
    "token-guess-4": spec("token-guess", token=True, connections=16, addresses=4),
}
SERVER_ATTACKS = list(SERVER_SPECS)
CLIENT_ATTACKS = ["id-jump", "frame-jump", "stream-info-4096", "stream-info-16384", "tiny-windows",
                  "silent", "silent-reconnect"]


def baseline_of(name):
    """The no-attack run a server attack's viewer figures are set beside."""
    s = SERVER_SPECS[name]
    return "tls-baseline" if s["transport"] == "tls" else "token-baseline" if s["token"] else "baseline"
WHAT = {
    "baseline": "no attack",
    "garbage": "connections sending 4 KiB of random bytes (every other one after the version "
               "byte 1), 50 a second at most",
    "oversize": "connections sending a record header of length 65535, 50 a second at most",
    "slowloris": "16 connections (4 addresses x 4) sending a HELLO one byte a second, "
                 "re-opened when closed",
    "half-open": "64 silent connections (16 addresses x 4), all re-opened every 4.5 s",
    "slow-readers": "14 clients (14 addresses) that send HELLO and never read (4 KiB receive "
                    "buffer); once evicted they stay away (they cannot see their BYE)",
    "slow-readers-cycle": "the same 14, each leaving and re-connecting evict_after_s + 1 s "
                          "after it joined",
    "churner": "join (HELLO), read 0.5 s, leave, in a loop (pps-idr-amplification's)",
    "tls-baseline": "no attack, server and viewer on TLS",
    "tls-half-open": "half-open, server and viewer on TLS",
    "id-jump": "hostile server: STREAM_INFO, WINDOW_END 1, WINDOW_END 4294967294",
    "frame-jump": "a proxy in front of the real server adds 2^30 to every frame number after 2 s",
    "stream-info-4096": "hostile server: STREAM_INFO of 4096x4096 pictures",
    "stream-info-16384": "hostile server: STREAM_INFO of 16384x16384 pictures",
    "ping-flood-1": "after HELLO, CLOCK_PING records as fast as the socket takes them (pongs "
                    "read away), one connection, re-opened if closed",
    "ping-flood-4": "the same, four connections from one address",
    "tls-ping-flood-1": "ping-flood-1 over TLS, server and viewer on TLS",
    "tls-ping-flood-4": "ping-flood-4 over TLS, server and viewer on TLS",
    "wss-ping-flood-1": "a wss:// WebSocket, then ping frames (8 bytes each) as fast as the socket "
                        "takes them, no HELLO, one connection; server and viewer (pps-client) on TLS",
    "wss-ping-flood-4": "the same, four connections from one address",
    "connect-flood": "64 silent connections (16 addresses x 4, inside the per-address limit), each "
                     "re-opened the moment the server drops it (pps-connect-flood); %d newcomers"
                     % CONNECT_FLOOD_NEWCOMERS,
    "tls-connect-flood": "the same against a TLS server (the newcomers on TLS)",
    "connect-flood-speak": "connect-flood whose connections each send one byte once made (the "
                           "wire's version byte; a TLS record's first against TLS) and nothing "
                           "more: the server's kernel hands a connection over at its first bytes, "
                           "so these reach the handshake pool at once, as silent ones do not",
    "tls-connect-flood-speak": "connect-flood-speak against a TLS server (the newcomers on TLS)",
    "token-connect-flood-speak": "connect-flood-speak against a server with an access token",
    "connect-churn": "16 addresses x 64 connections in flight, each closed (a reset) the moment it "
                     "is made and opened again (pps-connect-flood --cycle): connects as fast as "
                     "the attacker makes them, whatever the server keeps (past the per-address "
                     "limit most are refused at accept); %d newcomers" % CONNECT_FLOOD_NEWCOMERS,
    "tls-connect-churn": "connect-churn against a TLS server (the newcomers on TLS)",
    "token-connect-churn": "connect-churn against a server with an access token",
    "token-baseline": "no attack, server with an access token (viewer and newcomers hold it)",
    "token-connect-flood": "connect-flood against a server with an access token (the newcomers "
                           "hold it)",
    "token-guess-1": "4 connections from one address, each HELLO, a wrong AUTH, BYE, again, as "
                     "fast as the server answers",
    "token-guess-4": "the same from four addresses (16 connections)",
    "tiny-windows": "hostile server: STREAM_INFO, then valid, empty, consecutive windows (lone "
                    "dropped WINDOW_ENDs) as fast as TCP carries them for %g s" % TINY_WINDOWS_S,
    "silent": "hostile server: STREAM_INFO, then nothing, the connection held open (client "
              "`--duration %g`)" % SILENT_CLIENT_S,
    "silent-reconnect": "silent, the client with `--reconnect` (`--duration %g`): the connections "
                        "the hostile server sees" % SILENT_RECONNECT_S,
}



def viewer_window(client, t0_s, t1_s):
    """Frames shown per second, frame latency p95 (ms) and the longest freeze
    (ms: the longest time without a frame shown, the window's edges counted,
    so a viewer that shows nothing froze for the whole window) between the two
    wall-clock times."""
    shown = []
    try:
        for e in client.events("frame"):
            if e["shown"] and t0_s * 1e6 <= e["display_us"] <= t1_s * 1e6:
                shown.append((e["display_us"], e["latency_ms"]))
    except (OSError, ValueError):
        return None, None, None
    times = [t0_s * 1e6] + sorted(t for t, _ in shown) + [t1_s * 1e6]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return (len(shown) / (t1_s - t0_s), metrics.percentile([l for _, l in shown], 95),
            max(gaps) / 1000)


def newcomer_result(c, started_s):
    """Admitted (not refused: exit 0 or frames shown), frames shown and the
    seconds from its start to its first frame shown."""
    try:
        rc = c.wait(timeout=30)
    except subprocess.TimeoutExpired:
        c.proc.kill()
        rc = c.wait()
    try:
        shown = [e["display_us"] for e in c.events("frame") if e["shown"]]
    except (OSError, ValueError, KeyError):
        shown = []
    lines = [ln for ln in c.stderr.splitlines() if ln.strip()]
    return {"exit": rc, "admitted": rc == 0 or bool(shown), "frames_shown": len(shown),
            "first_frame_s": min(shown) / 1e6 - started_s if shown else None,
            "said": lines[-1][:160] if lines else ""}


def server_settings(workdir, name, transport, token):
    """(server settings, client settings) for @transport and @token."""
    settings, client_settings = [], []
    if transport == "tls":
        cert, key = programs.make_cert(workdir, name)
        settings = ["server.tls_cert=" + cert, "server.tls_key=" + key]
        client_settings = ["client.tls=true", "client.tls_ca=" + cert]
    if token:
        settings.append("server.access_token=" + token)
        client_settings.append("client.access_token=" + token)
    return settings, client_settings


def make_attacker(build, kind, port, transport="plain", token=None, connections=1, addresses=1):
    if kind in CONNECT_FLOODS:
        build.require("connect_flood")
    # A speaking flood's byte: a TLS handshake record's first, or the wire's version.
    return Attacker(kind, port, source=attacker_address(0),
                    tls=transport == "tls" and kind in ("ping-flood", "ws-ping-flood", "token-guess"),
                    token=token, connections=connections, addresses=addresses,
                    flood_program=build.connect_flood, speak=0x16 if transport == "tls" else 1)


def stderr_bytes(srv):
    try:
        return os.path.getsize(srv.stderr_path)
    except OSError:
        return 0


def server_run(build, workdir, name, seconds):
    s = SERVER_SPECS[name]
    kind = s["kind"]
    token = secrets.token_hex(16) if s["token"] else None
    settings, client_settings = server_settings(workdir, name, s["transport"], token)
    warm_s = tail_s = seconds / 4
    attack_s = max(seconds / 2, s["attack_s"] or 0)
    n_newcomers = s["newcomers"]
    log = os.path.join(workdir, name + "-server.jsonl")
    viewer_stats = os.path.join(workdir, name + "-viewer.json")
    srv = programs.LoopbackServer(build, workdir, *settings, extra=["--log", log])
    viewer, attacker, newcomers = None, None, []
    r = {"attack": name, "side": "server", "attack_s": attack_s, "transport": s["transport"],
         "token": s["token"], "baseline": baseline_of(name)}
    try:
        viewer = programs.LoopbackClient(build, workdir, srv.address, *client_settings,
                                          duration_s=warm_s + attack_s + tail_s, name="viewer",
                                          extra=["--stats-json", viewer_stats])
        srv.wait_for_log('"viewer" joined')
        time.sleep(warm_s)  # the warm-up's length, not a synchronisation
        r["rss_kib_before"], r["fds_before"] = proc_usage(srv.proc.pid)
        t0 = time.time()
        log0 = stderr_bytes(srv)
        if kind != "baseline":
            attacker = make_attacker(build, kind, srv.port, s["transport"], token,
                                     s["connections"], s["addresses"])
            attacker.start()
        starts = [0.5 + i * (attack_s - NEWCOMER_S - 0.5) / (n_newcomers - 1)
                  for i in range(n_newcomers)]
        most_fds = r["fds_before"]
        while time.time() < t0 + attack_s:
            # Two newcomers at once at most: with the viewer that stays under
            # max_clients_per_address (8: a client is three connections with its audio), all of them
            # coming from 127.0.0.1.
            running = sum(1 for c, _ in newcomers if c.proc.poll() is None)
            if starts and time.time() >= t0 + starts[0] and running < NEWCOMERS_AT_ONCE:
                starts.pop(0)
                newcomers.append((programs.LoopbackClient(build, workdir, srv.address, *client_settings,
                                                           duration_s=NEWCOMER_S,
                                                           name="newcomer%d" % len(newcomers)),
                                  time.time()))
            most_fds = max(most_fds or 0, proc_usage(srv.proc.pid)[1] or 0)
            time.sleep(0.1)  # the attack's length, not a synchronisation
        if attacker:
            attacker.stop()
        t1 = time.time()
        r["log_bytes"] = stderr_bytes(srv) - log0
        r["log_bytes_per_min"] = r["log_bytes"] / ((t1 - t0) / 60)
        r["newcomers"] = [newcomer_result(c, started) for c, started in newcomers]
        # The server closes what the attacker left as it notices; 5 s at most.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and srv.proc.poll() is None and \
                (proc_usage(srv.proc.pid)[1] or 0) > r["fds_before"]:
            time.sleep(0.1)
        r["rss_kib_after"], r["fds_after"] = proc_usage(srv.proc.pid)
        r["fds_peak"] = most_fds
        r["server_up"] = srv.proc.poll() is None
        try:
            r["viewer_exit"] = viewer.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            viewer.proc.kill()
            r["viewer_exit"] = viewer.wait()
    finally:
        if attacker:
            attacker.stop()
        for c in [c for c, _ in newcomers] + ([viewer] if viewer else []):
            if c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()
        r["server_exit"] = srv.stop()
    r["fps"], r["p95_ms"], r["longest_gap_ms"] = viewer_window(viewer, t0, t1)
    try:
        r["viewer_frames_shown_pct"] = viewer.summary()["frames_shown_pct"]
    except (OSError, ValueError, KeyError, Failure):
        r["viewer_frames_shown_pct"] = None
    r["admitted"] = sum(1 for n in r["newcomers"] if n["admitted"])
    r["with_frames"] = sum(1 for n in r["newcomers"] if n["frames_shown"] > 0)
    firsts = [n["first_frame_s"] for n in r["newcomers"] if n["first_frame_s"] is not None]
    r["newcomer_first_frame_max_s"] = max(firsts) if firsts else None
    r["newcomers_tried"] = len(r["newcomers"])
    if attacker:
        r["attacker"] = attacker.figures()
    try:
        stats = srv.stats()
        r["counters"] = {k: stats.get(k) for k in (
            "clients_total", "connections_total", "clients_refused", "clients_evicted",
            "handshakes_dropped", "clients_unauthorized", "auth_throttled",
            "log_lines_unlogged", "idr_requests", "recovery_deferred", "cpu_user_s",
            "cpu_system_s")}
    except (OSError, ValueError):
        r["counters"] = None
    return r


def watch_client(c, since_fn, seconds):
    """Waits (seconds + 10 s at most) for the client to exit; its figures."""
    peak, deadline = None, time.monotonic() + seconds + 10
    while c.proc.poll() is None and time.monotonic() < deadline:
        peak = peak_rss_kib(c.proc.pid) or peak
        try:
            c.proc.wait(timeout=0.02)  # sampling its memory while it runs
        except subprocess.TimeoutExpired:
            pass
    end = time.monotonic()
    killed = c.proc.poll() is None
    if killed:
        c.proc.kill()
    rc = c.wait()
    since = since_fn()
    lines = [ln for ln in c.stderr.splitlines() if ln.strip()]
    return {"client_exit": rc, "killed": killed,
            "exit_after_s": end - since if since else None,
            "log_bytes": os.path.getsize(c.log_path) if os.path.exists(c.log_path) else 0,
            "client_peak_rss_kib": peak, "said": lines[-1][:160] if lines else ""}


def client_run(build, workdir, name, seconds):
    r = {"attack": name, "side": "client", "duration_s": seconds}
    if name == "frame-jump":
        srv = programs.LoopbackServer(build, workdir)
        proxy = FrameJumpProxy(srv.port, 2.0)
        proxy.start()
        try:
            c = programs.LoopbackClient(build, workdir, proxy.address, duration_s=seconds, name=name)
            r.update(watch_client(c, lambda: proxy.first_jump, seconds))
        finally:
            proxy.halt.set()
            proxy.join(timeout=5)
            r["server_exit"] = srv.stop()
        return r
    if name in ("tiny-windows", "silent", "silent-reconnect"):
        return hostile_run(build, workdir, name, seconds, r)
    replies = {"id-jump": [stream_info(), window_end(1), window_end(0xFFFFFFFE)],
               "stream-info-4096": [stream_info(4096, 4096)],
               "stream-info-16384": [stream_info(16384, 16384)]}[name]
    lsock, address = listener()
    conn = None
    try:
        c = programs.LoopbackClient(build, workdir, address, duration_s=seconds, name=name)
        lsock.settimeout(10)
        conn, _ = lsock.accept()
        conn.settimeout(10)
        conn.recv(1024)
        sent = time.monotonic()
        try:
            for rec in replies:
                conn.sendall(rec)
        except OSError:
            pass
        # The connection stays open: the client must leave on its own.
        r.update(watch_client(c, lambda: sent, seconds))
    finally:
        if conn:
            conn.close()
        lsock.close()
    return r


def hostile_run(build, workdir, name, seconds, r):
    """tiny-windows, silent, silent-reconnect: HostileServer's, the client left to leave on its own."""
    duration = {"tiny-windows": seconds, "silent": SILENT_CLIENT_S,
                "silent-reconnect": SILENT_RECONNECT_S}[name]
    r["duration_s"] = duration
    hs = HostileServer("silent" if name.startswith("silent") else name, TINY_WINDOWS_S)
    hs.start()
    try:
        c = programs.LoopbackClient(build, workdir, hs.address, duration_s=duration, name=name,
                                    extra=["--reconnect"] if name == "silent-reconnect" else [])
        r.update(watch_client(c, lambda: hs.first_record, duration))
    finally:
        hs.stop()
    r["connections_seen"] = hs.accepted
    r["reconnections"] = max(0, hs.accepted - 1)
    r["windows_sent"] = hs.windows_sent
    return r


fmt = functools.partial(report.fmt, none="\u2013")


def kib(v):
    return fmt(v / 1024 if v is not None else None, ".0f")


def with_ref(r, ref, key, spec=".1f"):
    return fmt(r.get(key), spec) + (" (%s)" % fmt(ref.get(key), spec) if ref else "")


def newcomers_cell(r):
    return "%d/%d, %d (%s s)" % (r["admitted"], len(r["newcomers"]), r["with_frames"],
                                 fmt(r["newcomer_first_frame_max_s"], ".1f"))


def render(doc):
    every = doc["results"]
    rows = [r for r in every if not r.get("round")]
    out = ["# Attacks on loopback", "",
           "Made by `tools/pps-attack-table.py` from its results JSON; do not edit by hand.", "",
           "    " + doc["command"], "",
           "%s, %s; load average %s at the start, %s at the end; %s s per run "
           "(%d CPUs)." % (doc["date"], doc["machine"],
                           " ".join("%.2f" % x for x in doc["load_start"]),
                           " ".join("%.2f" % x for x in doc["load_end"]),
                           fmt(doc["seconds"], "g"), doc["cpus"]), ""]
    out += ["Attackers connect from 127.0.0.2 and up (other hosts to the server); the viewer "
            "and the newcomers from 127.0.0.1.", ""]
    out += ["- **%s**: %s" % (r["attack"], WHAT.get(r["attack"], "")) for r in rows]
    out.append("")
    by_name = {r["attack"]: r for r in rows}

    def ref_of(r):
        name = r.get("baseline") or ("tls-baseline" if r["attack"].startswith("tls-") else "baseline")
        b = by_name.get(name)
        return b if b is not None and b is not r else None

    server = [r for r in rows if r["side"] == "server"]
    if server:
        out += ["## Against the server", "",
                "One honest viewer streams through the run; the attack holds its middle "
                "(`attack s`). Viewer figures are for the attack window, the no-attack "
                "baseline's (same transport, same token) in parentheses. Newcomers: fresh "
                "pps-clients, %d (10 for the connect floods) tried for %g s each, two at a time, "
                "during the attack: admitted (not refused) of tried, and how many showed a "
                "frame (the latest first frame, from its start). RSS and descriptors: before the "
                "attack → after it (peak during). Log: the server's stderr during the attack "
                "(a status line a second included), in KiB a minute. Counters: the server's "
                "`--stats-json` over the run." % (NEWCOMERS, NEWCOMER_S), "",
                "| attack | attack s | server up (exit) | viewer fps | viewer p95 ms | viewer "
                "longest freeze ms | newcomers admitted, with frames (first frame, max) | RSS KiB "
                "| fds | log KiB/min | refused / evicted / handshakes dropped | attacker "
                "connections (closed by server) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in server:
            ref = ref_of(r)
            c = r.get("counters") or {}
            a = r.get("attacker")
            out.append("| %s | %g | %s (%s) | %s | %s | %s | %s | %s → %s | "
                       "%s → %s (%s) | %s | "
                       "%s / %s / %s | %s |" % (
                           r["attack"], r["attack_s"], "yes" if r["server_up"] else "**no**",
                           r["server_exit"], with_ref(r, ref, "fps"), with_ref(r, ref, "p95_ms"),
                           fmt(r["longest_gap_ms"], ".0f"), newcomers_cell(r),
                           fmt(r["rss_kib_before"], "d"), fmt(r["rss_kib_after"], "d"),
                           fmt(r["fds_before"], "d"), fmt(r["fds_after"], "d"),
                           fmt(r["fds_peak"], "d"), kib(r.get("log_bytes_per_min")),
                           c.get("clients_refused", "–"), c.get("clients_evicted", "–"),
                           c.get("handshakes_dropped", "–"),
                           "%d (%d)%s" % (a["connections"], a["closed_by_server"],
                                          ", %d held at most" % a["most_open"]
                                          if a.get("most_open") else "") if a else "–"))
        refusals = [(r["attack"], n["said"]) for r in server for n in r["newcomers"]
                    if not n["admitted"]]
        if refusals:
            out += ["", "Newcomers refused said:", ""]
            out += ["- %s: `%s`" % (a, s.replace("`", "'") or "(nothing)") for a, s in refusals]
        blank = ["%s (%s)" % (r["attack"], ", ".join("%d frames" % n["frames_shown"]
                                                     for n in r["newcomers"]))
                 for r in server if r["with_frames"] < r["admitted"]]
        if blank:
            out += ["", "Admitted newcomers that showed no frame in their %g s (a join waits "
                    "for an IDR, and forced IDRs are bounded by `recovery_budget_pct` and 500 ms "
                    "apart): %s." % (NEWCOMER_S, "; ".join(blank))]
        out += render_floods(server, ref_of)
    client = [r for r in rows if r["side"] == "client"]
    if client:
        out += ["", "## Against the client", "",
                "A hostile server (or, for frame-jump, a proxy in front of the real one); the "
                "client runs with `--duration %s` (silent: %g, silent-reconnect: %g) and must "
                "leave on its own, the connection left open. Time to exit counts from the "
                "hostile record (the STREAM_INFO for tiny-windows and silent). Connections: "
                "those the hostile server accepted from it." % (
                    fmt(doc["seconds"], "g"), SILENT_CLIENT_S, SILENT_RECONNECT_S), "",
                "| attack | client exit | time to exit s | log bytes | peak RSS KiB | "
                "connections | it said |",
                "|---|---|---|---|---|---|---|"]
        for r in client:
            out.append("| %s | %s%s | %s | %d | %s | %s | `%s` |" % (
                r["attack"], r["client_exit"], " (killed)" if r["killed"] else "",
                fmt(r["exit_after_s"], ".2f"), r["log_bytes"],
                fmt(r["client_peak_rss_kib"], "d"), fmt(r.get("connections_seen"), "d"),
                r["said"].replace("`", "'")))
    out += render_rounds(every)
    return "\n".join(out) + "\n"


def spread(xs, spec=".0f"):
    """The median of @xs and their range: "53 (41–61)"."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "–"
    return "%s (%s–%s)" % (fmt(statistics.median(xs), spec), fmt(xs[0], spec), fmt(xs[-1], spec))


def render_rounds(every):
    """Run to run, when the list ran more than once: each server attack's
    viewer figures over the rounds (median and range), beside its baseline's
    over the same rounds, and the ratio of the medians."""
    server = [r for r in every if r["side"] == "server"]
    names = list(dict.fromkeys(r["attack"] for r in server))
    rounds = {n: [r for r in server if r["attack"] == n] for n in names}
    names = [n for n in names if len(rounds[n]) >= 2]
    if not names:
        return []
    out = ["", "## Run to run", "",
           "These attacks ran %d times over, in turn, each round beside its baseline. "
           "The viewer's frame latency p95 and longest freeze during the attack window: median "
           "over the rounds and range; the ratio of the attack's median to its baseline's." % (
               max(len(rounds[n]) for n in names)), "",
           "| attack | rounds | viewer p95 ms | longest freeze ms | p95 / baseline's | freeze / "
           "baseline's |", "|---|---|---|---|---|---|"]
    for n in names:
        rs, base = rounds[n], rounds.get(baseline_of(n) or "", [])

        def ratio(key):
            a = [r[key] for r in rs if r.get(key) is not None]
            b = [r[key] for r in base if r.get(key) is not None]
            if not a or not b or n == baseline_of(n) or not statistics.median(b):
                return "–"
            return "%.2f" % (statistics.median(a) / statistics.median(b))
        out.append("| %s | %d | %s | %s | %s | %s |" % (
            n, len(rs), spread([r.get("p95_ms") for r in rs], ".1f"),
            spread([r.get("longest_gap_ms") for r in rs]), ratio("p95_ms"), ratio("longest_gap_ms")))
    return out


def render_floods(server, ref_of):
    """The floods' own figures: ping floods, connect floods, token guessing."""
    out = []
    pings = [r for r in server if (r.get("attacker") or {}).get("records_sent") is not None]
    if pings:
        out += ["", "### Ping floods", "",
                "Records (CLOCK_PING, or WebSocket ping frames for wss) the attackers wrote a "
                "second; the viewer's frame latency p95 and longest freeze (no frame shown, the "
                "window's edges counted) during the attack, the baseline's in parentheses; the "
                "server's log.", "",
                "| attack | attacker connections | records sent /s | closed by server | viewer "
                "p95 ms | viewer longest freeze ms | log bytes | log bytes/min |",
                "|---|---|---|---|---|---|---|---|"]
        for r in pings:
            a, ref = r["attacker"], ref_of(r)
            out.append("| %s | %d | %s | %d | %s | %s | %d | %s |" % (
                r["attack"], SERVER_SPECS.get(r["attack"], {}).get("connections", 0),
                fmt(a.get("records_per_s"), ".0f"), a["closed_by_server"],
                with_ref(r, ref, "p95_ms"), with_ref(r, ref, "longest_gap_ms", ".0f"),
                r.get("log_bytes") or 0, fmt(r.get("log_bytes_per_min"), ".0f")))
    floods = [r for r in server if (r.get("attacker") or {}).get("flood") is not None
              or SERVER_SPECS.get(r["attack"], {}).get("kind") in CONNECT_FLOODS]
    if floods:
        out += ["", "### Connect floods", "",
                "Connects tried a second by pps-connect-flood (connect() calls), and completed "
                "(the TCP handshake done; the slowest and fastest whole second) over the attack, "
                "the drops it saw; newcomers that were admitted and showed a frame, of those "
                "tried (the latest first frame, from its start).", "",
                "| attack | tried/s | connects/s (slowest – fastest s) | drops | newcomers with "
                "frames / tried | first frame max s | viewer p95 ms | handshakes dropped | log "
                "bytes | log bytes/min |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for r in floods:
            a, ref = r.get("attacker") or {}, ref_of(r)
            f = a.get("flood") or {}
            per = f.get("per_second") or []
            out.append("| %s | %s | %s (%s – %s) | %s | %d/%d | %s | %s | %s | %d | %s |" % (
                r["attack"], fmt(a.get("attempts_per_s"), ".0f"),
                fmt(a.get("connects_per_s"), ".0f"),
                fmt(min(per) if per else None, "d"), fmt(max(per) if per else None, "d"),
                fmt(f.get("drops"), "d"), r["with_frames"], len(r["newcomers"]),
                fmt(r["newcomer_first_frame_max_s"], ".1f"), with_ref(r, ref, "p95_ms"),
                (r.get("counters") or {}).get("handshakes_dropped", "–"),
                r.get("log_bytes") or 0, fmt(r.get("log_bytes_per_min"), ".0f")))
    guesses = [r for r in server if (r.get("attacker") or {}).get("guesses") is not None]
    if guesses:
        out += ["", "### Token guessing", "",
                "Wrong AUTHs the server answered (`BYE unauthorized`), a second per attacking "
                "address (the busiest), over the attack and after its first second; honest "
                "clients holding the token (the newcomers, from 127.0.0.1) admitted and showing "
                "frames meanwhile.", "",
                "| attack | addresses | guesses/s per address | after the first s | refused "
                "before AUTH | honest admitted, with frames (first frame, max) | unauthorized | "
                "log bytes | log bytes/min |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in guesses:
            a = r["attacker"]
            out.append("| %s | %d | %s | %s | %d | %s | %s | %d | %s |" % (
                r["attack"], a["addresses"], fmt(a["guesses_per_s_per_address"], ".0f"),
                fmt(a["guesses_per_s_per_address_after_1s"], ".0f"), a["refused_before_auth"],
                newcomers_cell(r), (r.get("counters") or {}).get("clients_unauthorized", "–"),
                r.get("log_bytes") or 0, fmt(r.get("log_bytes_per_min"), ".0f")))
    return out


# The soak's attackers, in the order they take turns: (kind, connections,
# addresses). Each runs two slots, so two run at once throughout.
SOAK_ROTATION = [("ping-flood", 4, 1), ("connect-flood", 64, 16), ("ws-ping-flood", 4, 1),
                 ("token-guess", 16, 4), ("garbage", 1, 1), ("oversize", 1, 1),
                 ("slowloris", 16, 4), ("half-open", 64, 16), ("churner", 1, 1),
                 ("slow-readers-cycle", 14, 14)]
SOAK_WARM_S = 5.0
SOAK_QUIET_S = 5.0
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer",
                   "ThreadSanitizer", "MemorySanitizer")


def soak_attacker(build, srv, transport, token, kind, conns, addrs):
    return Attacker(kind, srv.port, source=attacker_address(0),
                    tls=transport == "tls" and kind not in ("connect-flood", "half-open"),
                    token=token if kind in ("ping-flood", "slow-readers-cycle", "churner") else None,
                    connections=conns, addresses=addrs, flood_program=build.connect_flood)


def soak_run(build, workdir, seconds, transport="tls", slot_s=5.0, warm_slot_s=1.0, progress=print):
    """All the server attacks in quick rotation (two at a time, @slot_s each
    turn) for @seconds against one server with an access token (and TLS unless
    @transport is "plain"), beside one honest viewer; what the server's stderr
    says of sanitizers, the viewer's figures, the server's RSS and open
    descriptors before, at the end of the attacks and after SOAK_QUIET_S.

    The baseline is taken after a warm-up in which every attacker ran once
    for @warm_slot_s (0: none) and SOAK_QUIET_S of quiet: what a code path
    allocates the first time it runs (OpenSSL's tables, the web side's, the
    allocator's arenas) is then in the baseline, and what the soak leaves
    above it is what repeated attacks accumulate."""
    token = secrets.token_hex(16)
    settings, client_settings = server_settings(workdir, "soak", transport, token)
    rotation = [k for k in SOAK_ROTATION if transport == "tls" or k[0] != "ws-ping-flood"]
    # The warm-up's length at most (an attacker takes up to 2 s to stop): the
    # viewer streams through it and the whole of the attacks after it.
    warm_s = len(rotation) * (warm_slot_s + 2) + SOAK_QUIET_S if warm_slot_s > 0 else 0
    srv = programs.LoopbackServer(build, workdir, *settings)
    viewer_stats = os.path.join(workdir, "soak-viewer.json")
    viewer, running, turns, t0, t1 = None, [], [], None, None
    r = {"transport": transport, "token": True, "seconds": seconds, "slot_s": slot_s}
    try:
        viewer = programs.LoopbackClient(build, workdir, srv.address, *client_settings,
                                          duration_s=SOAK_WARM_S + warm_s + seconds + SOAK_QUIET_S + 2,
                                          name="viewer", extra=["--stats-json", viewer_stats])
        srv.wait_for_log('"viewer" joined')
        time.sleep(SOAK_WARM_S)  # the warm-up's length, not a synchronisation
        r["rss_kib_first"], r["fds_first"] = proc_usage(srv.proc.pid)
        r["warm_slot_s"] = warm_slot_s
        for kind, conns, addrs in (rotation if warm_slot_s > 0 else []):
            a = soak_attacker(build, srv, transport, token, kind, conns, addrs)
            progress("soak: warm-up: %s" % kind)
            a.start()
            time.sleep(warm_slot_s)  # the turn's length, not a synchronisation
            a.stop()
        if warm_slot_s > 0:
            time.sleep(SOAK_QUIET_S)  # the quiet's length, not a synchronisation
        r["rss_kib_start"], r["fds_start"] = proc_usage(srv.proc.pid)
        t0 = time.time()
        log0 = stderr_bytes(srv)
        k, next_turn, most_fds = 0, t0, r["fds_start"] or 0
        r["rss_kib_every_10s"] = []
        while time.time() < t0 + seconds and srv.proc.poll() is None:
            now = time.time()
            for a, until in [x for x in running if x[1] <= now]:
                a.stop()
                turns.append(dict(a.figures(), kind=a.kind, tls=bool(a.tls)))
                running.remove((a, until))
            if now >= next_turn:
                kind, conns, addrs = rotation[k % len(rotation)]
                k += 1
                a = soak_attacker(build, srv, transport, token, kind, conns, addrs)
                a.start()
                running.append((a, min(now + 2 * slot_s, t0 + seconds)))
                progress("soak: %4.0f s: %s" % (now - t0, kind))
                next_turn += slot_s
            rss, fds = proc_usage(srv.proc.pid)
            most_fds = max(most_fds, fds or 0)
            if now >= t0 + 10 * len(r["rss_kib_every_10s"]) and rss:
                r["rss_kib_every_10s"].append(rss)
            time.sleep(0.1)  # the turns' length, not a synchronisation
        for a, _ in running:
            a.stop()
            turns.append(dict(a.figures(), kind=a.kind, tls=bool(a.tls)))
        running = []
        t1 = time.time()
        r["log_bytes"] = stderr_bytes(srv) - log0
        r["log_bytes_per_min"] = r["log_bytes"] / ((t1 - t0) / 60)
        r["rss_kib_end"], r["fds_end"] = proc_usage(srv.proc.pid)
        r["fds_peak"] = most_fds
        time.sleep(SOAK_QUIET_S)  # the quiet's length, not a synchronisation
        r["rss_kib_quiet"], r["fds_quiet"] = proc_usage(srv.proc.pid)
        r["server_up"] = srv.proc.poll() is None
        try:
            r["viewer_exit"] = viewer.wait(timeout=SOAK_QUIET_S + warm_s + 30)
        except subprocess.TimeoutExpired:
            viewer.proc.kill()
            r["viewer_exit"] = viewer.wait()
    finally:
        for a, _ in running:
            a.stop()
        if viewer and viewer.proc.poll() is None:
            viewer.proc.kill()
            viewer.proc.wait()
        r["server_exit"] = srv.stop()
    r["fps"], r["p95_ms"], r["longest_gap_ms"] = viewer_window(viewer, t0, t1) if t1 else (None,) * 3
    try:
        r["viewer_frames_shown_pct"] = viewer.summary()["frames_shown_pct"]
    except (OSError, ValueError, KeyError, Failure):
        r["viewer_frames_shown_pct"] = None
    lines = srv.log().splitlines()
    marks = [i for i, ln in enumerate(lines) if any(m in ln for m in SANITIZER_MARKS)]
    r["sanitizer_lines"] = [lines[i] for i in marks][:40]
    # The first report whole (its stack traces follow the mark), 80 lines at most.
    r["sanitizer_report"] = lines[marks[0]:marks[0] + 80] if marks else []
    r["turns"] = turns
    try:
        r["counters"] = srv.stats()
    except (OSError, ValueError):
        r["counters"] = None
    return r


def glib_constructor_leak(report):
    """Whether @report's only leak is 16384 bytes from g_malloc, the stack ending there."""
    frames = [ln.strip() for ln in report if ln.strip().startswith("#")]
    return (any("Direct leak of 16384 byte(s) in 1 object(s)" in ln for ln in report)
            and sum("leak of" in ln for ln in report) == 1
            and len(frames) == 2 and " in g_malloc " in frames[1])


def render_soak(r, command):
    """The soak's report, sanitizer findings first."""
    out = ["# Soak", "", "    " + command, ""]
    if r["sanitizer_lines"]:
        out += ["**SANITIZER REPORT in the server's stderr** (%d lines; the first):" %
                len(r["sanitizer_lines"]), ""]
        out += ["    " + ln for ln in r["sanitizer_lines"]]
        out += ["", "The first report:", ""] + ["    " + ln for ln in r.get("sanitizer_report", [])]
        if glib_constructor_leak(r.get("sanitizer_report", [])):
            out += ["", "(A lone 16384-byte leak from g_malloc whose stack stops there looks like "
                    "GLib's library constructor, which tests/lsan.supp suppresses by `_dl_init`, "
                    "a frame the fast unwinder does not reach: rerun with "
                    "`ASAN_OPTIONS=fast_unwind_on_malloc=0` to tell.)"]
    else:
        out.append("No sanitizer report in the server's stderr.")
    out += ["", "Server: up at the end %s, exit status %s (a sanitizer's exit status is not 0)." % (
                "yes" if r["server_up"] else "**no**", r["server_exit"]),
            "Viewer (%s, token): exit %s, %s fps, p95 %s ms, longest freeze %s ms during the "
            "attacks; frames shown %s%% over its run." % (
                r["transport"], r["viewer_exit"], fmt(r["fps"]), fmt(r["p95_ms"]),
                fmt(r["longest_gap_ms"], ".0f"), fmt(r["viewer_frames_shown_pct"])),
            "Server log: %d bytes in the %g s of attacks, %s KiB a minute." % (
                r["log_bytes"], r["seconds"], kib(r["log_bytes_per_min"])), "",
            "| server | RSS KiB | fds |", "|---|---|---|"]
    if r.get("warm_slot_s"):
        out += ["| before the warm-up (every attacker once, %g s each) | %s | %s |" % (
                    r["warm_slot_s"], fmt(r["rss_kib_first"], "d"), fmt(r["fds_first"], "d"))]
    out += ["| before the attacks%s | %s | %s |" % (
                " (after the warm-up and %g s of quiet)" % SOAK_QUIET_S if r.get("warm_slot_s") else "",
                fmt(r["rss_kib_start"], "d"), fmt(r["fds_start"], "d")),
            "| at their end | %s | %s (peak %s) |" % (fmt(r["rss_kib_end"], "d"), fmt(r["fds_end"], "d"),
                                                    fmt(r["fds_peak"], "d")),
            "| after %g s of quiet | %s | %s |" % (SOAK_QUIET_S, fmt(r["rss_kib_quiet"], "d"),
                                                 fmt(r["fds_quiet"], "d")), "",
            "RSS during the attacks, KiB every 10 s: %s." % ", ".join(
                str(x) for x in r.get("rss_kib_every_10s", [])), "",
            "| turn | attacker | TLS | connections (closed by server) | figures |",
            "|---|---|---|---|---|"]
    for i, t in enumerate(r["turns"]):
        extra = []
        if t.get("records_per_s") is not None:
            extra.append("%s records/s" % fmt(t["records_per_s"], ".0f"))
        if t.get("connects_per_s") is not None:
            extra.append("%s connects/s" % fmt(t["connects_per_s"], ".0f"))
        if t.get("guesses") is not None:
            extra.append("%s guesses/s per address" % fmt(t["guesses_per_s_per_address"], ".0f"))
        out.append("| %d | %s | %s | %d (%d) | %s |" % (
            i + 1, t["kind"], "yes" if t["tls"] else "no", t["connections"], t["closed_by_server"],
            ", ".join(extra) or "–"))
    return "\n".join(out) + "\n"
