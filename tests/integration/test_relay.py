# SPDX-License-Identifier: MIT
"""The relay (docs/RELAY.md) with the real programs on loopback: a publisher
(pps-server --publish) pushes its stream into pps-relay, viewers
(pps-client HOST:PORT/NAME) take it from there. Every wait is on an event (a
port written, a line logged, a program's exit)."""
import base64
import json
import os
import re
import socket
import struct
import sys
import time

from harness import Client, Failure, Server, check, percentile, read_all, record, run, wait_until
from ppslab import process, programs

TOKEN = "relay-token-for-tests-0123"


class Relay(programs.Program):
    """pps-relay on 127.0.0.1, a port of the kernel's choosing (its FIFO)."""

    def __init__(self, build, workdir, *settings, extra=(), port=0):
        fifo = os.path.join(workdir, "relay-port-%d.fifo" % time.monotonic_ns())
        fd = programs.open_port_fifo(fifo)
        self.err_path = os.path.join(workdir, "relay-%d.err" % time.monotonic_ns())
        argv = [os.path.join(build, "server", "pps-relay"), "--listen", "127.0.0.1:%d" % port,
                "--port-file", fifo]
        for s in settings:
            argv += ["--set", s]
        try:
            super().__init__(argv + list(extra), stderr=self.err_path, new_session=False)
            self.port = programs.read_port(fd, self.proc, 20.0)
        finally:
            os.close(fd)
            os.unlink(fifo)
        self.address = "127.0.0.1:%d" % self.port

    def log(self):
        return self.stderr_text()

    def wait_for_log(self, text, timeout_s=20.0):
        process.wait_until(lambda: text in self.log(),
                           lambda: "the relay to log %r:\n%s" % (text, self.log()[-2000:]),
                           timeout_s=timeout_s, proc=self.proc)


class Publisher(programs.Program):
    """pps-server --publish RELAY/NAME."""

    def __init__(self, build, workdir, location, *settings, duration=20):
        self.err_path = os.path.join(workdir, "publisher-%d.err" % time.monotonic_ns())
        argv = [os.path.join(build, "server", "pps-server"), "--publish", location, "--quiet",
                "--duration", str(duration)]
        for s in settings:
            argv += ["--set", s]
        super().__init__(argv, stderr=self.err_path, new_session=False)


def publish(build, workdir, relay, name, *settings, duration=20):
    """A publisher of @name whose stream the relay has announced (its STREAM_INFO in)."""
    pub = Publisher(build, workdir, relay.address + "/" + name, *settings, duration=duration)
    relay.wait_for_log("stream %s: " % name)
    return pub


def shown_well(client, least, pct=85):
    s = client.summary()
    check(s["frames_shown"] >= least, "%s: %d frames shown, expected %d" % (client.log_path, s["frames_shown"],
                                                                           least))
    check(s["frames_shown_pct"] >= pct, "%s: %.1f%% shown" % (client.log_path, s["frames_shown_pct"]))
    return s


def p95_unchanged(client, attack_us, what, allow_ms=0):
    """The viewer's frame latency p95 during and after an attack that began at
    @attack_us (CLOCK_REALTIME) against its p95 before it, in the same run:
    within 1.5x + 30 ms (loopback latencies are tens of ms, and a shared
    machine moves them by a few), + @allow_ms where the design adds delay."""
    frames = [e for e in client.events("frame") if e.get("shown") and e.get("latency_ms") is not None]
    # The join's first second (its IDR, the playout settling) is not "before".
    start = min((e["capture_us"] for e in frames), default=0) + 1_000_000
    before = [e["latency_ms"] for e in frames if start <= e["capture_us"] < attack_us]
    during = [e["latency_ms"] for e in frames if e["capture_us"] >= attack_us]
    check(len(before) >= 30 and len(during) >= 30,
          "%s: %d frames before the attack, %d during" % (what, len(before), len(during)))
    p_before, p_during = percentile(before, 95), percentile(during, 95)
    print("%s: p95 %.1f ms before, %.1f ms during (%d, %d frames)" % (what, p_before, p_during, len(before),
                                                                      len(during)))
    check(p_during <= 1.5 * p_before + 30 + allow_ms,
          "%s: p95 %.1f ms during against %.1f before" % (what, p_during, p_before))


def stop_all(*programs_):
    for p in programs_:
        if p is not None:
            p.stop()


