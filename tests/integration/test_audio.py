#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The audio track on loopback: real pps-server (test source: ticks in step
with a flash) and pps-client (audio played on the clock, measured, written to
a WAV file)."""
import select
import socket
import struct
import sys
import time
import wave

from harness import Client, Server, check, record, run
from ppslab.records import split_records

KIND_HELLO, KIND_STREAM_INFO, KIND_BYE, KIND_AUDIO_FRAME = 1, 2, 8, 12
HELLO_AUDIO, HELLO_AUDIO_ONLY = 0x0002, 0x0004


def raw_hello(flags, name=b"raw"):
    return record(KIND_HELLO, struct.pack(">HHHB", 1, flags, 0, len(name)) + name + b"\x00")


def raw_session(address, flags, seconds=2.0):
    """A raw client: HELLO with @flags, then every record for @seconds (or
    until the server closes)."""
    host, port = address.rsplit(":", 1)
    data = b""
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(raw_hello(flags))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
    return split_records(data)


def audio_stream(transport):
    def test(build, workdir):
        """6 s with audio on the given transport (connection: the client's two
        audio connections by default, lip sync on: no pool): nearly every slot played,
        mouth-to-ear within a loopback's reach, the log and the summary
        agree, the server counts what it sent."""
        srv = Server(build, workdir, "audio.transport=" + transport)
        try:
            c = Client(build, workdir, srv.address, "audio.output=none", duration=6)
            rc = c.wait()
            check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
        finally:
            srv.stop()
        s = c.summary()
        slots = c.events("audio")
        check(s.get("audio_slots", 0) >= 200, "only %s audio slots in 6 s" % s.get("audio_slots"))
        check(s["audio_slots"] == len(slots), "summary %d slots, log %d" % (s["audio_slots"], len(slots)))
        check(s["audio_played_pct"] >= 95, "%.1f%% of the audio played" % s["audio_played_pct"])
        seqs = [e["seq"] for e in slots]
        # An inserted slot (the delay growing) is about the frame that follows it.
        check(all(b >= a for a, b in zip(seqs, seqs[1:])), "audio slots out of order")
        # Loopback: a 20 ms frame, the decoder's delay, a small playout delay,
        # and lip sync waiting for the picture (a 2-frame window).
        check(s["mouth_to_ear_p50_ms"] <= 200, "mouth-to-ear p50 %.1f ms" % s["mouth_to_ear_p50_ms"])
        check(s["av_skew_abs_p95_ms"] is not None and s["av_skew_abs_p95_ms"] <= 125,
              "A/V skew |p95| %s ms" % s["av_skew_abs_p95_ms"])
        st = srv.stats()
        check(st.get("audio_frames", 0) >= 250, "server encoded %s audio frames" % st.get("audio_frames"))
        only = srv.log().count("audio only)")
        # Two by default (the client pools only with lip sync off), each
        # carrying every frame.
        check(only == (2 if transport == "connection" else 0),
              "%d audio-only connections with transport %s:\n%s" % (only, transport, srv.log()[-1500:]))
        print("%s: %d slots, %.1f%% played, mouth-to-ear p50/p95 %.1f/%.1f ms, delay std %.1f ms, "
              "|skew| p95 %.1f ms" % (transport, s["audio_slots"], s["audio_played_pct"],
                                       s["mouth_to_ear_p50_ms"], s["mouth_to_ear_p95_ms"],
                                       s["audio_delay_std_ms"], s["av_skew_abs_p95_ms"]))
    test.__name__ = "audio_stream_" + transport
    return test


def audio_wav_ticks(build, workdir):
    """The WAV the client writes holds the test source's ticks, one a second
    (to within a frame), and the log's slots line up with it."""
    wav_path = workdir + "/played.wav"
    srv = Server(build, workdir)
    try:
        c = Client(build, workdir, srv.address, "audio.output=none", "audio.wav=" + wav_path, duration=5)
        rc = c.wait()
        check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
    finally:
        srv.stop()
    with wave.open(wav_path) as w:
        check(w.getframerate() == 48000 and w.getnchannels() == 1 and w.getsampwidth() == 2,
              "WAV %d Hz, %d channels, %d-byte samples" % (w.getframerate(), w.getnchannels(), w.getsampwidth()))
        n = w.getnframes()
        pcm = struct.unpack("<%dh" % n, w.readframes(n))
    slots = c.events("audio")
    check(abs(n - 960 * len(slots)) <= 960, "WAV %d samples for %d slots" % (n, len(slots)))
    # Tick onsets: loud after >= 100 ms of quiet. Not before the WAV had
    # 100 ms of quiet: it may start in the middle of a tick.
    onsets, quiet = [], 0
    for i, v in enumerate(pcm):
        if abs(v) >= 1000:
            if quiet >= 4800:
                onsets.append(i)
            quiet = 0
        else:
            quiet += 1
    check(len(onsets) >= 3, "%d ticks in %.1f s of audio" % (len(onsets), n / 48000))
    gaps = [(b - a) / 48.0 for a, b in zip(onsets, onsets[1:])]
    check(all(abs(g - 1000) <= 25 for g in gaps), "ticks %s ms apart, want 1000 +- 25" % gaps)
    print("%d samples, ticks %s ms apart" % (n, ["%.1f" % g for g in gaps]))


