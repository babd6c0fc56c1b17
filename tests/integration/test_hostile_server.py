#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-client against a server that goes silent after STREAM_INFO or floods
it with valid, tiny windows: a clear error and a non-zero exit (or, with
--reconnect, a new connection), and a log that stays small. The hostile
server is a raw socket in this process; every wait is for an event (an
accepted connection, a HELLO, the client's exit), never a fixed sleep."""
import json
import os
import re
import socket
import sys
import threading

from harness import Client, check, run
from ppslab.records import KIND_HELLO, bye, listener, split_records, stream_info, window_end

# The client's default data timeout must fire well within this.
WITHIN_S = 10.0
# A flood of this many windows: far more than any legitimate catch-up, and
# tens of megabytes of log for a client that takes them all.
FLOOD_WINDOWS = 100000
LOG_BOUND_BYTES = 1 << 20


def accept_hello(lsock, timeout_s):
    """The next connection on @lsock and its HELLO: (socket, record body)."""
    lsock.settimeout(timeout_s)
    conn, _ = lsock.accept()
    conn.settimeout(timeout_s)
    data = b""
    while not split_records(data):
        chunk = conn.recv(1024)
        check(chunk, "the client closed before its HELLO")
        data += chunk
    kind, body = split_records(data)[0]
    check(kind == KIND_HELLO, "first record of kind %d, not HELLO" % kind)
    return conn, body


def waited_s(stderr):
    """The seconds the client says it waited for a record, or None."""
    m = re.search(r"no record from the server for ([0-9.]+) s", stderr)
    return float(m.group(1)) if m else None


def silent_after_stream_info(build, workdir):
    """STREAM_INFO, then nothing with the connection left open: the client
    says what happened and how long it waited (at most WITHIN_S by default),
    and exits 1 (a run to --duration would exit 0)."""
    lsock, address = listener()
    c = Client(build, workdir, address, duration=30)
    try:
        conn, _ = accept_hello(lsock, 30)
        conn.sendall(stream_info())
        rc = c.wait(timeout=60)
    finally:
        lsock.close()
    conn.close()
    check(rc == 1, "exit %d: %s" % (rc, c.stderr))
    waited = waited_s(c.stderr)
    check(waited is not None, "no data timeout message: " + c.stderr)
    check(waited <= WITHIN_S, "the default data timeout waited %.1f s" % waited)


def silent_reconnects(build, workdir):
    """The same with --reconnect: the client connects again by itself (the
    server sees a second HELLO) and says why."""
    lsock, address = listener()
    # One connection: the second HELLO is then the reconnection, not a copy's.
    c = Client(build, workdir, address, "client.copies=1", duration=30, extra=["--reconnect"])
    try:
        first, _ = accept_hello(lsock, 30)
        first.sendall(stream_info())
        # Before the client's --duration ends the run (which would close it).
        second, _ = accept_hello(lsock, 25)
        second.close()
        first.close()
        c.proc.terminate()
        c.wait(timeout=30)
    finally:
        lsock.close()
        if c.proc.poll() is None:
            c.proc.kill()
    check(waited_s(c.stderr) is not None and "reconnecting in" in c.stderr, c.stderr)


def window_flood(build, workdir):
    """Valid, consecutive, tiny windows as fast as TCP carries them: the
    client refuses them with the rate it saw and the one announced, exits 1,
    and its --log stays under LOG_BOUND_BYTES."""
    lsock, address = listener()
    c = Client(build, workdir, address, duration=20)
    flood = stream_info() + b"".join(window_end(i) for i in range(FLOOD_WINDOWS))

    def send(conn):
        try:
            conn.sendall(flood)
        except OSError:
            pass  # the client refused the flood and closed: what we want

    try:
        conn, _ = accept_hello(lsock, 30)
        sender = threading.Thread(target=send, args=(conn,), daemon=True)
        sender.start()
        rc = c.wait(timeout=60)
        try:
            conn.shutdown(socket.SHUT_RDWR)  # a sender still blocked returns
        except OSError:
            pass  # the client's close reset it already
        sender.join(timeout=30)
    finally:
        lsock.close()
    conn.close()
    size = os.path.getsize(c.log_path)
    check(rc == 1, "exit %d: %s" % (rc, c.stderr))
    check(re.search(r"windows/s.*announce", c.stderr), "no window rate error: " + c.stderr)
    check(size < LOG_BOUND_BYTES, "log of %d bytes" % size)


def refusing_reconnects(build, workdir):
    """A server that ends every stream at once with BYE internal-error, to a
    client with --reconnect: the client's stderr says a few of them, then
    holds back the rest and says how many it held back (here at exit)."""
    connections = 24
    lsock, address = listener()
    # One connection: every HELLO is a reconnection, not a copy's.
    c = Client(build, workdir, address, "client.reconnect_attempts=100", "client.copies=1",
               duration=60, extra=["--reconnect"])
    try:
        for _ in range(connections):
            conn, _ = accept_hello(lsock, 30)
            conn.sendall(stream_info() + bye(4, b"try again"))
            conn.close()
        c.proc.terminate()
        c.wait(timeout=30)
    finally:
        lsock.close()
        if c.proc.poll() is None:
            c.proc.kill()
    said = c.stderr.count("internal-error: try again")
    held = re.search(r"(\d+) more messages? caused by the server not shown", c.stderr)
    check(held, "nothing held back of %d lines: %s" % (said, c.stderr))
    check(said < connections, "%d of %d ends said" % (said, connections))


def copy_bye_quoted(build, workdir):
    """client.copies = 2 against a server that ends the copy with a BYE whose
    text holds quotes and a backslash: the copy ends alone (the stream's own
    connection goes on to its own BYE), and the log stays JSON, the text in
    the copy_connection_ended event."""
    lsock, address = listener()
    c = Client(build, workdir, address, "client.copies=2", duration=30)
    text = b'say "no" \\ now'
    try:
        own, _ = accept_hello(lsock, 30)
        own.sendall(stream_info())
        copy, _ = accept_hello(lsock, 30)
        copy.sendall(stream_info() + bye(4, text))
        # The client closes the copy once it has read the BYE: then the
        # stream's own connection ends.
        while copy.recv(4096):
            pass
        copy.close()
        own.sendall(bye(0, b"done"))
        own.close()
        c.wait(timeout=30)
    finally:
        lsock.close()
        if c.proc.poll() is None:
            c.proc.kill()
    with open(c.log_path) as f:
        for n, line in enumerate(f, 1):
            try:
                json.loads(line)
            except ValueError:
                check(False, "log line %d is not JSON: %r" % (n, line))
    ended = c.events("copy_connection_ended")
    check(len(ended) == 1 and ended[0]["copy"] == 1, "copy ends: %r" % ended)
    check(text.decode() in ended[0]["why"], "why: %r" % ended[0]["why"])


TESTS = {f.__name__: f for f in [silent_after_stream_info, silent_reconnects, window_flood,
                                 refusing_reconnects, copy_bye_quoted]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