def relay_two_viewers(build, workdir):
    """Publisher -> relay -> two viewers: both decode and show the stream."""
    relay = Relay(build, workdir)
    pub = a = b = None
    try:
        pub = publish(build, workdir, relay, "room/alice")
        a = Client(build, workdir, relay.address + "/room/alice", duration=6, name="a")
        b = Client(build, workdir, relay.address + "/room/alice", duration=6, name="b")
        check(a.wait() == 0 and b.wait() == 0, "a viewer failed: %s %s" % (a.stderr, b.stderr))
    finally:
        stop_all(pub, relay)
    for c in (a, b):
        shown_well(c, 120)
    check("publisher" in relay.log() and "admitted for stream room/alice" in relay.log(), relay.log())


def relay_unknown_name(build, workdir):
    """An unknown name and a viewer without a name get a BYE that says why
    (printed by the client); a plain pps-server serves a named viewer as any."""
    relay = Relay(build, workdir)
    pub = None
    try:
        pub = publish(build, workdir, relay, "room/alice")
        viewer = Client(build, workdir, relay.address + "/room/alice", duration=8, name="viewer")
        viewer.wait_for_stderr(" fps")
        time.sleep(3)  # frames before the strangers, to compare with
        attack_us = time.time_ns() // 1000
        nobody = Client(build, workdir, relay.address + "/room/nobody", duration=4, name="nobody")
        plain = Client(build, workdir, relay.address, duration=4, name="plain")
        rc_nobody, rc_plain = nobody.wait(30), plain.wait(30)
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-600:])
    finally:
        stop_all(pub, relay)
    shown_well(viewer, 150)
    p95_unchanged(viewer, attack_us, "the named stream's viewer")
    check(rc_nobody != 0 and "no stream named room/nobody" in nobody.stderr,
          "unknown name: rc %s, %s" % (rc_nobody, nobody.stderr[-600:]))
    check(rc_plain != 0 and "ask for a stream by name" in plain.stderr,
          "no name: rc %s, %s" % (rc_plain, plain.stderr[-600:]))
    srv = Server(build, workdir)
    try:
        named = Client(build, workdir, srv.address + "/any/name", duration=4, name="named")
        check(named.wait() == 0, "a named viewer of pps-server: %s" % named.stderr[-600:])
    finally:
        srv.stop()
    shown_well(named, 80)


def relay_impostor(build, workdir):
    """A second publisher of a name that is taken is refused, the first keeps
    it and its viewers; with an access token, a publisher without it is
    refused and one with it publishes, its viewers prove it too."""
    relay = Relay(build, workdir)
    pub = None
    try:
        pub = publish(build, workdir, relay, "room/alice")
        viewer = Client(build, workdir, relay.address + "/room/alice", duration=9, name="viewer")
        viewer.wait_for_stderr(" fps")
        time.sleep(3)  # frames before the attack, to compare with
        attack_us = time.time_ns() // 1000
        impostor = Publisher(build, workdir, relay.address + "/room/alice", duration=5)
        rc_impostor = impostor.wait(30)
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-600:])
    finally:
        stop_all(pub, relay)
    check(rc_impostor == 1 and "already has a publisher" in impostor.stderr,
          "impostor: rc %s, %s" % (rc_impostor, impostor.stderr[-600:]))
    shown_well(viewer, 120)
    p95_unchanged(viewer, attack_us, "the first publisher's viewer")

    relay = Relay(build, workdir, "server.access_token=" + TOKEN)
    pub = None
    try:
        tokenless = Publisher(build, workdir, relay.address + "/room/bob", duration=5)
        wrong = Publisher(build, workdir, relay.address + "/room/bob", "server.access_token=x" + TOKEN, duration=5)
        rc_tokenless, rc_wrong = tokenless.wait(30), wrong.wait(30)
        pub = publish(build, workdir, relay, "room/bob", "server.access_token=" + TOKEN)
        viewer = Client(build, workdir, relay.address + "/room/bob", "client.access_token=" + TOKEN, duration=5,
                        name="viewer-token")
        check(viewer.wait() == 0, "viewer with token: %s" % viewer.stderr[-600:])
    finally:
        stop_all(pub, relay)
    check(rc_tokenless == 1 and "access token" in tokenless.stderr, "tokenless: %s" % tokenless.stderr[-600:])
    check(rc_wrong == 1 and "wrong access token" in wrong.stderr, "wrong token: %s" % wrong.stderr[-600:])
    shown_well(viewer, 60)


