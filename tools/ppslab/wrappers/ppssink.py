# SPDX-License-Identifier: MIT
"""ppssink: the GStreamer sink element as the sender (gst-launch
videotestsrc ! ppssink), pps-client as the receiver (ppstream.py's).

Settings: picture (the caps of the source), pattern, speed (pixels a frame
the pattern scrolls), congestion; the receiver's as ppstream's. Files:
sender.err (gst-launch -m: its messages, the port among them), the client's.
"""
import re
import subprocess

from .. import programs
from . import register
from .ppstream import Ppstream

PICTURE = "video/x-raw,width=640,height=480,framerate=30/1"


@register
class Ppssink(Ppstream):
    name = "ppssink"
    label = "gst-launch ... ppssink -> pps-client"

    def start_sender(self, lab, duration_s):
        s = self.settings
        snd = lab.addr("snd")
        err = self.path("sender", "err")
        argv = ["gst-launch-1.0", "-m", "-e", "videotestsrc", "is-live=true", "pattern=%s" % s.get("pattern", "smpte"),
                "horizontal-speed=%d" % s.get("speed", 2), "!", s.get("picture", PICTURE), "!", "ppssink",
                "listen=%s:0" % snd, "timecode=true", "congestion=%s" % s.get("congestion", "cubic")]
        sender = programs.Program(argv, lab, "snd", stdout=err, stderr=subprocess.STDOUT, env=self.build.gst_env())
        self.senders.append(sender)
        port = programs.port_from_log(err, sender.proc, 30, re.compile(r"pps-listening.*port=\(uint\)(\d+)"))
        return f"{snd}:{port}"
