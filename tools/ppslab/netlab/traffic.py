# SPDX-License-Identifier: MIT
"""Cross traffic in a lab: the schedules of `pps-netlab traffic`, the
background runner of each traffic run (iperf3 elephants and CBR, pps-mice)
and the summary of its results."""

import contextlib
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

from ..errors import LabError, NotPermitted, UsageError
from .proc import (
    CONGESTION_CHOICES, READY_TIMEOUT_S, STOP_TIMEOUT_S, log, netns_cmd, parse_rate_bps, parse_seconds, run,
    self_argv, tool_path, wait_pid_exit,
)
from .state import lab_read, lab_require, lab_side, state_dir, state_lock, write_pid


# ---------------------------------------------------------------- cross traffic


def parse_schedule(text, what, duration_s, count_kind):
    """'N', 'N@START', 'N@START-STOP' (seconds from the traffic start) -> (value, start, stop)."""
    m = re.fullmatch(r"([^@]+)(?:@(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?)?", text)
    if not m:
        raise UsageError(f"{what}: '{text}' is not VALUE[@START[-STOP]]")
    value = m.group(1)
    if count_kind:
        if not value.isdigit() or int(value) == 0 or int(value) > 128:
            raise UsageError(f"{what}: '{value}' is not a count in [1, 128]")
        value = int(value)
    else:
        value = parse_rate_bps(value, what)
    start = float(m.group(2)) if m.group(2) else 0.0
    stop = float(m.group(3)) if m.group(3) else duration_s
    if not start < stop <= duration_s:
        raise UsageError(f"{what}: need START < STOP <= --duration ({duration_s:g} s), got {start:g}-{stop:g}")
    return value, start, stop


def cmd_traffic(args):
    lab = lab_require(args.name)
    duration_s = parse_seconds(args.duration, "--duration")
    left = lab["deadline_unix"] - time.time()
    if duration_s > left:
        log(f"traffic cut to the lab's remaining {left:.0f} s")
        duration_s = max(1.0, left - 1)
    if args.congestion not in CONGESTION_CHOICES:
        raise UsageError(f"--congestion: '{args.congestion}' is not one of {', '.join(CONGESTION_CHOICES)}")
    plan = {"duration_s": duration_s, "reverse": args.reverse, "congestion": args.congestion, "flows": [],
            "receiver": lab_side(lab, args.receiver)}
    if args.elephants:
        n, start, stop = parse_schedule(args.elephants, "--elephants", duration_s, True)
        plan["flows"].append({"kind": "elephants", "count": n, "start_s": start, "stop_s": stop})
    if args.mice:
        n, start, stop = parse_schedule(args.mice, "--mice", duration_s, True)
        plan["flows"].append(
            {
                "kind": "mice",
                "count": n,
                "start_s": start,
                "stop_s": stop,
                "bytes": args.mice_bytes,
                "interval": args.mice_interval,
            }
        )
    if args.cbr:
        rate, start, stop = parse_schedule(args.cbr, "--cbr", duration_s, False)
        plan["flows"].append({"kind": "cbr", "rate_bps": rate, "start_s": start, "stop_s": stop})
    if not plan["flows"]:
        raise UsageError("traffic needs --elephants, --mice and/or --cbr")
    tool_path("pps-mice")
    if not shutil.which("iperf3") and any(f["kind"] != "mice" for f in plan["flows"]):
        raise NotPermitted("iperf3 is not installed; skipping")

    sdir = state_dir(lab["name"])
    with state_lock():
        ids = [int(m.group(1)) for e in os.listdir(sdir) if (m := re.fullmatch(r"traffic-(\d+)\.json", e))]
        tid = max(ids, default=-1) + 1
        if tid >= 50:
            raise LabError("at most 50 traffic runs per lab")
        plan["id"] = tid
        plan["port_base"] = 5201 + 10 * tid
        with open(os.path.join(sdir, f"traffic-{tid}.json"), "w") as f:
            json.dump(plan, f, indent=2)
    proc = subprocess.Popen(
        self_argv("_traffic", lab["name"], tid),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(sdir, f"traffic-{tid}.err"), "w"),
        start_new_session=True,
    )
    write_pid(os.path.join(sdir, f"traffic-{tid}.pid"), proc.pid)
    direction = "rcv->snd (reverse)" if args.reverse else "snd->rcv"
    kinds = ", ".join(
        f"{f['kind']} {f.get('count', '') or str(f.get('rate_bps', 0) / 1e6) + ' Mbit/s'} {f['start_s']:g}-{f['stop_s']:g} s" for f in plan["flows"]
    )
    print(f"lab {lab['name']}: traffic {tid} started, {direction}, {args.congestion}, {kinds}", flush=True)
    if args.wait:
        wait_pid_exit(proc.pid, duration_s + 30)
        proc.wait()
        with contextlib.suppress(OSError):
            with open(os.path.join(sdir, f"traffic-{tid}.out")) as f:
                sys.stdout.write(f.read())
    return 0


