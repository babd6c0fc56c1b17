# SPDX-License-Identifier: MIT
"""pps-netlab's commands: up (and staying in the foreground), down, exec,
addr, env, info, status, stats and the demo; the command line is the
script's (tools/pps-netlab.py)."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from ..errors import Interrupted, LabError, NotPermitted, UsageError
from .lifecycle import lab_print_summary, lab_up, teardown
from .proc import PROGRAM, netns_cmd, netns_exists, pid_alive, run, tool_path, wait_pid_exit
from .state import (
    all_netns, lab_name_check, lab_names, lab_read, lab_require, lab_side, read_pid, require_permission, state_dir,
)
from .traffic import wait_listening


def cmd_up(args):
    lab = lab_up(args)
    lab_print_summary(lab)
    if args.foreground:
        # Stay until the deadline or Ctrl-C, then take the lab down with us.
        try:
            wait_pid_exit(lab["supervisor_pid"], max(0.0, lab["deadline_unix"] - time.time()) + 10)
        except Interrupted:
            pass
        teardown(lab["name"])
    return 0


# ---------------------------------------------------------------- other commands


def cmd_down(args):
    names = lab_names() if args.all else [lab_name_check(args.name)]
    if os.geteuid() != 0:
        raise NotPermitted("needs root; skipping")
    for name in names:
        was_up = os.path.isdir(state_dir(name)) or any(netns_exists(ns) for ns in all_netns(name))
        teardown(name)
        print(f"lab {name}: {'removed' if was_up else 'was not up'}", flush=True)
    return 0


def cmd_exec(args):
    lab = lab_require(args.name)
    if not args.argv:
        raise UsageError("exec needs a command")
    side = lab_side(lab, args.side)
    ns = lab["netns"][side]
    env = dict(os.environ, PPS_LAB=lab["name"], PPS_LAB_SIDE=side, PPS_LAB_SND_ADDR=lab["addr"]["snd"],
               PPS_LAB_RCV_ADDR=lab["addr"][lab_side(lab, "rcv")])
    os.execvpe("ip", netns_cmd(ns, args.argv), env)


def cmd_addr(args):
    lab = lab_require(args.name)
    print(lab["addr"][lab_side(lab, args.side)])
    return 0


def cmd_env(args):
    lab = lab_require(args.name)
    for key, value in (
        ("PPS_LAB", lab["name"]),
        ("PPS_LAB_SND_NETNS", lab["netns"]["snd"]),
        ("PPS_LAB_RCV_NETNS", lab["netns"][lab_side(lab, "rcv")]),
        ("PPS_LAB_SND_ADDR", lab["addr"]["snd"]),
        ("PPS_LAB_RCV_ADDR", lab["addr"][lab_side(lab, "rcv")]),
        ("PPS_LAB_RTT_MS", f"{lab['rtt_ms']:g}"),
        ("PPS_LAB_RATE_BPS", str(lab["link"]["fwd"]["rate_bps"])),
        ("PPS_LAB_RECEIVERS", " ".join(r["side"] for r in lab.get("receivers", [])) or "rcv"),
    ):
        print(f"{key}={shlex.quote(value)}")
    for r in lab.get("receivers", []):
        print(f"PPS_LAB_{r['side'].upper()}_ADDR={shlex.quote(lab['addr'][r['side']])}")
    return 0


def cmd_info(args):
    lab = lab_read(lab_name_check(args.name))
    if not lab:
        raise UsageError(f"no lab named '{args.name}' (see `{PROGRAM} status`)")
    json.dump(lab, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


def cmd_status(args):
    names = lab_names()
    if not names:
        print("no labs")
        return 0
    for name in names:
        lab = lab_read(name) or {}
        alive = pid_alive(lab.get("supervisor_pid", 0)) if lab.get("supervisor_pid") else False
        left = lab.get("deadline_unix", 0) - time.time()
        state = lab.get("state", "?") if alive else "stale (supervisor gone; `down` clears it)"
        fwd = lab.get("link", {}).get("fwd", {})
        print(
            f"{name}: {state}, {left:.0f} s left, snd {lab.get('addr', {}).get('snd')} rcv {lab.get('addr', {}).get('rcv')}, "
            f"{fwd.get('rate_bps', 0) / 1e6:g} Mbit/s rtt {lab.get('rtt_ms', 0):g} ms {fwd.get('aqm')} q {fwd.get('queue_limit_pkts')} pkts, "
            f"{lab.get('congestion')} ecn {lab.get('ecn')}"
        )
    return 0


def cmd_stats(args):
    """Asks pps-linkem for its counters (SIGUSR1 writes the --stats file)."""
    lab = lab_require(args.name)
    if not lab.get("stats"):
        raise UsageError(f"lab '{args.name}' was started without --stats FILE")
    pid = read_pid(os.path.join(state_dir(args.name), "linkem.pid"))
    before = os.stat(lab["stats"]).st_mtime_ns if os.path.exists(lab["stats"]) else 0
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 2
    # Bounded wait for the rename pps-linkem does after writing.
    while time.monotonic() < deadline:
        if os.path.exists(lab["stats"]) and os.stat(lab["stats"]).st_mtime_ns != before:
            break
        time.sleep(0.02)
    with open(lab["stats"]) as f:
        sys.stdout.write(f.read())
    return 0


# ---------------------------------------------------------------- demo


def cmd_demo(args, parse_up):
    """Lab up at 10 Mbit/s and 50 ms RTT, idle RTT, a 10-second iperf3, RTT
    under load, down. @parse_up turns `up` arguments into the settings lab_up takes."""
    require_permission()
    if not shutil.which("iperf3"):
        raise NotPermitted("iperf3 is not installed; skipping")
    name = f"demo-{os.getpid()}"
    up_args = parse_up(
        ["--name", name, "--rate", args.rate, "--delay", args.delay, "--congestion", "cubic", "--duration", str(int(args.seconds) + 60)]
    )
    up_args.ecn = "off"
    lab = lab_up(up_args)
    try:
        lab_print_summary(lab)
        snd_ns, rcv_ns = lab["netns"]["snd"], lab["netns"]["rcv"]
        rcv_addr = lab["addr"]["rcv"]
        probe = tool_path("pps-probe")
        echo = subprocess.Popen(netns_cmd(rcv_ns, [probe, "echo", "--bind", rcv_addr, "--duration", f"{args.seconds + 30}s"]), stdout=subprocess.PIPE, text=True)
        echo.stdout.readline()
        ping = run(netns_cmd(snd_ns, [probe, "ping", "--to", rcv_addr, "--count", "20", "--interval", "50ms", "--json"]))
        idle = json.loads(ping.stdout)
        serialization_ms = 2 * idle["ip_bytes"] * 8 / lab["link"]["fwd"]["rate_bps"] * 1e3
        print(
            f"idle rtt: median {idle['rtt_median_ms']:.3f} ms, min {idle['rtt_min_ms']:.3f}, max {idle['rtt_max_ms']:.3f} "
            f"(configured {lab['rtt_ms']:g} ms + {serialization_ms:.3f} ms serialization of {idle['ip_bytes']}-byte probes)",
            flush=True,
        )
        server = subprocess.Popen(netns_cmd(rcv_ns, ["iperf3", "-s", "-1", "-B", rcv_addr, "--json"]), stdout=subprocess.PIPE, text=True)
        if not wait_listening(rcv_ns, 5201, server):
            raise LabError("iperf3 server did not start")
        client_cmd = netns_cmd(snd_ns, ["iperf3", "-c", rcv_addr, "-C", "cubic", "-t", str(int(args.seconds)), "--json"])
        loaded_ping = subprocess.Popen(
            netns_cmd(snd_ns, [probe, "ping", "--to", rcv_addr, "--count", str(int(args.seconds * 4) - 8), "--interval", "250ms", "--json"]),
            stdout=subprocess.PIPE,
            text=True,
        )
        client = subprocess.run(client_cmd, capture_output=True, text=True)
        loaded = json.loads(loaded_ping.communicate()[0] or "{}")
        server_out = server.communicate(timeout=30)[0]
        result = json.loads(client.stdout)
        if "error" in result:
            raise LabError(f"iperf3: {result['error']}")
        end = result["end"]
        goodput = end["sum_received"]["bits_per_second"]
        rate = lab["link"]["fwd"]["rate_bps"]
        retransmits = end["sum_sent"].get("retransmits", 0)
        steady = iperf3_steady_goodput_bps(json.loads(server_out), skip_s=2)
        print(
            f"iperf3 {int(args.seconds)} s, 1 flow, cubic: goodput {goodput / 1e6:.2f} Mbit/s ({goodput / rate * 100:.1f}% of {rate / 1e6:g} Mbit/s), "
            f"after the first 2 s {steady / 1e6:.2f} Mbit/s ({steady / rate * 100:.1f}%), {retransmits} retransmits",
            flush=True,
        )
        if loaded.get("received"):
            print(
                f"rtt under load: median {loaded['rtt_median_ms']:.3f} ms, max {loaded['rtt_max_ms']:.3f} ms "
                f"(queue {lab['link']['fwd']['queue_limit_pkts']} pkts = 1 BDP adds up to {lab['link']['fwd']['queue_limit_bytes'] * 8 / rate * 1e3:.0f} ms)",
                flush=True,
            )
        echo.terminate()
        echo.wait()
    finally:
        teardown(name)
    return 0


def iperf3_steady_goodput_bps(result, skip_s):
    """Receiver goodput over the intervals after the first @skip_s seconds (slow start)."""
    total_bytes, total_s = 0, 0.0
    for interval in result.get("intervals", []):
        s = interval["sum"]
        if s["start"] >= skip_s - 1e-6 and s["seconds"] > 0.5:
            total_bytes += s["bytes"]
            total_s += s["seconds"]
    return total_bytes * 8 / total_s if total_s else 0.0
