# SPDX-License-Identifier: MIT
"""Child processes with bounds: wait for one to exit on its pidfd (no
polling), stop it (a signal, a bounded wait, then SIGKILL), wait for an event
a program announces in a file, and turn signals into an exception."""
import contextlib
import os
import select
import signal
import subprocess
import time

from .errors import Failure, Interrupted

STOP_TIMEOUT_S = 5.0
POLL_S = 0.05
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _NoUsage:
    """The resource usage of a child reaped elsewhere: unknown."""

    ru_utime = ru_stime = float("nan")


NO_USAGE = _NoUsage()


def reap(proc, timeout_s):
    """Waits for the Popen @proc to exit, at most @timeout_s, on its pidfd;
    its resource usage (os.wait4), NO_USAGE if it was reaped already, None if
    it is still running. `pps-netlab exec` and `ip netns exec` exec in place,
    so a program started in a lab is the child itself."""
    if proc.returncode is not None:
        return NO_USAGE
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:  # reaped already: no usage to read
        proc.wait(timeout=max(0.0, timeout_s))
        return NO_USAGE
    try:
        readable, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
    finally:
        os.close(fd)
    if not readable:
        return None
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()
        return NO_USAGE
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage


def wait_exit(proc, timeout_s):
    """True once @proc has exited, False after @timeout_s."""
    return reap(proc, timeout_s) is not None


def stop(proc, timeout_s=STOP_TIMEOUT_S, sig=signal.SIGTERM):
    """@sig (SIGTERM unless said), a bounded wait, then SIGKILL. The resource
    usage of the child, as reap() gives it."""
    if proc is None:
        return None
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
    usage = reap(proc, timeout_s)
    if usage is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        usage = reap(proc, timeout_s)
    return usage


def wait_until(predicate, what, timeout_s=30.0, proc=None, poll_s=POLL_S):
    """Waits for an event: until @predicate() (a port file written, a log line
    printed, a record or a process state) returns a true value, which it
    returns. Raises Failure after @timeout_s, or as soon as @proc (a Popen the
    event depends on) exits, naming @what (a string, or a function returning
    one, for a message built from the logs at that moment). @poll_s is longer
    where asking is costly (a round trip to a browser)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise Failure("exited (status %s) before %s"
                          % (proc.returncode, what() if callable(what) else what))
        if time.monotonic() > deadline:
            raise Failure("timed out after %.0f s waiting for %s"
                          % (timeout_s, what() if callable(what) else what))
        # The poll interval of this one waiting loop: the events are files
        # and logs written by other processes, with nothing to block on.
        time.sleep(poll_s)


def file_has_content(path):
    return os.path.exists(path) and os.path.getsize(path) > 0


def wait_file(path, proc, timeout_s, what=None):
    """Waits for @path to have content (a --port-file, a "ready" line sent to
    a file); Failure if @proc exits first or after @timeout_s."""
    wait_until(lambda: file_has_content(path), what or path, timeout_s, proc)


def tail(path, n=3):
    """The last @n lines of a file, joined with ' | ' ("" if it cannot be read)."""
    with contextlib.suppress(OSError):
        with open(path) as f:
            return " | ".join(f.read().strip().splitlines()[-n:])
    return ""


def popen(argv, stdout=None, stderr=None, **kw):
    """Popen with stdin closed and stdout discarded unless said; @stdout and
    @stderr may be file paths (opened for writing, closed once the child has
    them)."""
    files = []
    try:
        if isinstance(stdout, str):
            stdout = open(stdout, "w")
            files.append(stdout)
        if isinstance(stderr, str):
            stderr = open(stderr, "w")
            files.append(stderr)
        return subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL if stdout is None else stdout,
                                stderr=stderr, **kw)
    finally:
        for f in files:
            f.close()


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def raise_on_signals():
    """SIGINT, SIGTERM and SIGHUP raise Interrupted, so `finally` blocks clean up."""
    for sig in INTERRUPT_SIGNALS:
        signal.signal(sig, _raise_interrupted)


class SignalsDeferred:
    """While tearing down: a Ctrl-C must not leave a lab half removed. A
    signal that arrives meanwhile is remembered and raised (Interrupted) once
    the block is done."""

    def __enter__(self):
        self.caught = None
        self.previous = {sig: signal.getsignal(sig) for sig in INTERRUPT_SIGNALS}
        for sig in INTERRUPT_SIGNALS:
            signal.signal(sig, self._remember)
        return self

    def _remember(self, signum, frame):
        self.caught = self.caught or signum

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if self.caught:
            raise Interrupted(signal.Signals(self.caught).name)
        return False