def publish_hello(name):
    """A raw publisher's HELLO: flags stream | publish, no client name, no auth."""
    body = struct.pack(">HHHBB", 1, 0x0018, 0, 0, 0) + struct.pack(">B", len(name)) + name
    return record(1, body)


def relay_garbage_publisher(build, workdir):
    """Publishers that send garbage (before and after STREAM_INFO) are
    dropped with a logged reason while a good stream flows on to its viewer."""
    relay = Relay(build, workdir)
    pub = None
    try:
        pub = publish(build, workdir, relay, "room/alice")
        viewer = Client(build, workdir, relay.address + "/room/alice", duration=9, name="viewer")
        viewer.wait_for_stderr(" fps")  # its status line: streaming
        time.sleep(3)  # frames before the attack, to compare with
        attack_us = time.time_ns() // 1000
        # Garbage where STREAM_INFO should be.
        bad = socket.create_connection(("127.0.0.1", relay.port))
        bad.sendall(publish_hello(b"room/bad"))
        bad.settimeout(5)
        relay_hello = bad.recv(4096)
        check(relay_hello[:2] == b"\x01\x01", "no HELLO from the relay: %r" % relay_hello)
        bad.sendall(b"\x01\x04\xff\xff" + os.urandom(2000))
        relay.wait_for_log("of stream room/bad dropped")
        bad.close()
        # A plausible STREAM_INFO, then a fragment outside any window.
        info = struct.pack(">HBBHHHHHHBBBBII", 1, 1, 1, 128, 96, 64, 48, 30, 1, 2, 1, 1, 0, 250, 60)
        frag = struct.pack(">IIIqIBBBBHII", 7, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 4) + b"abcd"
        bad2 = socket.create_connection(("127.0.0.1", relay.port))
        bad2.sendall(publish_hello(b"room/bad2"))
        bad2.recv(4096)
        bad2.sendall(record(2, info) + record(4, frag))
        relay.wait_for_log("of stream room/bad2 dropped")
        bad2.close()
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-600:])
    finally:
        stop_all(pub, relay)
    shown_well(viewer, 150)
    check("outside its window" in relay.log(), relay.log()[-2000:])
    p95_unchanged(viewer, attack_us, "the good stream's viewer")


def audio_publish_hello(name):
    """A raw publisher's audio HELLO: flags stream | publish | audio only."""
    body = struct.pack(">HHHBB", 1, 0x001C, 0, 0, 0) + struct.pack(">B", len(name)) + name
    return record(1, body)


def refused_with(relay, hello, text):
    """The bytes the relay answers @hello with before it closes, and whether
    they carry @text (its BYE's)."""
    sock = socket.create_connection(("127.0.0.1", relay.port))
    sock.settimeout(10)
    sock.sendall(hello)
    got = read_all(sock)
    sock.close()
    return text.encode() in got, got


def relay_publisher_audio(build, workdir):
    """A publisher's audio on a connection of its own (server.publish_audio =
    connection): the relay takes it beside the stream, from the stream's
    host only, once; the viewer plays it. By default it comes in the
    windows, and the viewer plays it as well."""
    relay = Relay(build, workdir)
    pub = pub2 = None
    try:
        pub = publish(build, workdir, relay, "room/alice", "server.publish_audio=connection")
        relay.wait_for_log("stream room/alice: the publisher's audio on a connection of its own")
        viewer = Client(build, workdir, relay.address + "/room/alice", "audio.output=none", duration=6,
                        name="viewer")
        viewer.wait_for_stderr(" fps")
        # A second audio connection for the stream, and one for a stream
        # that does not exist: refused, the stream's own goes on.
        taken, got = refused_with(relay, audio_publish_hello(b"room/alice"), "has its audio connection")
        check(taken, "a second audio connection: %r" % got)
        missing, got = refused_with(relay, audio_publish_hello(b"room/nobody"), "no stream room/nobody")
        check(missing, "audio for no stream: %r" % got)
        pub2 = publish(build, workdir, relay, "room/bob")
        viewer2 = Client(build, workdir, relay.address + "/room/bob", "audio.output=none", duration=6,
                         name="viewer-window")
        check(viewer.wait() == 0 and viewer2.wait() == 0,
              "a viewer failed: %s %s" % (viewer.stderr[-600:], viewer2.stderr[-600:]))
    finally:
        stop_all(pub, pub2, relay)
    log = relay.log()
    check("stream room/bob: the publisher's audio on a connection of its own" not in log,
          "the default opened an audio connection: %s" % log[-2000:])
    for c in (viewer, viewer2):
        s = shown_well(c, 100)
        check(s.get("audio_slots", 0) >= 150 and s["audio_played_pct"] >= 90,
              "%s: %s audio slots, %.1f%% played" % (c.log_path, s.get("audio_slots"), s.get("audio_played_pct") or 0))


