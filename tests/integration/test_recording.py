#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Recordings keep real time: pps-client's y4m and Matroska --output and
pps-server's --record, through a freeze (the server stopped with SIGSTOP
for 1.5 s), read by ffprobe, last as long as the run did within one frame
time. The run's time is each program's own: the client's first and last
frame shown in its log, the server's "duration_s" in its --stats-json. Also:
an unwritable --record fails before the server listens, and a file source
is sent at its own size with a line that says so. Waits are for events;
the one sleep is the freeze itself."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import SKIP, Client, Server, check, run, wait_until

FREEZE_S = 1.5
CLIENT_S = 6
# Raw frames the server's capture holds before the encoder (source.queue_frames'
# default): those it holds when it stops never reach the recording (nor any
# client).
QUEUE_FRAMES = 8


def ffprobe(path):
    """(duration in s, [streams]) as ffprobe reads @path."""
    r = subprocess.run(["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams", path],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "ffprobe cannot read %s: %s" % (path, r.stderr[-500:]))
    info = json.loads(r.stdout)
    return float(info["format"]["duration"]), info["streams"]


def need_ffmpeg():
    if not shutil.which("ffprobe") or not shutil.which("ffmpeg"):
        print("SKIP: ffmpeg/ffprobe not installed (scripts/install-deps.sh)")
        sys.exit(SKIP)


def has_shown(client):
    """Whether the client's log (as far as written) has a frame shown."""
    try:
        with open(client.log_path) as f:
            return '"shown":true' in f.read()
    except FileNotFoundError:
        return False


def shown_span_s(client):
    """The client's run as its log tells: first frame shown to last."""
    shown = [e["display_us"] for e in client.events("frame") if e.get("shown")]
    check(len(shown) > 30, "only %d frames shown" % len(shown))
    return (max(shown) - min(shown)) / 1e6


def y4m_frames(path):
    """(header line, frames, repeats) of a y4m file."""
    with open(path, "rb") as f:
        header = f.readline().decode()
        fields = dict((t[0], t[1:]) for t in header.split()[1:])
        size = int(fields["W"]) * int(fields["H"]) * 3 // 2
        frames = repeats = 0
        while True:
            line = f.readline()
            if not line:
                break
            check(line.startswith(b"FRAME"), "y4m: %r where a frame header belongs" % line[:20])
            frames += 1
            repeats += b"Xrepeat" in line
            f.seek(size, os.SEEK_CUR)
    return header, frames, repeats


