# SPDX-License-Identifier: MIT
"""The browser viewer (web/, served by pps-server) against a real pps-server on loopback.

  browser_stream   headless Chromium (chromedriver) opens the page the server
                   serves, beside a pps-client on the same server; asserts
                   frames shown, the enhancement layer applied (PSNR of a frame
                   read back from the WebGL combine against the source, base
                   only and base + enhancement), latency from the page's
                   statistics against pps-client's; keeps a screenshot in the
                   build dir (tests/browser-viewer.png). 77 without Chromium.
  browser_audio    the audio track (test source: a tick a second, a flash in
                   the picture on the tick's frame) on its own WebSocket
                   (audio.transport = connection): the page decodes Opus with
                   WebCodecs and plays it (autoplay allowed by a flag);
                   asserts slots played, mouth-to-ear, the ticks found in the
                   decoded audio 1 s apart (as heard) and in step with the
                   flash frames (capture times), the A/V skew. 77 without
                   Chromium.
  browser_audio_window  the same with audio.transport = window (the audio in
                   the video's WebSocket).
  browser_audio_unmute  the autoplay policy that wants a gesture: audio
                   decoded and measured, not heard, until the page's sound
                   button is clicked.
  browser_jitter   the page's jitter buffer (web/jitter.js) on made-up
                   arrival times in the browser: steady, jittered, a spike,
                   a step, lip sync's floor, a stall, a restart, bounds.
  browser_keepalive  a third-party WebSocket client (Python websockets, its
                   default keepalive: a ping every 20 s, closed when a pong
                   takes over 20 s) joins as the viewer does and streams
                   for 2 minutes; asserts windows still arrive in the last
                   10 s and no keepalive timeout closed it. 77 without
                   python3-websockets.
  browser_reconnect  the server stops and a new one starts on the same
                   port, three times: the page says it reconnects, then
                   streams again (frames and sound) within 5 s of the new
                   server's listening; prints each time it took.
  browser_token    a server with an access token: the page without one and
                   with a wrong one shows the token field; the right one
                   typed into it streams, and a reload streams with it.
  browser_relay    on pps-relay: the front page lists the streams and their
                   room, the viewer plays one by name, the room page shows
                   each participant in a tile and drops one who left.
  browser_http     HTTP and WebSocket errors, raw sockets, no browser: 404,
                   405, bad handshake -> 400, unmasked frame -> close 1002,
                   oversize message -> close 1009, text -> close 1003; a
                   RECOVERY_REQUEST in a WebSocket message is handled.

usage: test_browser.py BUILD_DIR TEST [--keep DIR]
With --keep, the page's statistics, pps-client's summary and both PSNRs are
written to DIR/browser-figures.json (the must-show figures); browser_audio
writes DIR/browser-audio-figures.json (the page's audio statistics, slots,
ticks and flashes).
"""
import base64
import json
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from harness import SKIP, Client, Failure, Server, check, read_all, wait_until

# 320x240 (base 160x120): a headless Chromium's software decode and combine
# keep up at 30 frames/s on a loaded 2-core CI machine (640x480 did not).
WIDTH, HEIGHT = 320, 240
# A static zone plate: fine detail the half-resolution base cannot carry, so
# the enhancement layer's effect shows, and a source we can regenerate.
PATTERN = "videotestsrc is-live=true pattern=zone-plate kx2=20 ky2=20"
CAPS = "video/x-raw,format=I420,width=%d,height=%d" % (WIDTH, HEIGHT)
# The pixel timecode's blocks (codec/pps-timecode.c: 14 x 8 blocks of 16 px).
TIMECODE_W, TIMECODE_H = 14 * 16, 8 * 16
DURATION_S = 10


def server_settings():
    return ["source.type=pipeline", "source.pipeline=%s ! %s" % (PATTERN, CAPS),
            "source.width=%d" % WIDTH, "source.height=%d" % HEIGHT,
            "server.max_clients_per_address=16"]


def source_luma(workdir):
    path = os.path.join(workdir, "source.yuv")
    subprocess.run(["gst-launch-1.0", "-q"] + PATTERN.replace("is-live=true ", "").split() +
                   ["num-buffers=1", "!", CAPS + ",framerate=30/1", "!", "filesink",
                    "location=" + path], check=True, timeout=30)
    with open(path, "rb") as f:
        return f.read()[:WIDTH * HEIGHT]


def psnr(a, b):
    """Luma PSNR outside the timecode blocks (they change every frame)."""
    se, n = 0, 0
    for y in range(HEIGHT):
        x0 = TIMECODE_W if y < TIMECODE_H else 0
        row_a = a[y * WIDTH + x0:(y + 1) * WIDTH]
        row_b = b[y * WIDTH + x0:(y + 1) * WIDTH]
        se += sum((p - q) * (p - q) for p, q in zip(row_a, row_b))
        n += WIDTH - x0
    mse = se / n
    return float("inf") if mse == 0 else 10 * math.log10(255 * 255 / mse)


def client_luma(client, recording, frame_index, layers):
    """The luma of @frame_index in pps-client's Matroska recording (every frame
    shown, once, in the order shown), if pps-client showed it with @layers
    layers too (else None)."""
    events = [e for e in client.events("frame") if e.get("shown")]
    shown = [e["frame"] for e in events]
    if frame_index not in shown:
        return None
    k = shown.index(frame_index)
    if events[k]["quality_layers"] != layers:
        return None
    # The stored pictures, byte for byte (no decoder, no conversion).
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", recording, "-map", "0:v", "-c", "copy", "-f", "rawvideo",
                        "-"], capture_output=True, timeout=60)
    size = WIDTH * HEIGHT * 3 // 2
    check(r.returncode == 0 and len(r.stdout) >= (k + 1) * size,
          "ffmpeg cannot read frame %d of %s: %s" % (k, recording, r.stderr[-300:]))
    return r.stdout[k * size:k * size + WIDTH * HEIGHT]


def client_reached(client, frame_index):
    """Whether pps-client's log (its whole lines so far) has a frame at or
    past @frame_index, shown or not."""
    with open(client.log_path) as f:
        lines = f.read().split("\n")[:-1]
    return any(e.get("type") == "frame" and e["frame"] >= frame_index
               for e in map(json.loads, lines))


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    if not chromium or not driver:
        return None
    return chromium, driver


def start_browser(chromium, driver_path, workdir, extra_args=()):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=720,600", "--enable-unsafe-swiftshader",
                "--use-angle=swiftshader", "--no-first-run", "--disable-extensions",
                "--user-data-dir=" + os.path.join(workdir, "chromium")] + list(extra_args):
        options.add_argument(arg)
    service = Service(executable_path=driver_path, log_path=os.path.join(workdir, "driver.log"))
    return webdriver.Chrome(service=service, options=options)


def wait_for(driver, cond, what, timeout_s):
    """Waits until the page's stats satisfy @cond (the event); returns them."""
    last = {}

    def ready():
        last["stats"] = stats = driver.execute_script(
            "return window.ppsStats ? window.ppsStats() : null")
        if stats and stats.get("state") == "failed":
            raise Failure("viewer failed: %s" % stats.get("error"))
        return stats if stats and cond(stats) else None

    def message():
        logs = driver.get_log("browser") if hasattr(driver, "get_log") else []
        return "%s; stats %s; console %s" % (what, json.dumps(last.get("stats")), logs[-10:])

    return wait_until(ready, message, timeout_s=timeout_s, poll_s=0.2)


