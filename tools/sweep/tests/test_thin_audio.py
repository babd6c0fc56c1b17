#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A viewer whose path the audio's own copies fill: pps-fanout with a
receiver on a 0.5 Mbit/s link whose queue holds 3 packets (1 BDP at 50 ms)
beside one on 8 Mbit/s, smpte with the test tone, 20 s, the server's
default settings.

The server must say that it turned the client's audio copies off (its first
audio connection retransmits above audio.copies_off_loss_permille there),
and the stream must get through on that path: frames shown and audio
played above floors with a margin below what such runs measure (97-99.6%
and 95% with the rule, 88-98% and 94-96% without; with the pacing at twice
the tcp-friendly rate, eight runs alternated with it at once the rate gave
94.1-100% and 97.1-99.7% shown, 92.0-95.1% and 88.9-95.8% played, and one
suite run 89.9% shown; later, eight runs 97.3-99.3% shown and 87.4-96.4%
played, and two suite runs 84.9% and 84.3% played: the audio's floor sits
below those). Exit 77 without root or /dev/net/tun.

usage: test_thin_audio.py PPS_FANOUT
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
MIN_SHOWN_PCT = 90.0
MIN_PLAYED_PCT = 80.0


def main(argv):
    fanout = argv[1]
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("skipped: needs root and /dev/net/tun")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="pps-thin-audio-") as out:
        r = subprocess.run([fanout, "--rates", "0.5,8", "--duration", "20", "--pattern", "smpte",
                            "--relay", "0", "--out", out], capture_output=True, text=True, timeout=240)
        print(r.stdout[-1500:])
        if r.returncode == SKIP:
            return SKIP
        if r.returncode != 0:
            print("FAIL: pps-fanout exited %d: %s" % (r.returncode, r.stderr[-1500:]))
            return 1
        with open(os.path.join(out, "server.err")) as f:
            server = f.read()
        summary = None
        with open(os.path.join(out, "client-rcv1.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e.get("type") == "summary":
                    summary = e
    copies = [line for line in server.splitlines() if "audio copies" in line and "198.19.0.1" in line]
    print("\n".join(copies) or "the server never turned the audio copies off")
    if summary is None:
        print("FAIL: no client summary")
        return 1
    shown, played = summary["frames_shown_pct"], summary.get("audio_played_pct", 0)
    print("frames shown %.1f%% (p95 %.0f ms), audio played %.1f%%"
          % (shown, summary["frame_latency_p95_ms"] or -1, played))
    failures = []
    if not any("audio copies off" in line for line in copies):
        failures.append("the server never turned the audio copies off")
    if shown < MIN_SHOWN_PCT:
        failures.append("frames shown %.1f%% < %.0f%%" % (shown, MIN_SHOWN_PCT))
    if played < MIN_PLAYED_PCT:
        failures.append("audio played %.1f%% < %.0f%%" % (played, MIN_PLAYED_PCT))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
