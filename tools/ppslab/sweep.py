# SPDX-License-Identifier: MIT
"""pps-sweep's runner: each cell in a fresh lab (pps-netlab up), the
elephants and their warm-up, then the ppstream wrapper (pps-server on snd,
pps-client on rcv) of the cell's server build for the cell's duration; every
wait is bounded and the lab is torn down whatever happens (Ctrl-C included:
the sweep then says how to resume). Then the cell's analysis (cells) and,
at the end, the report (report)."""
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

from . import cells, matrix, process, programs, report
from .errors import EXIT_INTERRUPTED, EXIT_SKIP, Failure, Interrupted, NotPermitted, UsageError
from .files import read_json, write_json
from .lab import Lab, other_labs, parse_steps, step_trace_write
from .matrix import FPS, PPS_DEFAULT_DRD_CONGEST_BDP, PPS_DEFAULT_DRD_MIN_BDP, QUEUES, transport_sets
from .netlab.state import require_permission
from .metrics import PSNR_PATTERNS, peer_score
from .wrappers.ppstream import Ppstream

PROGRAM = "pps-sweep"

# Bounds on every wait (seconds), on top of the cell's own duration.
SERVER_EXIT_GRACE_S = 30.0
CLIENT_EXIT_GRACE_S = 20.0
TRAFFIC_EXIT_GRACE_S = 30.0
# Time around the stream that the lab and its traffic stay up.
TRAFFIC_TAIL_S = 2.0
LAB_SLACK_S = 90.0
# Every elephant's congestion control (iperf3 -C), forward and reverse, and
# the lab's routes' (congctl).
ELEPHANT_CONGESTION = "cubic"
LAB_CONGESTION = "cubic"
# Wall-clock overhead per cell beyond warm-up + duration (lab up/down, start,
# client end); only used for the time-left estimate before a cell finishes.
CELL_OVERHEAD_GUESS_S = 8.0


class CellError(Failure):
    pass


def log(message):
    Progress.current.clear() if Progress.current else None
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)


def machine_info(build, server_builds=None):
    """The machine, the tree's git state ("" outside git), @build's version
    and that of each of @server_builds (name -> Build), from their pps-server
    --version (the build's version header: a build outside git has it too)."""
    cpu = ""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    os_release = ""
    with contextlib.suppress(OSError):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_release = line.split("=", 1)[1].strip().strip('"')
    return {
        "uname": " ".join(platform.uname()),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "os": os_release,
        "python": platform.python_version(),
        "git": programs.tree_version(),
        "version": build.version(),
        "server_build_versions": {name: b.version() for name, b in (server_builds or {}).items() if name},
        "default_congestion": open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
        if os.path.exists("/proc/sys/net/ipv4/tcp_congestion_control") else "",
    }


# ---------------------------------------------------------------- progress


class Progress:
    """One status line on stderr: the cell running, cells done, time left.
    Redrawn each second on a terminal; one line per event otherwise."""

    current = None

    def __init__(self, total, done, per_cell_guess_s):
        self.total, self.done = total, done
        self.guess_s = per_cell_guess_s
        self.spent = []  # wall seconds of the cells finished in this run
        self.cell, self.cell_start = None, None
        self.tty = sys.stderr.isatty()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.shown = False
        Progress.current = self
        if self.tty:
            threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while not self.stop.wait(1.0):
            self.draw()

    def per_cell_s(self):
        return sum(self.spent) / len(self.spent) if self.spent else self.guess_s

    def left_s(self):
        left = (self.total - self.done) * self.per_cell_s()
        if self.cell_start is not None:
            left -= min(time.monotonic() - self.cell_start, self.per_cell_s())
        return max(0.0, left)

    def line(self):
        width = 24
        filled = int(width * self.done / max(1, self.total))
        bar = "#" * filled + "." * (width - filled)
        running = ""
        if self.cell:
            running = f" running {self.cell} ({time.monotonic() - self.cell_start:.0f} s)"
        return f"[{bar}] {self.done}/{self.total} cells done,{running} ~{fmt_duration(self.left_s())} left"

    def draw(self):
        with self.lock:
            if self.tty:
                text = self.line()[: shutil.get_terminal_size((120, 20)).columns - 1]
                sys.stderr.write("\r\033[K" + text)
                sys.stderr.flush()
                self.shown = True

    def clear(self):
        with self.lock:
            if self.tty and self.shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                self.shown = False

    def start_cell(self, cid):
        self.cell, self.cell_start = cid, time.monotonic()
        if self.tty:
            self.draw()
        else:
            print(f"{PROGRAM}: {self.line()}", file=sys.stderr, flush=True)

    def end_cell(self, result_line):
        self.spent.append(time.monotonic() - self.cell_start)
        self.done += 1
        self.cell, self.cell_start = None, None
        log(result_line)
        self.draw()

    def finish(self):
        self.stop.set()
        self.clear()
        Progress.current = None


