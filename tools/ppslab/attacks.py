# SPDX-License-Identifier: MIT
"""Hostile peers on loopback, for the benchmarks that measure what they cost
(pps-attack-table, pps-idr-amplification): an attacker thread per attack,
connecting from its own loopback addresses (127.0.0.2 and up: other hosts
to the server), and a proxy that corrupts a real server's records on their
way to a client. Every socket is bounded in time and closed by stop()."""
import os
import select
import socket
import struct
import threading
import time

from .records import KIND_ADU_FRAGMENT, hello, listener

EVICT_AFTER_S = 10  # [server] evict_after_s's default
TCP_ESTABLISHED = 1


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


class Attacker(threading.Thread):
    """One attack (@kind) on a server's @port on its own thread until stop();
    counts its connections, those the server closed, and the joins (HELLOs).
    Kinds: slow-reader and churner (one client from @source, by default
    127.0.0.1), garbage, oversize, slowloris, half-open, slow-readers,
    slow-readers-cycle (from attacker_address())."""

    def __init__(self, kind, port, source=None):
        super().__init__(daemon=True)
        self.kind = kind
        self.port = port
        self.source = source
        self.halt = threading.Event()
        self.joins = 0
        self.connections = 0
        self.closed_by_server = 0
        self.most_open = 0
        self.socks = []
        self.error = None

    def stop(self):
        self.halt.set()
        self.join(timeout=5)
        for s in self.socks:
            s.close()
        self.socks = []

    def open(self, src, rcvbuf=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if src:
            s.bind((src, 0))
        s.settimeout(2)
        s.connect(("127.0.0.1", self.port))
        self.connections += 1
        return s

    def connect(self, rcvbuf=None):
        """A client that joins: connects from @source and says HELLO."""
        s = self.open(self.source, rcvbuf)
        s.sendall(hello(self.kind.encode()))
        self.joins += 1
        return s

    def run(self):
        try:
            getattr(self, "attack_" + self.kind.replace("-", "_"))()
        except OSError as e:
            self.error = str(e)

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
            s.sendall(hello(b"slow-reader"))
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
