# SPDX-License-Identifier: MIT
"""Calls through a relay (docs/RELAY.md#calls): pps-relay on loopback and one
pps-call per participant, each publishing its test pattern and showing its
peers headless with a log per peer. Every wait is on an event (a port
written, a line printed, a program's exit)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import Failure, check, run, wait_until
from ppslab import programs
from test_relay import Publisher, Relay


class Call(programs.Program):
    """pps-call RELAY/ROOM --name NAME --peer P... --display none --log-dir DIR."""

    def __init__(self, build, workdir, relay, name, peers, room="room", duration=6, extra=(), display="none",
                 env=None):
        self.log_dir = os.path.join(workdir, "call-%s-%d" % (name, time.monotonic_ns()))
        self.err_path = self.log_dir + ".err"
        self.out_path = self.log_dir + ".out"
        argv = [os.path.join(build, "call", "pps-call"), "%s/%s" % (relay.address, room), "--name", name,
                "--display", display, "--log-dir", self.log_dir]
        for p in peers:
            argv += ["--peer", p]
        if duration is not None:
            argv += ["--duration", str(duration)]
        super().__init__(argv + list(extra), stdout=self.out_path, stderr=self.err_path, new_session=False,
                         env=env)
        self.name = name

    def summary(self, peer):
        """The summary of the viewer of @peer (its log's last try)."""
        path = os.path.join(self.log_dir, peer + ".jsonl")
        check(os.path.exists(path), "%s: no log of %s" % (self.name, peer))
        with open(path) as f:
            summaries = [e for e in (json.loads(line) for line in f) if e["type"] == "summary"]
        check(len(summaries) == 1, "%s: %d summaries in %s" % (self.name, len(summaries), path))
        return summaries[0]


def finish(calls, timeout_s=60):
    """Waits for every call; Failure naming one that did not exit 0."""
    for c in calls:
        try:
            rc = c.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise Failure("pps-call %s still running after %d s" % (c.name, timeout_s)) from None
        check(rc == 0, "pps-call %s: exit %s:\n%s" % (c.name, rc, c.stderr[-3000:]))


def stop_all(*progs):
    for p in progs:
        if p is not None and p.returncode is None:
            p.stop()


def sees(call, peer, least, pct):
    s = call.summary(peer)
    check(s["frames_shown"] >= least, "%s shows %s: %d frames, expected %d" %
          (call.name, peer, s["frames_shown"], least))
    check(s["frames_shown_pct"] >= pct, "%s shows %s: %.1f%% of the frames" %
          (call.name, peer, s["frames_shown_pct"]))


def call_two_party(build, workdir):
    """alice and bob, one pps-call each: each log shows the other's frames.
    alice starts first, so her viewer of bob waits for him to publish."""
    relay = Relay(build, workdir)
    calls = []
    try:
        calls.append(Call(build, workdir, relay, "alice", ["bob"], duration=7))
        calls.append(Call(build, workdir, relay, "bob", ["alice"], duration=7))
        finish(calls)
    finally:
        stop_all(*calls, relay)
    alice, bob = calls
    sees(alice, "bob", 100, 85)
    sees(bob, "alice", 100, 85)
    for c in calls:
        check("[%s] pps-client: connected to" % ("bob" if c is alice else "alice") in c.stderr,
              "%s: no viewer's line passed on:\n%s" % (c.name, c.stderr[-2000:]))
        check(c.stderr.count("waiting for") <= 1, "%s: said it waits more than once:\n%s" %
              (c.name, c.stderr[-2000:]))
        check("pps-call: call ended: the call's duration ended" in c.stderr, c.stderr[-2000:])


def call_windows(build, workdir):
    """With windows (SDL's dummy video driver: no screen needed), alice's tries
    for bob are headless probes until he publishes, then one real viewer
    shows him; the log is the real viewer's."""
    env = dict(os.environ, SDL_VIDEODRIVER="dummy")
    relay = Relay(build, workdir)
    calls = []
    try:
        calls.append(Call(build, workdir, relay, "alice", ["bob"], duration=8, display="sdl", env=env))
        wait_until(lambda: "waiting for bob to publish" in calls[0].stderr_text(),
                   lambda: "alice to wait for bob:\n%s" % calls[0].stderr_text()[-2000:], 30, calls[0].proc)
        calls.append(Call(build, workdir, relay, "bob", ["alice"], duration=7, display="sdl", env=env))
        finish(calls)
    finally:
        stop_all(*calls, relay)
    alice, bob = calls
    sees(alice, "bob", 100, 85)
    sees(bob, "alice", 100, 85)
    check(alice.stderr.count("[bob] pps-client: connected to") == 1,
          "alice's viewer of bob connected %d times (the probe's line passed on?):\n%s" %
          (alice.stderr.count("[bob] pps-client: connected to"), alice.stderr[-3000:]))


def call_three_party(build, workdir):
    """alice, bob and carol, each showing the other two: every one sees both.
    Ten programs on two cores: a lower share than two parties must show."""
    relay = Relay(build, workdir)
    names = ["alice", "bob", "carol"]
    calls = []
    try:
        for n in names:
            calls.append(Call(build, workdir, relay, n, [p for p in names if p != n], duration=8))
        finish(calls)
    finally:
        stop_all(*calls, relay)
    for c in calls:
        for p in names:
            if p != c.name:
                sees(c, p, 100, 80)


def call_peer_never_publishes(build, workdir):
    """A peer that never publishes: the viewer is tried again each second, the
    call says it waits once and ends cleanly at its duration."""
    relay = Relay(build, workdir)
    call = None
    try:
        call = Call(build, workdir, relay, "alice", ["ghost"], duration=4)
        finish([call])
    finally:
        stop_all(call, relay)
    check(call.stderr.count("pps-call: waiting for ghost to publish") == 1,
          "the wait said %d times:\n%s" % (call.stderr.count("waiting for ghost"), call.stderr[-3000:]))
    check("no stream named" not in call.stderr, "a try's no-stream line was passed on:\n%s" % call.stderr[-2000:])
    check("call ended: the call's duration ended" in call.stderr, call.stderr[-2000:])


def call_publisher_fails(build, workdir):
    """A name someone else publishes: the call's publisher is refused, the
    call ends at once with exit status 1 and says why."""
    relay = Relay(build, workdir)
    pub = call = None
    try:
        pub = Publisher(build, workdir, relay.address + "/room/alice", duration=30)
        relay.wait_for_log("stream room/alice: ")
        call = Call(build, workdir, relay, "alice", ["bob"], duration=20)
        rc = call.wait(30)
    finally:
        stop_all(call, pub, relay)
    check(rc == 1, "exit %s, expected 1:\n%s" % (rc, call.stderr[-2000:]))
    check("pps-call: the publisher of room/alice failed" in call.stderr, call.stderr[-2000:])
    check("[alice] pps-server:" in call.stderr, "the publisher's lines are not passed on:\n%s" % call.stderr[-2000:])


def children_of(pid):
    """Processes whose parent is @pid."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def call_sigterm(build, workdir):
    """SIGTERM to a call without --duration: it stops its children and exits 0."""
    relay = Relay(build, workdir)
    call = None
    try:
        call = Call(build, workdir, relay, "alice", ["bob"], duration=None)
        wait_until(lambda: "waiting for bob to publish" in call.stderr_text(),
                   lambda: "the call to wait for bob:\n%s" % call.stderr_text()[-2000:], 30, call.proc)
        children = children_of(call.proc.pid)  # the publisher at least
        check(children, "no child of the call")
        call.proc.send_signal(signal.SIGTERM)
        rc = call.wait(30)
        check(rc == 0, "exit %s after SIGTERM:\n%s" % (rc, call.stderr[-2000:]))
        left = [pid for pid in children if os.path.exists("/proc/%d" % pid)]
        check(not left, "children left after the call: %s" % left)
        check("SIGTERM, stopping" in call.stderr, call.stderr[-2000:])
    finally:
        stop_all(call, relay)


def call_bad_settings(build, workdir):
    """A --set the publisher refuses, a --client-set the viewers refuse: the
    call ends at once with exit status 2, the child's own message passed on."""
    relay = Relay(build, workdir)
    runs = []
    try:
        for extra, says in ((["--set", "source.pattern=bogus"], "[alice] pps-server: --set: [source] pattern"),
                            (["--client-set", "client.bogus=1"], "[bob] pps-client: --set: [client] bogus")):
            call = Call(build, workdir, relay, "alice", ["bob"], duration=20, extra=extra)
            runs.append((call, call.wait(30), says))
    finally:
        stop_all(*(r[0] for r in runs), relay)
    for call, rc, says in runs:
        check(rc == 2, "%s: exit %s, expected 2:\n%s" % (call.argv, rc, call.stderr[-2000:]))
        check(says in call.stderr, "%s: %r not passed on:\n%s" % (call.argv, says, call.stderr[-2000:]))


def call_programs_missing(build, workdir):
    """pps-call alone in a directory (no pps-server beside it, no ../server):
    exit status 1, the places it looked named."""
    lone = os.path.join(workdir, "lone")
    os.mkdir(lone)
    shutil.copy(os.path.join(build, "call", "pps-call"), lone)
    p = subprocess.run([os.path.join(lone, "pps-call"), "127.0.0.1:9/room", "--name", "alice", "--peer", "bob"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1, "exit %d, expected 1: %s" % (p.returncode, p.stderr))
    check("cannot find pps-server" in p.stderr and os.path.join(lone, "pps-server") in p.stderr, p.stderr)


TESTS = {f.__name__: f for f in [call_two_party, call_three_party, call_peer_never_publishes,
                                 call_publisher_fails, call_sigterm, call_bad_settings,
                                 call_programs_missing, call_windows]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
