# SPDX-License-Identifier: MIT
"""ppssrc: pps-server as the sender (ppstream.py's), the GStreamer source
element as the receiver (gst-launch ppssrc ! fakesink sync=true), its JSON
Lines log (log-file) in the client's format. It runs until stop().

Files: the server's, client[-TAG].jsonl (ppssrc's log), receiver[-TAG].err.
"""
import signal
import time

from .. import programs
from . import register
from .ppstream import Ppstream


@register
class Ppssrc(Ppstream):
    name = "ppssrc"
    label = "pps-server -> gst-launch ppssrc"

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        self.duration_s = duration_s
        argv = ["gst-launch-1.0", "-e", "ppssrc", "location=" + address, "log-file=" + self.path("client", "jsonl", tag),
                "!", "fakesink", "sync=true"]
        return self.receiver_started(programs.Program(argv, lab, side, stderr=self.path("receiver", "err", tag),
                                                      env=self.build.gst_env()))

    def wait(self, timeout_s):
        """gst-launch ppssrc has no duration of its own: it runs for the run's
        duration (a schedule, not a synchronization), then SIGINT (-e: end of
        stream, the log's summary)."""
        time.sleep(min(self.duration_s, timeout_s))
        for r in self.receivers:
            r.stop(signal.SIGINT, 15)
        return super().wait(15)

    def stop_kw(self, program):
        return {"sig": signal.SIGINT, "timeout_s": 15}