def subscribe_hello(name):
    """A raw viewer's HELLO for the stream @name: flags stream, no client name, no auth."""
    body = struct.pack(">HHHBB", 1, 0x0008, 0, 0, 0) + struct.pack(">B", len(name)) + name
    return record(1, body)


def relay_slow_subscriber(build, workdir):
    """A subscriber that stops reading is isolated: it is evicted (BYE
    too-slow) while the other viewer of the stream keeps its frames, and its
    stalled path does not hold the stream's rates down for the others."""
    relay = Relay(build, workdir, "server.evict_after_s=3")
    pub = slow = None
    try:
        pub = publish(build, workdir, relay, "room/alice")
        viewer = Client(build, workdir, relay.address + "/room/alice", duration=11, name="viewer")
        viewer.wait_for_stderr(" fps")
        time.sleep(3)  # frames before the attack, to compare with
        attack_us = time.time_ns() // 1000
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", relay.port))
        slow.sendall(subscribe_hello(b"room/alice"))
        relay.wait_for_log("too slow: took no data", timeout_s=15)
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-600:])
    finally:
        if slow is not None:
            slow.close()
        stop_all(pub, relay)
    s = shown_well(viewer, 200, pct=95)
    # Any join switches B frames on for the stream until the joiner's start
    # reads clean, and a reader that stalls after its first kilobytes has
    # windows cut: B frames stay on for the hold (5 s). Their reordering
    # delays every viewer's pictures by up to two frame times (30 fps).
    p95_unchanged(viewer, attack_us, "the other viewer", allow_ms=67)
    reports = re.search(r"path reports sent upstream (\d+)", relay.log())
    check(reports and int(reports.group(1)) >= 10, "no PATH_REPORTs went upstream: %s" % relay.log()[-600:])
    return s


def second_joins(build, workdir, relay, status_lines, durations, *settings):
    """A publisher of room/alice (@settings), a first viewer, and a second one
    that joins once the first has shown @status_lines status lines (a second
    each); both run to their end (@durations, s). Stops the publisher and the
    relay; returns (publisher, first, second)."""
    pub = first = None
    try:
        pub = publish(build, workdir, relay, "room/alice", *settings)
        first = Client(build, workdir, relay.address + "/room/alice", duration=durations[0], name="first")
        wait_until(lambda: first.output()[1].count(" fps") >= status_lines,
                   lambda: "%d status lines: %s" % (status_lines, first.output()[1][-600:]), 30, first.proc)
        second = Client(build, workdir, relay.address + "/room/alice", duration=durations[1], name="second")
        check(second.wait() == 0 and first.wait() == 0, "%s %s" % (second.stderr[-600:], first.stderr[-600:]))
    finally:
        stop_all(pub, relay)
    return pub, first, second


def relay_late_joiner(build, workdir):
    """A viewer that joins a stream flowing for seconds gets pictures: its
    join's IDR request travels to the publisher as a RECOVERY_REQUEST. It
    joins once the first has shown three status lines of pictures: mid-GOP
    (a GOP is 10 s)."""
    relay = Relay(build, workdir)
    pub, _, late = second_joins(build, workdir, relay, 3, (8, 5), "encoder.gop_frames=300")
    shown_well(late, 60, pct=0)
    check("IDR requests sent upstream" in relay.log(), relay.log()[-1000:])
    sent = int(relay.log().split("IDR requests sent upstream ")[1].split()[0].rstrip(","))
    check(sent >= 2, "IDR requests sent upstream: %d (one per join)" % sent)
    check("lost layer 0" in pub.stderr_text(), "the publisher saw no RECOVERY_REQUEST: %s" % pub.stderr_text()[-600:])


