# SPDX-License-Identifier: MIT
"""Hostile peers on loopback, for the benchmarks that measure what they cost
(pps-attack-table, pps-idr-amplification): an attacker thread per attack,
connecting from its own loopback addresses (127.0.0.2 and up: other hosts
to the server), hostile servers for pps-client, and a proxy that corrupts a
real server's records on their way to a client. Every socket and process is
bounded in time and closed by stop()."""
import base64
import json
import os
import select
import socket
import ssl
import struct
import subprocess
import threading
import time

from .records import (BYE_UNAUTHORIZED, HELLO_CHALLENGE, KIND_ADU_FRAGMENT, KIND_BYE, KIND_CHALLENGE,
                      auth, clock_ping, hello, listener, stream_info, window_end)

# Connections in flight from each address in a connect churn.
CHURN_PER_ADDRESS = 64

EVICT_AFTER_S = 10  # [server] evict_after_s's default
TCP_ESTABLISHED = 1


# The attacks pps-connect-flood makes.
CONNECT_FLOODS = ("connect-flood", "connect-flood-speak", "connect-churn")


def attacker_address(i):
    return "127.0.0.%d" % (2 + i)


def tls_context():
    """The attackers' TLS: 1.3, any certificate (they are not fooled, they fool)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def read_record(s, buf):
    """(kind, body, rest) of the first whole record, reading @s as needed
    (its timeout bounds each read); (None, None, rest) at EOF."""
    while True:
        if len(buf) >= 4:
            length = struct.unpack(">H", buf[2:4])[0]
            if len(buf) >= 4 + length:
                return buf[1], buf[4:4 + length], buf[4 + length:]
        chunk = s.recv(65536)
        if not chunk:
            return None, None, buf
        buf += chunk


def ws_frame(opcode, payload, mask=b"\x5a\xa5\x3c\xc3"):
    """One masked client frame (RFC 6455), FIN set, payload under 126 bytes."""
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + \
        bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


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


class Attacker(threading.Thread):
    """One attack (@kind) on a server's @port on its own thread until stop();
    counts its connections, those the server closed, and the joins (HELLOs).
    Kinds: slow-reader and churner (one client from @source, by default
    127.0.0.1), garbage, oversize, slowloris, half-open, slow-readers,
    slow-readers-cycle (from attacker_address()); and, with @connections
    connections (spread over @addresses addresses), ping-flood (over TLS with
    @tls, proving @token when given), ws-ping-flood (wss://, no HELLO),
    token-guess, and connect-flood (@flood_program, 16 addresses x 4).
    figures() says what it did."""

    def __init__(self, kind, port, source=None, tls=False, token=None, connections=1, addresses=1,
                 flood_program=None, speak=None):
        super().__init__(daemon=True)
        self.kind = kind
        self.speak = speak  # connect-flood-speak: the byte each connection sends
        self.port = port
        self.source = source
        self.tls = tls_context() if tls else None
        self.token = token.encode() if isinstance(token, str) else token
        self.n_connections = connections
        self.n_addresses = addresses
        self.flood_program = flood_program
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.workers = []
        self.joins = 0
        self.connections = 0
        self.closed_by_server = 0
        self.most_open = 0
        self.socks = []
        self.error = None
        self.started = None
        self.stopped = None
        self.sent_records = 0
        self.received_bytes = 0
        self.guesses = {}  # address -> monotonic times of the wrong AUTHs the server answered
        self.refused_before_auth = 0
        self.flood = None
        self.flood_proc = None

    def stop(self):
        self.halt.set()
        if self.flood_proc and self.flood_proc.poll() is None:
            self.flood_proc.terminate()
        self.join(timeout=10)
        for w in self.workers:
            w.join(timeout=5)
        if self.flood_proc and self.flood_proc.poll() is None:
            self.flood_proc.kill()
            self.flood_proc.wait()
        for s in self.socks:
            s.close()
        self.socks = []
        self.stopped = self.stopped or time.monotonic()

    def open(self, src, rcvbuf=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if src:
            s.bind((src, 0))
        s.settimeout(2)
        s.connect(("127.0.0.1", self.port))
        with self.lock:
            self.connections += 1
        if self.tls:
            try:
                s = self.tls.wrap_socket(s, server_hostname="127.0.0.1")
            except (OSError, ssl.SSLError):
                s.close()
                raise
        return s

    def figures(self):
        """What the attack did, for the results JSON."""
        out = {"connections": self.connections, "closed_by_server": self.closed_by_server,
               "most_open": self.most_open, "error": self.error}
        ran = (self.stopped or time.monotonic()) - self.started if self.started else None
        if self.kind in ("ping-flood", "ws-ping-flood"):
            out.update(records_sent=self.sent_records, received_bytes=self.received_bytes,
                       records_per_s=self.sent_records / ran if ran else None)
        if self.kind == "token-guess":
            out["refused_before_auth"] = self.refused_before_auth
            per, later = [], []
            for times in self.guesses.values():
                per.append(len(times) / ran if ran else 0)
                late = [x for x in times if x >= self.started + 1]
                later.append(len(late) / (ran - 1) if ran and ran > 1 else 0)
            out.update(addresses=self.n_addresses, guesses=sum(len(v) for v in self.guesses.values()),
                       guesses_per_s_per_address=max(per) if per else 0,
                       guesses_per_s_per_address_after_1s=max(later) if later else 0)
        if self.kind in CONNECT_FLOODS:
            out["flood"] = self.flood
            if self.flood and self.flood.get("seconds"):
                out["connects_per_s"] = self.flood["connects"] / self.flood["seconds"]
                out["attempts_per_s"] = self.flood.get("attempts", 0) / self.flood["seconds"]
                out["connections"] = self.flood["connects"]
                out["closed_by_server"] = self.flood["drops"]
        return out

    def spawn(self, fn, *args):
        """Runs @fn(*args) on a worker thread of this attack (joined by stop())."""
        def guarded():
            try:
                fn(*args)
            except (OSError, ssl.SSLError, ValueError) as e:
                self.error = str(e)
        w = threading.Thread(target=guarded, daemon=True)
        w.start()
        self.workers.append(w)

    def connect(self, rcvbuf=None):
        """A client that joins: connects from @source and says HELLO."""
        s = self.open(self.source, rcvbuf)
        self.join_stream(s, self.kind.encode())
        return s

    def run(self):
        self.started = time.monotonic()
        try:
            getattr(self, "attack_" + self.kind.replace("-", "_"))()
        except OSError as e:
            self.error = str(e)
        self.halt.wait()
        self.stopped = time.monotonic()

    def sources(self):
        """The source address of each of the @connections connections."""
        per = max(1, -(-self.n_connections // self.n_addresses))
        return [attacker_address(i // per) for i in range(self.n_connections)]

    def join_stream(self, s, name):
        """HELLO (and the challenge with the token); raises OSError if refused."""
        s.sendall(hello(name, flags=HELLO_CHALLENGE if self.token else 0))
        with self.lock:
            self.joins += 1
        if self.token:
            kind, body, _ = read_record(s, b"")
            if kind != KIND_CHALLENGE:
                raise ConnectionError("no CHALLENGE (record %s)" % kind)
            s.sendall(auth(self.token, body[1:33]))

    def pump(self, s, blob):
        """Writes @blob over and over as fast as @s takes it, reading away what
        comes back, until halt or the server closes (returns True then)."""
        s.setblocking(False)
        pending = memoryview(blob)
        per_record = {"ping-flood": 16, "ws-ping-flood": 14}[self.kind]
        while not self.halt.is_set():
            progressed = False
            try:
                while True:
                    data = s.recv(65536)
                    if not data:
                        return True
                    with self.lock:
                        self.received_bytes += len(data)
                    progressed = True
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                pass
            except OSError:
                return True
            try:
                n = s.send(pending)
                with self.lock:
                    self.sent_records += n // per_record
                pending = pending[n:] if n < len(pending) else memoryview(blob)
                progressed = True
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                pass
            except OSError:
                return True
            if not progressed:
                select.select([s], [s], [], 0.2)
        return False

    def flooder(self, src):
        """One connection of a ping flood, re-opened when the server closes it."""
        while not self.halt.is_set():
            try:
                s = self.open(src)
            except OSError:
                self.halt.wait(0.05)
                continue
            try:
                if self.kind == "ping-flood":
                    self.join_stream(s, b"ping-flood")
                    now = int(time.time() * 1e6)
                    blob = b"".join(clock_ping(i, now) for i in range(1024))
                else:
                    key = base64.b64encode(os.urandom(16))
                    s.sendall(b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                              b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                              b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = s.recv(4096)
                        if not chunk:
                            raise ConnectionError("no WebSocket upgrade")
                        head += chunk
                    if not head.startswith(b"HTTP/1.1 101"):
                        raise ConnectionError("upgrade refused: %r" % head[:40])
                    blob = ws_frame(0x9, b"pps-ping") * 1024
                closed = self.pump(s, blob)
                with self.lock:
                    self.closed_by_server += closed
            except (OSError, ssl.SSLError) as e:
                self.error = str(e)
                with self.lock:
                    self.closed_by_server += 1
                self.halt.wait(0.05)
            finally:
                s.close()

    def attack_ping_flood(self):
        for src in self.sources():
            self.spawn(self.flooder, src)

    attack_ws_ping_flood = attack_ping_flood

    def guesser(self, src):
        """HELLO with the challenge flag, a wrong AUTH, the BYE; again."""
        times = self.guesses.setdefault(src, [])
        while not self.halt.is_set():
            try:
                s = self.open(src)
            except OSError:
                self.halt.wait(0.01)
                continue
            try:
                s.sendall(hello(b"guess", flags=HELLO_CHALLENGE))
                with self.lock:
                    self.joins += 1
                kind, body, rest = read_record(s, b"")
                if kind != KIND_CHALLENGE:
                    with self.lock:
                        self.refused_before_auth += 1
                    self.halt.wait(0.01)
                    continue
                s.sendall(auth(os.urandom(16), body[1:33]))
                kind, body, _ = read_record(s, rest)
                if kind == KIND_BYE and struct.unpack(">H", body[:2])[0] == BYE_UNAUTHORIZED:
                    times.append(time.monotonic())
                with self.lock:
                    self.closed_by_server += 1
            except (OSError, ssl.SSLError) as e:
                self.error = str(e)
            finally:
                s.close()

    def attack_token_guess(self):
        for src in self.sources():
            self.spawn(self.guesser, src)

    def attack_connect_churn(self):
        """16 addresses x 64 connections in flight, each closed the moment it
        is made and opened again: connects at the rate the attacker reaches
        (past the per-address limit, most are refused at accept)."""
        self.attack_connect_flood(cycle=True, per_address=CHURN_PER_ADDRESS)

    def attack_connect_flood_speak(self):
        """connect-flood whose connections each send one byte (self.speak)
        once made, and nothing more: a server that accepts at a client's
        first bytes gets them at once."""
        self.attack_connect_flood(speak=self.speak if self.speak is not None else 1)

    def attack_connect_flood(self, cycle=False, per_address=4, speak=None):
        """16 addresses x 4 silent connections, re-opened the moment they are
        dropped (pps-connect-flood, C: Python does not reach the rate)."""
        self.flood_proc = subprocess.Popen(
            [self.flood_program, "--port", str(self.port), "--duration", "600",
             "--addresses", "16", "--per-address", str(per_address), "--first", "2"]
            + (["--cycle"] if cycle else []) + (["--speak", str(speak)] if speak is not None else []),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.halt.wait()
        if self.flood_proc.poll() is None:
            self.flood_proc.terminate()
        try:
            out, err = self.flood_proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.flood_proc.kill()
            out, err = self.flood_proc.communicate()
        try:
            self.flood = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.error = "pps-connect-flood: %s" % (err.strip() or out.strip())[:200]

    def attack_slow_reader(self):
        """Says HELLO, then reads 512 bytes every 100 ms through a 4 KiB
        receive buffer: it keeps losing its base layer, so it keeps asking for
        IDRs, but is never evicted."""
        s = self.connect(rcvbuf=4096)
        s.settimeout(0.05)
        try:
            while not self.halt.wait(0.1):
                try:
                    if not s.recv(512):
                        s.close()
                        s = self.connect(rcvbuf=4096)
                        s.settimeout(0.05)
                except socket.timeout:
                    pass
        finally:
            s.close()

    def attack_churner(self):
        """Joins (HELLO), reads for 0.5 s and leaves, in a loop: every join asks for an IDR."""
        while not self.halt.is_set():
            s = self.connect()
            s.settimeout(0.05)
            end = time.monotonic() + 0.5
            try:
                while time.monotonic() < end and not self.halt.is_set():
                    try:
                        if not s.recv(65536):
                            break
                    except socket.timeout:
                        pass
            finally:
                s.close()

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
        greeting = hello(b"slowloris")
        srcs = [attacker_address(i // 4) for i in range(16)]
        self.socks = [self.open(src) for src in srcs]
        sent = [0] * len(self.socks)
        while not self.halt.wait(1.0):
            for i, s in enumerate(self.socks):
                if closed_by_peer(s) or sent[i] == len(greeting):
                    self.closed_by_server += sent[i] < len(greeting)
                    s.close()
                    self.socks[i], sent[i] = self.open(srcs[i]), 0
                try:
                    self.socks[i].send(greeting[sent[i]:sent[i] + 1])
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
            self.join_stream(s, b"slow-reader")
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
                        if rec[1] == KIND_ADU_FRAGMENT and time.monotonic() - start >= self.after_s:
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


class HostileServer(threading.Thread):
    """A server for pps-client that answers every HELLO with STREAM_INFO and
    then, by @kind: tiny-windows sends valid, empty, consecutive windows (lone
    dropped WINDOW_ENDs) as fast as TCP carries them for @flood_s, then
    nothing; silent sends nothing. Connections stay open until stop();
    accepted counts them, first_record is when the first STREAM_INFO went out."""

    def __init__(self, kind, flood_s=10.0):
        super().__init__(daemon=True)
        self.kind = kind
        self.flood_s = flood_s
        self.lsock, self.address = listener()
        self.halt = threading.Event()
        self.accepted = 0
        self.first_record = None
        self.windows_sent = 0
        self.conns = []

    def stop(self):
        self.halt.set()
        self.join(timeout=5)
        for c in self.conns:
            c.close()
        self.lsock.close()

    def run(self):
        flooding, pending, next_id = None, memoryview(b""), 1
        try:
            while not self.halt.is_set():
                wr = [flooding] if flooding else []
                readable, writable, _ = select.select([self.lsock], wr, [], 0.2)
                if readable:
                    conn, _ = self.lsock.accept()
                    self.conns.append(conn)
                    self.accepted += 1
                    conn.settimeout(5)
                    try:
                        conn.recv(1024)  # the HELLO
                        conn.sendall(stream_info())
                    except OSError:
                        continue
                    self.first_record = self.first_record or time.monotonic()
                    if self.kind == "tiny-windows" and flooding is None:
                        flooding = conn
                        conn.setblocking(False)
                if not writable:
                    continue
                if time.monotonic() - self.first_record >= self.flood_s and not pending:
                    flooding = False  # no more windows; the connection stays open
                    continue
                if not pending:
                    pending = memoryview(b"".join(window_end(i) for i in range(next_id, next_id + 1024)))
                    next_id += 1024
                try:
                    n = flooding.send(pending)
                except BlockingIOError:
                    continue
                except OSError:
                    flooding = False
                    continue
                pending = pending[n:]
                if not pending:
                    self.windows_sent = next_id - 1
        except OSError:
            pass
