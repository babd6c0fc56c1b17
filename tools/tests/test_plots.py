#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ppslab.plots' window timeline (suite unit): the per-window series the
sweep's timeline.png draws are the counts themselves, frames shown of the
window and the most quality layers among them, at their true heights (no
offset that would make 2 layers read as 2.08)."""
import sys

from ppslab.plots import window_steps

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


def frame(window, capture_us, shown, quality_layers):
    return {"window": str(window), "capture_us": str(capture_us), "shown": "1" if shown else "0",
            "quality_layers": str(quality_layers)}


frames = [frame(0, 1_000_000, True, 2), frame(0, 1_033_333, True, 1),
          frame(1, 1_066_667, True, 1), frame(1, 1_100_000, False, 2),
          frame(2, 1_133_333, False, 0), frame(2, 1_166_667, False, 0)]
t, shown, layers = window_steps(frames, 1_000_000)
check(t == [(c - 1_000_000) / 1e6 for c in (1_000_000, 1_066_667, 1_133_333)], f"window starts {t}")
check(shown == [2, 1, 0], f"frames shown per window {shown}")
check(layers == [2, 1, 0], f"quality layers per window {layers}: the counts, not offset")
check(all(isinstance(v, int) for v in layers), "layers are whole numbers")
sys.exit(1 if failures else 0)