def test_browser_stream(build, workdir, keep=None, settings=()):
    found = find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    if not shutil.which("ffmpeg"):
        print("SKIP: ffmpeg not installed (it reads pps-client's recording)")
        sys.exit(SKIP)
    source = source_luma(workdir)
    # The server checks the MIN_BUF bound of WebSocket sessions independently.
    os.environ["PPS_WEB_CHECK_BOUND"] = "1"
    server = Server(build, workdir, *server_settings(), *settings)
    driver = None
    try:
        driver = start_browser(found[0], found[1], workdir)
        driver.get("http://127.0.0.1:%d/?name=selenium" % server.port)
        wait_for(driver, lambda s: s["state"] == "streaming", "the stream to start", 20)
        # pps-client on the same server, until it has shown the frame the
        # browser is read back on (its --duration only a bound).
        recording = os.path.join(workdir, "client.mkv")
        client = Client(build, workdir, server.address, duration=DURATION_S + 20, name="client",
                        extra=("--output", recording))
        t0 = time.monotonic()
        stats = wait_for(driver, lambda s: s["frames_total"] >= 30 * (DURATION_S - 1),
                         "%d s of frames" % (DURATION_S - 1), DURATION_S + 15)
        grab = driver.execute_script("return window.ppsGrab(true)")
        check(grab is not None, "no frame on screen to read back")
        shot = os.path.join(build, "tests", "browser-viewer.png")
        os.makedirs(os.path.dirname(shot), exist_ok=True)
        driver.save_screenshot(shot)
        wait_until(lambda: client_reached(client, grab["frame_index"]),
                   "pps-client to show frame %d" % grab["frame_index"], timeout_s=15,
                   proc=client.proc)
        client.proc.send_signal(signal.SIGTERM)
        check(client.wait(timeout=30) == 0, "pps-client failed: %s" % client.stderr[-2000:])
        summary = client.summary()
        stats = driver.execute_script("return window.ppsStats()")
        elapsed = time.monotonic() - t0
    finally:
        if driver:
            driver.quit()
        server.stop()

    bound = re.search(r"MIN_BUF check: (\d+) packets, max held - bound (-?\d+) packets, "
                      r"(\d+) over", server.log())
    check(bound, "no MIN_BUF check in the server's log")
    bound_packets, bound_max_over = int(bound.group(1)), int(bound.group(2))
    full = base64.b64decode(grab["luma"])
    base = base64.b64decode(grab["luma_base"])
    check(len(full) == WIDTH * HEIGHT and len(base) == WIDTH * HEIGHT, "read-back size")
    psnr_full, psnr_base = psnr(full, source), psnr(base, source)
    # The same frame as pps-client's C decoder showed it: bit for bit.
    c_luma = client_luma(client, recording, grab["frame_index"], grab["layers"])
    check(c_luma is not None, "frame %d was not shown by pps-client with %d layers"
          % (grab["frame_index"], grab["layers"]))
    differing = sum(1 for p, q in zip(full, c_luma) if p != q)
    # The WebGL2 and JavaScript combines agree bit for bit (integer taps).
    check(grab.get("check_luma") == grab["luma"] and
          grab.get("check_luma_base") == grab["luma_base"],
          "%s and %s combines differ" % (grab["renderer"], grab.get("check_renderer")))
    figures = {
        "browser": stats, "pps_client": summary,
        "psnr_base_db": psnr_base, "psnr_full_db": psnr_full, "grab_layers": grab["layers"],
        "grab_frame": grab["frame_index"], "seconds": elapsed, "renderer": grab["renderer"],
        "pixels_differing_from_pps_client": differing,
        "minbuf_check_packets": bound_packets, "minbuf_max_over_bound_pkts": bound_max_over,
    }
    print(json.dumps({k: v for k, v in figures.items() if k not in ("browser", "pps_client")}))
    print("browser:   shown %d/%d (%.1f%%), latency p50 %.1f p95 %.1f ms, layers shown %s, "
          "frozen %.0f ms, decode %.2f ms/frame"
          % (stats["frames_shown"], stats["frames_total"], stats["frames_shown_pct"] or 0,
             stats["frame_latency_p50_ms"] or -1, stats["frame_latency_p95_ms"] or -1,
             stats["layers_shown"], stats["frozen_ms"], stats["decode_ms_mean"] or -1))
    print("browser not shown: late %d, undecodable %d, dropped %d, lost %d, overflow %d; "
          "windows %d (%d partial, %d dropped); %d freezes, longest %.0f ms; renderer %s"
          % (stats["frames_late"], stats["frames_undecodable"], stats["frames_dropped"],
             stats["frames_lost"], stats["frames_overflow"], stats["windows"],
             stats["windows_partial"], stats["windows_dropped"], stats["freezes"],
             stats["freeze_longest_ms"], stats["renderer"]))
    print("pps-client: shown %d/%d (%.1f%%), latency p50 %.1f p95 %.1f ms, frozen %.0f ms"
          % (summary["frames_shown"], summary["frames_total"], summary["frames_shown_pct"],
             summary["frame_latency_p50_ms"], summary["frame_latency_p95_ms"],
             summary["frozen_total_ms"]))
    print("PSNR-Y vs source: base only %.2f dB, base + enhancement %.2f dB; frame %d: %d luma "
          "samples differ from pps-client's" % (psnr_base, psnr_full, grab["frame_index"],
                                                differing))
    if keep:
        with open(os.path.join(keep, "browser-figures.json"), "w") as f:
            json.dump(figures, f, indent=1)

    # MIN_BUF on the browser's socket: every packet within A*cwnd + min(B, cwnd)
    # + sacked (tolerance 0 on loopback, as test-minbuf).
    check(bound_packets >= 100, "only %d packets checked" % bound_packets)
    check(bound_max_over <= 0, "MIN_BUF bound exceeded by %d packets" % bound_max_over)
    check(stats["frames_total"] >= 30 * (DURATION_S - 1), "too few frames accounted")
    check(stats["frames_shown_pct"] >= 95, "browser showed %.1f%% of frames"
          % stats["frames_shown_pct"])
    check(stats["decode_errors"] == 0, "decode errors: %d" % stats["decode_errors"])
    # The enhancement layer was decoded and combined: most frames with both
    # layers, and the read-back frame clearly closer to the source.
    check(grab["layers"] == 2, "frame read back with %d layer(s)" % grab["layers"])
    check(stats["layers_shown"][1] >= 0.9 * stats["frames_shown"],
          "frames shown with the enhancement: %s" % stats["layers_shown"])
    check(psnr_full >= psnr_base + 3, "enhancement adds %.2f dB only" % (psnr_full - psnr_base))
    check(psnr_full >= 30, "PSNR with enhancement %.2f dB" % psnr_full)
    check(differing == 0, "%d luma samples differ from pps-client's frame %d"
          % (differing, grab["frame_index"]))
    # Latency: the same stream, the same playout policy as pps-client; a
    # generous margin (the browser's timers and software GL), no absolute bound.
    p50, cp50 = stats["frame_latency_p50_ms"], summary["frame_latency_p50_ms"]
    check(p50 is not None and p50 > 0, "no latency measured")
    check(p50 <= 2 * cp50 + 100, "browser p50 %.1f ms vs pps-client %.1f ms" % (p50, cp50))
    return server


