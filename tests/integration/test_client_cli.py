#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The client's command line against real and hostile servers: exit codes
and messages. Every wait is for an event (a connection, a log line, a
process exit), never a fixed sleep."""
import os
import signal
import subprocess
import sys

from harness import Client, Server, check, run, wait_until
from ppslab.records import bye, listener, stream_info, window_end


def client_path(build):
    return os.path.join(build, "client", "pps-client")


def hostile(build, workdir, replies, settings=(), duration=20):
    """A fake server that accepts, reads HELLO and sends @replies; returns the client."""
    lsock, address = listener()
    c = Client(build, workdir, address, *settings, duration=duration)
    conn, _ = lsock.accept()
    conn.settimeout(10)
    conn.recv(1024)
    for r in replies:
        conn.sendall(r)
    rc = c.wait(timeout=60)
    conn.close()
    lsock.close()
    return rc, c


def handshake_timeout(build, workdir):
    """A listener that accepts and never speaks: a clear error, exit 1."""
    lsock, address = listener()
    c = Client(build, workdir, address, "client.handshake_timeout_ms=300", duration=30)
    conn, _ = lsock.accept()
    rc = c.wait(timeout=30)
    conn.close()
    lsock.close()
    check(rc == 1, "exit %d: %s" % (rc, c.stderr))
    check("no stream within 300 ms" in c.stderr, c.stderr)


def reconnect_gives_up(build, workdir):
    """--reconnect with no server: bounded tries, then exit 1 saying so."""
    lsock, address = listener()
    lsock.close()  # nothing listens there now
    c = Client(build, workdir, address, "client.reconnect_attempts=2", duration=60,
               extra=["--reconnect"])
    rc = c.wait(timeout=60)
    check(rc == 1, "exit %d: %s" % (rc, c.stderr))
    check("giving up after 2 tries" in c.stderr and "nan" not in c.stderr, c.stderr)


def server_vanishes(build, workdir):
    """A server killed mid-stream (no BYE) is an error; one that says BYE is not."""
    for sig, want_rc, text in [(signal.SIGKILL, 1, "without BYE"),
                               (signal.SIGTERM, 0, "server said BYE (normal")]:
        srv = Server(build, workdir)
        c = Client(build, workdir, srv.address, duration=60)
        try:
            wait_until(lambda: os.path.exists(c.log_path) and
                       '"shown":true' in open(c.log_path).read(), "a shown frame", proc=c.proc)
            srv.proc.send_signal(sig)
            rc = c.wait(timeout=30)
        finally:
            srv.stop()
            if c.proc.poll() is None:
                c.proc.kill()
        check(rc == want_rc, "%s: exit %d: %s" % (sig, rc, c.stderr))
        check(text in c.stderr, c.stderr)


def display_without_display(build, workdir):
    """--display sdl with no display is an error, not a silent headless run."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    p = subprocess.run([client_path(build), "--display", "sdl", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=30, env=env)
    check(p.returncode == 1, "exit %d: %s" % (p.returncode, p.stderr))
    check("--display sdl: no display" in p.stderr, p.stderr)


def output_stdout_and_quiet(build, workdir):
    """--output - writes y4m to stdout, the summary to stderr; -q hides only
    the status line."""
    srv = Server(build, workdir)
    try:
        p = subprocess.run([client_path(build), srv.address, "--display", "none",
                            "--output", "-", "--duration", "3", "-q"],
                           capture_output=True, timeout=60)
    finally:
        srv.stop()
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err))
    check(p.stdout.startswith(b"YUV4MPEG2 W"), "stdout is not y4m: %r" % p.stdout[:40])
    check(b"summary" not in p.stdout, "the summary went into the video")
    check("pps-client summary" in err, "no summary on stderr: " + err)
    check("pps-client: latency p50" not in err, "-q still printed status lines: " + err)


def unwritable_outputs(build, workdir):
    """--log and --stats-json on a full device fail the run with a message;
    --duration inf / nan are usage errors."""
    srv = Server(build, workdir)
    try:
        for option in ("--log", "--stats-json"):
            p = subprocess.run([client_path(build), srv.address, "--display", "none",
                                "--duration", "2", option, "/dev/full"],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 1, "%s /dev/full: exit %d" % (option, p.returncode))
            check(option + " /dev/full" in p.stderr and "No space left" in p.stderr,
                  "%s: %s" % (option, p.stderr))
    finally:
        srv.stop()
    for value in ("inf", "nan", "-1", "3x"):
        p = subprocess.run([client_path(build), "--duration", value],
                           capture_output=True, text=True, timeout=10)
        check(p.returncode == 2, "--duration %s: exit %d" % (value, p.returncode))
        check("--duration %s" % value in p.stderr, p.stderr)


def hostile_server(build, workdir):
    """Untrusted STREAM_INFO, window ids and BYE text: refused with a clear
    message, exit 1, at once and without a flood of log lines."""
    rc, c = hostile(build, workdir, [stream_info(4096, 4096)])
    check(rc == 1 and "4096x4096 pictures refused" in c.stderr, "%d %s" % (rc, c.stderr))
    rc, c = hostile(build, workdir, [stream_info(16384, 16384)])
    check(rc == 1 and "16384x16384 pictures refused" in c.stderr, "%d %s" % (rc, c.stderr))
    rc, c = hostile(build, workdir, [stream_info(),
                                     window_end(1), window_end(0xFFFFFFFE)])
    check(rc == 1 and "window id jumps from 1 to 4294967294" in c.stderr,
          "%d %s" % (rc, c.stderr))
    check(os.path.getsize(c.log_path) < 100000, "log of %d bytes" % os.path.getsize(c.log_path))
    rc, c = hostile(build, workdir, [stream_info(), bye(4, b"bad \x1b[2J\x1b]0;owned\x07 text")])
    check(rc == 1, "BYE internal-error: exit %d" % rc)
    check("\x1b" not in c.stderr and "\x07" not in c.stderr, repr(c.stderr))
    check("bad ?[2J?]0;owned? text" in c.stderr, repr(c.stderr))


TESTS = {f.__name__: f for f in [handshake_timeout, reconnect_gives_up, server_vanishes,
                                 display_without_display, output_stdout_and_quiet,
                                 unwritable_outputs, hostile_server]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