def audio_old_client(build, workdir):
    """A client that does not ask for audio gets the first revision's 28-byte
    STREAM_INFO and no audio; one that asks (audio in the video's connection)
    gets the 36-byte record and audio frames."""
    srv = Server(build, workdir, "audio.transport=window")
    try:
        old = raw_session(srv.address, 0)
        new = raw_session(srv.address, HELLO_AUDIO)
    finally:
        srv.stop()
    info = [b for k, b in old if k == KIND_STREAM_INFO]
    check(len(info) == 1 and len(info[0]) == 28, "old client: STREAM_INFO %s" % [len(b) for b in info])
    check(not any(k == KIND_AUDIO_FRAME for k, _ in old), "old client was sent audio")
    info = [b for k, b in new if k == KIND_STREAM_INFO]
    check(len(info) == 1 and len(info[0]) == 36, "audio client: STREAM_INFO %s" % [len(b) for b in info])
    codec, channels, transport, _, frame_us, rate = struct.unpack(">BBBBHH", info[0][28:])
    check((codec, channels, transport, frame_us, rate) == (1, 1, 0, 20000, 48000),
          "audio track %s" % ((codec, channels, transport, frame_us, rate),))
    frames = [b for k, b in new if k == KIND_AUDIO_FRAME]
    check(len(frames) >= 40, "%d audio frames in 2 s" % len(frames))
    seqs = [struct.unpack(">I", b[:4])[0] for b in frames]
    check(all(b == a + 1 for a, b in zip(seqs, seqs[1:])), "audio seq not consecutive on loopback")


def audio_only_without_track(build, workdir):
    """An audio-only connection to a stream without audio is refused with a
    line that says so; a video client of the same server streams."""
    srv = Server(build, workdir, "audio.source=off")
    try:
        recs = raw_session(srv.address, HELLO_AUDIO | HELLO_AUDIO_ONLY, seconds=2)
        c = Client(build, workdir, srv.address, "audio.output=none", duration=3)
        rc = c.wait()
    finally:
        srv.stop()
    byes = [b for k, b in recs if k == KIND_BYE]
    check(len(byes) == 1 and b"no audio track" in byes[0], "audio-only refusal: %s" % byes)
    check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
    s = c.summary()
    check(s["frames_shown"] >= 60 and "audio_slots" not in s,
          "video client: %d frames, audio fields %s" % (s["frames_shown"], "audio_slots" in s))


