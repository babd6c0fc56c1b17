#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-sweep: latency-tolerance sweeps of ppstream in the network lab.

Every cell of a matrix is one real pps-server (in the lab's snd namespace) and
one real pps-client (rcv), with long-lived cubic elephants as cross traffic,
as in TOMCCAP 2008 section 7. Axes: transport (tcp, minbuf(A,B)), adaptation
window (frames at 30 frames/s), competing flows, RTT, bottleneck rate, queue
variant (drop-tail of one BDP with ECN off, or DRD with ECN on every flow),
the stream's congestion control, repetitions; and the source
pattern, a capacity-step trace and named server settings. The matrix comes from an INI
file; presets live in tools/sweep/presets (sweep/presets beside this script).

    pps-sweep --preset quick [--out DIR]          run (or resume) a sweep
    pps-sweep --config my.ini --out DIR           the same with your own matrix
    pps-sweep --resume DIR                        finish an interrupted sweep
    pps-sweep report DIR [--markdown FILE]        tables and plots again
    pps-sweep presets                             list the presets
    pps-sweep run --preset benchmarks --server-build old=OLD_BUILD \
        --server-build new=NEW_BUILD --out DIR    two server builds side by side

Outputs in DIR: plan.json (matrix, seed, order, machine), cells/ID/ (client
log, server stats, lab.json, pps-linkem counters, iperf3 results, cell.json),
summary.json, summary.csv, groups.csv, report.md and plots/*.png. With
--server-build, report.md opens with the builds' comparison, cell by cell.

Run as root with Debian's /usr/bin/python3 (numpy, matplotlib). This is a
benchmark: it prints figures; it does not pass or fail on them.
"""
import argparse
import sys

from ppslab import programs, report, sweep
from ppslab.version import add_version_option
from ppslab.errors import EXIT_INTERRUPTED, EXIT_USAGE, Interrupted, UsageError

PROGRAM = sweep.PROGRAM


def server_build(text):
    """NAME=BUILD_DIR -> (NAME, BUILD_DIR)."""
    name, eq, path = text.partition("=")
    if not eq or not name or not path:
        raise argparse.ArgumentTypeError(f"'{text}': expected NAME=BUILD_DIR")
    return name.strip(), path.strip()


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Latency-tolerance sweeps of ppstream in the network lab: each cell one pps-server and one "
        "pps-client with long-lived cubic cross traffic. Subcommands: run (default), report, presets, table. Two server "
        "builds side by side: pps-sweep run --preset benchmarks --server-build old=OLD_BUILD --server-build "
        "new=NEW_BUILD --out DIR (see run --help).",
        epilog="Exit status: 0 done, 1 some cells failed, 2 bad settings, 77 no root or /dev/net/tun, 130 interrupted "
        "(resume with --resume DIR). See docs/BENCHMARKS.md.",
    )
    add_version_option(p, PROGRAM)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    r = sub.add_parser("run", help="run (or resume) a sweep (the default command)",
                       description="Run (or resume) a sweep. With --server-build NAME=BUILD_DIR given twice or more "
                       "(e.g. --server-build old=../old/build --server-build new=build), every cell runs once with each "
                       "build's pps-server and pps-client, interleaved cell by cell, and report.md opens with a table "
                       "comparing the builds cell by cell; --duration S shortens every cell.")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--preset", help="a matrix from tools/sweep/presets (quick, paper, full, steps, steps-tiny, mustshow, benchmarks, playout, congestion-alone, audio, b-frames, b-frames-steps, keyframes, keyframes-gop, deadlines, deadlines-steps, b-frames-ondrops, timeouts, share, spread, drain, drain-steps, quality-layers, pacing-gain, pacing-gain-high, b-frames-cuts, tail, droppable, ...)")
    src.add_argument("--config", help="a sweep INI file (see presets/*.ini for the format)")
    r.add_argument("--out", help="output folder (default ./sweep-PRESET-DATE); an existing one with the same plan resumes")
    r.add_argument("--resume", metavar="DIR", help="finish the sweep in DIR (its plan.json)")
    r.add_argument("--reps", type=int, help="repetitions (overrides the file)")
    r.add_argument("--duration", type=float, help="seconds of streaming per cell (overrides the file)")
    r.add_argument("--warmup", type=float, help="seconds of cross traffic before the stream starts")
    r.add_argument("--seed", type=int, help="seed of the cell order (overrides the file)")
    r.add_argument("--dry-run", action="store_true", help="print the cells in run order and the time estimate")
    r.add_argument("--keep-linkem-log", action="store_true", help="keep pps-linkem's per-packet log of each cell")
    r.add_argument("--server-set", action="append", metavar="SECTION.KEY=VALUE",
                   help="a pps-server --set for every cell (after [server]; a server_set axis value still wins); repeatable")
    r.add_argument("--server-build", action="append", type=server_build, metavar="NAME=BUILD_DIR",
                   help="run every cell with this build's pps-server and pps-client too; give two or more (e.g. "
                   "old=../old/build new=build): the builds run interleaved cell by cell, their order "
                   "rotated from one cell to the next (old, new; new, old; ...), so that drift of a shared machine "
                   "and the order within a pair hit them alike, cell ids end in -bNAME, and the report compares "
                   "them cell by cell (frames shown, frame latency p50/p95, longest freeze, throughput share, PSNR, "
                   "and the differences)")
    r.add_argument("--build", help="meson build directory: its pps-netlab, pps-config-doc, pps-peer-score, and its "
                   "pps-server and pps-client unless --server-build (default: the one this script is in)")
    r.add_argument("--netlab", help="pps-netlab program")
    r.add_argument("--server", help="pps-server program")
    r.add_argument("--client", help="pps-client program")
    r.add_argument("--lab-name", help="lab name (default sweepPID)")
    rep = sub.add_parser("report", help="summary, CSV, plots and report.md of a sweep folder again")
    rep.add_argument("dir")
    rep.add_argument("--markdown", help="also write the report here (e.g. docs/BENCHMARKS.md)")
    rep.add_argument("--plots-dir", help="copy the plots here and link them from --markdown (default: beside it, benchmarks/)")
    rep.add_argument("--section", metavar="TITLE",
                     help="write only the report's section TITLE (e.g. 'Audio beside video') into the "
                          "--markdown file, between its <!-- figures:begin --> and <!-- figures:end --> "
                          "markers, with the command that made it")
    sub.add_parser("presets", help="list the presets with their size")
    tab = sub.add_parser("table", help="a Markdown table of a sweep's runs, side by side by server_set",
                         description="Print a Markdown table of a sweep folder's runs: one row per path, pattern "
                         "and server_set, each run's figure (frames shown, p50, p95, longest freeze, share, PSNR-Y, "
                         "Mbit/s) separated by ' / '. The tables in docs/DESIGN.md are made with it.")
    tab.add_argument("dir")
    tab.add_argument("--label", action="append", default=[], metavar="SET=WORDS",
                     help="show server_set SET as WORDS; repeatable")
    tab.add_argument("--tail", action="store_true",
                     help="where the latency goes instead: capture to the decoder and to the screen (p50, p95), "
                          "anchors against B frames at the decoder, stalls (a frame reaching the decoder 50 ms or "
                          "more later after its capture than the one before it) per second and their p50, the "
                          "bottleneck's drops and the video connection's retransmissions per second")
    return p


def main(argv):
    if not argv or argv[0] not in ("run", "report", "presets", "table", "-h", "--help", "-V", "--version"):
        argv = ["run"] + list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command == "report":
            return sweep.cmd_report(args)
        if args.command == "presets":
            return sweep.cmd_presets(programs.Build())
        if args.command == "table":
            labels = {}
            for item in args.label:
                name, eq, words = item.partition("=")
                if not eq or not name:
                    raise UsageError(f"--label '{item}': expected SET=WORDS")
                labels[name] = words
            table = report.tail_table if args.tail else report.runs_table
            sys.stdout.write(table(args.dir, labels))
            return 0
        if args.server_build and (args.server or args.client):
            raise UsageError("--server-build gives each build's pps-server and pps-client: no --server or --client with it")
        build = programs.Build(args.build, netlab=args.netlab, server=args.server, client=args.client)
        return sweep.cmd_run(build, args, args.server_build or ())
    except UsageError as error:
        sweep.log(str(error))
        return EXIT_USAGE
    except Interrupted as error:
        sweep.log(f"interrupted ({error})")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