def first_picture_s(client):
    """Seconds from the viewer's start to its first picture shown: the
    summary's first_picture_ms, which the log's own records must agree with."""
    start = client.events("start")[0]["time_us"]
    shown = [e["display_us"] for e in client.events("frame") if e.get("shown")]
    check(shown, "%s: no picture shown" % client.log_path)
    reported = client.summary().get("first_picture_ms")
    check(reported is not None and abs(reported - (min(shown) - start) / 1e3) < 1.0,
          "%s: first_picture_ms %s against %.1f ms from the records" % (client.log_path, reported,
                                                                       (min(shown) - start) / 1e3))
    return reported / 1e3


def relay_joins_close_together(build, workdir):
    """Viewers joining a relay soon after the stream began, and a second
    after each other, see pictures at once: each join's IDR request, which
    the relay forwards within 2 s of its own (the publisher's bound per
    client between loss requests), is heard (a relay asks for its viewers,
    each bounded at the relay), not left for a retry 2 s later or the next
    periodic IDR (a GOP of 10 s here). The bound in bits is out of the way
    (a forced IDR may follow the one before it after 500 ms): what is left
    to hold a join is the bound per client."""
    relay = Relay(build, workdir)
    _, first, second = second_joins(build, workdir, relay, 1, (6, 5), "encoder.gop_frames=300",
                                    "server.recovery_budget_pct=100")
    t1, t2 = first_picture_s(first), first_picture_s(second)
    print("first picture after %.2f s (first viewer), %.2f s (second)" % (t1, t2))
    # Held by the per-client bound, the first waited 2.1 s and the second
    # 1.0 s (a retry); heard, 0.4 and 0.1 s. The bound is 2 s whatever the
    # machine's load: 1.6 s leaves a loaded machine more than a second.
    check(t1 < 1.6 and t2 < 1.6, "first pictures after %.2f and %.2f s" % (t1, t2))
    shown_well(second, 60, pct=0)


def relay_tree(build, workdir):
    """Publisher -> relay A -> relay B (--upstream A/NAME) -> viewer: two hops,
    the viewer's join travels up both as RECOVERY_REQUESTs."""
    a = Relay(build, workdir)
    pub = b = None
    try:
        pub = publish(build, workdir, a, "room/alice", "encoder.gop_frames=300")
        b = Relay(build, workdir, extra=["--upstream", a.address + "/room/alice"])
        b.wait_for_log("stream room/alice: ")
        viewer = Client(build, workdir, b.address + "/room/alice", duration=6, name="viewer")
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-600:])
    finally:
        stop_all(pub, b, a)
    shown_well(viewer, 100, pct=0)
    check("subscribed to %s/room/alice" % a.address in b.log(), b.log()[-1000:])
    check('"pps-relay" lost layer 0' in pub.stderr_text(), "no request reached the publisher: %s" %
          pub.stderr_text()[-600:])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def relay_tree_reconnect(build, workdir):
    """A tree that heals: relay B starts before its upstream A exists and
    keeps trying; once A and a publisher are up, B takes the stream; the
    publisher stops and another starts under the same name, and B takes the
    stream again; a viewer of B with --reconnect shows frames from both
    publishers. A publisher cannot take the name on B meanwhile."""
    port_a = free_port()
    up = "127.0.0.1:%d/room/alice" % port_a
    b = Relay(build, workdir, extra=["--upstream", up])
    a = pub = pub2 = viewer = None
    try:
        b.wait_for_log("upstream %s: cannot connect" % up)
        a = Relay(build, workdir, port=port_a)
        pub = publish(build, workdir, a, "room/alice", duration=60)
        b.wait_for_log("subscribed to %s as stream room/alice (after" % up, timeout_s=15)
        viewer = Client(build, workdir, b.address + "/room/alice", duration=18, name="viewer",
                        extra=["--reconnect"])
        time.sleep(5)
        # The name is the upstream's on B.
        s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        s.sendall(publish_hello(b"room/alice"))
        refused = read_all(s)
        check(b"comes from another relay" in refused, "a publisher took the name: %r" % refused)
        pub.stop()
        pub = None
        b.wait_for_log("its publisher left; trying again")
        restart_us = time.time() * 1e6
        pub2 = publish(build, workdir, a, "room/alice", duration=60)
        b.wait_for_log("(again, after", timeout_s=15)
        check(viewer.wait() == 0, "viewer: %s" % viewer.stderr[-800:])
    finally:
        stop_all(pub, pub2, b, a)
    after = [e for e in viewer.events("frame") if e.get("shown") and e["capture_us"] > restart_us]
    before = [e for e in viewer.events("frame") if e.get("shown") and e["capture_us"] <= restart_us]
    first = min(e["capture_us"] for e in after) if after else restart_us
    print("viewer of the leaf relay: %d frames shown from the first publisher, %d from the second; its "
          "first frame captured %.1f s after the second publisher started"
          % (len(before), len(after), (first - restart_us) / 1e6))
    check(len(before) >= 60 and len(after) >= 60, "frames shown before/after: %d/%d" % (len(before), len(after)))
    m = re.search(r"upstream reconnects (\d+)", b.log())
    check(m and int(m.group(1)) >= 1, "the reconnect is not counted: %s" % b.log()[-800:])


