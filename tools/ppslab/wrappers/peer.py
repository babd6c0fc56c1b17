# SPDX-License-Identifier: MIT
"""The peers' common part (docs/PEERS.md): ppstream's test source encoded by
x264 (zerolatency) into MPEG-TS and sent by pps-peer-send over a GStreamer
transport; pps-peer-recv decodes it, writes the pictures shown (y4m) and each
picture's receive time (frames.tsv). gst_tcp and srt choose the transport.

Settings: kbps (x264's bitrate), pattern (source.pattern), fps, port.
Files: sender.ready, sender.err, sender.json, receiver.err, receiver.json,
frames.tsv, shown.y4m.
"""
import signal

from .. import process, programs
from ..files import read_json, read_tsv
from . import Wrapper

PORT = 7400
READY_TIMEOUT_S = 15.0


class Peer(Wrapper):
    transport = ""  # pps-peer-send --sink / pps-peer-recv --source

    def start_sender(self, lab, duration_s):
        s = self.settings
        snd, port = lab.addr("snd"), s.get("port", PORT)
        ready = self.path("sender", "ready")
        sender = programs.Program(
            [self.build.peer_send, "--sink", self.transport, "--listen", f"{snd}:{port}", "--kbps", s["kbps"],
             "--duration", int(duration_s + 30), "--stats-json", self.path("sender", "json"),
             "--set", f"source.pattern={s.get('pattern', 'smpte')}", "--set", f"source.fps={s.get('fps', 30)}"],
            lab, "snd", stdout=ready, stderr=self.path("sender", "err"), new_session=False)
        self.senders.append(sender)
        process.wait_file(ready, sender.proc, READY_TIMEOUT_S, "the sender's ready line")
        return f"{snd}:{port}"

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        s = self.settings
        recv = programs.Program(
            [self.build.peer_recv, "--source", self.transport, "--connect", address, "--duration", int(duration_s),
             "--fps", s.get("fps", 30), "--output", self.path("shown", "y4m", tag),
             "--frames", self.path("frames", "tsv", tag), "--stats-json", self.path("receiver", "json", tag)],
            lab, side, stderr=self.path("receiver", "err", tag), new_session=False)
        return self.receiver_started(recv)

    def stop_kw(self, program):
        return {"sig": signal.SIGINT, "timeout_s": 10}

    def results(self, tag=None):
        """The bytes the receiver's source element delivered (MPEG-TS, i.e. TCP
        or SRT payload) over its run; the rest is measured on the pictures."""
        rx = read_json(self.path("receiver", "json", tag)) or {}
        bps = 8.0 * rx["bytes_received"] / rx["seconds"] if rx.get("seconds") else None
        return {"frames_shown_pct": None, "frame_latency_p50_ms": None, "frame_latency_p95_ms": None,
                "longest_freeze_ms": None, "bits_per_second": bps}

    def display_times(self, scores, tag=None):
        """pps-peer-recv's receive time of each decoded picture, in order."""
        frames = read_tsv(self.path("frames", "tsv", tag))
        return [int(f["recv_us"]) for f in frames[: len(scores)]]
