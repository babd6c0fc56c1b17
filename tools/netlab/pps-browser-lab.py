#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The browser viewer beside pps-client through the lab:
one pps-server in `snd`, pps-client and headless Chromium (the page the
server serves, over WebSocket) both in `rcv`, on one emulated link with
optional cubic cross traffic; prints both sides' frames shown, latency
p50/p95 and freezes, and writes DIR/browser-lab.json.

    build/tools/netlab/pps-browser-lab --flows 20 --duration 30 --out /tmp/blab

Link: 10 Mbit/s, 50 ms RTT, drop-tail of 1 BDP (the sweep's must-show cell).
Both viewers use their default playout policy (adaptive). The server checks
the MIN_BUF bound on the browser's socket independently (PPS_WEB_CHECK_BOUND)
and the result is printed. Chromium gets
--unsafely-treat-insecure-origin-as-secure for the lab address: WebCodecs
needs a secure context and the lab has no TLS. Needs root (pps-netlab);
exits 77 where the lab or Chromium is not available.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from netlab_lab import Lab, NotPermitted  # noqa: E402

SKIP = 77


def drive_browser(url, duration_s, out, workdir):
    """Runs inside the receiver namespace: the page for duration_s, then its stats."""
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


def client_summary(path):
    with open(path) as f:
        events = [json.loads(line) for line in f]
    s = [e for e in events if e.get("type") == "summary"]
    return s[-1] if s else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", ".."), help="meson build dir")
    ap.add_argument("--flows", type=int, default=20, help="cubic elephants (0 = idle)")
    ap.add_argument("--duration", type=float, default=30, help="seconds measured")
    ap.add_argument("--warmup", type=float, default=4, help="seconds of cross traffic first")
    ap.add_argument("--size", default="320x240", help="source WxH (default 320x240)")
    ap.add_argument("--pattern", default="smpte", help="source pattern")
    ap.add_argument("--out", help="output directory (required)")
    ap.add_argument("--name", default="weblab", help="lab name")
    ap.add_argument("--drive", nargs=3, metavar=("URL", "SECONDS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.drive:
        with tempfile.TemporaryDirectory(prefix="pps-blab-") as wd:
            drive_browser(args.drive[0], float(args.drive[1]), args.drive[2], wd)
        return 0

    if not args.out:
        ap.error("--out is required")
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        print("pps-browser-lab: chromium / chromedriver not installed", file=sys.stderr)
        return SKIP
    build = os.path.abspath(args.build)
    netlab = os.path.join(build, "tools", "netlab", "pps-netlab")
    server_exe = os.path.join(build, "server", "pps-server")
    client_exe = os.path.join(build, "client", "pps-client")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    width, height = args.size.split("x")
    lab_s = args.warmup + args.duration + 60
    up = ["--rate", "10mbit", "--delay", "25ms", "--aqm", "droptail", "--ecn", "off",
          "--congestion", "cubic", "--queue", "auto"]
    procs = []
    try:
        with Lab(netlab, args.name, up, lab_s) as lab:
            snd = lab.addr("snd")
            if args.flows:
                procs.append(subprocess.Popen(
                    lab.traffic_argv(args.flows, args.warmup + args.duration + 20),
                    stdin=subprocess.DEVNULL, stdout=open(os.path.join(out, "traffic.txt"), "w"),
                    stderr=subprocess.STDOUT, start_new_session=True))
                time.sleep(args.warmup)
            port_file = os.path.join(out, "port")
            if os.path.exists(port_file):
                os.unlink(port_file)
            # PPS_WEB_CHECK_BOUND: the independent MIN_BUF check on the browser's socket.
            server = subprocess.Popen(lab.exec_argv("snd", [
                "env", "PPS_WEB_CHECK_BOUND=1", server_exe, "--listen", "%s:0" % snd, "--port-file", port_file, "--quiet",
                "--duration", "%g" % (args.duration + 15), "--stats-json",
                os.path.join(out, "server.json"),
                "--set", "source.width=" + width, "--set", "source.height=" + height,
                "--set", "source.pattern=" + args.pattern, "--set", "transport.congestion=cubic",
                "--set", "server.max_clients_per_address=16"]),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(out, "server.err"), "w"), start_new_session=True)
            procs.append(server)
            deadline = time.monotonic() + 30
            while not (os.path.exists(port_file) and os.path.getsize(port_file)):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("pps-server did not start (see %s/server.err)" % out)
                time.sleep(0.1)
            port = int(open(port_file).read())
            client = subprocess.Popen(lab.exec_argv("rcv", [
                client_exe, "%s:%d" % (snd, port), "--display", "none", "--quiet",
                "--duration", "%g" % args.duration, "--log", os.path.join(out, "client.jsonl")]),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(out, "client.err"), "w"), start_new_session=True)
            procs.append(client)
            browser = subprocess.Popen(lab.exec_argv("rcv", [
                "/usr/bin/python3", os.path.abspath(__file__), "--drive",
                "http://%s:%d/?name=lab" % (snd, port), "%g" % args.duration,
                os.path.join(out, "browser.json")]),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(out, "browser.err"), "w"), start_new_session=True)
            procs.append(browser)
            client.wait(timeout=args.duration + 60)
            browser.wait(timeout=args.duration + 90)
            server.wait(timeout=60)
    except NotPermitted as e:
        print("pps-browser-lab: lab not permitted: %s" % e, file=sys.stderr)
        return SKIP
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    c = client_summary(os.path.join(out, "client.jsonl"))
    with open(os.path.join(out, "browser.json")) as f:
        b = json.load(f)
    rows = [
        ("frames shown %", c["frames_shown_pct"], b["frames_shown_pct"]),
        ("latency p50 ms", c["frame_latency_p50_ms"], b["frame_latency_p50_ms"]),
        ("latency p95 ms", c["frame_latency_p95_ms"], b["frame_latency_p95_ms"]),
        ("frozen ms", c["frozen_total_ms"], b["frozen_ms"]),
        ("freezes", c["freezes"], b["freezes"]),
        ("frames total", c["frames_total"], b["frames_total"]),
    ]
    print("%d cubic flows, 10 Mbit/s, 50 ms, 1 BDP drop-tail, %gs, %s %s"
          % (args.flows, args.duration, args.pattern, args.size))
    print("%-16s %12s %12s" % ("", "pps-client", "browser"))
    for name, cv, bv in rows:
        print("%-16s %12.1f %12.1f" % (name, cv or 0, bv or 0))
    with open(os.path.join(out, "server.err")) as f:
        bound = [line.strip() for line in f if "MIN_BUF check" in line]
    print("browser socket: %s" % (bound[-1].split(": ", 2)[-1] if bound else "no MIN_BUF check"))
    with open(os.path.join(out, "browser-lab.json"), "w") as f:
        json.dump({"flows": args.flows, "duration_s": args.duration, "size": args.size,
                   "pattern": args.pattern, "pps_client": c, "browser": b,
                   "minbuf_check": bound[-1] if bound else None}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