def relay_tls(build, workdir):
    """A relay with a certificate: a publisher over TLS (server.relay_tls), a
    second relay taking the stream over TLS (--upstream with relay_tls), a
    pps-client over TLS and one in plaintext, each showing the stream; the
    list over https; a publisher whose CA does not vouch for the relay, and
    one that asks a plaintext relay for TLS, each fail with the reason; a
    broken handshake is dropped; the viewers stream on through all of it."""
    import ssl
    cert, key = programs.make_cert(workdir)
    other, _ = programs.make_cert(workdir, name="other")
    up_tls = ("server.relay_tls=true", "server.relay_tls_ca=" + cert)
    relay = Relay(build, workdir, "server.tls_cert=" + cert, "server.tls_key=" + key)
    pub = leaf = tls_viewer = plain = None
    ctx = ssl.create_default_context(cafile=cert)
    ctx.check_hostname = False
    try:
        pub = publish(build, workdir, relay, "room/alice", *up_tls, duration=30)
        leaf = Relay(build, workdir, *up_tls, extra=["--upstream", relay.address + "/room/alice"])
        leaf.wait_for_log("stream room/alice: ")
        tls_viewer = Client(build, workdir, relay.address + "/room/alice", "client.tls=true",
                            "client.tls_ca=" + cert, duration=8, name="tls")
        plain = Client(build, workdir, leaf.address + "/room/alice", duration=8, name="plain")
        time.sleep(2)
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", relay.port), timeout=5)) as t:
            t.sendall(b"GET /streams HTTP/1.1\r\nHost: x\r\n\r\n")
            data = read_all(t)
        head, _, body = data.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200 "), "https GET /streams: %r" % head[:100])
        check([x["name"] for x in json.loads(body)["streams"]] == ["room/alice"], "the list: %r" % body)
        # The wrong CA; TLS asked of a plaintext relay (the leaf has no certificate).
        for where, settings, want in ((relay, ("server.relay_tls=true", "server.relay_tls_ca=" + other),
                                       "certificate verification failed"),
                                      (leaf, up_tls, "TLS")):
            bad = Publisher(build, workdir, where.address + "/room/bob", *settings, duration=5)
            check(bad.wait(timeout=20) == 1, "a publisher that should fail did not")
            err = bad.stderr_text()
            check(want in err, "the failing publisher says: %s" % err[-400:])
        bad = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        bad.sendall(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 64)
        read_all(bad)
        check(tls_viewer.wait() == 0 and plain.wait() == 0,
              "a viewer failed: %s %s" % (tls_viewer.stderr[-400:], plain.stderr[-400:]))
    finally:
        stop_all(pub, leaf, relay)
    for c in (tls_viewer, plain):
        shown_well(c, 150)
    log = relay.log()
    check("admitted for stream room/alice (TLS)" in log, "the publisher over TLS: %s" % log[-2000:])
    check(log.count("joined (minbuf, TLS)") >= 2, "the leaf relay and the viewer over TLS: %s" % log[-2000:])
    check("TLS handshake with" in log and "failed" in log, "the broken handshake: %s" % log[-1500:])
    check("https://" in log, "the browser's address: %s" % log[:400])

