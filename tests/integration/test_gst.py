#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The GStreamer plugin on loopback: docs/GSTREAMER.md's pipelines ("Use it from
GStreamer"), run headless with GST_PLUGIN_PATH at the build tree, against the
real pps-server and pps-client and against each other. Frame counts and
latency come from the logs (ppssrc's log-file is the client's JSON Lines);
the audio pads' ticks from the samples (ppssrc's through GStreamer's Python
bindings, a pps-client's from its WAV file)."""
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import wave

from harness import SKIP, Client, Failure, Server, check, percentile, run, wait_until
from ppslab.programs import Build  # Build.gst_env: the plugin in the build tree, a registry of its own

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "GSTREAMER.md")
DOC_ADDRESS = "127.0.0.1:7400"
DOC_RELAY = "127.0.0.1:7500"  # the relay of the pipelines that name a stream
FRAME_MS = 1000.0 / 30


def readme_pipelines():
    """The gst-launch-1.0 lines of docs/GSTREAMER.md's "Use it from GStreamer", by what they do."""
    text = open(DOC).read()
    section = text.split("## Use it from GStreamer", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in section.splitlines() if ln.strip().startswith("gst-launch-1.0")]
    found = {}
    for ln in lines:
        audio = " s.audio" in ln
        if "ppssink publish=" in ln:
            found["publish"] = ln
        elif "ppssink" in ln:
            found["serve_audio" if audio else "serve"] = ln
        elif "playbin uri=pps://" in ln:
            found["play_uri"] = ln
        elif "filesink" in ln:
            found["record"] = ln
        elif "ppssrc location=%s/" % DOC_RELAY in ln:
            found["view_relay"] = ln
        elif "ppssrc" in ln:
            found["view_audio" if audio else "view"] = ln
    check(set(found) == {"serve", "record", "view", "serve_audio", "view_audio", "view_relay",
                         "play_uri", "publish"},
          "docs/GSTREAMER.md's pipelines section lacks a pipeline: %s" % sorted(found))
    return found


