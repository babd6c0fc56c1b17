#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Attacks on loopback, one run each: what a hostile peer does to pps-server
and its other viewers, and what a hostile server does to pps-client.

Server attacks (each beside one honest headless pps-client, the "viewer",
that streams for the whole run; the attack runs in the middle half):
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
  tls-baseline, tls-half-open
                 the same two with the server on TLS and the viewer over TLS
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

Figures: the server's state, exit status, RSS and open descriptors (/proc)
before the attack and after it (once its descriptors are back, 5 s at most),
its --stats-json counters; the viewer's frames shown per second and frame
latency p95 during the attack window; newcomers that got a stream; for the
client attacks the client's exit status, time to exit, log size and peak RSS.
Results go to OUT/attacks.json, and OUT/ATTACKS.md is made from that JSON
(--render JSON redoes only that). Standard library only; every process and
socket is bounded in time and removed whatever happens.

  flock -x /tmp/pps-measure.lock tools/pps-attack-table.py build --out docs

Benchmarks print figures; they do not pass or fail.
"""
import argparse
import importlib.util
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import harness  # noqa: E402  (the Server and Client fixtures, records)
from test_client_cli import listener, stream_info, window_end  # noqa: E402
from test_tls import make_cert  # noqa: E402

NEWCOMERS = 4
NEWCOMER_S = 2.0
NEWCOMERS_AT_ONCE = 2
EVICT_AFTER_S = 10  # [server] evict_after_s's default
TCP_ESTABLISHED = 1

SERVER_ATTACKS = ["baseline", "garbage", "oversize", "slowloris", "half-open", "slow-readers",
                  "slow-readers-cycle", "churner", "tls-baseline", "tls-half-open"]
CLIENT_ATTACKS = ["id-jump", "frame-jump", "stream-info-4096", "stream-info-16384"]
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
}


def attacker_address(i):
    return "127.0.0.%d" % (2 + i)


def proc_usage(pid):
    """(VmRSS KiB, open descriptors) of @pid, or (None, None) once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), None)
        return rss, len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None, None


def peak_rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), None)
    except OSError:
        return None