def audio_pool(build, workdir):
    """Four audio connections of one pool and one outside it, for 3 s: the
    server announces up to two copies; on loopback (no retransmissions: a
    clean path takes one copy) each frame reaches exactly one of the pool,
    the pool's connections take turns, and the one outside the pool gets
    every frame."""
    pool_flag = 0x0020
    srv = Server(build, workdir, "audio.transport=connection", "audio.copies=2")
    host, port = srv.address.rsplit(":", 1)
    socks, data = [], []
    try:
        for i in range(5):
            sock = socket.create_connection((host, int(port)), timeout=5)
            hello = struct.pack(">HHHB", 1, HELLO_AUDIO | HELLO_AUDIO_ONLY | (pool_flag if i < 4 else 0), 0, 0) + b"\x00"
            if i < 4:
                hello += struct.pack(">I", 0x5eed)
            sock.sendall(record(KIND_HELLO, hello))
            sock.setblocking(False)
            socks.append(sock)
            data.append(b"")
        end = time.monotonic() + 3
        while time.monotonic() < end:
            ready, _, _ = select.select(socks, [], [], 0.1)
            for sock in ready:
                chunk = sock.recv(65536)
                check(chunk, "the server closed an audio connection")
                data[socks.index(sock)] += chunk
    finally:
        for sock in socks:
            sock.close()
        srv.stop()
    seqs = []
    for i, d in enumerate(data):
        recs = split_records(d)
        info = [b for k, b in recs if k == KIND_STREAM_INFO]
        check(len(info) == 1 and len(info[0]) == 36, "connection %d: STREAM_INFO %s" % (i, [len(b) for b in info]))
        copies = info[0][31]
        check(copies == 2, "connection %d: audio_copies %d, expected 2" % (i, copies))
        seqs.append([struct.unpack(">I", b[:4])[0] for k, b in recs if k == KIND_AUDIO_FRAME])
    outside = seqs[4]
    check(len(outside) >= 100 and all(b == a + 1 for a, b in zip(outside, outside[1:])),
          "outside the pool: %d frames, not every one" % len(outside))
    # The span every pooled connection was there for.
    first = max(min(s) for s in seqs[:4] if s) + 2
    last = min(max(s) for s in seqs[:4] if s) - 2
    check(last - first >= 50, "the pool overlapped for %d frames only" % (last - first))
    for seq in range(first, last + 1):
        holders = sum(seq in s for s in seqs[:4])
        check(holders == 1, "frame %d reached %d of the pool's connections, expected 1" % (seq, holders))
    for i, s in enumerate(seqs[:4]):
        share = sum(first <= q <= last for q in s) / (last - first + 1)
        check(0.15 <= share <= 0.35, "pooled connection %d carried %.0f%% of the frames" % (i, 100 * share))


def audio_pool_client(build, workdir):
    """pps-client with lip sync off takes the server's pool: twelve audio
    connections, each frame on one of them on loopback (the server's JSON:
    every frame sent about once over the pool, not twelve times), nearly
    every slot played."""
    srv = Server(build, workdir)
    try:
        c = Client(build, workdir, srv.address, "audio.output=none", "audio.lip_sync=false", duration=5)
        rc = c.wait()
        check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
    finally:
        srv.stop()
    st = srv.stats()
    only = srv.log().count("audio only)")
    check(only == 12, "%d audio-only connections, expected a pool of 12" % only)
    s = c.summary()
    check(s["audio_played_pct"] >= 95, "%.1f%% of the audio played" % s["audio_played_pct"])
    sent = sum(cl.get("audio_sent", 0) for cl in st.get("clients", []) if cl.get("audio_only"))
    frames = st.get("audio_frames", 0)
    check(frames >= 200 and sent <= 1.2 * frames,
          "the pool carried %d frames for %d encoded (one copy each on a clean path)" % (sent, frames))


TESTS = {f.__name__: f for f in [audio_stream("connection"), audio_stream("window"), audio_wav_ticks,
                                 audio_old_client, audio_only_without_track, audio_pool, audio_pool_client]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