def traffic_run(name, tid):
    """Runs one traffic plan: servers on the receiving side, clients on the
    sending side, each kind started and stopped on its schedule; everything
    stops at the plan's duration or on SIGTERM."""
    lab = lab_read(name)
    sdir = state_dir(name)
    with open(os.path.join(sdir, f"traffic-{tid}.json")) as f:
        plan = json.load(f)
    rcv = plan.get("receiver", "rcv")
    snd_side, rcv_side = (rcv, "snd") if plan["reverse"] else ("snd", rcv)
    src_ns, dst_ns = lab["netns"][snd_side], lab["netns"][rcv_side]
    src_addr, dst_addr = lab["addr"][snd_side], lab["addr"][rcv_side]
    cc = plan["congestion"]
    out_dir = os.path.join(sdir, f"traffic-{tid}")
    os.makedirs(out_dir, exist_ok=True)

    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    t0 = time.monotonic()
    running = []  # (flow index, Popen, role)
    events = []
    for i, flow in enumerate(plan["flows"]):
        events.append((flow["start_s"], 0, i))
        events.append((flow["stop_s"], 1, i))
    events.sort()

    def spawn(cmd, out_name, role, i, listen_port=None):
        with open(os.path.join(out_dir, out_name), "w") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        running.append((i, proc, role))
        if listen_port and not wait_listening(dst_ns, listen_port, proc):
            raise LabError(f"{shlex.join(cmd)} did not start listening")
        return proc

    def start(i):
        flow = plan["flows"][i]
        length = flow["stop_s"] - flow["start_s"]
        port = plan["port_base"] + {"elephants": 0, "cbr": 1, "mice": 2}[flow["kind"]]
        if flow["kind"] == "elephants":
            spawn(netns_cmd(dst_ns, ["iperf3", "-s", "-1", "-B", dst_addr, "-p", str(port)]), "elephants-server.txt", "server", i, port)
            spawn(
                netns_cmd(src_ns, ["iperf3", "-c", dst_addr, "-B", src_addr, "-p", str(port), "-P", str(flow["count"]), "-C", cc, "-t", f"{max(1, int(length))}", "--json"]),
                "elephants-client.json",
                "client",
                i,
            )
        elif flow["kind"] == "cbr":
            spawn(netns_cmd(dst_ns, ["iperf3", "-s", "-1", "-B", dst_addr, "-p", str(port)]), "cbr-server.txt", "server", i, port)
            spawn(
                netns_cmd(src_ns, ["iperf3", "-c", dst_addr, "-B", src_addr, "-p", str(port), "-u", "-b", str(flow["rate_bps"]), "-t", f"{max(1, int(length))}", "--json"]),
                "cbr-client.json",
                "client",
                i,
            )
        else:
            spawn(
                netns_cmd(dst_ns, [tool_path("pps-mice"), "server", "--bind", dst_addr, "--port", str(port), "--congestion", cc, "--duration", f"{length + 10}s"]),
                "mice-server.txt",
                "server",
                i,
                port,
            )
            for k in range(flow["count"]):
                spawn(
                    netns_cmd(
                        src_ns,
                        [
                            tool_path("pps-mice"),
                            "client",
                            "--to",
                            dst_addr,
                            "--port",
                            str(port),
                            "--congestion",
                            cc,
                            "--bytes",
                            str(flow["bytes"]),
                            "--interval",
                            flow["interval"],
                            "--duration",
                            f"{length}s",
                        ]
                    ),
                    f"mice-client-{k}.txt",
                    "client",
                    i,
                )

    def finish(i, grace_s):
        # Clients first (they end on their own at -t/--duration), then servers.
        for role in ("client", "server"):
            for j, proc, r in running:
                if j == i and r == role:
                    try:
                        proc.wait(timeout=grace_s if role == "client" else 0.5)
                    except subprocess.TimeoutExpired:
                        proc.terminate()
                        try:
                            proc.wait(timeout=STOP_TIMEOUT_S)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()

    try:
        for when, kind, i in events:
            while not stop["now"]:
                left = t0 + when - time.monotonic()
                if left <= 0:
                    break
                select.select([wake_r], [], [], left)
            if stop["now"]:
                break
            if kind == 0:
                start(i)
            else:
                finish(i, grace_s=3.0)
    finally:
        for _, proc, _ in running:
            if proc.poll() is None:
                proc.terminate()
        for _, proc, _ in running:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        traffic_summarize(plan, out_dir, os.path.join(sdir, f"traffic-{tid}.out"))


def wait_listening(ns, port, proc=None, timeout_s=READY_TIMEOUT_S):
    """Bounded wait until something listens on TCP @port in @ns (iperf3 has no
    readiness signal we can read without holding its stdout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        listening = run(["ip", "netns", "exec", ns, "ss", "-Hltn", f"sport = :{port}"], check=False, quiet=True).stdout
        if listening.strip():
            return True
        time.sleep(0.02)
    return False


def traffic_summarize(plan, out_dir, out_path):
    lines = []
    for flow in plan["flows"]:
        kind = flow["kind"]
        if kind in ("elephants", "cbr"):
            try:
                with open(os.path.join(out_dir, f"{kind}-client.json")) as f:
                    result = json.load(f)
                end = result.get("end", {})
                if kind == "elephants":
                    recv = end.get("sum_received", {}).get("bits_per_second", 0)
                    retr = end.get("sum_sent", {}).get("retransmits", 0)
                    lines.append(f"elephants x{flow['count']}: {recv / 1e6:.2f} Mbit/s received, {retr} retransmits")
                else:
                    s = end.get("sum", {})
                    lines.append(f"cbr {flow['rate_bps'] / 1e6:g} Mbit/s: {s.get('bits_per_second', 0) / 1e6:.2f} Mbit/s, lost {s.get('lost_percent', 0):.1f}%")
            except (OSError, ValueError):
                lines.append(f"{kind}: no result")
        else:
            for k in range(flow["count"]):
                with contextlib.suppress(OSError):
                    with open(os.path.join(out_dir, f"mice-client-{k}.txt")) as f:
                        lines += [line for line in f.read().splitlines() if line.startswith("mice client")]
    with open(out_path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