def test_browser_stream_early(build, workdir, keep=None):
    """The same with 1-frame windows: every window goes out from its base on,
    announcing its residual with a byte bound (wire/PROTOCOL.md); the browser's
    reassembly takes it like pps-client's (same checks, bit for bit)."""
    server = test_browser_stream(build, workdir, keep, ("pps.window_frames=1",))
    st = server.stats()
    check(st["windows_early"] >= 200 and st["windows_early"] >= st["windows"] - 2,
          "server: %d of %d windows sent early" % (st["windows_early"], st["windows"]))
    print("server: %d of %d windows early" % (st["windows_early"], st["windows"]))


def test_browser_stream_disposable(build, workdir, keep=None):
    """The same with disposable P frames in every window (pps.droppable =
    p-frames, pps.b_frames = always): the page takes ADU frame type 4,
    releases each frame on its top layer and shows what pps-client shows, bit
    for bit."""
    server = test_browser_stream(build, workdir, keep,
                                 ("pps.droppable=p-frames", "pps.b_frames=always"))
    st = server.stats()
    check(st["windows"] >= 100 and st["windows_anchors"] == 0,
          "server: %d windows, %d of anchors alone" % (st["windows"], st["windows_anchors"]))
    print("server: %d windows, each with a disposable frame" % st["windows"])


# The audio test: the test source's ticks, one a second (codec/pps-capture.c),
# and the flash on the frame of each (a frame starts within a frame period
# after the tick's onset), at 320x240 so that the page's video keeps up.
AUDIO_SECONDS = 8
# The heard ticks are judged after this: the page's start-up (its main
# thread stalls 100-250 ms while the video's decoders and combine warm up)
# and the delay estimate's first seconds move the playout delay.
AUDIO_WARMUP_S = 3
TICK_PERIOD_MS = 1000
TICK_TOLERANCE_MS = 25
AUDIO_FRAME_MS = 20  # [audio] frame_ms, the server's default
FRAME_MS = 1000 / 30
# Where a flash frame's capture time may fall from its tick's, as the page
# finds the tick in decoded audio: within a frame period after it, give or
# take what the decoded audio's alignment adds (Opus's 6.5 ms, rounding), and
# on the early side up to one audio frame (a run found a flash 13 ms before
# its tick's onset as the page detected it). Still well inside what ITU-R
# BT.1359 says is detectable (sound 45 ms early, 125 ms late).
FLASH_WINDOW_MS = (-AUDIO_FRAME_MS, FRAME_MS + 10)


