#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-netlab: named network labs for ppstream experiments.

A lab is two network namespaces, pps-NAME-snd (the sender side) and
pps-NAME-rcv (the receiver side), joined by pps-linkem: one TUN device in each
namespace, an emulated bottleneck in each direction. Addresses come from
198.18.0.0/15, the range reserved for benchmarks; the namespaces have no route
anywhere else. Each lab is bounded in time: a supervisor process tears it down
at its deadline, when pps-linkem dies, or on `pps-netlab down`.

State lives in /run/ppstream-netlab/NAME/ (lab.json, pids, linkem output);
`pps-netlab info NAME` prints lab.json, which records every setting a result
depends on (rate, delay, queue, AQM, congestion control, ECN).

Run `pps-netlab --help` or see docs/NETLAB.md.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

# The modules beside this script (the build tree, the source tree), or where
# meson installs them (PREFIX/share/ppstream/netlab).
sys.path.insert(1, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "share", "ppstream", "netlab"))
from netlab_proc import (  # noqa: E402
    CONGESTION_CHOICES, EXIT_SKIP, EXIT_USAGE, Interrupted, LabError, NotPermitted, PPS_DEFAULT_AQM,
    PPS_DEFAULT_CONGESTION, PPS_DEFAULT_DELAY, PPS_DEFAULT_DURATION_S, PPS_DEFAULT_MICE_BYTES,
    PPS_DEFAULT_MICE_INTERVAL, PPS_DEFAULT_NAME, PPS_DEFAULT_QUEUE, PPS_DEFAULT_RATE,
    PPS_DEFAULT_TRAFFIC_DURATION_S, PROGRAM, UsageError, log, netns_cmd, netns_exists, pid_alive,
    run, tool_path, wait_pid_exit,
)
from netlab_state import (  # noqa: E402
    all_netns, lab_name_check, lab_names, lab_read, lab_require, lab_side, read_pid,
    require_permission, state_dir,
)
from netlab_lifecycle import lab_print_summary, lab_up, supervise, teardown  # noqa: E402
from netlab_traffic import cmd_traffic, traffic_run, wait_listening  # noqa: E402


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


