# SPDX-License-Identifier: MIT
"""SRT with its default 120 ms latency: MPEG-TS over srtsink / srtsrc (peer.py)."""
from . import register
from .peer import Peer


@register
class Srt(Peer):
    name = "srt"
    label = "SRT 120 ms (x264 zerolatency)"
    transport = "srt"
