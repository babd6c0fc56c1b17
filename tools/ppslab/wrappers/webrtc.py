# SPDX-License-Identifier: MIT
"""WebRTC between two headless Chromiums (docs/PEERS.md): the sender page
(tools/peers/webrtc/sender.html) draws the lab's test picture with its
pixel timecode 30 times a second into a MediaStreamTrackGenerator feeding an
RTCPeerConnection; the receiver page plays the track and, for every frame
it presents (requestVideoFrameCallback), reads the timecode back and keeps
the frame's display time and size. Browser defaults throughout: VP8, GCC,
NACK/RTX, no bitrate set.

Each side is a selenium + chromedriver + Chromium started inside its own
namespace (`python3 -m ppslab.wrappers.webrtc send|recv PAGES RUNDIR
SECONDS PATTERN`). The SDP offer and answer go through files in the run folder
(ICE gathering completes before each is written: no signalling server, no
trickle). Chromium gathers no host candidate unless it finds a route to a
public address (it probes one with a UDP connect that sends nothing), so
each namespace gets a /32 route for that address on the lab's device;
nothing is sent to it (no STUN server is configured), and the route goes
with the namespace.

Which frame a row is: the callback reads the picture the <video> holds when
it runs, which is newer than the presented one the metadata describes when
the callback runs late (a few in a hundred rows on a loaded machine). The
metadata's RTP timestamp names the presented frame: RTP time follows the
capture time (the page's capture time minus RTP time varied by under 2 ms
in a run), so a row whose difference is off the run's median by half a
frame period or more read a newer picture, and scores() moves it back by
that many frame periods (`redrawn` in results()).

Files: offer.sdp, answer.sdp, sender.err, sender.json (counts and getStats
samples), receiver.err, frames.tsv (a row per presented frame: display_us,
timecode_ok, frame_index, capture_us, width, height, presented,
callback_us, media_us, rtp_timestamp, rtp_capture_us, receive_us: the
callback's own time and the metadata's),
receiver.json (start and end of the run, getStats samples), scores.tsv
(written by scores(): pps-peer-score's columns, without PSNR and SSIM).
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from .. import programs
from ..errors import Failure
from ..files import read_json, read_tsv
from . import Wrapper, register

PYTHON = "/usr/bin/python3"  # Debian's, with selenium
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The pages sit beside the peers' programs, in the source tree and in the build.
PAGES = os.path.join(PACKAGE_PARENT, "peers", "webrtc")
# The address Chromium probes for a default route (its network manager's IPv4 one).
PROBE_ADDRESS = "8.8.8.8"
SDP_TIMEOUT_S = 60
PERIOD_US = 1e6 / 30
RTP_CLOCK_HZ = 90000
TAKE_INTERVAL_S = 1.0
FRAME_COLUMNS = ("display_us", "timecode_ok", "frame_index", "capture_us", "width", "height", "presented",
                 "callback_us", "media_us", "rtp_timestamp", "rtp_capture_us", "receive_us")
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
    "--window-size=800,600", "--autoplay-policy=no-user-gesture-required",
    # Host candidates as addresses: an mDNS name cannot be resolved across namespaces.
    "--disable-features=WebRtcHideLocalIpsWithMdns",
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows", "--allow-file-access-from-files",
]


def available():
    """Whether Chromium, its driver and selenium (for /usr/bin/python3) are installed."""
    return bool(shutil.which("chromium") and shutil.which("chromedriver") and os.path.exists(PYTHON))


@register
class WebRTC(Wrapper):
    name = "webrtc"
    label = "WebRTC (Chromium, VP8, GCC)"

    def route_probe(self, lab, side):
        """The /32 route Chromium's candidate gathering needs (see above)."""
        routes = lab.run_in(side, ["ip", "-o", "-4", "route", "show"]).split()
        dev = routes[routes.index("dev") + 1]
        lab.run_in(side, ["ip", "route", "replace", PROBE_ADDRESS + "/32", "dev", dev])

    def driver(self, lab, side, role, seconds, stderr):
        argv = [PYTHON, "-m", __name__, role, PAGES, self.rundir, "%g" % seconds, self.settings.get("pattern", "smpte")]
        return programs.Program(argv, lab, side, stderr=stderr, env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT))

    def start_sender(self, lab, duration_s):
        if not available():
            raise Failure("chromium, chromedriver or python3-selenium is not installed")
        for stale in ("offer.sdp", "answer.sdp"):
            if os.path.exists(self.path(*stale.split("."))):
                os.unlink(self.path(*stale.split(".")))
        self.route_probe(lab, "snd")
        # The sender's bound: the receiver's setup, its run and the end; stop() ends it sooner.
        self.senders.append(self.driver(lab, "snd", "send", duration_s + SDP_TIMEOUT_S + 30, self.path("sender", "err")))
        return self.path("offer", "sdp")

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        self.route_probe(lab, side)
        return self.receiver_started(self.driver(lab, side, "recv", duration_s, self.path("receiver", "err")))

    def wait(self, timeout_s):
        """The receivers' end; the run starts when the receiver had the offer
        (its connection's setup, as a TCP receiver's connect) and ends with
        its last frame."""
        ended = super().wait(timeout_s)
        rx = read_json(self.path("receiver", "json")) or {}
        if rx.get("start_us"):
            self.start_us, self.end_us = rx["start_us"], rx["end_us"]
        return ended

    def stop_kw(self, program):
        return {"sig": signal.SIGTERM, "timeout_s": 15}

    def failed(self):
        failed = super().failed()
        if failed:
            return failed
        if not os.path.exists(self.path("frames", "tsv")):
            return "the WebRTC receiver wrote no frames.tsv (receiver.err, sender.err)"
        return None

    def presented(self):
        """Per row of frames.tsv: (timecode_ok, frame_index, capture_us,
        periods moved back) of the frame presented (see above)."""
        frames = read_tsv(self.path("frames", "tsv"))
        offsets, wrap, last = [], 0, None
        for r in frames:
            if not r.get("rtp_timestamp") or r["timecode_ok"] != "1":
                offsets.append(None)
                continue
            rtp = int(r["rtp_timestamp"])
            if last is not None and rtp < last - 2 ** 31:
                wrap += 2 ** 32
            last = rtp
            offsets.append(int(r["capture_us"]) - (rtp + wrap) * 1e6 / RTP_CLOCK_HZ)
        known = sorted(o for o in offsets if o is not None)
        median = known[len(known) // 2] if known else None
        out = []
        for r, o in zip(frames, offsets):
            if r["timecode_ok"] != "1":
                out.append((False, 0, 0, 0))
                continue
            back = round((o - median) / PERIOD_US) if o is not None and median is not None else 0
            # Moved back, the capture time is the RTP timestamp's (within ~2 ms).
            capture_us = int(r["capture_us"]) - (round(o - median) if back else 0)
            out.append((True, int(r["frame_index"]) - back, capture_us, back))
        return out

    def scores(self):
        """scores.tsv in pps-peer-score's columns from the page's read-out:
        the page's frame index is its capture slot, which is the source
        picture's number (ref_frame); no PSNR or SSIM (the pictures stay in
        the page)."""
        with open(self.path("scores", "tsv"), "w") as f:
            f.write("ordinal\ttimecode_ok\tframe_index\tcapture_us\tref_frame\tpsnr_y\tssim_y\tref_check\n")
            for i, (ok, index, capture_us, _) in enumerate(self.presented()):
                f.write(f"{i}\t{int(ok)}\t{index}\t{capture_us}\t{index if ok else -1}\t\t\t-1\n")
        return read_tsv(self.path("scores", "tsv"))

    def display_times(self, scores, tag=None):
        """The display time of each presented frame (expectedDisplayTime), in order."""
        frames = read_tsv(self.path("frames", "tsv"))
        return [int(f["display_us"]) for f in frames[: len(scores)]]

    def results(self, tag=None):
        """From the receiver's getStats samples over [start + 2 s, end - 1 s]
        (the analysis' window): the RTP payload received per second
        (bytesReceived of the video stream: retransmissions and padding
        included), the mean received frame rate (framesPerSecond, decoded
        frames) and the frame sizes with the share of the samples at each;
        redrawn: the rows moved back to the frame presented."""
        rx = read_json(self.path("receiver", "json")) or {}
        stats = [s for s in rx.get("stats", []) if s.get("bytesReceived") is not None]
        out = {"frames_shown_pct": None, "frame_latency_p50_ms": None, "frame_latency_p95_ms": None,
               "longest_freeze_ms": None, "bits_per_second": None, "received_fps": None, "received_sizes": {},
               "redrawn": sum(1 for p in self.presented() if p[3]) if os.path.exists(self.path("frames", "tsv")) else None}
        if not stats or not rx.get("start_us"):
            return out
        t0, t1 = rx["start_us"] + 2e6, rx["end_us"] - 1e6
        inside = [s for s in stats if t0 <= s["t_us"] <= t1] or stats
        if len(inside) >= 2 and inside[-1]["t_us"] > inside[0]["t_us"]:
            out["bits_per_second"] = 8e6 * (inside[-1]["bytesReceived"] - inside[0]["bytesReceived"]) / (inside[-1]["t_us"] - inside[0]["t_us"])
        fps = [s["framesPerSecond"] or 0 for s in inside if "frameWidth" in s]
        out["received_fps"] = sum(fps) / len(fps) if fps else 0.0
        for s in inside:
            if s.get("frameWidth"):
                size = f"{s['frameWidth']}x{s['frameHeight']}"
                out["received_sizes"][size] = out["received_sizes"].get(size, 0) + 1
        return out


# ---------------------------------------------------------------- inside a namespace


class Stopped(Exception):
    pass


def on_signal(signum, frame):
    raise Stopped()


def chromium(workdir):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in CHROMIUM_FLAGS + ["--user-data-dir=" + os.path.join(workdir, "chromium")]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    driver.set_script_timeout(30)
    return driver


def call(driver, function, *args):
    """await @function(...args) in the page; its value (an error is Failure)."""
    r = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"{function}(...Array.from(arguments).slice(0, -1)).then((v) => done({{v}}), (e) => done({{e: String(e)}}));",
        *args)
    if "e" in r:
        raise Failure(f"{function}: {r['e']}")
    return r["v"]


