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
import re
import sys

from ppslab.errors import EXIT_SKIP, EXIT_USAGE, Interrupted, LabError, NotPermitted, UsageError
from ppslab.netlab import commands
from ppslab.netlab.lifecycle import supervise
from ppslab.netlab.proc import (
    CONGESTION_CHOICES, PPS_DEFAULT_AQM, PPS_DEFAULT_CONGESTION, PPS_DEFAULT_DELAY, PPS_DEFAULT_DURATION_S,
    PPS_DEFAULT_MICE_BYTES, PPS_DEFAULT_MICE_INTERVAL, PPS_DEFAULT_NAME, PPS_DEFAULT_QUEUE, PPS_DEFAULT_RATE,
    PPS_DEFAULT_TRAFFIC_DURATION_S, PROGRAM, log,
)
from ppslab.netlab.state import lab_name_check
from ppslab.netlab.traffic import cmd_traffic, traffic_run
from ppslab.version import add_version_option


# ---------------------------------------------------------------- command line


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Named network labs: two namespaces joined by pps-linkem, an emulated bottleneck.",
        epilog="Exit status: 0 ok, 1 failure, 2 bad settings, 77 not permitted (no root or no /dev/net/tun).",
    )
    add_version_option(p, PROGRAM)
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


def parse_up(words):
    """`up` arguments -> the settings lab_up takes (the demo's own lab)."""
    return build_parser().parse_args(["up"] + list(words))


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
            return commands.cmd_up(args)
        if args.command == "_supervise":
            supervise(args.name)
            return 0
        if args.command == "_traffic":
            traffic_run(args.name, args.id)
            return 0
        handlers = {
            "down": commands.cmd_down,
            "exec": commands.cmd_exec,
            "addr": commands.cmd_addr,
            "env": commands.cmd_env,
            "info": commands.cmd_info,
            "status": commands.cmd_status,
            "stats": commands.cmd_stats,
            "traffic": cmd_traffic,
            "demo": lambda a: commands.cmd_demo(a, parse_up),
            "selftest": lambda a: commands.cmd_demo(build_parser().parse_args(["demo"]), parse_up),
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
