# SPDX-License-Identifier: MIT
"""The browser viewer: pps-server (ppstream.py's sender) serves its page and
the stream over WebSocket; headless Chromium, driven by selenium in the
receiver's namespace, plays it and reports its figures (window.ppsStats()).

Run in the namespace as `python3 -m ppslab.wrappers.browser URL SECONDS OUT`
(the receiver this wrapper starts). Chromium gets
--unsafely-treat-insecure-origin-as-secure for the lab address: WebCodecs
needs a secure context and the lab has no TLS. Files: the server's,
browser[-TAG].json (its stats), browser[-TAG].png (a screenshot at the end),
browser[-TAG].err.
"""
import json
import os
import shutil
import sys
import tempfile
import time

from .. import programs
from ..files import read_json
from . import register
from .ppstream import Ppstream

PYTHON = "/usr/bin/python3"  # Debian's, with selenium
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def available():
    """Whether Chromium and its driver are installed."""
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


@register
class Browser(Ppstream):
    name = "browser"
    label = "browser (Chromium, WebCodecs)"

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        argv = [PYTHON, "-m", __name__, "http://%s/?name=lab" % address, "%g" % duration_s,
                self.path("browser", "json", tag)]
        return self.receiver_started(programs.Program(argv, lab, side, stderr=self.path("browser", "err", tag),
                                                      env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT)))

    def results(self, tag=None):
        b = read_json(self.path("browser", "json", tag)) or {}
        return {"stats": b, "frames_shown_pct": b.get("frames_shown_pct"),
                "frame_latency_p50_ms": b.get("frame_latency_p50_ms"),
                "frame_latency_p95_ms": b.get("frame_latency_p95_ms"),
                "longest_freeze_ms": None, "bits_per_second": None}


def drive(url, duration_s, out, workdir):
    """Runs inside the receiver's namespace: the page for @duration_s, then its stats to @out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    origin = url.split("/", 3)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=720,600", "--no-first-run", "--disable-extensions",
                "--unsafely-treat-insecure-origin-as-secure=%s//%s" % (origin[0], origin[2]),
                "--user-data-dir=" + os.path.join(workdir, "chromium")]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                              options=options)
    try:
        driver.get(url)
        # A measurement, not a test: the page runs for the experiment's time.
        time.sleep(duration_s)
        stats = driver.execute_script("return window.ppsStats()")
        driver.save_screenshot(os.path.splitext(out)[0] + ".png")
    finally:
        driver.quit()
    with open(out, "w") as f:
        json.dump(stats, f, indent=1)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="pps-blab-") as wd:
        drive(sys.argv[1], float(sys.argv[2]), sys.argv[3], wd)