class Launch:
    """gst-launch-1.0 running one pipeline (a docs/GSTREAMER.md line, adapted)."""

    def __init__(self, build, workdir, line, name):
        args = shlex.split(line)
        check(args[0] == "gst-launch-1.0", "not a gst-launch line: " + line)
        # -m prints bus messages (ppssink's port, ppssrc's summary); -v the
        # last-message of a fakesink silent=false (each buffer's PTS).
        args = [args[0], "-m", "-v"] + args[1:]
        env = Build(build).gst_env()
        env.pop("DISPLAY", None)
        env.pop("WAYLAND_DISPLAY", None)
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        self.out = open(self.out_path, "w")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=self.err, env=env)
        self.name = name

    def text(self):
        self.out.flush()
        with open(self.out_path) as f:
            out = f.read()
        with open(self.err_path) as f:
            return out + f.read()

    def wait_for(self, pattern, timeout=30):
        """Waits for a line matching @pattern (the event); returns the match."""
        return wait_until(lambda: re.search(pattern, self.text()),
                          lambda: "%s to print '%s':\n%s" % (self.name, pattern,
                                                             self.text()[-3000:]),
                          timeout_s=timeout, proc=self.proc)

    def wait(self, timeout=60):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure("%s did not end:\n%s" % (self.name, self.text()[-3000:]))
        return self.proc.returncode

    def interrupt(self):
        """Ctrl-C: with -e, gst-launch sends EOS and waits for it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()


def headless(line):
    """The display sink becomes a fakesink that prints each buffer."""
    return line.replace("autovideosink", "fakesink sync=true silent=false")


def ppssrc_args(line, address, log, buffers):
    return line.replace("ppssrc location=" + DOC_ADDRESS,
                        "ppssrc location=%s log-file=%s num-buffers=%d" % (address, log, buffers))


def ppssink_args(line, buffers=None):
    line = line.replace("ppssink listen=" + DOC_ADDRESS, "ppssink listen=127.0.0.1:0")
    if buffers:
        line = line.replace("videotestsrc ", "videotestsrc num-buffers=%d " % buffers, 1)
    return line


def sink_port(launch):
    m = launch.wait_for(r"pps-listening.*port=\(uint\)(\d+)")
    return int(m.group(1))


def jsonl(path):
    import json
    with open(path) as f:
        return [json.loads(line) for line in f]


def ppssrc_summary(log):
    events = jsonl(log)
    summaries = [e for e in events if e["type"] == "summary"]
    check(len(summaries) == 1, "ppssrc log: %d summary events" % len(summaries))
    shown = [e for e in events if e["type"] == "frame" and e["shown"]]
    reasons = {}
    for e in events:
        if e["type"] == "frame" and not e["shown"]:
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    print("ppssrc frames not shown: %s" % (reasons or "none"))
    return summaries[0], shown


def buffer_pts_ms(text):
    """PTS of each buffer a fakesink silent=false printed, in milliseconds."""
    out = []
    for h, m, s in re.findall(r"chain .*?pts: (\d+):(\d+):(\d+\.\d+)", text):
        out.append((int(h) * 3600 + int(m) * 60 + float(s)) * 1000)
    return out


def check_timestamps(pts, what):
    check(len(pts) >= 60, "%s: only %d buffers printed" % (what, len(pts)))
    steps = [b - a for a, b in zip(pts, pts[1:])]
    check(all(s > 0 for s in steps), "%s: PTS not increasing" % what)
    median = percentile(steps, 50)
    # Each frame stamped at its own display time: the frame interval.
    check(0.5 * FRAME_MS <= median <= 2 * FRAME_MS,
          "%s: median PTS step %.1f ms, the stream's frame interval is %.1f" % (what, median,
                                                                                 FRAME_MS))


def gst_server_to_ppssrc(build, workdir):
    """pps-server -> the documented viewing pipeline: 150 buffers with increasing
    PTS a frame apart, >= 70% of the frames shown (the rest is what a busy
    machine's server cut at its deadline, accounted), and its frame latency
    within 1.5x + 30 ms of a pps-client on the same server at the same time
    (same policy)."""
    lines = readme_pipelines()
    srv = Server(build, workdir, "source.pattern=smpte")
    log = os.path.join(workdir, "ppssrc.jsonl")
    try:
        line = ppssrc_args(headless(lines["view"]), srv.address, log, 150)
        view = Launch(build, workdir, line, "view")
        client = Client(build, workdir, srv.address, duration=5)
        rc = view.wait()
        check(rc == 0, "gst-launch exit %d:\n%s" % (rc, view.text()[-3000:]))
        check(client.wait() == 0, client.stderr)
        text = view.text()
    finally:
        srv.stop()
        if 'view' in locals():
            view.stop()
    s, shown = ppssrc_summary(log)
    check_timestamps(buffer_pts_ms(text), "ppssrc")
    # gst-launch -m shows the figures while the stream plays (the summary at
    # stop comes after it stopped watching the bus): a pps-status a second.
    status = re.findall(r"pps-status, latency-p50-ms=\(double\)[0-9.]+.*quality-layers=\(uint\)(\d)", text)
    check(len(status) >= 3 and max(int(q) for q in status) >= 1,
          "%d pps-status messages in 5 s:\n%s" % (len(status), text[-2000:]))
    check(s["frames_shown"] >= 150, "%d frames shown" % s["frames_shown"])
    check(s["frames_shown_pct"] >= 70, "%.1f%% of frames shown" % s["frames_shown_pct"])
    c = Client.summary(client)
    check(s["frame_latency_p50_ms"] <= 1.5 * c["frame_latency_p50_ms"] + 30,
          "ppssrc p50 %.1f ms, pps-client p50 %.1f ms" % (s["frame_latency_p50_ms"],
                                                          c["frame_latency_p50_ms"]))
    print("ppssrc: %d frames shown (%.1f%%), p50 %.1f ms p95 %.1f ms; pps-client p50 %.1f ms"
          % (s["frames_shown"], s["frames_shown_pct"], s["frame_latency_p50_ms"],
             s["frame_latency_p95_ms"], c["frame_latency_p50_ms"]))


def gst_ppssrc_no_server(build, workdir):
    """ppssrc to a port nobody listens on: an error naming the address."""
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    lines = readme_pipelines()
    line = headless(lines["view"]).replace(DOC_ADDRESS, "127.0.0.1:%d" % port)
    view = Launch(build, workdir, line, "view")
    try:
        rc = view.wait()
        text = view.text()
    finally:
        view.stop()
    check(rc != 0, "gst-launch exit 0 without a server")
    check("no stream from 127.0.0.1:%d" % port in text, "no clear error:\n" + text[-2000:])


def gst_ppssink_to_client(build, workdir):
    """The documented serving pipeline -> pps-client: the client's stream has the
    caps' size, >= 70% of its frames shown, frame latency p50 below twice the
    stream's latency budget (asap playout; the sender cuts at the budget)."""
    lines = readme_pipelines()
    serve = Launch(build, workdir, ppssink_args(lines["serve"]), "serve")
    try:
        port = sink_port(serve)
        client = Client(build, workdir, "127.0.0.1:%d" % port, "playout.policy=asap",
                        duration=5)
        rc = client.wait()
        check(rc == 0, "client exit %d: %s\n%s" % (rc, client.stderr, serve.text()[-2000:]))
        check(serve.interrupt() == 0, "gst-launch failed:\n" + serve.text()[-3000:])
    finally:
        serve.stop()
    s = client.summary()
    check("640x480@30" in client.stderr, "stream info: " + client.stderr)
    check(s["frames_shown"] >= 100, "%d frames shown" % s["frames_shown"])
    check(s["frames_shown_pct"] >= 70, "%.1f%% shown" % s["frames_shown_pct"])
    check(s["frame_latency_p50_ms"] <= 500, "p50 %.1f ms" % s["frame_latency_p50_ms"])
    print("ppssink -> pps-client: %d frames shown (%.1f%%), p50 %.1f ms p95 %.1f ms"
          % (s["frames_shown"], s["frames_shown_pct"], s["frame_latency_p50_ms"],
             s["frame_latency_p95_ms"]))


def gst_ppssink_to_ppssrc(build, workdir):
    """The documented serving pipeline -> its recording pipeline: 120 frames
    recorded into an MP4 that demuxes to 120 video frames, >= 70% of the
    stream's frames shown (two x264 encoders and a decoder share the cores
    here: the server cuts what misses its deadline, and that is counted)."""
    lines = readme_pipelines()
    serve = Launch(build, workdir, ppssink_args(lines["serve"]), "serve")
    log = os.path.join(workdir, "ppssrc.jsonl")
    mp4 = os.path.join(workdir, "recording.mp4")
    try:
        port = sink_port(serve)
        line = ppssrc_args(lines["record"], "127.0.0.1:%d" % port, log, 120)
        line = line.replace("location=recording.mp4", "location=" + mp4)
        record = Launch(build, workdir, line, "record")
        rc = record.wait()
        check(rc == 0, "recording exit %d:\n%s" % (rc, record.text()[-3000:]))
        check(serve.interrupt() == 0, "serving gst-launch failed:\n" + serve.text()[-3000:])
    finally:
        serve.stop()
        if 'record' in locals():
            record.stop()
    s, shown = ppssrc_summary(log)
    check(s["frames_shown"] >= 120, "%d frames shown" % s["frames_shown"])
    check(s["frames_shown_pct"] >= 70, "%.1f%% shown" % s["frames_shown_pct"])
    # The file holds the frames: demux it and count them.
    count = Launch(build, workdir,
                   "gst-launch-1.0 filesrc location=%s ! qtdemux ! fakesink silent=false" % mp4,
                   "count")
    try:
        check(count.wait() == 0, "cannot demux the recording:\n" + count.text()[-2000:])
        frames = len(re.findall(r"chain\s+\*", count.text()))
    finally:
        count.stop()
    check(frames == 120, "the recording has %d frames, want 120" % frames)
    print("ppssink -> ppssrc: %d frames shown (%.1f%%), p50 %.1f ms p95 %.1f ms; %d recorded"
          % (s["frames_shown"], s["frames_shown_pct"], s["frame_latency_p50_ms"],
             s["frame_latency_p95_ms"], frames))


def gst_inspect(build, workdir):
    """gst-inspect-1.0 documents both elements and their configuration keys."""
    env = Build(build).gst_env()
    elements = [("ppssrc", ["location", "policy", "tolerance-ms", "log-file"])]
    # ppssink is built with the server library (meson sets this when it is).
    if os.environ.get("PPS_GST_HAVE_SINK") == "1":
        elements.append(("ppssink", ["listen", "window-frames", "latency-budget-ms",
                                     "transport-mode", "max-clients", "port", "publish"]))
    for element, keys in elements:
        p = subprocess.run(["gst-inspect-1.0", element], env=env, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, "gst-inspect-1.0 %s: %s" % (element, p.stderr))
        for k in keys:
            check(re.search(r"^\s+%s\s*:" % re.escape(k), p.stdout, re.M),
                  "gst-inspect-1.0 %s lacks %s" % (element, k))
        if element == "ppssrc":
            check(re.search(r"Supported URI protocols:\s+pps\s", p.stdout),
                  "gst-inspect-1.0 ppssrc: no pps:// URI handler")
        # A property's text speaks of the element: no server source type in ppssink's.
        check("type=" not in p.stdout, "gst-inspect-1.0 %s speaks of a source type: %s" % (
            element, [ln.strip() for ln in p.stdout.splitlines() if "type=" in ln]))


def gst_bad_property(build, workdir):
    """A value the configuration refuses (an address without a port, a URI)
    stops the pipeline with the loader's own message, instead of running on
    the default; the message names the property as the pipeline spells it,
    not the configuration key behind it."""
    for value in ("nowhere", "pps://127.0.0.1"):
        view = Launch(build, workdir, "gst-launch-1.0 ppssrc location=%s ! fakesink" % value, "bad")
        try:
            rc = view.wait()
            text = view.text()
        finally:
            view.stop()
        check(rc != 0, "gst-launch exit 0 with location=%s" % value)
        check("location=%s: must be HOST:PORT" % value in text,
              "no message naming the property:\n" + text[-2000:])
        check("[client] server" not in text and "--set" not in text,
              "the message names the internal key:\n" + text[-2000:])


# ---- audio ---------------------------------------------------------------------------

TICK_LEVEL = 1000      # |sample| at or above: a tick (codec/pps-audio.h, PPS_AUDIO_TICK_LEVEL)
TICK_QUIET = 4800      # after at least 100 ms below it
AUDIO_RATE = 48000


def tick_onsets(pieces):
    """Tick onsets in a stream cut into pieces (sequences of samples): the
    first sample at or above TICK_LEVEL after >= 100 ms below it (the stream's
    first 100 ms are never an onset, as in pps_audio_find_ticks()), as
    (piece, sample) indices."""
    onsets, quiet = [], 0
    for k, samples in enumerate(pieces):
        for i, v in enumerate(samples):
            if abs(v) >= TICK_LEVEL:
                if quiet >= TICK_QUIET:
                    onsets.append((k, i))
                quiet = 0
            else:
                quiet += 1
    return onsets


def check_tick_gaps(onsets_ms, what):
    check(len(onsets_ms) >= 4, "%s: %d ticks" % (what, len(onsets_ms)))
    gaps = [b - a for a, b in zip(onsets_ms, onsets_ms[1:])]
    check(all(abs(g - 1000) <= 25 for g in gaps),
          "%s: ticks %s ms apart, want 1000 +- 25" % (what, ["%.1f" % g for g in gaps]))
    return gaps


def shows_flash(y, stride, width, height):
    """codec/pps-timecode.c's pps_timecode_read_flash(): the bottom-right
    patch's centre bright, its border's corners dark."""
    side = min(64, width // 4, height // 4) & ~1
    x0, y0, edge, mid = width - side, height - side, side // 8, (16 + 235) // 2

    def mean(x, yy, n):
        return sum(sum(y[(yy + r) * stride + x:(yy + r) * stride + x + n]) for r in range(n)) / (n * n)

    return (mean(x0 + side * 3 // 8, y0 + side * 3 // 8, side // 4) > mid and
            all(mean(x, yy, edge) < mid for x, yy in ((x0, y0), (x0 + side - edge, y0),
                                                     (x0, y0 + side - edge),
                                                     (x0 + side - edge, y0 + side - edge))))


def gst_server_to_ppssrc_audio(build, workdir):
    """pps-server (the test source: a tick a second, a flash on the frame of
    each tick) -> the documented viewing pipeline with its audio pad, run in
    this process with appsinks. Every audio buffer and frame is stamped with
    the running time of its play or display time in ppssrc's log (to 2 ms: one
    mapping for both); the ticks are 1000 +- 25 ms apart (in capture time: the
    player's lip sync moves the delay at talkspurts, a tick's start, with the
    picture's latency); and each tick is within -45 / +125 ms of the frame
    showing its flash in running time (ITU-R BT.1359: audio at most 45 ms
    early, 125 ms late), less a frame for the flash frame's own offset of 0 to
    1 frame after its tick."""
    try:
        import gi
        gi.require_version("Gst", "1.0")
        from gi.repository import Gst
    except (ImportError, ValueError) as e:
        print("GStreamer's Python bindings: %s" % e)
        sys.exit(SKIP)
    lines = readme_pipelines()
    os.environ.update(Build(build).gst_env())
    Gst.init(None)
    srv = Server(build, workdir)
    log = os.path.join(workdir, "ppssrc.jsonl")
    line = ppssrc_args(lines["view_audio"], srv.address, log, 210)
    line = line.replace("autovideosink", "video/x-raw,format=I420 ! appsink name=video_out "
                        "sync=false emit-signals=true")
    line = line.replace("autoaudiosink", "audio/x-raw,format=S16LE,rate=48000,channels=1 ! "
                        "appsink name=audio_out sync=false emit-signals=true")
    check(line.startswith("gst-launch-1.0 "), line)
    frames, audio = [], []

    def on_video(sink):
        sample = sink.emit("pull-sample")
        caps = sample.get_caps().get_structure(0)
        width, height = caps.get_value("width"), caps.get_value("height")
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        if ok:
            stride = (width + 3) & ~3  # I420's luma stride in GStreamer
            frames.append((buf.pts, shows_flash(info.data, stride, width, height)))
            buf.unmap(info)
        return Gst.FlowReturn.OK

    def on_audio(sink):
        buf = sink.emit("pull-sample").get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        if ok:
            data = bytes(info.data)
            audio.append((buf.pts, struct.unpack("<%dh" % (len(data) // 2), data)))
            buf.unmap(info)
        return Gst.FlowReturn.OK

    pipeline = Gst.parse_launch(line[len("gst-launch-1.0 "):])
    pipeline.get_by_name("video_out").connect("new-sample", on_video)
    pipeline.get_by_name("audio_out").connect("new-sample", on_audio)
    try:
        pipeline.set_state(Gst.State.PLAYING)
        msg = pipeline.get_bus().timed_pop_filtered(60 * Gst.SECOND,
                                                    Gst.MessageType.EOS | Gst.MessageType.ERROR)
        check(msg is not None, "no end of stream in 60 s (%d frames, %d audio buffers)"
              % (len(frames), len(audio)))
        if msg.type == Gst.MessageType.ERROR:
            raise Failure("pipeline error: %s" % (msg.parse_error(),))
    finally:
        pipeline.set_state(Gst.State.NULL)
        srv.stop()
    check(len(frames) == 210, "%d frames" % len(frames))
    check(all(p is not None and p != Gst.CLOCK_TIME_NONE for p, _ in frames + audio),
          "a buffer without PTS")
    s, shown = ppssrc_summary(log)
    slots = [e for e in jsonl(log) if e["type"] == "audio"]
    # Each buffer is one slot the player played, in order: the log's audio
    # events (its play time: ear_us, less the decoder's constant delay), and
    # each frame one shown frame (display_us).
    check(200 <= len(audio) <= len(slots), "%d audio buffers, %d slots played in the log"
          % (len(audio), len(slots)))
    stamping = [(pts - audio[0][0]) / 1e6 - (e["ear_us"] - slots[0]["ear_us"]) / 1e3
                for (pts, _), e in zip(audio, slots)]
    stamping += [(pts - frames[0][0]) / 1e6 - (e["display_us"] - shown[0]["display_us"]) / 1e3
                 for (pts, _), e in zip(frames, shown)]
    worst = max(stamping, key=abs)
    check(abs(worst) <= 2, "a buffer stamped %.1f ms off its play or display time" % worst)

    ticks = []  # (PTS in ms, capture time in ms) of each tick onset
    for k, i in tick_onsets([samples for _, samples in audio]):
        ticks.append((audio[k][0] / 1e6 + i * 1000 / AUDIO_RATE,
                      slots[k]["capture_us"] / 1e3 + i * 1000 / AUDIO_RATE))
    pts_gaps = [b[0] - a[0] for a, b in zip(ticks, ticks[1:])]
    print("ticks in running time %s ms apart (the player's delay changes, made at "
          "talkspurts, move them)" % ["%.1f" % g for g in pts_gaps])
    gaps = check_tick_gaps([c for _, c in ticks], "ppssrc's audio pad, in capture time")
    flashes_ms = [p / 1e6 for p, flash in frames if flash]
    skews = []
    for t, _ in ticks:
        near = [f for f in flashes_ms if abs(f - t) < 500]
        if near:
            skews.append(t - min(near, key=lambda f: abs(f - t)))
    print("tick - flash frame %s ms" % ["%.1f" % d for d in skews])
    check(len(skews) >= len(ticks) - 1, "ticks %s, flash frames %s" % (ticks, flashes_ms))
    # The flash frame is captured 0 to 1 frame after its tick: audio and
    # picture in step put the tick up to a frame before that frame.
    check(all(-45 - FRAME_MS <= d <= 125 for d in skews),
          "tick - flash frame %s ms, want -45 (less a frame) .. +125"
          % ["%.1f" % d for d in skews])
    print("ppssrc audio: %d buffers, ticks %s ms apart in capture time, stamped within %.2f ms; "
          "%d frames shown" % (len(audio), ["%.1f" % g for g in gaps], abs(worst),
                               s["frames_shown"]))


def gst_ppssink_audio_to_client(build, workdir):
    """The documented serving pipeline with an audio pad (audiotestsrc ticks)
    -> pps-client writing the audio it plays to a WAV file: the stream has an
    audio track, nearly every slot is played, and the ticks are 1000 +- 25 ms
    apart in the capture times ppssink gave them (each WAV sample's slot is a
    played slot of the client's log, with its capture time). Their spacing in
    the WAV file itself is printed: the client's playout delay changes at
    talkspurts (a tick's start) move them there."""
    lines = readme_pipelines()
    serve = Launch(build, workdir, ppssink_args(lines["serve_audio"]), "serve")
    wav_path = os.path.join(workdir, "played.wav")
    try:
        port = sink_port(serve)
        client = Client(build, workdir, "127.0.0.1:%d" % port, "audio.output=none",
                        "audio.wav=" + wav_path, duration=5)
        rc = client.wait()
        check(rc == 0, "client exit %d: %s\n%s" % (rc, client.stderr, serve.text()[-2000:]))
        check(serve.interrupt() == 0, "gst-launch failed:\n" + serve.text()[-3000:])
    finally:
        serve.stop()
    s = client.summary()
    slots = client.events("audio")
    check(s.get("audio_slots", 0) >= 200, "%s audio slots in 5 s" % s.get("audio_slots"))
    check(s["audio_played_pct"] >= 90, "%.1f%% of the audio played" % s["audio_played_pct"])
    with wave.open(wav_path) as w:
        n = w.getnframes()
        pcm = struct.unpack("<%dh" % n, w.readframes(n))
    slot_samples = n // len(slots)
    check(slot_samples * len(slots) == n, "WAV %d samples for %d slots" % (n, len(slots)))
    onsets = [i for _, i in tick_onsets([pcm])]
    wav_gaps = [(b - a) * 1000 / AUDIO_RATE for a, b in zip(onsets, onsets[1:])]
    print("ticks in the WAV file %s ms apart" % ["%.1f" % g for g in wav_gaps])
    gaps = check_tick_gaps([slots[i // slot_samples]["capture_us"] / 1e3 +
                            (i % slot_samples) * 1000 / AUDIO_RATE for i in onsets],
                           "ppssink's audio, in capture time")
    print("ppssink audio -> pps-client: %d slots, %.1f%% played, mouth-to-ear p50 %.1f ms, "
          "ticks %s ms apart in capture time" % (s["audio_slots"], s["audio_played_pct"],
                                                 s["mouth_to_ear_p50_ms"],
                                                 ["%.1f" % g for g in gaps]))

# ---- the relay: named streams, pps:// URIs, publishing ---------------------------------

def gst_python():
    """GStreamer's Python bindings with the plugin of the build tree, or SKIP."""
    try:
        import gi
        gi.require_version("Gst", "1.0")
        from gi.repository import GLib, Gst
    except (ImportError, ValueError) as e:
        print("GStreamer's Python bindings: %s" % e)
        sys.exit(SKIP)
    return GLib, Gst


def run_to_end(Gst, pipeline, timeout_s=60):
    """PLAYING until end of stream or an error; returns the bus message (EOS or ERROR)."""
    try:
        pipeline.set_state(Gst.State.PLAYING)
        msg = pipeline.get_bus().timed_pop_filtered(timeout_s * Gst.SECOND,
                                                    Gst.MessageType.EOS | Gst.MessageType.ERROR)
    finally:
        pipeline.set_state(Gst.State.NULL)
    check(msg is not None, "neither end of stream nor an error in %d s" % timeout_s)
    return msg


def gst_relay_ppssrc(build, workdir):
    """pps-server --publish -> pps-relay -> the documented pipeline that views a
    relay's stream by name (ppssrc location=RELAY/room/alice): 90 buffers a
    frame apart, every one a frame shown, and the relay saw ppssrc's HELLO ask
    for room/alice. A name the relay does not carry stops the pipeline with an
    error that names the stream and says the relay's reason, of code
    GST_RESOURCE_ERROR_NOT_FOUND (an application can tell it from a network
    failure)."""
    from test_relay import Relay, publish, stop_all
    GLib, Gst = gst_python()
    lines = readme_pipelines()
    relay = Relay(build, workdir)
    pub = None
    log = os.path.join(workdir, "ppssrc.jsonl")
    try:
        pub = publish(build, workdir, relay, "room/alice")
        line = headless(lines["view_relay"]).replace(
            "ppssrc location=%s/room/alice" % DOC_RELAY,
            "ppssrc location=%s/room/alice log-file=%s num-buffers=90" % (relay.address, log))
        check(relay.address in line, "the pipeline was not adapted: " + line)
        view = Launch(build, workdir, line, "view-relay")
        try:
            rc = view.wait()
            text = view.text()
        finally:
            view.stop()
        check(rc == 0, "gst-launch exit %d:\n%s" % (rc, text[-3000:]))
        wrong = Launch(build, workdir, line.replace("/room/alice", "/room/nobody").replace(
            log, os.path.join(workdir, "nobody.jsonl")), "view-nobody")
        try:
            rc_wrong = wrong.wait()
            text_wrong = wrong.text()
        finally:
            wrong.stop()
        os.environ.update(Build(build).gst_env())
        Gst.init(None)
        msg = run_to_end(Gst, Gst.parse_launch("ppssrc location=%s/room/nobody ! fakesink"
                                               % relay.address))
    finally:
        stop_all(pub, relay)
    s, shown = ppssrc_summary(log)
    check(s["frames_shown"] >= 90, "%d frames shown through the relay" % s["frames_shown"])
    check_timestamps(buffer_pts_ms(text), "ppssrc through the relay")
    check(re.search(r"client \S+ \"pps-client\" joined", relay.log()) and
          "admitted for stream room/alice" in relay.log(), relay.log()[-2000:])
    check(rc_wrong != 0, "gst-launch exit 0 for a stream the relay does not carry")
    want = "no stream from %s/room/nobody: server said BYE (no-stream: no stream named room/nobody" \
        % relay.address
    check(want in text_wrong, "no error naming the stream:\n" + text_wrong[-2000:])
    check(msg.type == Gst.MessageType.ERROR, "no error for room/nobody: %s" % msg.type)
    err, _ = msg.parse_error()
    check(err.matches(Gst.ResourceError.quark(), Gst.ResourceError.NOT_FOUND),
          "room/nobody: error %s %d (%s), want GST_RESOURCE_ERROR_NOT_FOUND"
          % (err.domain, err.code, err.message))
    print("ppssrc through the relay: %d frames shown (%.1f%%), p50 %.1f ms; room/nobody: %s"
          % (s["frames_shown"], s["frames_shown_pct"], s["frame_latency_p50_ms"], err.message))


def gst_relay_uri(build, workdir):
    """pps:// URIs: ppssrc is the source GStreamer makes for one (location =
    the URI less its scheme, and back; a bad one refused with the loader's
    message), and the documented playbin pipeline and a uridecodebin play a
    relay's stream through it: 90 frames (num-buffers, set in source-setup)
    to the video sink, then end of stream. The picture only: uridecodebin
    follows a source's sometimes pads (ppssrc's audio) only when the source
    has no pad at all when it is looked at (docs/GSTREAMER.md); the audio
    buffers that reach playbin's audio sink are printed, not required."""
    GLib, Gst = gst_python()
    from test_relay import Relay, publish, stop_all
    os.environ.update(Build(build).gst_env())
    Gst.init(None)
    # The handler, without a network.
    src = Gst.Element.make_from_uri(Gst.URIType.SRC, "pps://127.0.0.1:9/room/alice", None)
    check(src.get_factory().get_name() == "ppssrc", "pps:// made %s" % src.get_factory().get_name())
    check(src.get_property("location") == "127.0.0.1:9/room/alice", src.get_property("location"))
    check(src.get_uri() == "pps://127.0.0.1:9/room/alice", src.get_uri())
    src.set_uri("pps://127.0.0.1:9/")
    check(src.get_property("location") == "127.0.0.1:9", "pps://HOST:PORT/: %s" % src.get_property("location"))
    for bad, why in (("pps://nowhere", "uri=pps://nowhere: must be HOST:PORT"),
                     ("pps://127.0.0.1:9/room/../x", "uri=pps://127.0.0.1:9/room/../x: ")):
        try:
            src.set_uri(bad)
            raise Failure("%s accepted" % bad)
        except GLib.Error as e:
            check(why in e.message, "%s: %s" % (bad, e.message))
    check(src.get_property("location") == "127.0.0.1:9", "a refused URI changed the location")

    lines = readme_pipelines()
    relay = Relay(build, workdir)
    pub = None
    results = {}
    try:
        pub = publish(build, workdir, relay, "room/alice")
        uri = "pps://%s/room/alice" % relay.address
        play = lines["play_uri"].replace("pps://%s/" % DOC_RELAY, "pps://%s/" % relay.address)
        check(uri in play, "the pipeline was not adapted: " + play)
        decode = "uridecodebin name=decode uri=%s ! video/x-raw ! fakesink name=video" % uri
        for name, line in (("playbin", play[len("gst-launch-1.0 "):]), ("uridecodebin", decode)):
            log = os.path.join(workdir, "%s.jsonl" % name)
            counts = {"video": 0, "audio": 0, "sources": []}

            def source_setup(_bin, source, log=log, counts=counts):
                counts["sources"].append(source.get_factory().get_name())
                source.set_property("num-buffers", 90)
                source.set_property("log-file", log)

            def counter(kind, counts=counts):
                def handoff(*_):
                    counts[kind] += 1
                return handoff

            pipeline = Gst.parse_launch(line)
            if name == "playbin":
                sinks = {kind: Gst.ElementFactory.make("fakesink", kind) for kind in ("video", "audio")}
                for kind, sink in sinks.items():
                    sink.set_property("sync", False)
                    pipeline.set_property(kind + "-sink", sink)
            else:
                sinks = {"video": pipeline.get_by_name("video")}
            for kind, sink in sinks.items():
                sink.set_property("signal-handoffs", True)
                sink.connect("handoff", counter(kind))
            bin_ = pipeline if name == "playbin" else pipeline.get_by_name("decode")
            bin_.connect("source-setup", source_setup)
            msg = run_to_end(Gst, pipeline)
            if msg.type == Gst.MessageType.ERROR:
                raise Failure("%s: %s" % (name, msg.parse_error()))
            results[name] = (counts, ppssrc_summary(log)[0])
    finally:
        stop_all(pub, relay)
    for name, (counts, s) in results.items():
        check(counts["sources"] == ["ppssrc"], "%s's source: %s" % (name, counts["sources"]))
        check(counts["video"] == 90, "%s: %d frames to the video sink" % (name, counts["video"]))
        check(s["frames_shown"] >= 90, "%s: %d frames shown" % (name, s["frames_shown"]))
        print("%s %s: %d frames, %d audio buffers, p50 %.1f ms" % (name, "pps://RELAY/room/alice",
              counts["video"], counts["audio"], s["frame_latency_p50_ms"]))


def gst_ppssink_publish(build, workdir):
    """The documented publishing pipeline (ppssink publish=RELAY/room/alice) ->
    pps-relay -> pps-client RELAY/room/alice: the client gets the caps' size
    and shows >= 70% of its frames; the pipeline's end of stream ends the
    stream at the relay with BYE (the viewer's end is clean). A second
    publisher of the name is refused, with the relay's reason."""
    from test_relay import Relay, stop_all
    lines = readme_pipelines()
    relay = Relay(build, workdir)
    serve = taken = None
    try:
        line = lines["publish"].replace("publish=%s/" % DOC_RELAY, "publish=%s/" % relay.address)
        check(relay.address in line, "the pipeline was not adapted: " + line)
        serve = Launch(build, workdir, line, "publish")
        serve.wait_for(r"pps-publishing, publish=\(string\)%s/room/alice" % re.escape(relay.address))
        relay.wait_for_log("stream room/alice: ")
        client = Client(build, workdir, relay.address + "/room/alice", "playout.policy=asap",
                        duration=6)
        taken = Launch(build, workdir, line, "publish-taken")
        rc_taken = taken.wait()
        text_taken = taken.text()
        rc = client.wait()
        check(rc == 0, "client exit %d: %s\n%s" % (rc, client.stderr, serve.text()[-2000:]))
        check(serve.interrupt() == 0, "gst-launch failed:\n" + serve.text()[-3000:])
        relay.wait_for_log("of stream room/alice left (normal")
    finally:
        if serve:
            serve.stop()
        if taken:
            taken.stop()
        stop_all(relay)
    s = client.summary()
    check("640x480@30" in client.stderr, "stream info: " + client.stderr)
    # Its first picture waits for the IDR its join asks the publisher for
    # (docs/RELAY.md), as test_relay.py's viewers' do.
    check(s["frames_shown"] >= 90, "%d frames shown" % s["frames_shown"])
    check(s["frames_shown_pct"] >= 70, "%.1f%% shown" % s["frames_shown_pct"])
    check(rc_taken != 0 and "already has a publisher" in text_taken,
          "a second publisher of room/alice: exit %d\n%s" % (rc_taken, text_taken[-2000:]))
    print("ppssink publish -> relay -> pps-client: %d frames shown (%.1f%%), p50 %.1f ms p95 %.1f ms"
          % (s["frames_shown"], s["frames_shown_pct"], s["frame_latency_p50_ms"],
             s["frame_latency_p95_ms"]))


class Xvfb:
    """A virtual X display (Xvfb :N, N of its choosing): .display once it
    accepts clients (it writes N to -displayfd then). -noreset: an X server
    resets when its last client leaves, and autovideosink's first try
    (xvimagesink: Xvfb has no XVideo) is such a client; ximagesink, next,
    would find the display gone while it resets."""

    def __init__(self, workdir, timeout_s=20):
        import select
        r, w = os.pipe()
        self.err = open(os.path.join(workdir, "xvfb.err"), "w")
        self.proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-nolisten", "tcp", "-noreset",
                                      "-screen", "0", "800x600x24"],
                                     pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=self.err)
        os.close(w)
        number = b""
        try:
            while not number.endswith(b"\n"):
                ready, _, _ = select.select([r], [], [], timeout_s)
                chunk = os.read(r, 16) if ready else b""
                if not chunk:
                    self.stop()
                    raise Failure("Xvfb did not start: %s" % open(self.err.name).read()[-1000:])
                number += chunk
        finally:
            os.close(r)
        self.display = ":" + number.decode().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.err.close()


def gst_view_on_display(build, workdir):
    """The documented viewing pipelines as a user types them, autovideosink
    included, on a display (Xvfb): each shows 90 frames and ends at EOS with
    exit status 0. Without an X video sink (gstreamer1.0-x) autovideosink
    goes on to sinks that crash (139)."""
    if not shutil.which("Xvfb"):
        print("SKIP: Xvfb not installed (scripts/install-deps.sh installs xvfb)")
        sys.exit(SKIP)
    lines = readme_pipelines()
    env = Build(build).gst_env()
    env.pop("WAYLAND_DISPLAY", None)
    xvfb = Xvfb(workdir)
    env["DISPLAY"] = xvfb.display
    srv = None
    try:
        srv = Server(build, workdir)
        for name in ("view", "view_audio"):
            line = lines[name].replace("ppssrc location=" + DOC_ADDRESS,
                                       "ppssrc location=%s num-buffers=90" % srv.address)
            p = subprocess.run(shlex.split(line), env=env, capture_output=True, text=True,
                               timeout=90)
            out = p.stdout + p.stderr
            check(p.returncode != 139 and p.returncode != -signal.SIGSEGV,
                  "%s: gst-launch crashed (SIGSEGV; no X video sink? gstreamer1.0-x):\n%s"
                  % (name, out[-2000:]))
            check(p.returncode == 0 and "Got EOS" in out,
                  "%s: exit %d, not at EOS:\n%s" % (name, p.returncode, out[-2000:]))
            sink = re.search(r"autovideosink0-actual-sink-(\w+)", out)
            m = re.search(r"Execution ended after (\S+)", out)
            print("%s: EOS after 90 buffers on Xvfb %s%s (%s)"
                  % (name, xvfb.display, ", " + sink.group(1) if sink else "",
                     m.group(1) if m else "?"))
    finally:
        if srv:
            srv.stop()
        xvfb.stop()


TESTS = {f.__name__: f for f in (gst_server_to_ppssrc, gst_ppssrc_no_server,
                                 gst_ppssink_to_client, gst_ppssink_to_ppssrc, gst_inspect,
                                 gst_bad_property, gst_server_to_ppssrc_audio,
                                 gst_ppssink_audio_to_client, gst_view_on_display,
                                 gst_relay_ppssrc, gst_relay_uri, gst_ppssink_publish)}

if __name__ == "__main__":
    if not shutil.which("gst-launch-1.0"):
        print("gst-launch-1.0 not found")
        sys.exit(SKIP)
    sys.exit(run(TESTS, sys.argv))