def fmt_duration(s):
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# ---------------------------------------------------------------- one cell


def interruptible_sleep(seconds):
    # A schedule (the traffic's warm-up), not a synchronization: signals still interrupt it.
    time.sleep(max(0.0, seconds))


def trace_lead_s(cell, cfg):
    """Seconds between the link coming up (the trace's time zero) and the
    stream: the first step lasts that much longer, so that the stream meets
    every step in full. The real offset is measured (pps-linkem's epoch)."""
    tr = cfg["traces"][cell["trace"]]
    if tr.get("lead_s") is not None:
        return tr["lead_s"]
    return (cfg["warmup_s"] if has_cross_traffic(cell) else 0.0) + 2.0


def has_cross_traffic(cell):
    """Whether a cell has elephants, forward (flows) or reverse (reverse_flows)."""
    return cell["flows"] > 0 or bool(cell.get("reverse_flows"))


def flow_congestion(cell, sets):
    """The congestion control of every flow of a cell, as it was asked for:
    the stream's (the server's transport.congestion, which a server_set may
    override; the audio connection is a session of the same server), the
    elephants' each way (iperf3 -C), and the lab's routes (congctl: what a
    socket that names none gets, e.g. the client's own)."""
    out = {"stream": sets.get("transport.congestion"), "routes": LAB_CONGESTION}
    if cell["flows"] > 0:
        out["elephants"] = ELEPHANT_CONGESTION
    if cell.get("reverse_flows"):
        out["reverse_elephants"] = ELEPHANT_CONGESTION
    return out


def traffic_result(lab, reverse, name="elephants-client.json"):
    """The path of the elephants' iperf3 result of the lab's forward (or
    @reverse) traffic run: pps-netlab numbers its traffic runs in the order it
    was asked for them, so each run's plan says which way it flowed."""
    sdir = lab.state_dir()
    with contextlib.suppress(OSError):
        for entry in sorted(os.listdir(sdir)):
            m = re.fullmatch(r"traffic-(\d+)\.json", entry)
            if m and bool((read_json(os.path.join(sdir, entry)) or {}).get("reverse")) == reverse:
                return os.path.join(sdir, f"traffic-{m.group(1)}", name)
    return None


def link_args(cell, cfg, celldir):
    """--rate, or a capacity-step trace written into the cell folder (link.trace)."""
    if not cell.get("trace"):
        return ["--rate", "%gmbit" % cell["rate_mbit"]]
    tr = cfg["traces"][cell["trace"]]
    path = step_trace_write(os.path.join(celldir, "link.trace"), parse_steps(tr["steps"]),
                                       trace_lead_s(cell, cfg))
    return ["--trace", path, "--rev-rate", "%gmbit" % tr["rev_rate_mbit"]]


