# SPDX-License-Identifier: MIT
"""Fixtures for the integration suites: start the real pps-server and
pps-client on ephemeral ports, read their logs, and clean up after."""
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

SKIP = 77


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


POLL_S = 0.05


def wait_until(predicate, what, timeout=30.0, proc=None, poll_s=POLL_S):
    """Waits for an event: until @predicate() (a port file written, a log line
    printed, a record or a process state) returns a true value, which it
    returns. Fails the test after @timeout seconds, or as soon as @proc (a
    Popen the event depends on) exits, naming @what (a string, or a function
    returning one, for a message built from the logs at that moment). @poll_s
    is longer where asking is costly (a round trip to a browser)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise Failure("exited (status %s) before %s"
                          % (proc.returncode, what() if callable(what) else what))
        if time.monotonic() > deadline:
            raise Failure("timed out after %.0f s waiting for %s"
                          % (timeout, what() if callable(what) else what))
        # The poll interval of this one waiting loop: the events are files
        # and logs written by other processes, with nothing to block on.
        time.sleep(poll_s)


class Server:
    """A pps-server on 127.0.0.1 and a port of the kernel's choosing."""

    def __init__(self, build, workdir, *settings, duration=None, extra=()):
        self.port_file = os.path.join(workdir, "port-%d" % time.monotonic_ns())
        self.stats_file = os.path.join(workdir, "server-stats-%d.json" % time.monotonic_ns())
        args = [os.path.join(build, "server", "pps-server"), "--listen", "127.0.0.1:0",
                "--port-file", self.port_file, "--stats-json", self.stats_file,
                "--set", "server.status_interval_s=1"]
        for s in settings:
            args += ["--set", s]
        if duration:
            args += ["--duration", str(duration)]
        args += list(extra)
        self.stderr_path = os.path.join(workdir, "server-%d.err" % time.monotonic_ns())
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(args, stderr=self.stderr, stdout=subprocess.DEVNULL)
        # The port file appears once the socket is bound and the source runs.
        wait_until(lambda: os.path.exists(self.port_file) and os.path.getsize(self.port_file) > 0,
                   lambda: "pps-server's --port-file: " + self.log(), proc=self.proc)
        self.port = int(open(self.port_file).read())
        self.address = "127.0.0.1:%d" % self.port

    def log(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def wait_for_log(self, text, timeout=20.0):
        """Waits until the server's log holds @text (the event: "joined", ...)."""
        wait_until(lambda: text in self.log(),
                   lambda: "the server to log %r:\n%s" % (text, self.log()[-2000:]),
                   timeout=timeout, proc=self.proc)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()
        return self.proc.returncode

    def stats(self):
        with open(self.stats_file) as f:
            return json.load(f)


class Client:
    """A headless pps-client with a JSON Lines log."""

    def __init__(self, build, workdir, address, *settings, duration=10, name="client",
                 extra=()):
        self.log_path = os.path.join(workdir, "%s-%d.jsonl" % (name, time.monotonic_ns()))
        args = [os.path.join(build, "client", "pps-client"), address, "--display", "none",
                "--log", self.log_path, "--duration", str(duration),
                "--set", "client.name=" + name]
        for s in settings:
            args += ["--set", s]
        args += list(extra)
        # Files rather than pipes: a test can wait on a line while it runs.
        self.stdout_path = self.log_path[:-len(".jsonl")] + ".out"
        self.stderr_path = self.log_path[:-len(".jsonl")] + ".err"
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err)
        self.stdout = self.stderr = ""

    def output(self):
        """(stdout, stderr) so far."""
        with open(self.stdout_path) as out, open(self.stderr_path) as err:
            return out.read(), err.read()

    def wait_for_stderr(self, text, timeout=20.0):
        """Waits until the client's stderr holds @text (the event)."""
        wait_until(lambda: text in self.output()[1],
                   lambda: "the client to say %r:\n%s" % (text, self.output()[1][-2000:]),
                   timeout=timeout, proc=self.proc)

    def wait(self, timeout=60):
        self.proc.wait(timeout=timeout)
        self.stdout, self.stderr = self.output()
        return self.proc.returncode

    def events(self, kind=None):
        out = []
        with open(self.log_path) as f:
            for line in f:
                e = json.loads(line)
                if kind is None or e["type"] == kind:
                    out.append(e)
        return out

    def summary(self):
        s = self.events("summary")
        check(len(s) == 1, "expected one summary event, got %d" % len(s))
        return s[0]


def percentile(values, p):
    """Nearest rank, as the client computes it."""
    if not values:
        return None
    v = sorted(values)
    import math
    rank = max(1, math.ceil(p / 100.0 * len(v)))
    return v[rank - 1]


def record(kind, body, version=1):
    return struct.pack(">BBH", version, kind, len(body)) + body


def hello(name=b"raw", version=1):
    return record(1, struct.pack(">HHHB", version, 0, 0, len(name)) + name + b"\x00")


def read_all(sock, timeout=5.0):
    """Reads until EOF, a reset or @timeout seconds of silence; the bytes."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def read_records(sock, timeout=5.0):
    """Reads until EOF or timeout; returns (kind, body) of whole records."""
    data = read_all(sock, timeout)
    out = []
    while len(data) >= 4:
        version, kind, length = struct.unpack(">BBH", data[:4])
        if len(data) < 4 + length:
            break
        out.append((kind, data[4:4 + length]))
        data = data[4 + length:]
    return out


def run(tests, argv):
    """Runs the named test from argv[2] with argv[1] = build dir."""
    build = argv[1]
    name = argv[2]
    with tempfile.TemporaryDirectory(prefix="pps-it-") as workdir:
        try:
            tests[name](build, workdir)
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
    print("ok")
    return 0