def browser_version(chromium):
    try:
        return subprocess.run([chromium, "--version"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown (%s)" % e


def tick_flash_pairs(ticks, flashes):
    """For each tick (capture time), the flash frame nearest after it within
    the window, or None; only ticks inside the span of decoded frames."""
    if not flashes:
        return []
    first, last = flashes[0]["capture_us"], flashes[-1]["capture_us"]
    out = []
    for t in ticks:
        c = t["capture_us"]
        if c < first - 500000 or c > last + 500000:
            continue
        near = [f for f in flashes
                if FLASH_WINDOW_MS[0] <= (f["capture_us"] - c) / 1000 <= FLASH_WINDOW_MS[1]]
        out.append((t, near[0] if near else None))
    return out


def test_browser_audio(build, workdir, keep=None, transport="connection"):
    found = find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    version = browser_version(found[0])
    # With an access token: both of the page's connections prove it.
    token = "browser-audio-test-token"
    server = Server(build, workdir, "source.type=test", "source.width=%d" % WIDTH,
                    "source.height=%d" % HEIGHT, "audio.source=source",
                    "audio.transport=" + transport, "server.max_clients_per_address=16",
                    "server.access_token=" + token)
    driver = None
    try:
        # Autoplay allowed: the AudioContext runs without a click.
        driver = start_browser(found[0], found[1], workdir,
                               ["--autoplay-policy=no-user-gesture-required"])
        driver.get("http://127.0.0.1:%d/?name=selenium&token=%s" % (server.port, token))
        wait_for(driver, lambda s: s["state"] == "streaming", "the stream to start", 20)
        audio = driver.execute_script("return window.ppsAudio()")
        support = audio.get("support") or {}
        check(support.get("supported"), "%s: no Opus decoding in this browser: %s"
              % (version, support.get("reason")))
        frame_ms = 20
        wait_for(driver, lambda s: (s.get("audio") or {}).get("slots") and
                 s["audio"]["slots"] >= AUDIO_SECONDS * 1000 / frame_ms,
                 "%d s of audio slots" % AUDIO_SECONDS, AUDIO_SECONDS + 20)
        driver.set_script_timeout(30)
        audio = driver.execute_async_script(
            "const done = arguments[0]; window.ppsAudioFull().then(done, (e) => done(String(e)))")
        check(isinstance(audio, dict), "ppsAudioFull: %s" % audio)
        stats = driver.execute_script("return window.ppsStats()")
        if keep:
            driver.save_screenshot(os.path.join(keep, "browser-audio.png"))
    finally:
        if driver:
            driver.quit()
        server.stop()

    track = audio["track"]
    check(track is not None, "no audio track: %s" % audio.get("error"))
    # A slot sounded as a concealment and then again when its frame was
    # decoded late passes the tick detector twice: one tick a second, so an
    # onset within half a period of the one before is that same tick.
    ticks = []
    for t in sorted((t for t in track["ticks"] if t["heard"]), key=lambda t: t["capture_us"]):
        if not ticks or t["capture_us"] - ticks[-1]["capture_us"] >= TICK_PERIOD_MS * 500:
            ticks.append(t)
    flashes = audio["flashes"]
    ear_gaps = [(b["ear_us"] - a["ear_us"]) / 1000 for a, b in zip(ticks, ticks[1:])]
    capture_gaps = [(b["capture_us"] - a["capture_us"]) / 1000 for a, b in zip(ticks, ticks[1:])]
    # The playout delay may change between two ticks (a frame inserted or
    # skipped in the pause, jitter.js): that gap is heard longer or shorter.
    latency = [(t["ear_us"] - t["capture_us"]) / 1000 for t in ticks]
    delay_steps = [b - a for a, b in zip(latency, latency[1:])]
    first = track["slots_log"][0]["due_us"] if track["slots_log"] else 0
    warm = [first and a["ear_us"] - first >= AUDIO_WARMUP_S * 1e6 for a in ticks[:-1]]
    warm_gaps = [g for g, w in zip(ear_gaps, warm) if w]
    # Steady: the playout delay moved less than 5 ms between the two ticks
    # (the quantile playout follows the path's delay in small steps).
    steady_gaps = [g for g, d, w in zip(ear_gaps, delay_steps, warm) if w and abs(d) < 5]
    pairs = tick_flash_pairs(ticks, flashes)
    offsets = [(f["capture_us"] - t["capture_us"]) / 1000 for t, f in pairs if f]
    figures = {
        "browser": version, "transport": transport, "context": audio["context"],
        "output": track["output"], "output_fallback": track["output_fallback"],
        "slots": track["slots"], "played_pct": track["played_pct"],
        "concealed": track["concealed"], "inserted": track["inserted"], "skipped": track["skipped"],
        "late": track["late"], "undecoded": track["undecoded"],
        "decode_errors": track["decode_errors"], "heard_slots": track["heard_slots"],
        "mouth_to_ear_p50_ms": track["mouth_to_ear_p50_ms"],
        "mouth_to_ear_p95_ms": track["mouth_to_ear_p95_ms"],
        "output_delay_ms": track["output_delay_ms"], "output_underruns": track["output_underruns"],
        "output_moves": track["output_moves"], "renderer": track["renderer"],
        "playout_delay_mean_ms": track["jitter"]["playout_delay_mean_ms"],
        "sync_floor_ms": track["jitter"]["sync_floor_ms"],
        "av_skew_p5_ms": track["av_skew_p5_ms"], "av_skew_p50_ms": track["av_skew_p50_ms"],
        "av_skew_p95_ms": track["av_skew_p95_ms"], "av_skew_abs_p95_ms": track["av_skew_abs_p95_ms"],
        "video_frames_shown_pct": stats["frames_shown_pct"],
        "video_latency_p50_ms": stats["frame_latency_p50_ms"],
        "ticks": len(ticks), "tick_ear_gaps_ms": ear_gaps, "tick_capture_gaps_ms": capture_gaps,
        "tick_delay_steps_ms": delay_steps, "wake_late_max_ms": track["wake_late_max_ms"],
        "wakes": track["wakes"], "wakes_late_10ms": track["wakes_late_10ms"],
        "wakes_late_20ms": track["wakes_late_20ms"],
        "flashes": len(flashes), "flash_minus_tick_ms": offsets,
        "ticks_without_flash": sum(1 for _, f in pairs if not f),
    }
    print(json.dumps(figures))
    if keep:
        with open(os.path.join(keep, "browser-audio-figures.json"), "w") as f:
            json.dump({"figures": figures, "audio": audio, "stats": stats}, f, indent=1)
    fmt = lambda xs: "[%s]" % ", ".join("%.1f" % x for x in xs)  # noqa: E731
    print("%s, audio on %s: %d slots, %.1f%% played (%d concealed, %d inserted, %d skipped, "
          "%d late), mouth-to-ear p50 %.1f p95 %.1f ms, output %s (%.1f ms to the ear, "
          "%d underruns), A/V skew p5/p50/p95 %.1f/%.1f/%.1f ms"
          % (version, transport, track["slots"], track["played_pct"], track["concealed"],
             track["inserted"], track["skipped"], track["late"], track["mouth_to_ear_p50_ms"],
             track["mouth_to_ear_p95_ms"], track["output"], track["output_delay_ms"] or -1,
             track["output_underruns"], track["av_skew_p5_ms"] or 0, track["av_skew_p50_ms"] or 0,
             track["av_skew_p95_ms"] or 0))
    print("ticks heard %s ms apart (capture %s, playout delay steps %s); flash - tick %s ms; "
          "video shown %.1f%%, p50 %.1f ms; worker timer late > 10 ms %d of %d, max %.1f ms"
          % (fmt(ear_gaps), fmt(capture_gaps), fmt(delay_steps), fmt(offsets),
             stats["frames_shown_pct"] or 0, stats["frame_latency_p50_ms"] or -1,
             track["wakes_late_10ms"], track["wakes"], track["wake_late_max_ms"]))

    log = server.log()
    only = log.count("audio only)")
    check(only == (1 if transport == "connection" else 0),
          "%d audio-only connections with transport %s" % (only, transport))
    check(track["transport"] == transport, "the page saw transport %s" % track["transport"])
    check(audio["context"]["state"] == "running" and track["state"] == "playing",
          "audio not playing: context %s, track %s" % (audio["context"]["state"], track["state"]))
    check(track["decode_errors"] == 0, "%d audio decode errors" % track["decode_errors"])
    # With transport = window the frames come through the page's main thread,
    # which stalls for 100-250 ms while the video starts, and longer on a
    # loaded machine: the frames get there late, the playout delay follows.
    # Its run checks that they are parsed, handed over and played in step
    # with the picture; its timing figures are printed, not judged.
    strict = transport == "connection"
    # A loaded machine stalls the page's audio worker now and then: the
    # slots it misses are concealed, counted and not played.
    least_played = 90 if strict else 85
    check(track["played_pct"] >= least_played, "%.1f%% of the audio slots played (want %d%%)"
          % (track["played_pct"], least_played))
    check(track["mouth_to_ear_p50_ms"] < 250,
          "mouth-to-ear p50 %.1f ms on loopback" % track["mouth_to_ear_p50_ms"])
    check(len(ticks) >= AUDIO_SECONDS - 2, "%d ticks heard in %d s" % (len(ticks), AUDIO_SECONDS))
    # In the decoded audio, on the capture clock: a tick a second. The first
    # tick can fall among the start's inserted or skipped frames, which move
    # where it is found by up to a frame (20 ms): its gap is allowed that.
    check(all(abs(g - TICK_PERIOD_MS) <= TICK_TOLERANCE_MS + (AUDIO_FRAME_MS if i == 0 else 0)
              for i, g in enumerate(capture_gaps)),
          "ticks captured %s ms apart, want %d +- %d"
          % (fmt(capture_gaps), TICK_PERIOD_MS, TICK_TOLERANCE_MS))
    # As heard, after the warm-up: the same where the playout delay held
    # (most gaps: it changes only when the path's delay does).
    check(len(warm_gaps) >= 3 and (len(steady_gaps) >= len(warm_gaps) / 2 or not strict),
          "the playout delay changed between %d of the %d ticks after %d s: %s ms"
          % (len(warm_gaps) - len(steady_gaps), len(warm_gaps), AUDIO_WARMUP_S, fmt(delay_steps)))
    check(all(abs(g - TICK_PERIOD_MS) <= TICK_TOLERANCE_MS for g in steady_gaps),
          "ticks heard %s ms apart (playout delay steps %s), want %d +- %d"
          % (fmt(ear_gaps), fmt(delay_steps), TICK_PERIOD_MS, TICK_TOLERANCE_MS))
    check(len(pairs) >= len(ticks) - 2 and len(pairs) >= 3,
          "%d of %d ticks inside the decoded video" % (len(pairs), len(ticks)))
    check(all(f for _, f in pairs), "ticks without a flash frame %s..%s ms after them: %s; flashes %s"
          % (FLASH_WINDOW_MS[0], FLASH_WINDOW_MS[1], [t["capture_us"] for t, f in pairs if not f],
             [f["capture_us"] for f in flashes]))
    check(track["av_skew_samples"] >= 30, "%d A/V skew samples" % track["av_skew_samples"])
    # The picture no more than 125 ms ahead of the sound nor 45 behind
    # (ITU-R BT.1359's thresholds of detectability), as a rule: the median.
    # (The tails are printed: a stall of the page's renderer at start-up,
    # 400 ms in one run, puts the picture behind for a second.)
    check(not strict or -125 <= track["av_skew_p50_ms"] <= 45,
          "A/V skew p50 %.1f ms (video - audio latency), want -125..45" % track["av_skew_p50_ms"])


def test_browser_audio_unmute(build, workdir, keep=None):
    """Browsers start muted: with the autoplay policy that wants a user
    gesture, the page decodes and measures the audio without playing it
    (state muted, nothing heard), and a click on its sound button starts it."""
    found = find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    from selenium.webdriver.common.by import By

    server = Server(build, workdir, "source.type=test", "source.width=%d" % WIDTH,
                    "source.height=%d" % HEIGHT, "server.max_clients_per_address=16")
    driver = None
    try:
        driver = start_browser(found[0], found[1], workdir,
                               ["--autoplay-policy=document-user-activation-required"])
        driver.get("http://127.0.0.1:%d/?name=selenium" % server.port)
        stats = wait_for(driver, lambda s: (s.get("audio") or {}).get("slots") and
                         s["audio"]["slots"] >= 100, "2 s of audio slots", 30)
        before = driver.execute_script("return window.ppsAudio()")
        button = driver.find_element(By.ID, "sound")
        label_before = button.text
        button.click()
        wait_for(driver, lambda s: s["audio"]["state"] == "playing", "the sound to start", 10)
        n = driver.execute_script("return window.ppsAudio().track.slots")
        wait_for(driver, lambda s: s["audio"]["slots"] >= n + 50, "1 s more of audio slots", 15)
        after = driver.execute_script("return window.ppsAudio()")
        label_after = driver.find_element(By.ID, "sound").text
    finally:
        if driver:
            driver.quit()
        server.stop()
    t0, t1 = before["track"], after["track"]
    print("before the click: context %s, state %s, %d slots (%.1f%% played), %d heard, button %r; "
          "after: context %s, state %s, %d slots, %d heard, button %r"
          % (before["context"]["state"], t0["state"], t0["slots"], t0["played_pct"] or 0,
             t0["heard_slots"], label_before, after["context"]["state"], t1["state"], t1["slots"],
             t1["heard_slots"], label_after))
    check(before["context"]["state"] == "suspended" and t0["state"] == "muted",
          "before a gesture: context %s, state %s" % (before["context"]["state"], t0["state"]))
    check(t0["heard_slots"] == 0 and t0["played_pct"] >= 90,
          "muted: %d slots heard, %.1f%% played" % (t0["heard_slots"], t0["played_pct"] or 0))
    check(t0["mouth_to_ear_p50_ms"] is not None, "muted: no mouth-to-ear estimate")
    check(label_before == "unmute" and label_after == "mute", "button %r, then %r"
          % (label_before, label_after))
    # Half of the 50 slots at least: a loaded machine's first heard slots come late.
    check(after["context"]["state"] == "running" and t1["heard_slots"] >= 25,
          "after the click: context %s, %d slots heard" % (after["context"]["state"], t1["heard_slots"]))
    check(stats["state"] == "streaming", "video: %s" % stats["state"])


def test_browser_audio_window(build, workdir, keep=None):
    test_browser_audio(build, workdir, keep, transport="window")


# Runs web/jitter.js in the page on made-up arrivals (an injected clock):
# each scenario's frames (seq, capture, speech, arrival) are put and popped in
# time order; what each slot did comes back.
JITTER_SCENARIOS_JS = r"""
const done = arguments[arguments.length - 1];
import('/jitter.js').then((m) => {
  const F = 20000, T0 = 1e12;
  let seed = 7;
  const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  function run(delayOf, opt = {}) {
    const n = opt.n || 1500;
    const j = new m.JitterBuffer(F);
    if (opt.floorUs) j.setFloor(opt.floorUs);
    const speechOf = opt.speechOf || ((s) => s % 50 < 3);
    const arrivals = [];
    for (let s = 0; s < n; s++)
      arrivals.push({ seq: s, captureUs: T0 + s * F, speech: speechOf(s), at: T0 + s * F + delayOf(s) });
    for (const x of opt.extra || []) arrivals.push(x);
    arrivals.sort((a, b) => a.at - b.at);
    const slots = [], puts = {};
    let i = 0, maxHeld = 0;
    for (let guard = 0; guard < 100000; guard++) {
      const due = j.nextDue();
      if (i >= arrivals.length && due === Infinity) break;
      if (i < arrivals.length && arrivals[i].at <= due) {
        const a = arrivals[i++];
        const r = j.put({ seq: a.seq, captureUs: a.captureUs, speech: a.speech }, a.at);
        puts[r] = (puts[r] || 0) + 1;
      } else {
        let sl;
        while ((sl = j.pop(due)))
          slots.push([sl.action, sl.seq, (sl.dueUs - sl.captureUs) / 1000, sl.speech ? 1 : 0]);
      }
      maxHeld = Math.max(maxHeld, j.held);
    }
    return { slots, puts, stats: j.snapshot(), maxHeld, n: n + (opt.extra || []).length };
  }
  done({
    steady: run(() => 5000),
    jitter: run(() => 5000 + 10000 * rnd()),
    // TCP's way: a 200 ms stall, then the frames held behind it come together.
    spike: run((s) => (s >= 500 && s < 510 ? 5000 + (510 - s) * F : 5000)),
    step: run((s) => (s >= 500 ? 105000 : 5000)),
    floor: run(() => 5000, { floorUs: 80000 }),
    spurts: run((s) => (s >= 700 ? 65000 : 5000) + 8000 * rnd(),
      { speechOf: (s) => s % 50 < 12 }),
    continuous: run((s) => (s >= 500 ? 65000 : 5000), { speechOf: () => true }),
    stall: run((s) => (s >= 500 && s < 600 ? (600 - s) * F + 5000 : 5000)),
    far: run(() => 5000, { n: 300,
      extra: [{ seq: 100000, captureUs: T0 + 100000 * F, speech: true, at: T0 + 100 * F }] }),
    // The sender restarts 2 s after its first frame: new numbers, a new clock.
    restart: run(() => 5000, { n: 100, extra: [...Array(100).keys()].map((k) =>
      ({ seq: 5000000 + k, captureUs: T0 + 7e9 + k * F, speech: false, at: T0 + (100 + k) * F }))}),
  });
}, (e) => done({ error: String(e) }));
"""


def test_browser_jitter(build, workdir, keep=None):
    """web/jitter.js's rules in the browser that runs it, on made-up times."""
    found = find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    server = Server(build, workdir, "server.max_clients_per_address=16")
    driver = None
    try:
        driver = start_browser(found[0], found[1], workdir)
        # A document of the server's origin that runs nothing of its own.
        driver.get("http://127.0.0.1:%d/jitter.js" % server.port)
        driver.set_script_timeout(60)
        r = driver.execute_async_script(JITTER_SCENARIOS_JS)
    finally:
        if driver:
            driver.quit()
        server.stop()
    check("error" not in r, "jitter.js: %s" % r.get("error"))

    def played(name):
        return [x for x in r[name]["slots"] if x[0] == "played"]

    def delays(name, first_seq=0):
        return sorted(x[2] for x in played(name) if x[1] >= first_seq)

    def median(xs):
        return xs[len(xs) // 2]

    for name, sc in r.items():
        st = sc["stats"]
        print("%-10s played %4d/%d, late %3d, concealed %3d, inserted %2d, skipped %2d, changes %2d,"
              " delay p50 %.1f ms, held max %d, puts %s"
              % (name, st["played"], sc["n"], st["late"], st["concealed"], st["inserted"],
                 st["skipped"], st["delay_changes"], median(delays(name)) if played(name) else -1,
                 sc["maxHeld"], sc["puts"]))
        check(sc["maxHeld"] <= st["max_frames"], "%s: %d held" % (name, sc["maxHeld"]))
    # Steady 5 ms: everything plays at 5 ms + the least margin (20 ms).
    st = r["steady"]["stats"]
    check(st["played"] == 1500 and st["late"] == 0, "steady: %s" % st)
    check(set(delays("steady")) == {25.0}, "steady: delays %s" % set(delays("steady")))
    # Jitter of 0-10 ms: nothing late, D = d + max(4 v, 20 ms) rounded up to frames.
    st = r["jitter"]["stats"]
    check(st["played"] == 1500 and st["late"] == 0, "jitter: %s" % st)
    check(median(delays("jitter")) <= 60, "jitter: delay p50 %.1f" % median(delays("jitter")))
    # A stall of 200 ms (the frames behind it come at once): few late frames,
    # D grew at the pauses and came back.
    st = r["spike"]["stats"]
    check(st["late"] <= 20 and st["played"] >= 0.98 * 1500, "spike: %s" % st)
    check(median(delays("spike", 1000)) <= 60, "spike: D after it %.1f" % median(delays("spike", 1000)))
    # A step of +100 ms: D follows it (at a talkspurt start or in a pause).
    st = r["step"]["stats"]
    check(st["late"] <= 10, "step: %d late" % st["late"])
    d = median(delays("step", 700))
    check(105 + 20 - 5 <= d <= 105 + 20 + 20, "step: D after it %.1f" % d)
    # Lip sync's floor: D at least 80 ms whatever the estimate.
    check(min(delays("floor")) >= 80, "floor: least D %.1f" % min(delays("floor")))
    # D changes only in pauses and at talkspurt starts: never between two
    # speech frames of one talkspurt.
    slots = r["spurts"]["slots"]
    for k in range(1, len(slots) - 1):
        if slots[k][0] in ("inserted", "skipped"):
            check(not (slots[k - 1][3] and slots[k - 1][0] == "played" and slots[k + 1][3]),
                  "spurts: %s inside a talkspurt at slot %d: %s" % (slots[k][0], k, slots[k - 1:k + 2]))
    check(r["spurts"]["stats"]["late"] <= 15, "spurts: %s" % r["spurts"]["stats"])
    # Continuous speech: a step a second at most, after 2 s without a pause.
    slots = r["continuous"]["slots"]
    changes = [k for k, x in enumerate(slots) if x[0] in ("inserted", "skipped")]
    check(changes and all(b - a >= 50 for a, b in zip(changes, changes[1:])),
          "continuous: changes at slots %s" % changes)
    # A 2 s stall: what comes after its slot is late, dropped and counted.
    st = r["stall"]["stats"]
    check(st["late"] >= 40 and st["played"] + st["late"] == 1500, "stall: %s" % st)
    # A frame far ahead of the ring is refused, the stream plays on.
    check(r["far"]["puts"].get("far") == 1 and r["far"]["stats"]["played"] == 300,
          "far: %s %s" % (r["far"]["puts"], r["far"]["stats"]))
    # Two frames of a new timeline restart the stream.
    st = r["restart"]["stats"]
    check(r["restart"]["puts"].get("restart") == 1 and st["restarts"] == 1 and st["played"] >= 195,
          "restart: %s %s" % (r["restart"]["puts"], st))


def ws_connect(port, extra=b"", key=None, version=b"13", path=b"/stream"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = key or base64.b64encode(os.urandom(16))
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
              b"\r\nSec-WebSocket-Version: " + version + b"\r\n" + extra + b"\r\n")
    return s


def masked(opcode, payload, mask=b"\x11\x22\x33\x44"):
    head = bytes([0x80 | opcode])
    head += bytes([0x80 | len(payload)]) if len(payload) < 126 else \
        bytes([0x80 | 126]) + struct.pack(">H", len(payload))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def close_code(data):
    """The code of the close frame after the 101 head, or None."""
    i = data.find(b"\r\n\r\n")
    i = i + 4 if i >= 0 else 0
    while i + 2 <= len(data):
        op, n = data[i] & 15, data[i + 1] & 127
        j = i + 2
        if n == 126:
            n = struct.unpack(">H", data[j:j + 2])[0]
            j += 2
        if op == 8 and n >= 2:
            return struct.unpack(">H", data[j:j + 2])[0]
        i = j + n
    return None


def test_browser_http(build, workdir, keep=None):
    server = Server(build, workdir, "server.max_clients_per_address=16")
    try:
        def get(request):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(request)
            return read_all(s)

        r = get(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        check(r.startswith(b"HTTP/1.1 200 ") and b"text/html" in r and b"viewer.js" in r,
              "GET /: %r" % r[:200])
        r = get(b"GET /viewer.js HTTP/1.1\r\n\r\n")
        check(r.startswith(b"HTTP/1.1 200 ") and b"text/javascript" in r, "viewer.js")
        check(get(b"GET /../meson.build HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 "), "404")
        check(get(b"POST / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 "), "405")
        check(get(b"GET / HTTP/1.1\r\nno colon\r\n\r\n").startswith(b"HTTP/1.1 400 "),
              "malformed head")
        check(get(b"GET / HTTP/1.1\r\nX: " + b"a" * 5000 + b"\r\n\r\n")
              .startswith(b"HTTP/1.1 431 "), "over-long head")
        # Bad handshakes: 400 and close.
        for kw in [dict(version=b"8"), dict(key=b"bm90IDE2IGJ5dGVz")]:
            r = read_all(ws_connect(server.port, **kw))
            check(r.startswith(b"HTTP/1.1 400 ") and b"Sec-WebSocket-Version: 13" in r,
                  "bad handshake %s: %r" % (kw, r[:100]))
        # A good handshake, then bad frames: closed with a code.
        hello = struct.pack(">BBH", 1, 1, 11) + struct.pack(">HHHB", 1, 0, 0, 3) + b"raw\x00"
        for frame, code in [(bytes([0x82, len(hello)]) + hello, 1002),  # unmasked
                            (masked(2, b"\x00" * 600), 1009),            # over 512 bytes
                            (masked(1, b"hello"), 1003)]:                # text
            s = ws_connect(server.port)
            s.sendall(frame)
            r = read_all(s)
            check(r.startswith(b"HTTP/1.1 101 "), "no 101: %r" % r[:100])
            check(close_code(r) == code, "expected close %d, got %s" % (code, close_code(r)))
        # A masked HELLO streams; a protocol error inside the records (a second
        # HELLO) ends with BYE protocol-error and close 1002.
        s = ws_connect(server.port)
        s.sendall(masked(2, hello))
        s.settimeout(5)
        data = b""
        while len(data) < 2000:
            c = s.recv(65536)
            check(c, "stream ended early")
            data += c
        # A recovery request (the page's decoder lost a layer): the server logs it
        # and asks the encoder for an IDR.
        s.sendall(masked(2, struct.pack(">BBHIB", 1, 11, 5, 7, 0)))
        s.sendall(masked(2, hello))
        data += read_all(s)
        check(close_code(data) == 1002, "second HELLO: close %s" % close_code(data))
    finally:
        server.stop()
    log = server.log()
    check("bad WebSocket handshake" in log, "bad handshakes not logged")
    check("unmasked client frame" in log, "unmasked frame not logged")
    check("lost layer 0 at frame 7; asking for an IDR" in log, "recovery request not handled")

KEEPALIVE_STREAM_S = 120


def viewer_hello(name="browser"):
    """The HELLO the viewer sends first (web/wire.js encodeHello, no token, no audio)."""
    body = struct.pack(">HHHB", 1, 0, 0, len(name)) + name.encode() + b"\x00"
    return struct.pack(">BBH", 1, 1, len(body)) + body


def record_kinds(message):
    """The kinds of the whole records in one server message."""
    kinds, i = [], 0
    while i + 4 <= len(message):
        version, kind, length = struct.unpack(">BBH", message[i:i + 4])
        check(version == 1 and i + 4 + length <= len(message),
              "a message that is not whole records: %r" % message[i:i + 8])
        kinds.append(kind)
        i += 4 + length
    check(i == len(message), "a record cut at the end of a message")
    return kinds


def test_browser_keepalive(build, workdir, keep=None):
    try:
        import asyncio
        import websockets
    except ImportError:
        print("SKIP: python3-websockets not installed")
        sys.exit(SKIP)
    window_begin = 3
    server = Server(build, workdir, *server_settings())

    async def watch():
        # The library's defaults on purpose: a ping every 20 s, and the
        # connection closed (1011, "keepalive ping timeout") when its pong
        # has not come 20 s later.
        loop = asyncio.get_running_loop()
        windows = []  # arrival time of each WINDOW_BEGIN
        async with websockets.connect("ws://127.0.0.1:%d/stream" % server.port) as ws:
            await ws.send(viewer_hello())
            start = loop.time()
            end = start + KEEPALIVE_STREAM_S
            while loop.time() < end:
                try:
                    message = await asyncio.wait_for(ws.recv(), end - loop.time())
                except asyncio.TimeoutError:
                    break
                except websockets.ConnectionClosed as e:
                    raise Failure("closed after %.1f s: code %s, %r (%d windows)"
                                  % (loop.time() - start, e.code, e.reason, len(windows)))
                check(isinstance(message, bytes), "a text message: %r" % message[:80])
                windows += [loop.time() - start] * record_kinds(message).count(window_begin)
            check(ws.open, "closed at the end: code %s" % ws.close_code)
        return windows

    try:
        windows = asyncio.run(watch())
        server.wait_for_log("WebSocket pings")
    finally:
        server.stop()
    recent = [t for t in windows if t >= KEEPALIVE_STREAM_S - 10]
    check(len(recent) > 0, "no window in the last 10 s (%d in all, the last at %.1f s)"
          % (len(windows), windows[-1] if windows else -1))
    # The library pinged every 20 s and each ping was answered on its own.
    m = re.search(r"(\d+) WebSocket pings, (\d+) answered by a later", server.log())
    check(m and int(m.group(1)) >= KEEPALIVE_STREAM_S // 20 - 1,
          "pings: %s" % (m.group(0) if m else server.log()[-1000:]))


# The page streams again this soon after a restarted server listens: its
# first retry comes 0.5 s after the old server's BYE, the next ones after
# 1, 2 and 3 s (web/reconnect.js, each +-20 %), so the try that finds the
# new server comes at most one wait (1.2 s while a restart takes under a
# second, 3.6 s at most) after it listens, plus the admission.
RECONNECT_BOUND_S = 5.0
RESTARTS = 3


def browser_or_skip():
    found = find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    return found


def notice(driver):
    """The page's notice: (shown, its text, whether the token field shows)."""
    from selenium.webdriver.common.by import By
    box = driver.find_element(By.ID, "notice")
    return (box.is_displayed(), driver.find_element(By.ID, "notice-text").text,
            driver.find_element(By.ID, "token").is_displayed())


def wait_notice(driver, cond, what, timeout_s=10):
    last = {}

    def ready():
        last["notice"] = n = notice(driver)
        return n if cond(*n) else None

    return wait_until(ready, lambda: "%s; notice %r" % (what, last.get("notice")),
                      timeout_s=timeout_s, poll_s=0.1)


def test_browser_reconnect(build, workdir, keep=None):
    """The server stops (BYE "server shutting down") and a new one starts on
    the same port, three times: each time the page says it will reconnect,
    then streams again (frames shown, the sound's slots played) within
    RECONNECT_BOUND_S of the new server's listening, as the page reports
    its streaming time."""
    found = browser_or_skip()
    settings = ("source.type=test", "source.width=%d" % WIDTH, "source.height=%d" % HEIGHT,
                "audio.source=source", "server.max_clients_per_address=16")
    server = Server(build, workdir, *settings)
    port = server.port
    driver = None
    took_ms = []
    try:
        driver = start_browser(found[0], found[1], workdir,
                               ["--autoplay-policy=no-user-gesture-required"])
        driver.get("http://127.0.0.1:%d/?name=selenium" % port)
        wait_for(driver, lambda s: s["state"] == "streaming" and s["frames_shown"] >= 30,
                 "the stream to start", 20)
        for restart in range(1, RESTARTS + 1):
            before = driver.execute_script("return window.ppsStats()")
            check(before.get("reconnects", 0) == restart - 1, "reconnects: %s" % before.get("reconnects"))
            server.stop()
            # The page says why and when: the server's BYE, the countdown.
            shown, text, _ = wait_notice(
                driver, lambda shown, text, token: shown and "reconnecting in" in text,
                "the page to say it reconnects")
            check("shutting down" in text, "the notice does not give the reason: %r" % text)
            stats = driver.execute_script("return window.ppsStats()")
            check(stats["state"] in ("reconnecting", "connecting"), "state %s" % stats["state"])
            server = Server(build, workdir, *settings, port=port)
            listening_ms = time.time() * 1000
            stats = wait_for(driver, lambda s: s.get("reconnects") == restart and
                             s["state"] == "streaming", "the stream to come back",
                             RECONNECT_BOUND_S + 10)
            took = stats["streaming_at_unix_ms"] - listening_ms
            took_ms.append(took)
            print("restart %d: streaming again %.0f ms after the new server listened (%d tries)"
                  % (restart, took, stats["connects"] - before["connects"]))
            # Streaming again: new frames shown, the notice gone, the sound back.
            wait_for(driver, lambda s: s["frames_shown"] >= before["frames_shown"] + 30,
                     "frames shown after the restart", 15)
            check(not notice(driver)[0], "the notice still shows: %r" % (notice(driver),))
            audio = driver.execute_script("return window.ppsAudio()")
            if (audio.get("support") or {}).get("supported"):
                wait_for(driver, lambda s: (s.get("audio") or {}).get("slots", 0) >= 25,
                         "the sound's slots after the restart", 10)
    finally:
        if driver:
            driver.quit()
        server.stop()
    check(all(t <= RECONNECT_BOUND_S * 1000 for t in took_ms),
          "streaming again took %s ms after the new server listened (bound %.0f)"
          % (["%.0f" % t for t in took_ms], RECONNECT_BOUND_S * 1000))
    print("reconnect: %s ms" % ", ".join("%.0f" % t for t in took_ms))


def test_browser_token(build, workdir, keep=None):
    """A server with an access token: the page without one, then with a wrong
    one (?token=), shows the token field and says why; the right token typed
    into it streams, leaves the URL, and is remembered for the tab (a reload
    streams without asking)."""
    from selenium.webdriver.common.by import By
    found = browser_or_skip()
    token = "the-viewer-right-token"
    server = Server(build, workdir, *server_settings(), "server.access_token=" + token)
    driver = None
    try:
        driver = start_browser(found[0], found[1], workdir)
        driver.get("http://127.0.0.1:%d/?name=selenium" % server.port)
        wait_for(driver, lambda s: s["state"] == "token", "the page to ask for a token", 20)
        _, text, _ = wait_notice(driver, lambda shown, text, field: shown and field,
                                 "the token field")
        check("needs an access token" in text, "notice without a token: %r" % text)

        driver.get("http://127.0.0.1:%d/?name=selenium&token=wrong" % server.port)
        stats = wait_for(driver, lambda s: s["state"] == "token", "the page to ask for a token", 20)
        _, text, _ = wait_notice(driver, lambda shown, text, field: shown and field,
                                 "the token field")
        check("refused" in text, "notice with a wrong token: %r" % text)
        check(stats["frames_shown"] == 0 and stats["reconnects"] == 0, "stats %s" % stats)

        field = driver.find_element(By.ID, "token")
        field.send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()
        wait_for(driver, lambda s: s["state"] == "streaming" and s["frames_shown"] >= 30,
                 "the stream with the right token", 20)
        check(not notice(driver)[0], "the notice still shows: %r" % (notice(driver),))
        check("token=" not in driver.current_url, "the token stays in the URL: %s"
              % driver.current_url)

        driver.refresh()
        wait_for(driver, lambda s: s["state"] == "streaming" and s["frames_shown"] >= 10,
                 "the stream after a reload (the remembered token)", 20)
    finally:
        if driver:
            driver.quit()
        server.stop()
    log = server.log()
    check("wrong access token" in log or "unauthorized" in log, "the server's log: %s" % log[-1500:])


def test_browser_relay(build, workdir, keep=None):
    """The browser on a relay: its front page lists the published streams
    and their room; the viewer plays a stream by name
    (index.html?stream=room/alice); the room page (room.html?room=room)
    shows every participant in a tile that streams, and drops the tile of
    one who stopped publishing."""
    from selenium.webdriver.common.by import By
    from test_relay import Relay, publish, stop_all
    found = browser_or_skip()
    settings = ("source.type=test", "source.width=%d" % WIDTH, "source.height=%d" % HEIGHT,
                "source.fps=15", "audio.source=off")
    relay = Relay(build, workdir, "server.max_clients_per_address=16")
    alice = bob = driver = None
    base = "http://%s/" % relay.address
    try:
        alice = publish(build, workdir, relay, "room/alice", *settings, duration=90)
        bob = publish(build, workdir, relay, "room/bob", *settings, duration=90)
        driver = start_browser(found[0], found[1], workdir)
        driver.get(base)

        def listed():
            rows = driver.find_elements(By.CSS_SELECTOR, "#streams tbody tr")
            rooms = driver.find_elements(By.CSS_SELECTOR, "#rooms a")
            names = sorted(r.find_element(By.TAG_NAME, "a").text for r in rows)
            return names == ["room/alice", "room/bob"] and [a.text for a in rooms] == ["room"]

        wait_until(listed, lambda: "the front page to list both streams and the room: %s"
                   % driver.find_element(By.TAG_NAME, "body").text, timeout_s=15, poll_s=0.2)

        driver.get(base + "index.html?stream=room/alice&name=selenium")
        wait_for(driver, lambda s: s["state"] == "streaming" and s["frames_shown"] >= 30,
                 "room/alice by name", 20)
        check("room/alice" in driver.title, "title %r" % driver.title)

        driver.get(base + "room.html?room=room")

        def tiles():
            # One script: a tile may go between a lookup and a read.
            return sorted(driver.execute_script(
                "return [...document.querySelectorAll('iframe')].map((f) => f.title)"))

        wait_until(lambda: tiles() == ["room/alice", "room/bob"],
                   lambda: "two tiles: %s" % tiles(), timeout_s=15, poll_s=0.2)
        for name in ("room/alice", "room/bob"):
            frame = driver.find_element(By.CSS_SELECTOR, 'iframe[title="%s"]' % name)
            driver.switch_to.frame(frame)
            try:
                stats = wait_for(driver, lambda s: s["state"] == "streaming" and s["frames_shown"] >= 20,
                                 "the tile of %s" % name, 30)
            finally:
                driver.switch_to.default_content()
            print("room tile %s: %d frames shown" % (name, stats["frames_shown"]))
        bob.stop()
        bob = None
        wait_until(lambda: tiles() == ["room/alice"], lambda: "bob's tile to go: %s" % tiles(),
                   timeout_s=15, poll_s=0.2)
    finally:
        if driver:
            driver.quit()
        stop_all(alice, bob, relay)
    log = relay.log()
    check("web requests" in log, "the relay's summary: %s" % log[-600:])


TESTS = {"browser_stream": test_browser_stream, "browser_stream_early": test_browser_stream_early,
         "browser_stream_disposable": test_browser_stream_disposable,
         "browser_http": test_browser_http, "browser_audio": test_browser_audio,
         "browser_audio_window": test_browser_audio_window, "browser_jitter": test_browser_jitter,
         "browser_audio_unmute": test_browser_audio_unmute,
         "browser_keepalive": test_browser_keepalive, "browser_reconnect": test_browser_reconnect,
         "browser_token": test_browser_token, "browser_relay": test_browser_relay}

if __name__ == "__main__":
    build, name = sys.argv[1], sys.argv[2]
    keep = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--keep" else None
    with tempfile.TemporaryDirectory(prefix="pps-web-") as workdir:
        try:
            TESTS[name](os.path.abspath(build), workdir, keep)
        except Failure as e:
            print("FAIL: %s" % e)
            sys.exit(1)
    print("ok")