def lab_args(cell, cfg, duration_s, celldir):
    queue = QUEUES[cell["queue"]]
    args = link_args(cell, cfg, celldir) + ["--delay", "%gms" % (cell["rtt_ms"] / 2.0),
            "--aqm", queue["aqm"], "--ecn", "on" if queue["ecn"] else "off",
            "--congestion", LAB_CONGESTION, "--duration", "%ds" % int(duration_s),
            "--queue", (cell.get("trace") and cfg["traces"][cell["trace"]].get("queue")) or cfg["lab"].get("queue", "auto"),
            "--stats", os.path.join(celldir, "linkem.json"), "--log", os.path.join(celldir, "linkem.log")]
    if queue["aqm"] == "drd":
        args += ["--drd-min", cfg["lab"].get("drd_min_bdp", PPS_DEFAULT_DRD_MIN_BDP),
                 "--drd-congest", cfg["lab"].get("drd_congest_bdp", PPS_DEFAULT_DRD_CONGEST_BDP)]
    if cell.get("loss_pct"):
        # pps-linkem's loss probability, each direction, before the queue.
        args += ["--loss", "%g" % (cell["loss_pct"] / 100.0)]
    return args


def server_sets(cell, cfg):
    """The server's --set keys of a cell: its axes, then [server] and
    --server-set, then its server_set axis value's section."""
    sets = dict(transport_sets(cell["transport"]), **{
        "transport.congestion": cell["congestion"],
        "transport.ecn": "true" if QUEUES[cell["queue"]]["ecn"] else "false",
        "pps.window_frames": cell["window_frames"],
        "source.fps": FPS,
    })
    sets.update(cfg["server_set"])
    if cell.get("pattern"):
        sets["source.pattern"] = cell["pattern"]
    if cell.get("server_set") and cell["server_set"] != "default":
        sets.update({k: v for k, v in cfg.get("server_sets", {})[cell["server_set"]].items()
                     if not k.startswith(CLIENT_KEY_PREFIX)})
    return sets


# A [server_set NAME] key with this prefix is the client's (client/client.copies = 2):
# one axis value can set both programs.
CLIENT_KEY_PREFIX = "client/"


def client_sets(cfg, build, cell=None):
    """The client's --set keys of a cell: [client], then its server_set
    section's client/ keys; and, for a client with an audio track,
    audio.output = none unless those say otherwise (the lab has no sound
    card: the audio is played on the clock and measured)."""
    sets = dict(cfg["client_set"])
    if cell and cell.get("server_set") and cell["server_set"] != "default":
        sets.update({k[len(CLIENT_KEY_PREFIX):]: v
                     for k, v in cfg.get("server_sets", {})[cell["server_set"]].items()
                     if k.startswith(CLIENT_KEY_PREFIX)})
    if "audio.output" not in sets:
        with contextlib.suppress(UsageError):
            if "none" in programs.config_choices(build, "client", "audio", "output"):
                sets["audio.output"] = "none"
    return sets


def cell_pattern(cell, cfg):
    return cell.get("pattern") or cfg["server_set"].get("source.pattern") or "ball"