def closed_by_peer(s, timeout=0.0):
    """True if @s sees EOF or a reset within @timeout seconds (what the server
    sent before, a BYE, is read away)."""
    deadline = time.monotonic() + timeout
    try:
        while select.select([s], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if not s.recv(65536):
                return True
    except OSError:
        return True
    return False


def load_tool(name):
    """A tool beside this one whose file name is not a module name."""
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"),
                                                  os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


idr_amplification = load_tool("pps-idr-amplification")


class Attacker(idr_amplification.Attacker):
    """One attack on its own thread until stop(); counts its connections.
    The churner is pps-idr-amplification's, here from another host."""

    def __init__(self, kind, port):
        super().__init__(kind, port)
        self.connections = 0
        self.closed_by_server = 0
        self.most_open = 0
        self.socks = []

    def open(self, src, rcvbuf=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.bind((src, 0))
        s.settimeout(2)
        s.connect(("127.0.0.1", self.port))
        self.connections += 1
        return s

    def connect(self, rcvbuf=None):
        """The churner's connection (idr_amplification.Attacker.run)."""
        s = self.open(attacker_address(0), rcvbuf)
        s.sendall(harness.hello(self.kind.encode()))
        self.joins += 1
        return s

    def stop(self):
        super().stop()
        for s in self.socks:
            s.close()
        self.socks = []

    def run(self):
        try:
            if self.kind == "churner":
                super().run()
            else:
                getattr(self, "attack_" + self.kind.replace("-", "_"))()
        except OSError as e:
            self.error = str(e)

    def one_shot(self, payload):
        """Connects, sends @payload, waits for the server to close; 50 a second at most."""
        while not self.halt.wait(0.02):
            s = self.open(attacker_address(0))
            try:
                s.sendall(payload())
            except OSError:
                pass
            self.closed_by_server += closed_by_peer(s, 2.0)
            s.close()

    def attack_garbage(self):
        # Every other one starts with the protocol's version byte, so that the
        # parser reads on into the header rather than stopping at the first byte.
        self.one_shot(lambda: (b"\x01" if self.connections % 2 else b"") + os.urandom(4096))

    def attack_oversize(self):
        self.one_shot(lambda: struct.pack(">BBH", 1, 1, 65535) + b"\x00" * 1024)

    def attack_slowloris(self):
        hello = harness.hello(b"slowloris")
        srcs = [attacker_address(i // 4) for i in range(16)]
        self.socks = [self.open(src) for src in srcs]
        sent = [0] * len(self.socks)
        while not self.halt.wait(1.0):
            for i, s in enumerate(self.socks):
                if closed_by_peer(s) or sent[i] == len(hello):
                    self.closed_by_server += sent[i] < len(hello)
                    s.close()
                    self.socks[i], sent[i] = self.open(srcs[i]), 0
                try:
                    self.socks[i].send(hello[sent[i]:sent[i] + 1])
                    sent[i] += 1
                except OSError:
                    pass

    def attack_half_open(self):
        while True:
            for s in self.socks:
                s.close()
            self.socks = []
            for i in range(64):
                try:
                    self.socks.append(self.open(attacker_address(i // 4)))
                except OSError:
                    pass
            if self.halt.wait(0.5):
                break
            still = sum(1 for s in self.socks if not closed_by_peer(s))
            self.most_open = max(self.most_open, still)
            self.closed_by_server += len(self.socks) - still
            if self.halt.wait(4.0):
                break

    def attack_slow_readers(self, cycle_s=None):
        srcs = [attacker_address(i) for i in range(14)]

        def reader(src):
            s = self.open(src, rcvbuf=4096)
            s.sendall(harness.hello(b"slow-reader"))
            return s, time.monotonic()

        readers = [reader(src) for src in srcs]
        self.socks = [s for s, _ in readers]
        while not self.halt.wait(0.5):
            for i, (s, since) in enumerate(readers):
                # A reader that never reads never sees the server's BYE and FIN
                # (they wait behind its closed window), so the TCP state rarely
                # tells; with @cycle_s it leaves and comes back that long after
                # it joined, whatever the server did.
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
                if info[0] != TCP_ESTABLISHED or (cycle_s and time.monotonic() - since > cycle_s):
                    self.closed_by_server += info[0] != TCP_ESTABLISHED
                    s.close()
                    readers[i] = reader(srcs[i])
                    self.socks[i] = readers[i][0]

    def attack_slow_readers_cycle(self):
        self.attack_slow_readers(cycle_s=EVICT_AFTER_S + 1)


def viewer_window(client, t0_s, t1_s):
    """Frames shown per second and frame latency p95 (ms) between the two wall-clock times."""
    shown = []
    try:
        for e in client.events("frame"):
            if e["shown"] and t0_s * 1e6 <= e["display_us"] <= t1_s * 1e6:
                shown.append((e["display_us"], e["latency_ms"]))
    except (OSError, ValueError):
        return None, None, None
    times = sorted(t for t, _ in shown)
    gaps = [b - a for a, b in zip(times, times[1:])]
    return (len(shown) / (t1_s - t0_s), harness.percentile([l for _, l in shown], 95),
            max(gaps) / 1000 if gaps else None)


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


def server_run(build, workdir, name, seconds):
    kind = name[len("tls-"):] if name.startswith("tls-") else name
    tls = name.startswith("tls-")
    settings, client_settings = [], []
    if tls:
        cert, key = make_cert(workdir, name)
        settings = ["server.tls_cert=" + cert, "server.tls_key=" + key]
        client_settings = ["client.tls=true", "client.tls_ca=" + cert]
    warm_s = tail_s = seconds / 4
    attack_s = seconds / 2
    if kind.startswith("slow-readers"):
        attack_s = max(attack_s, EVICT_AFTER_S + 4)
    log = os.path.join(workdir, name + "-server.jsonl")
    viewer_stats = os.path.join(workdir, name + "-viewer.json")
    srv = harness.Server(build, workdir, *settings, extra=["--log", log])
    viewer, attacker, newcomers = None, None, []
    r = {"attack": name, "side": "server", "attack_s": attack_s}
    try:
        viewer = harness.Client(build, workdir, srv.address, *client_settings,
                                duration=warm_s + attack_s + tail_s, name="viewer",
                                extra=["--stats-json", viewer_stats])
        srv.wait_for_log('"viewer" joined')
        time.sleep(warm_s)  # the warm-up's length, not a synchronisation
        r["rss_kib_before"], r["fds_before"] = proc_usage(srv.proc.pid)
        t0 = time.time()
        if kind != "baseline":
            attacker = Attacker(kind, srv.port)
            attacker.start()
        starts = [0.5 + i * (attack_s - NEWCOMER_S - 0.5) / (NEWCOMERS - 1)
                  for i in range(NEWCOMERS)]
        most_fds = r["fds_before"]
        while time.time() < t0 + attack_s:
            # Two newcomers at once at most: with the viewer that stays under
            # max_clients_per_address (4), all of them coming from 127.0.0.1.
            running = sum(1 for c, _ in newcomers if c.proc.poll() is None)
            if starts and time.time() >= t0 + starts[0] and running < NEWCOMERS_AT_ONCE:
                starts.pop(0)
                newcomers.append((harness.Client(build, workdir, srv.address, *client_settings,
                                                 duration=NEWCOMER_S,
                                                 name="newcomer%d" % len(newcomers)),
                                  time.time()))
            most_fds = max(most_fds or 0, proc_usage(srv.proc.pid)[1] or 0)
            time.sleep(0.1)  # the attack's length, not a synchronisation
        if attacker:
            attacker.stop()
        t1 = time.time()
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
    except (OSError, ValueError, KeyError, harness.Failure):
        r["viewer_frames_shown_pct"] = None
    r["admitted"] = sum(1 for n in r["newcomers"] if n["admitted"])
    r["with_frames"] = sum(1 for n in r["newcomers"] if n["frames_shown"] > 0)
    firsts = [n["first_frame_s"] for n in r["newcomers"] if n["first_frame_s"] is not None]
    r["newcomer_first_frame_max_s"] = max(firsts) if firsts else None
    if attacker:
        r["attacker"] = {"connections": attacker.connections,
                         "closed_by_server": attacker.closed_by_server,
                         "most_open": attacker.most_open,
                         "error": getattr(attacker, "error", None)}
    try:
        stats = srv.stats()
        r["counters"] = {k: stats.get(k) for k in (
            "clients_total", "clients_refused", "clients_evicted", "handshakes_dropped",
            "refusals_unlogged", "idr_requests", "recovery_deferred", "cpu_user_s",
            "cpu_system_s")}
    except (OSError, ValueError):
        r["counters"] = None
    return r


class FrameJumpProxy(threading.Thread):
    """Forwards one client to the server, adding 2^30 to every ADU_FRAGMENT's
    frame_index once @after_s have passed; first_jump is when it began."""

    def __init__(self, upstream_port, after_s):
        super().__init__(daemon=True)
        self.upstream_port = upstream_port
        self.after_s = after_s
        self.lsock, self.address = listener()
        self.halt = threading.Event()
        self.first_jump = None

    def run(self):
        conn, _ = self.lsock.accept()
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        start, pending = time.monotonic(), b""
        try:
            while not self.halt.is_set():
                for s in select.select([conn, up], [], [], 0.2)[0]:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is conn:
                        up.sendall(data)
                        continue
                    pending += data
                    out = bytearray()
                    while len(pending) >= 4:
                        length = struct.unpack(">H", pending[2:4])[0]
                        if len(pending) < 4 + length:
                            break
                        rec = bytearray(pending[:4 + length])
                        pending = pending[4 + length:]
                        if rec[1] == 4 and time.monotonic() - start >= self.after_s:
                            frame = struct.unpack(">I", rec[12:16])[0]
                            rec[12:16] = struct.pack(">I", (frame + (1 << 30)) & 0xFFFFFFFF)
                            self.first_jump = self.first_jump or time.monotonic()
                        out += rec
                    conn.sendall(bytes(out))
        except OSError:
            pass
        finally:
            conn.close()
            up.close()
            self.lsock.close()


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
        srv = harness.Server(build, workdir)
        proxy = FrameJumpProxy(srv.port, 2.0)
        proxy.start()
        try:
            c = harness.Client(build, workdir, proxy.address, duration=seconds, name=name)
            r.update(watch_client(c, lambda: proxy.first_jump, seconds))
        finally:
            proxy.halt.set()
            proxy.join(timeout=5)
            r["server_exit"] = srv.stop()
        return r
    replies = {"id-jump": [stream_info(), window_end(1), window_end(0xFFFFFFFE)],
               "stream-info-4096": [stream_info(4096, 4096)],
               "stream-info-16384": [stream_info(16384, 16384)]}[name]
    lsock, address = listener()
    conn = None
    try:
        c = harness.Client(build, workdir, address, duration=seconds, name=name)
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


def fmt(v, spec="%.1f", none="–"):
    return none if v is None else spec % v


def render(doc):
    rows = doc["results"]
    out = ["# Attacks on loopback", "",
           "Made by `tools/pps-attack-table.py` from its results JSON; do not edit by hand.", "",
           "    " + doc["command"], "",
           "%s, tree `%s`, %s; load average %s at the start, %s at the end; %s s per run "
           "(%d CPUs)." % (doc["date"], doc["commit"], doc["machine"],
                           " ".join("%.2f" % x for x in doc["load_start"]),
                           " ".join("%.2f" % x for x in doc["load_end"]),
                           fmt(doc["seconds"], "%g"), doc["cpus"]), ""]
    out += ["Attackers connect from 127.0.0.2 and up (other hosts to the server); the viewer "
            "and the newcomers from 127.0.0.1.", ""]
    out += ["- **%s**: %s" % (r["attack"], WHAT.get(r["attack"], "")) for r in rows]
    out.append("")
    base = {r["attack"]: r for r in rows if r["attack"] in ("baseline", "tls-baseline")}
    server = [r for r in rows if r["side"] == "server"]
    if server:
        out += ["## Against the server", "",
                "One honest viewer streams through the run; the attack holds its middle "
                "(`attack s`). Viewer figures are for the attack window, the no-attack "
                "baseline's in parentheses. Newcomers: fresh pps-clients, up to %d tried for %g s "
                "each during the attack: admitted (not refused) of tried, and how many showed a "
                "frame (the latest first frame, from its start). RSS and descriptors: before the "
                "attack → after it (peak during). Counters: the server's `--stats-json` over "
                "the run." % (NEWCOMERS, NEWCOMER_S), "",
                "| attack | attack s | server up (exit) | viewer fps | viewer p95 ms | viewer "
                "longest gap ms | newcomers admitted, with frames (first frame, max) | RSS KiB "
                "| fds | refused / evicted / handshakes dropped | attacker connections (closed "
                "by server) |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in server:
            b = base.get("tls-baseline" if r["attack"].startswith("tls-") else "baseline")
            ref = b if b is not None and b is not r else None
            c = r.get("counters") or {}
            a = r.get("attacker")
            out.append("| %s | %g | %s (%s) | %s | %s | %s | %d/%d, %d (%s s) | %s → %s | "
                       "%s → %s (%s) | "
                       "%s / %s / %s | %s |" % (
                           r["attack"], r["attack_s"], "yes" if r["server_up"] else "**no**",
                           r["server_exit"],
                           fmt(r["fps"]) + (" (%s)" % fmt(ref["fps"]) if ref else ""),
                           fmt(r["p95_ms"]) + (" (%s)" % fmt(ref["p95_ms"]) if ref else ""),
                           fmt(r["longest_gap_ms"], "%.0f"),
                           r["admitted"], len(r["newcomers"]), r["with_frames"],
                           fmt(r["newcomer_first_frame_max_s"], "%.1f"),
                           fmt(r["rss_kib_before"], "%d"), fmt(r["rss_kib_after"], "%d"),
                           fmt(r["fds_before"], "%d"), fmt(r["fds_after"], "%d"),
                           fmt(r["fds_peak"], "%d"),
                           c.get("clients_refused", "–"), c.get("clients_evicted", "–"),
                           c.get("handshakes_dropped", "–"),
                           "%d (%d)%s" % (a["connections"], a["closed_by_server"],
                                          ", %d held at most" % a["most_open"]
                                          if a["most_open"] else "") if a else "–"))
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
    client = [r for r in rows if r["side"] == "client"]
    if client:
        out += ["", "## Against the client", "",
                "A hostile server (or, for frame-jump, a proxy in front of the real one); the "
                "client runs with `--duration %s` and must leave on its own, the connection "
                "left open. Time to exit counts from the hostile record." % fmt(
                    doc["seconds"], "%g"), "",
                "| attack | client exit | time to exit s | log bytes | peak RSS KiB | it said |",
                "|---|---|---|---|---|---|"]
        for r in client:
            out.append("| %s | %s%s | %s | %d | %s | `%s` |" % (
                r["attack"], r["client_exit"], " (killed)" if r["killed"] else "",
                fmt(r["exit_after_s"], "%.2f"), r["log_bytes"],
                fmt(r["client_peak_rss_kib"], "%d"), r["said"].replace("`", "'")))
    return "\n".join(out) + "\n"


def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", help="meson build directory")
    ap.add_argument("--seconds", type=float, default=12,
                    help="run length (the attack holds its middle half); default 12")
    ap.add_argument("--only", help="attacks to run, comma-separated, of: "
                    + ", ".join(SERVER_ATTACKS + CLIENT_ATTACKS)
                    + " (a server attack brings its baseline)")
    ap.add_argument("--out", help="write attacks.json and ATTACKS.md in this directory")
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
        names = SERVER_ATTACKS + CLIENT_ATTACKS
        if a.only:
            wanted = a.only.split(",")
            unknown = [n for n in wanted if n not in names]
            if unknown:
                ap.error("--only: unknown %s" % ", ".join(unknown))
            if any(n in SERVER_ATTACKS and not n.startswith("tls-") for n in wanted):
                wanted.append("baseline")
            if any(n.startswith("tls-") for n in wanted):
                wanted.append("tls-baseline")
            names = [n for n in names if n in wanted]
        doc = {"command": " ".join(["tools/pps-attack-table.py"] + sys.argv[1:]),
               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": git_commit(),
               "machine": os.uname().sysname + " " + os.uname().release,
               "cpus": os.cpu_count(), "seconds": a.seconds,
               "load_start": list(os.getloadavg()), "results": []}
        with tempfile.TemporaryDirectory(prefix="pps-attack-") as workdir:
            for name in names:
                started = time.monotonic()
                try:
                    run = server_run if name in SERVER_ATTACKS else client_run
                    r = run(os.path.abspath(a.build), workdir, name, a.seconds)
                except (harness.Failure, OSError, subprocess.SubprocessError) as e:
                    print("%s: could not run: %s" % (name, e), file=sys.stderr)
                    continue
                r["run_s"] = time.monotonic() - started
                doc["results"].append(r)
                print("%-18s %s" % (name, json.dumps({k: v for k, v in r.items()
                                                      if k not in ("newcomers",)})),
                      flush=True)
        doc["load_end"] = list(os.getloadavg())
    text = render(doc)
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