def cmd_demo(args):
    """Lab up at 10 Mbit/s and 50 ms RTT, idle RTT, a 10-second iperf3, RTT under load, down."""
    require_permission()
    if not shutil.which("iperf3"):
        raise NotPermitted("iperf3 is not installed; skipping")
    name = f"demo-{os.getpid()}"
    up_args = build_parser().parse_args(
        ["up", "--name", name, "--rate", args.rate, "--delay", args.delay, "--congestion", "cubic", "--duration", str(int(args.seconds) + 60)]
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



# ---------------------------------------------------------------- command line


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Named network labs: two namespaces joined by pps-linkem, an emulated bottleneck.",
        epilog="Exit status: 0 ok, 1 failure, 2 bad settings, 77 not permitted (no root or no /dev/net/tun).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="create a lab and return once it forwards packets")
    up.add_argument("--name", default=PPS_DEFAULT_NAME, help=f"lab name (default {PPS_DEFAULT_NAME})")
    up.add_argument("--rate", default=PPS_DEFAULT_RATE, help=f"bottleneck rate, both directions (default {PPS_DEFAULT_RATE})")
    up.add_argument("--rev-rate", help="rate of the reverse direction rcv->snd (default: --rate)")
    up.add_argument("--delay", default=PPS_DEFAULT_DELAY, help=f"one-way delay per direction; RTT is twice this (default {PPS_DEFAULT_DELAY})")
    up.add_argument("--queue", default=PPS_DEFAULT_QUEUE, help="queue limit in packets, or auto = 1 BDP (default auto)")
    up.add_argument("--queue-bytes", help="queue limit in bytes (default: 1500 x --queue)")
    up.add_argument("--aqm", default=PPS_DEFAULT_AQM, choices=("droptail", "drd"), help="queue discipline (default droptail)")
    up.add_argument("--drd-min", help="DRD: mark ECT packets above this many BDPs (default 0.5)")
    up.add_argument("--drd-congest", help="DRD: drop above this many BDPs (default 1.5)")
    up.add_argument("--drd-drop-not-ect", action="store_true", help="DRD: drop non-ECT packets where ECT ones would be marked")
    up.add_argument("--loss", default="0", help="random loss probability per direction: 0.01 or 1%% (default 0)")
    up.add_argument("--trace", help="mahimahi trace for snd->rcv (and rcv->snd unless --rev-rate/--rev-trace)")
    up.add_argument("--rev-trace", help="mahimahi trace for rcv->snd")
    up.add_argument("--ecn", default=None, help="on: tcp_ecn=1 and ECN routes; off: tcp_ecn=0 (default: on with drd, else off)")
    up.add_argument("--congestion", default=PPS_DEFAULT_CONGESTION, choices=CONGESTION_CHOICES, help=f"route congctl and namespace default (default {PPS_DEFAULT_CONGESTION})")
    up.add_argument("--duration", default=str(PPS_DEFAULT_DURATION_S), help=f"seconds until the lab tears itself down (default {PPS_DEFAULT_DURATION_S})")
    up.add_argument("--log", help="pps-linkem per-packet log file")
    up.add_argument("--stats", help="pps-linkem counters as JSON, written at exit and by `stats`")
    up.add_argument("--seed", type=int, default=1, help="seed of random loss and DRD decisions")
    up.add_argument("--foreground", action="store_true", help="stay until the deadline or Ctrl-C, then tear down")
    up.add_argument("--receivers", type=int, default=1,
                    help="N receiver namespaces (sides rcv1..rcvN), each behind its own pps-linkem link; --rate, --delay, "
                    "--queue, --loss, --trace take 1 or N comma-separated values (default 1)")

    down = sub.add_parser("down", help="remove a lab: traffic, pps-linkem, processes, namespaces")
    down.add_argument("name", nargs="?", default=None)
    down.add_argument("--name", dest="name_opt")
    down.add_argument("--all", action="store_true", help="every lab")

    c = sub.add_parser("addr", help="print one side's address", usage=f"{PROGRAM} addr [NAME | --name NAME] snd|rcv")
    c.add_argument("side")
    c = sub.add_parser("exec", help="run a command on one side", usage=f"{PROGRAM} exec [NAME | --name NAME] snd|rcv|rcvK CMD...")
    c.add_argument("side")
    c.add_argument("argv", nargs=argparse.REMAINDER)

    for cmd, help_text in (("info", "print a lab's lab.json"), ("env", "print shell variables for a lab"), ("stats", "print pps-linkem's live counters")):
        c = sub.add_parser(cmd, help=help_text)
        c.add_argument("name", nargs="?", default=None)
        c.add_argument("--name", dest="name_opt")

    sub.add_parser("status", help="list labs")

    t = sub.add_parser("traffic", help="start cross traffic in the background")
    t.add_argument("name", nargs="?", default=None)
    t.add_argument("--name", dest="name_opt")
    t.add_argument("--elephants", help="N[@START[-STOP]]: N bulk TCP flows (iperf3 -P N)")
    t.add_argument("--mice", help="N[@START[-STOP]]: N repeating short TCP flows (pps-mice)")
    t.add_argument("--mice-bytes", default=str(PPS_DEFAULT_MICE_BYTES), help="bytes per mouse flow (default 20000)")
    t.add_argument("--mice-interval", default=PPS_DEFAULT_MICE_INTERVAL, help="time between a mouse's flow starts (default 1s)")
    t.add_argument("--cbr", help="RATE[@START[-STOP]]: constant-bit-rate UDP (iperf3 -u -b)")
    t.add_argument("--reverse", action="store_true", help="data flows rcv->snd instead of snd->rcv")
    t.add_argument("--receiver", default="rcv", help="the receiver side of a multi-receiver lab (rcv1..rcvN; default rcv = rcv1)")
    t.add_argument("--congestion", default=PPS_DEFAULT_CONGESTION, help="TCP congestion control of the flows (default cubic)")
    t.add_argument("--duration", default=str(PPS_DEFAULT_TRAFFIC_DURATION_S), help="seconds (default 60; cut to the lab's remaining time)")
    t.add_argument("--wait", action="store_true", help="wait for the end and print the results")

    d = sub.add_parser("demo", help="10 Mbit/s, 50 ms RTT lab: RTT, 10 s of iperf3, goodput; then down")
    d.add_argument("--rate", default="10mbit")
    d.add_argument("--delay", default="25ms")
    d.add_argument("--seconds", type=float, default=10)
    sub.add_parser("selftest", help="same as demo")

    s = sub.add_parser("_supervise")
    s.add_argument("name")
    tr = sub.add_parser("_traffic")
    tr.add_argument("name")
    tr.add_argument("id", type=int)
    return p


def resolve_name(args, required=True):
    """Accepts the lab name positionally or as --name (default 'lab')."""
    name = getattr(args, "name_opt", None) or getattr(args, "name", None)
    if name is None:
        name = PPS_DEFAULT_NAME
    args.name = lab_name_check(name)


def parse_side_command(argv):
    """`exec`/`addr` take [NAME | --name NAME] SIDE [CMD...]; argparse cannot
    tell a lab name from a side in front of a free-form command, so parse by hand."""
    command, words = argv[0], list(argv[1:])
    name = None
    if words and words[0] in ("-h", "--help"):
        build_parser().parse_args([command, "--help"])
    if words and words[0] == "--name" and len(words) > 1:
        name, words = words[1], words[2:]
    elif words and words[0].startswith("--name="):
        name, words = words[0].split("=", 1)[1], words[1:]
    elif words and not re.fullmatch(r"snd|rcv\d*", words[0]):
        name, words = words[0], words[1:]
    if not words or not re.fullmatch(r"snd|rcv\d*", words[0]):
        raise UsageError(f"usage: {PROGRAM} {command} [NAME | --name NAME] snd|rcv|rcvK" + (" CMD..." if command == "exec" else ""))
    side, rest = words[0], words[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    if command == "addr" and rest:
        raise UsageError(f"addr takes no command (got '{rest[0]}')")
    return argparse.Namespace(command=command, name=lab_name_check(name or PPS_DEFAULT_NAME), side=side, argv=rest)


def main(argv):
    if argv and argv[0] in ("exec", "addr"):
        try:
            args = parse_side_command(argv)
        except UsageError as error:
            log(str(error))
            return EXIT_USAGE
    else:
        args = build_parser().parse_args(argv)
    try:
        if args.command in ("down", "info", "env", "stats", "traffic"):
            resolve_name(args)
        if args.command == "up":
            if args.ecn is None:
                args.ecn = "on" if args.aqm == "drd" else "off"
            return cmd_up(args)
        if args.command == "_supervise":
            supervise(args.name)
            return 0
        if args.command == "_traffic":
            traffic_run(args.name, args.id)
            return 0
        handlers = {
            "down": cmd_down,
            "exec": cmd_exec,
            "addr": cmd_addr,
            "env": cmd_env,
            "info": cmd_info,
            "status": cmd_status,
            "stats": cmd_stats,
            "traffic": cmd_traffic,
            "demo": cmd_demo,
            "selftest": lambda a: cmd_demo(build_parser().parse_args(["demo"])),
        }
        return handlers[args.command](args)
    except UsageError as error:
        log(str(error))
        return EXIT_USAGE
    except NotPermitted as error:
        log(str(error))
        return EXIT_SKIP
    except (LabError, Interrupted) as error:
        log(str(error) if not isinstance(error, Interrupted) else f"interrupted ({error}); lab removed")
        return 130 if isinstance(error, Interrupted) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