def run_cell(ctx, cell, celldir):
    """Runs one cell; returns the measurements; the lab is down whatever happens."""
    cfg = ctx.cfg
    os.makedirs(celldir, exist_ok=True)
    for stale in ("cell.json", "client.jsonl", "server.json", "server.jsonl", "linkem.json", "linkem.log", "elephants.json",
                  "reverse-elephants.json", "shown.y4m", "scores.tsv", "av-timeline.png"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(celldir, stale))
    lab = Lab(ctx.netlab, ctx.lab_name)
    lab_duration = cfg["warmup_s"] + cfg["duration_s"] + LAB_SLACK_S
    system = traffic = reverse = None
    times = {}
    result = {"server_rusage": None, "client_rusage": None}
    # The machine may be shared: note other labs and the load, to read results with.
    times["other_labs_at_start"] = other_labs(ctx.lab_name)
    times["loadavg_at_start"] = os.getloadavg()[0]
    try:
        times["lab_up_unix"] = time.time()
        if cell.get("trace"):
            times["trace_lead_s"] = trace_lead_s(cell, cfg)
        lab.up(lab_args(cell, cfg, lab_duration, celldir))
        with open(os.path.join(celldir, "lab.json"), "w") as f:
            json.dump(lab.info, f, indent=2, sort_keys=True)
            f.write("\n")
        # Clock pair: pps-linkem's log is in CLOCK_MONOTONIC, the client's in CLOCK_REALTIME.
        times["realtime_minus_monotonic_ns"] = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        traffic_s = cfg["warmup_s"] + cfg["duration_s"] + TRAFFIC_TAIL_S + 2.0
        if cell["flows"] > 0:
            times["traffic_start_unix"] = time.time()
            traffic = lab.traffic(traffic_s, elephants=cell["flows"], congestion=ELEPHANT_CONGESTION,
                                  stdout=os.path.join(celldir, "traffic.txt"), stderr=subprocess.STDOUT)
            times["traffic_duration_s"] = traffic_s
        if cell.get("reverse_flows"):
            # Elephants from the receiver's side to the sender's: they fill the
            # reverse queue, where the stream's ACKs and the client's records wait.
            times["reverse_traffic_start_unix"] = time.time()
            reverse = lab.traffic(traffic_s, elephants=cell["reverse_flows"], congestion=ELEPHANT_CONGESTION,
                                  reverse=True, stdout=os.path.join(celldir, "reverse-traffic.txt"),
                                  stderr=subprocess.STDOUT)
            times["traffic_duration_s"] = traffic_s
        if has_cross_traffic(cell):
            interruptible_sleep(cfg["warmup_s"])
        sets = server_sets(cell, cfg)
        result["server_set"] = sets
        result["congestion"] = flow_congestion(cell, sets)
        result["client_set"] = client_sets(cfg, ctx.builds[cell.get("build", "")], cell)
        psnr = cfg.get("psnr") and cell_pattern(cell, cfg) in PSNR_PATTERNS and ctx.score is not None
        # The server ends the run at its --duration; the client's bound is only a backstop.
        system = Ppstream(ctx.builds[cell.get("build", "")], celldir, sets=sets, server_log=True,
                          client_extra_s=CLIENT_EXIT_GRACE_S, policy=cell.get("playout") or cfg["playout"],
                          tolerance_ms=cfg["tolerance_ms"], client_sets=result["client_set"], output=psnr)
        try:
            address = system.start_sender(lab, cfg["duration_s"])
        except Failure as error:
            raise CellError(f"{error} (see server.err)") from None
        server = system.server
        times["server_start_unix"] = server.start_unix
        client = system.start_receiver(lab, address, cfg["duration_s"])
        times["client_start_unix"] = client.start_unix
        if not server.exited(cfg["duration_s"] + SERVER_EXIT_GRACE_S):
            raise CellError("pps-server did not stop at its --duration")
        result["server_rusage"], times["server_end_unix"] = server.rusage, server.end_unix
        if not client.exited(CLIENT_EXIT_GRACE_S):
            raise CellError("pps-client did not stop after the server ended")
        result["client_rusage"], times["client_end_unix"] = client.rusage, client.end_unix
        if server.returncode != 0:
            raise CellError(f"pps-server exit {server.returncode}: {process.tail(server.stderr_path)}")
        ran_s = times["server_end_unix"] - times["server_start_unix"]
        if ran_s < 0.9 * cfg["duration_s"]:
            raise CellError(f"pps-server stopped after {ran_s:.1f} s of {cfg['duration_s']:g} (signalled from outside?)")
        if client.returncode != 0:
            # pps-server ends at --duration with the client still connected; a
            # reset then is the end of the run, not a failed one, as long as the
            # client wrote its summary. Recorded in cell.json either way.
            result["client_exit"] = {"status": client.returncode, "stderr": process.tail(client.stderr_path)}
            if not client.has_summary():
                raise CellError(f"pps-client exit {client.returncode}: {result['client_exit']['stderr']}")
        for proc, way, dest in ((traffic, False, "elephants.json"), (reverse, True, "reverse-elephants.json")):
            if proc is None:
                continue
            if not process.wait_exit(proc, times["traffic_duration_s"] + TRAFFIC_EXIT_GRACE_S):
                raise CellError(("reverse " if way else "") + "cross traffic did not end")
            src = traffic_result(lab, way)
            if src and os.path.exists(src):
                shutil.copyfile(src, os.path.join(celldir, dest))
    finally:
        with process.SignalsDeferred():
            if system is not None:
                system.stop()
            process.stop(traffic)
            process.stop(reverse)
            lab.down()  # pps-linkem writes linkem.json and closes linkem.log
    if psnr:
        score_pictures(ctx, cell_pattern(cell, cfg), celldir)
    times["other_labs_at_end"] = other_labs(ctx.lab_name)
    times["loadavg_at_end"] = os.getloadavg()[0]
    result["times"] = times
    return result