def http_get(relay, path, extra=b""):
    s = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
    data = read_all(s)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def ws_masked(payload, mask=b"\x5a\x17\xc3\x08"):
    return bytes([0x82, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def relay_web(build, workdir):
    """The relay's browser side, raw sockets: its front page (the stream
    list page), GET /streams (the streams published now, as JSON), a
    WebSocket to /stream/NAME routed to that stream (a masked HELLO gets its
    STREAM_INFO and windows), a WebSocket for a name that is not published
    (404), bad requests, and more heads that never end than the door holds;
    a pps-client viewer of the same stream keeps streaming through all of it."""
    relay = Relay(build, workdir)
    pub = viewer = None
    ua = b"User-Agent: " + b"x" * 900 + b"\r\n"  # a head longer than a HELLO may be
    try:
        pub = publish(build, workdir, relay, "room/alice", duration=30)
        viewer = Client(build, workdir, relay.address + "/room/alice", duration=14, name="v")
        head, body = http_get(relay, b"/", ua)
        check(head.startswith(b"HTTP/1.1 200 ") and b"text/html" in head and b"ppstream relay" in body,
              "GET /: %r" % head[:200])
        head, body = http_get(relay, b"/streams")
        check(head.startswith(b"HTTP/1.1 200 ") and b"application/json" in head, "GET /streams: %r" % head)
        listing = json.loads(body)
        names = [s["name"] for s in listing["streams"]]
        check(listing["relay"] is True and names == ["room/alice"], "the list: %s" % listing)
        alice = listing["streams"][0]
        check(alice["width"] == 640 and alice["height"] == 480 and alice["layers"] >= 1,
              "the stream's entry: %s" % alice)
        for path in (b"/viewer.js", b"/room.html", b"/index.html"):
            check(http_get(relay, path)[0].startswith(b"HTTP/1.1 200 "), "GET %s" % path)
        check(http_get(relay, b"/nothing")[0].startswith(b"HTTP/1.1 404 "), "GET /nothing")

        def upgrade(path):
            s = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
            key = base64.b64encode(os.urandom(16))
            s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + ua + b"Upgrade: websocket\r\n"
                      b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                      b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
            return s

        # No such stream, or no name: 404, and the stream goes on.
        for path in (b"/stream/room/nobody", b"/stream", b"/stream/../etc"):
            r = read_all(upgrade(path))
            check(r.startswith(b"HTTP/1.1 404 "), "upgrade to %s: %r" % (path, r[:100]))
        # The stream's WebSocket: 101, then its records for a masked HELLO.
        body = struct.pack(">HHHB", 1, 0, 0, 7) + b"browser" + b"\x00"
        hello = struct.pack(">BBH", 1, 1, len(body)) + body
        s = upgrade(b"/stream/room/alice")
        s.sendall(ws_masked(hello))
        s.settimeout(5)
        data = b""
        while len(data) < 20000:
            c = s.recv(65536)
            check(c, "the browser's stream ended early: %r" % data[:200])
            data += c
        s.close()
        check(data.startswith(b"HTTP/1.1 101 "), "no 101: %r" % data[:100])
        # The first message after the head: STREAM_INFO (kind 2).
        i = data.find(b"\r\n\r\n") + 4
        check(data[i] == 0x82 and data[i + 2:i + 4] == b"\x01\x02", "first message: %r" % data[i:i + 8])
        # Heads that never end, more than the door holds at once: the door
        # refuses the excess, drops the rest at its timeout, and serves
        # pages again after; the viewer streams throughout.
        slow = []
        for _ in range(80):
            c = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
            c.sendall(b"GET /streams HTTP/1.1\r\nHost: x\r\n")
            slow.append(c)
        t0 = time.monotonic()
        answered = sum(1 for c in slow if read_all(c, timeout=8))
        waited = time.monotonic() - t0
        check(answered == len(slow), "%d of %d slow heads never ended by the relay" % (len(slow) - answered,
                                                                                      len(slow)))
        print("80 heads that never end: all closed by the relay within %.1f s" % waited)
        for c in slow:
            c.close()
        head, _ = http_get(relay, b"/streams")
        check(head.startswith(b"HTTP/1.1 200 "), "GET /streams after the slow heads: %r" % head[:100])
        check(viewer.wait() == 0, "the viewer failed: %s" % viewer.stderr)
    finally:
        stop_all(pub, relay)
    shown_well(viewer, 300)
    log = relay.log()
    check("no stream named room/nobody" in log, "the refusal is not logged: %s" % log[-2000:])
    check(re.search(r"web requests [1-9]", log), "web requests not counted: %s" % log[-600:])


TESTS = {f.__name__: f for f in [relay_two_viewers, relay_unknown_name, relay_impostor, relay_slow_subscriber,
                                 relay_garbage_publisher, relay_late_joiner, relay_tree, relay_web,
                                 relay_tree_reconnect, relay_tls, relay_joins_close_together,
                                 relay_publisher_audio]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