def file_wait(path, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not (os.path.exists(path) and os.path.getsize(path)):
        if time.monotonic() > deadline:
            raise Failure(f"no {os.path.basename(path)} within {timeout_s} s")
        time.sleep(0.05)
    with open(path) as f:
        return f.read()


def file_write(path, text):
    """Whole or not at all: the other side polls for it."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def json_write(path, value):
    file_write(path, json.dumps(value, indent=1))


def send(driver, pages, rundir, bound_s, pattern):
    """The sender's page drawing @pattern: the offer out, the answer in, then
    frames until stopped or @bound_s; its counts and stats to sender.json
    each second."""
    driver.get("file://" + os.path.join(pages, "sender.html") + "?pattern=" + pattern)
    file_write(os.path.join(rundir, "offer.sdp"), call(driver, "ppsSenderStart"))
    call(driver, "ppsSenderAnswer", file_wait(os.path.join(rundir, "answer.sdp"), SDP_TIMEOUT_S))
    out = {"stats": []}
    deadline = time.monotonic() + bound_s
    try:
        while time.monotonic() < deadline:
            time.sleep(TAKE_INTERVAL_S)
            take = driver.execute_script("return ppsSenderTake()")
            out["stats"] += take["stats"]
            out["counts"], out["connection"] = take["counts"], take["connection"]
            json_write(os.path.join(rundir, "sender.json"), out)
    except Stopped:
        pass


def recv(driver, pages, rundir, duration_s, pattern=None):
    """The receiver's page: the offer in, the answer out, then @duration_s
    of frames; frames.tsv and receiver.json."""
    driver.get("file://" + os.path.join(pages, "receiver.html"))
    offer = file_wait(os.path.join(rundir, "offer.sdp"), SDP_TIMEOUT_S)
    out = {"start_us": int(time.time() * 1e6), "stats": []}
    file_write(os.path.join(rundir, "answer.sdp"), call(driver, "ppsReceiverStart", offer))
    end = time.monotonic() + duration_s
    with open(os.path.join(rundir, "frames.tsv"), "w") as frames:
        frames.write("\t".join(FRAME_COLUMNS) + "\n")
        while True:
            time.sleep(max(0.0, min(TAKE_INTERVAL_S, end - time.monotonic())))
            take = driver.execute_script("return ppsReceiverTake()")
            for row in take["frames"]:
                frames.write("\t".join(str(int(v)) for v in row) + "\n")
            frames.flush()
            out["stats"] += take["stats"]
            out["connection"] = take["connection"]
            if time.monotonic() >= end:
                break
    out["end_us"] = int(time.time() * 1e6)
    json_write(os.path.join(rundir, "receiver.json"), out)


def main(role, pages, rundir, seconds, pattern):
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with tempfile.TemporaryDirectory(prefix="pps-webrtc-") as workdir:
        driver = None
        try:
            driver = chromium(workdir)
            (send if role == "send" else recv)(driver, pages, rundir, seconds, pattern)
        except Stopped:
            return 1 if role == "recv" else 0
        except Failure as e:
            print(f"webrtc {role}: {e}", file=sys.stderr)
            return 1
        finally:
            if driver is not None:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]))