def score_pictures(ctx, pattern, celldir, y4m_name="shown.y4m", scores_name="scores.tsv"):
    """PSNR of the pictures shown against the regenerated source (pps-peer-score,
    docs/PEERS.md); the y4m goes once scored. Outside the measurement: the lab is down."""
    y4m = os.path.join(celldir, y4m_name)
    if not os.path.exists(y4m):
        return
    try:
        r = peer_score(ctx.score, pattern, y4m, os.path.join(celldir, scores_name))
        if r.returncode != 0:
            log(f"pps-peer-score failed: {r.stderr.strip()[-300:]}")
    finally:
        os.unlink(y4m)


# ---------------------------------------------------------------- run


class Context:
    """What a sweep runs with: the lab program, the server build of each
    cell (by build name; "" when the sweep has one build), pps-peer-score."""

    def __init__(self, build, cfg, lab_name):
        self.build = build
        self.cfg = cfg
        self.netlab = build.require("netlab").netlab
        self.lab_name = lab_name
        builds = cfg.get("server_builds") or []
        if builds:
            self.builds = {name: programs.Build(path).require("server", "client") for name, path in builds}
        else:
            self.builds = {"": build.require("server", "client")}
        self.score = build.peer_score if build.has("peer_score") else None


def cmd_run(build, args, server_builds=()):
    """pps-sweep run: @build runs the lab and names the axes' choices (and is
    the server build unless @server_builds [(NAME, DIR)] gives two or more)."""
    sets = []
    for item in args.server_set or []:
        key, eq, value = item.partition("=")
        if not eq or "." not in key:
            raise UsageError(f"--server-set {item}: expected SECTION.KEY=VALUE")
        sets.append((key.strip(), value.strip()))
    overrides = {"duration_s": args.duration, "warmup_s": args.warmup, "repetitions": args.reps, "seed": args.seed,
                 "server_set_cli": sets, "server_builds": list(server_builds)}
    out = args.resume or args.out
    plan_path = os.path.join(out, "plan.json") if out else None
    if args.resume and not os.path.exists(plan_path):
        raise UsageError(f"--resume {args.resume}: no plan.json there")
    if args.resume or (plan_path and os.path.exists(plan_path)):
        with open(plan_path) as f:
            plan = json.load(f)
        if args.preset or args.config:
            # Same --out with a matrix again: resume only if it is the same one.
            cfg = matrix.load_config(matrix.preset_path(args.preset) if args.preset else args.config, overrides, build)
            if [c["id"] for c in matrix.plan_cells(cfg)] != [c["id"] for c in plan["cells"]] or cfg["duration_s"] != plan["config"]["duration_s"]:
                raise UsageError(f"{out} holds a different sweep (plan.json); use another --out")
        cfg = plan["config"]
        resuming = True
    else:
        if not (args.preset or args.config):
            raise UsageError("give --preset NAME, --config FILE or --resume DIR")
        cfg = matrix.load_config(matrix.preset_path(args.preset) if args.preset else args.config, overrides, build)
        out = out or os.path.join(os.getcwd(), "sweep-%s-%s" % (args.preset or "custom", time.strftime("%Y%m%d-%H%M%S")))
        plan = {
            "preset": args.preset,
            "command": " ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]]),
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "config": cfg,
            "cells": matrix.plan_cells(cfg),
            "fps": FPS,
        }
        resuming = False
    cells_ = plan["cells"]
    est = len(cells_) * (cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
    if args.dry_run:
        for c in cells_:
            print(c["id"])
        print(f"{len(cells_)} cells, about {fmt_duration(est)}", file=sys.stderr)
        return 0
    try:
        require_permission()
    except NotPermitted as error:
        log(str(error))
        return EXIT_SKIP
    ctx = Context(build, cfg, args.lab_name or "sweep%d" % (os.getpid() % 100000))
    os.makedirs(os.path.join(out, "cells"), exist_ok=True)
    plan.setdefault("machine", machine_info(ctx.build, ctx.builds))
    plan.setdefault("build", ctx.build.path)
    plan["out"] = os.path.abspath(out)
    write_json(os.path.join(out, "plan.json"), plan)

    def finished(c):
        path = os.path.join(out, "cells", c["id"], "cell.json")
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                return json.load(f).get("status") == "ok"
        return False

    todo = [c for c in cells_ if not finished(c)]
    log(f"{'resuming' if resuming else 'sweep'} {out}: {len(cells_)} cells ({len(cells_) - len(todo)} done), "
        f"seed {cfg['seed']}, {cfg['duration_s']:g} s + {cfg['warmup_s']:g} s warm-up each, about "
        f"{fmt_duration(len(todo) * (cfg['warmup_s'] + cfg['duration_s'] + CELL_OVERHEAD_GUESS_S))}")
    process.raise_on_signals()
    progress = Progress(len(cells_), len(cells_) - len(todo), cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
    failures = 0
    try:
        for cell in todo:
            celldir = os.path.join(out, "cells", cell["id"])
            progress.start_cell(cell["id"])
            record = {"cell": cell, "status": "failed"}
            try:
                measured = run_cell(ctx, cell, celldir)
                record.update(cells.analyse_cell(celldir, cell, cfg, measured, keep_linkem_log=args.keep_linkem_log))
                record["status"] = "ok"
                line = report.cell_line(record)
            except (Failure, NotPermitted, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as error:
                failures += 1
                record["error"] = str(error)
                line = f"{cell['id']}: FAILED: {error}"
            write_json(os.path.join(celldir, "cell.json"), record)
            progress.end_cell(line)
    except Interrupted as error:
        progress.finish()
        log(f"interrupted ({error}); lab removed; resume with: {PROGRAM} --resume {out}")
        return EXIT_INTERRUPTED
    progress.finish()
    text = report.report(out, markdown=None, plots_dir=None)
    print(text)
    log(f"results in {out} ({failures} failed cells)" if failures else f"results in {out}")
    return 1 if failures else 0


def cmd_report(args):
    if not os.path.exists(os.path.join(args.dir, "plan.json")):
        raise UsageError(f"{args.dir}: no plan.json (not a sweep folder)")
    if getattr(args, "section", None):
        if not args.markdown:
            raise UsageError("--section needs --markdown FILE (the page whose figures it replaces)")
        text = report.report(args.dir, markdown=None, plots_dir=None)
        report.write_section(text, args.section, args.markdown, args.dir)
        return 0
    text = report.report(args.dir, markdown=args.markdown, plots_dir=args.plots_dir)
    if not args.markdown:
        print(text)
    return 0


def cmd_presets(build):
    for name in matrix.preset_names():
        cfg = matrix.load_config(matrix.preset_path(name), {}, build)
        cells_ = matrix.plan_cells(cfg)
        est = len(cells_) * (cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
        print(f"{name:8s} {len(cells_):5d} cells, about {fmt_duration(est):>7s}  {cfg['description']}")
    return 0
