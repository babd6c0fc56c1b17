# SPDX-License-Identifier: MIT
"""GStreamer plain TCP: MPEG-TS over tcpserversink / tcpclientsrc (peer.py)."""
from . import register
from .peer import Peer


@register
class GstTcp(Peer):
    name = "gst-tcp"
    label = "GStreamer TCP (x264 zerolatency)"
    transport = "tcp"