def recording_real_time(build, workdir):
    need_ffmpeg()
    record = os.path.join(workdir, "server.mkv")
    y4m = os.path.join(workdir, "client.y4m")
    mkv = os.path.join(workdir, "client.mkv")
    srv = Server(build, workdir, extra=("--record", record))
    try:
        clients = [Client(build, workdir, srv.address, duration=CLIENT_S, name=n, extra=("--output", out))
                   for n, out in (("y4m", y4m), ("mkv", mkv))]
        for c in clients:
            wait_until(lambda: has_shown(c), "a frame shown", timeout_s=30, proc=c.proc)
        srv.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)  # the freeze itself, not a wait for something
        finally:
            srv.proc.send_signal(signal.SIGCONT)
        for c in clients:
            check(c.wait(timeout=60) == 0, "client: exit %d: %s" % (c.returncode, c.stderr[-1000:]))
    finally:
        rc = srv.stop(signal.SIGINT)
    check(rc == 0, "server: exit %d: %s" % (rc, srv.log()[-1000:]))
    fps = 30.0
    frame_s = 1 / fps
    margin_s = frame_s + 0.002  # one frame time, and the containers' millisecond

    for c, path in zip(clients, (y4m, mkv)):
        check(c.summary()["freeze_longest_ms"] >= 1000 * FREEZE_S * 0.8,
              "%s: no freeze seen: %s" % (path, c.summary()["freeze_longest_ms"]))
        run_s = shown_span_s(c) + frame_s  # the last frame lasts a frame time
        duration, streams = ffprobe(path)
        check(len(streams) == 1 and streams[0]["codec_type"] == "video", "%s: %s" % (path, streams))
        check(abs(duration - run_s) <= margin_s,
              "%s lasts %.3f s, the run %.3f s (first frame shown to last)" % (path, duration, run_s))
        print("%s: %.3f s, run %.3f s" % (os.path.basename(path), duration, run_s))
        check("--output %s: " % path in c.stderr, "no --output line: %s" % c.stderr[-500:])

    header, frames, repeats = y4m_frames(y4m)
    check(" F30:1 " in header, "y4m header: %r" % header)
    check(repeats >= fps * FREEZE_S * 0.8, "y4m: %d repeats through a %.1f s freeze" % (repeats, FREEZE_S))
    _, streams = ffprobe(mkv)
    check(streams[0]["codec_name"] == "rawvideo", "client.mkv: %s" % streams[0]["codec_name"])

    duration, streams = ffprobe(record)
    check([s["codec_name"] for s in streams] == ["h264", "h264"], "server.mkv: %s" % streams)
    check(streams[0]["width"] < streams[1]["width"], "server.mkv: the base first: %s" % streams)
    # The server's run: its "duration_s", first frame to stop. The file ends at
    # the last frame encoded: the queue's frames and the one being encoded
    # at the stop are not in it.
    run_s = srv.stats()["duration_s"]
    check(abs(duration - run_s) <= (QUEUE_FRAMES + 1) * frame_s + margin_s,
          "server.mkv lasts %.3f s, the server ran %.3f s" % (duration, run_s))
    print("server.mkv: %.3f s, server ran %.3f s" % (duration, run_s))
    check("--record %s: " % record in srv.log(), "no --record line: %s" % srv.log()[-500:])
    # The base layer decodes as a plain H.264 stream.
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", record, "-map", "0:0", "-f", "null", "-"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "rror" not in r.stderr, "the base does not decode: %s" % r.stderr[-500:])


def record_unwritable(build, workdir):
    """An unwritable --record is said before the server listens: exit 1."""
    path = os.path.join(workdir, "missing", "server.mkv")
    p = subprocess.run([os.path.join(build, "server", "pps-server"), "--listen", "127.0.0.1:0",
                        "--record", path], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1, "exit %d: %s" % (p.returncode, p.stderr))
    check("--record %s: No such file or directory" % path in p.stderr, p.stderr)
    check("listening" not in p.stderr, p.stderr)


def file_source_size(build, workdir):
    """A file source goes at its own size and rate, with one line that says so."""
    need_ffmpeg()
    clip = os.path.join(workdir, "clip.mp4")
    r = subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25",
                        "-f", "lavfi", "-i", "sine=frequency=440", "-t", "2", "-pix_fmt", "yuv420p",
                        "-c:v", "libx264", "-c:a", "aac", "-shortest", clip], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, "ffmpeg cannot make the clip: %s" % r.stderr[-500:])
    srv = Server(build, workdir, "source.type=file", "source.file=" + clip, "audio.source=off")
    try:
        srv.wait_for_log("source: clip.mp4 is 320x240 at 25 fps; sent as is; its sound is dropped")
        c = Client(build, workdir, srv.address, duration=2)
        check(c.wait(timeout=60) == 0, c.stderr[-500:])
        check(": 320x240@25," in c.stderr, c.stderr[-500:])
    finally:
        srv.stop()
    srv = Server(build, workdir, "source.type=file", "source.file=" + clip, "source.width=640",
                 "source.height=480")
    try:
        srv.wait_for_log("source: clip.mp4 is 320x240 at 25 fps; scaled to 640x480 as source.width/height say")
    finally:
        srv.stop()


TESTS = {f.__name__: f for f in [recording_real_time, record_unwritable, file_source_size]}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv))
