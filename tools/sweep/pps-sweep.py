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
file; presets live in presets/ beside this script.

    pps-sweep --preset quick [--out DIR]          run (or resume) a sweep
    pps-sweep --config my.ini --out DIR           the same with your own matrix
    pps-sweep --resume DIR                        finish an interrupted sweep
    pps-sweep report DIR [--markdown FILE]        tables and plots again
    pps-sweep presets                             list the presets

Outputs in DIR: plan.json (matrix, seed, order, machine), cells/ID/ (client
log, server stats, lab.json, pps-linkem counters, iperf3 results, cell.json),
summary.json, summary.csv, groups.csv, report.md and plots/*.png.

Run as root with Debian's /usr/bin/python3 (numpy, matplotlib). This is a
benchmark: it prints figures; it does not pass or fail on them.
"""
import argparse
import configparser
import contextlib
import datetime
import itertools
import json
import os
import platform
import random
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree when run from there
import sweep_report  # noqa: E402  (beside this script in the source and build trees)
# The shared Lab and step traces: ../netlab in the build tree (copied there), and in the source tree.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "netlab"))
import netlab_lab  # noqa: E402

PROGRAM = "pps-sweep"
EXIT_SKIP = 77
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

FPS = 30  # the server's source.fps default; the papers' 30 frames/s
PRESETS_DIR = os.path.join(HERE, "presets")
NETLAB_STATE_ROOT = os.environ.get("PPS_NETLAB_STATE", "/run/ppstream-netlab")

AXES = ("transport", "window_frames", "flows", "rtt_ms", "rate_mbit", "queue", "congestion",
        "pattern", "trace", "server_set", "playout")
# Axes added with the closed loop; when a matrix does not name them they are "" and
# stay out of the cell id, so older sweep folders keep their ids (and resume).
OPTIONAL_AXES = ("pattern", "trace", "server_set", "playout")
# The build whose programs a sweep runs: --build, or the one this script was copied into.
BUILD_DEFAULT = os.path.dirname(os.path.dirname(HERE))  # build/tools/sweep -> build
BUILD = BUILD_DEFAULT  # run --build, once parsed
AXIS_DEFAULTS = {
    "transport": "tcp, minbuf(1,0), minbuf(1,3), minbuf(2,0)",
    "window_frames": "2",
    "flows": "20",
    "rtt_ms": "50",
    "rate_mbit": "10",
    "queue": "droptail",
    "congestion": "cubic",
    "pattern": "",
    "trace": "",
    "server_set": "",
    "playout": "",
}
# Queue variants. droptail: FIFO of one bandwidth-delay product, ECN off.
# drd-ecn: DRD with ECN negotiated by every flow (the stream and the
# elephants); thresholds as in IWQoS 2002 section 4.1 / TOMCCAP section 5.1
# (drdmin 1 BDP, drdcongest 2 BDP) unless [lab] says otherwise.
QUEUES = {"droptail": {"aqm": "droptail", "ecn": False}, "drd-ecn": {"aqm": "drd", "ecn": True}}
CONGESTION = ("cubic", "reno", "bbr")

PPS_DEFAULT_DURATION_S = 30.0
PPS_DEFAULT_WARMUP_S = 4.0
PPS_DEFAULT_REPETITIONS = 1
PPS_DEFAULT_PLAYOUT = "asap"  # frame latency then follows arrival, not a fixed tolerance
PPS_DEFAULT_DRD_MIN_BDP = "1"
PPS_DEFAULT_DRD_CONGEST_BDP = "2"

# Bounds on every wait (seconds), on top of the cell's own duration.
SERVER_READY_TIMEOUT_S = 20.0
SERVER_EXIT_GRACE_S = 30.0
CLIENT_EXIT_GRACE_S = 20.0
TRAFFIC_EXIT_GRACE_S = 30.0
LAB_COMMAND_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 5.0
# Time around the stream that the lab and its traffic stay up.
TRAFFIC_TAIL_S = 2.0
LAB_SLACK_S = 90.0
# Wall-clock overhead per cell beyond warm-up + duration (lab up/down, start,
# client end); only used for the time-left estimate before a cell finishes.
CELL_OVERHEAD_GUESS_S = 8.0


class UsageError(Exception):
    pass


class Interrupted(Exception):
    pass


class CellError(Exception):
    pass


def log(message):
    Progress.current.clear() if Progress.current else None
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the matrix


def parse_transport(text):
    """'tcp' or 'minbuf(A,B)' -> {'name', 'mode', 'a', 'b'}."""
    t = text.strip().lower().replace(" ", "")
    if t == "tcp":
        return {"name": "tcp", "mode": "tcp", "a": 1, "b": 0}
    m = re.fullmatch(r"minbuf\((\d+),(\d+)\)", t)
    if not m:
        raise UsageError(f"transport '{text}': expected tcp or minbuf(A,B)")
    a, b = int(m.group(1)), int(m.group(2))
    if not (1 <= a <= 16 and 0 <= b <= 64):
        raise UsageError(f"transport '{text}': A in 1..16, B in 0..64")
    return {"name": f"minbuf({a},{b})", "mode": "minbuf", "a": a, "b": b}


def transport_tag(name):
    return "tcp" if name == "tcp" else "mb" + re.sub(r"\D", "", name)


_key_choices = {}


def key_choices(program, section, key):
    """An enum key's names, in the program's order, as its own key table spells
    them (printed by `pps-config-doc <program>` as "(one of a, b, ...)"), so
    that no copy lives here."""
    build = BUILD
    if (build, program, section, key) not in _key_choices:
        # data/ since the settings moved to the programs; config/ before.
        doc = os.path.join(build, "data", "pps-config-doc")
        if not os.path.exists(doc):
            doc = os.path.join(build, "config", "pps-config-doc")
        try:
            text = subprocess.run([doc, program], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as error:
            raise UsageError(f"{doc} {program}: {error} (build first, or pass --build)") from None
        current, comment, names = None, "", None
        for line in text.splitlines():
            if line.startswith("["):
                current = line.strip("[] ")
            elif line.startswith("#"):
                comment = line
            elif current == section and line.split("=")[0].strip() == key:
                m = re.search(r"\(one of ([^)]*)\)$", comment)
                names = tuple(n.strip() for n in m.group(1).split(",")) if m else None
        if not names:
            raise UsageError(f"{doc} {program}: no [{section}] {key} choices in its output")
        _key_choices[build, program, section, key] = names
    return _key_choices[build, program, section, key]


def playouts():
    """[playout] policy's names (client/pps-client-policy.h)."""
    return key_choices("client", "playout", "policy")


def patterns():
    """[source] pattern's names (the server's key table, videotestsrc's spelling)."""
    return key_choices("server", "source", "pattern")


def parse_axis(name, text, traces=(), server_sets=()):
    values = [v.strip() for v in re.split(r",(?![^(]*\))", text) if v.strip()]
    if not values and name in OPTIONAL_AXES:
        return [""]
    if not values:
        raise UsageError(f"axis {name}: no values")
    out = []
    for v in values:
        if name == "transport":
            out.append(parse_transport(v)["name"])
        elif name in ("window_frames", "flows"):
            if not v.isdigit():
                raise UsageError(f"axis {name}: '{v}' is not a whole number")
            n = int(v)
            if name == "window_frames" and not 1 <= n <= 64:
                raise UsageError("axis window_frames: 1..64")
            if name == "flows" and n > 128:
                raise UsageError("axis flows: at most 128 (pps-netlab's limit)")
            out.append(n)
        elif name in ("rtt_ms", "rate_mbit"):
            try:
                x = float(v)
            except ValueError:
                raise UsageError(f"axis {name}: '{v}' is not a number") from None
            if x <= 0:
                raise UsageError(f"axis {name}: must be > 0")
            out.append(int(x) if x == int(x) else x)
        elif name == "queue":
            if v not in QUEUES:
                raise UsageError(f"axis queue: '{v}' is not one of {', '.join(QUEUES)}")
            out.append(v)
        elif name == "congestion":
            if v not in CONGESTION:
                raise UsageError(f"axis congestion: '{v}' is not one of {', '.join(CONGESTION)}")
            out.append(v)
        elif name == "pattern":
            if v not in patterns():
                raise UsageError(f"axis pattern: '{v}' is not one of {', '.join(patterns())}")
            out.append(v)
        elif name == "trace":
            if v not in traces:
                raise UsageError(f"axis trace: no [trace {v}] section")
            out.append(v)
        elif name == "playout":
            if v not in playouts():
                raise UsageError(f"axis playout: '{v}' is not one of {', '.join(playouts())}")
            out.append(v)
        elif name == "server_set":
            if v != "default" and v not in server_sets:
                raise UsageError(f"axis server_set: '{v}' is neither default nor a [server_set {v}] section")
            out.append(v)
    return out


def cell_id(cell):
    rate = ("%g" % cell["rate_mbit"]).replace(".", "p")
    rtt = ("%g" % cell["rtt_ms"]).replace(".", "p")
    link = f"t{cell['trace']}" if cell.get("trace") else f"{rate}mbit"
    extra = ""
    if cell.get("pattern"):
        extra += f"-{cell['pattern']}"
    if cell.get("server_set"):
        extra += f"-s{cell['server_set']}"
    if cell.get("playout"):
        extra += f"-p{cell['playout']}"
    return (f"{transport_tag(cell['transport'])}-w{cell['window_frames']}-f{cell['flows']}-{link}-{rtt}ms-"
            f"{cell['queue']}-{cell['congestion']}{extra}-r{cell['rep']}")


def load_config(path, overrides):
    """Reads a sweep INI file -> a plain dict (the plan's 'config')."""
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"))
    parser.optionxform = str  # server keys are case-sensitive section.key names
    try:
        with open(path) as f:
            text = f.read()
        parser.read_string(text, source=path)
    except (OSError, configparser.Error) as error:
        raise UsageError(f"{path}: {error}") from None
    sweep = dict(parser["sweep"]) if parser.has_section("sweep") else {}
    known = {"description", "duration_s", "warmup_s", "repetitions", "seed", "playout", "tolerance_ms", "timeline", "psnr"}
    for key in sweep:
        if key not in known:
            raise UsageError(f"{path}: [sweep] {key}: unknown key (known: {', '.join(sorted(known))})")
    cfg = {
        "source": os.path.abspath(path),
        "text": text,
        "description": sweep.get("description", ""),
        "duration_s": float(overrides.get("duration_s") or sweep.get("duration_s", PPS_DEFAULT_DURATION_S)),
        "warmup_s": float(overrides.get("warmup_s") or sweep.get("warmup_s", PPS_DEFAULT_WARMUP_S)),
        "repetitions": int(overrides.get("repetitions") or sweep.get("repetitions", PPS_DEFAULT_REPETITIONS)),
        "seed": int(overrides["seed"] if overrides.get("seed") is not None else sweep.get("seed", 1)),
        "playout": sweep.get("playout", PPS_DEFAULT_PLAYOUT),
        "tolerance_ms": sweep.get("tolerance_ms"),
        "timeline": sweep.get("timeline", ""),
        # PSNR needs the shown pictures (client --output, about 14 MB/s, deleted
        # once scored) and a pattern pps-peer-score regenerates (run_metrics.PSNR_PATTERNS).
        "psnr": sweep.get("psnr", "false").strip().lower() in ("1", "true", "yes", "on"),
        "server_set": dict(parser["server"]) if parser.has_section("server") else {},
        "server_sets": {},
        "traces": {},
        "client_set": dict(parser["client"]) if parser.has_section("client") else {},
        "lab": dict(parser["lab"]) if parser.has_section("lab") else {},
        "matrices": {},
    }
    if cfg["duration_s"] < 5 or cfg["warmup_s"] < 0 or cfg["repetitions"] < 1:
        raise UsageError(f"{path}: duration_s >= 5, warmup_s >= 0, repetitions >= 1")
    if cfg["playout"] not in playouts():
        raise UsageError(f"{path}: playout: {', '.join(playouts())}")
    for key in cfg["lab"]:
        if key not in ("drd_min_bdp", "drd_congest_bdp", "queue"):
            raise UsageError(f"{path}: [lab] {key}: unknown key (drd_min_bdp, drd_congest_bdp, queue)")
    for key, value in overrides.get("server_set_cli") or []:
        cfg["server_set"][key] = value  # pps-sweep --server-set KEY=VALUE: every cell
    for section in parser.sections():
        m = re.fullmatch(r"(trace|server_set)\s+(\S+)", section)
        if m and m.group(1) == "trace":
            cfg["traces"][m.group(2)] = trace_settings(path, section, dict(parser[section]))
        elif m:
            # A named set of server --set overrides: one value of the server_set axis.
            cfg["server_sets"][m.group(2)] = dict(parser[section])
    for section in parser.sections():
        m = re.fullmatch(r"matrix(?:\s+(\S+))?", section)
        if not m:
            if section not in ("sweep", "server", "client", "lab") and not re.fullmatch(r"(trace|server_set)\s+\S+", section):
                raise UsageError(f"{path}: unknown section [{section}]")
            continue
        values = dict(parser[section])
        if "ecn" in values:
            # ECN on/off is the queue variant: on = DRD with ECN on every flow.
            if "queue" in values:
                raise UsageError(f"{path}: [{section}] gives both ecn and queue; ecn on/off means queue drd-ecn/droptail")
            values["queue"] = ", ".join({"on": "drd-ecn", "off": "droptail"}.get(v.strip(), "?" + v.strip()) for v in values.pop("ecn").split(","))
        for key in values:
            if key not in AXES:
                raise UsageError(f"{path}: [{section}] {key}: unknown axis (axes: {', '.join(AXES)}, ecn)")
        cfg["matrices"][m.group(1) or "main"] = {axis: parse_axis(axis, values.get(axis, AXIS_DEFAULTS[axis]), cfg["traces"], cfg["server_sets"])
                                                 for axis in AXES}
    if not cfg["matrices"]:
        raise UsageError(f"{path}: no [matrix NAME] section")
    return cfg


def trace_settings(path, section, values):
    """[trace NAME]: steps = RATE_MBIT:SECONDS, ... (the forward capacity over
    time, repeating), lead_s (added to the first step: the time between the
    link coming up and the stream starting; default warm-up + 2 s),
    rev_rate_mbit (the ACK path; default the largest step's rate), queue (the
    link's queue in packets under this trace; default [lab] queue)."""
    for key in values:
        if key not in ("steps", "lead_s", "rev_rate_mbit", "queue"):
            raise UsageError(f"{path}: [{section}] {key}: unknown key (steps, lead_s, rev_rate_mbit, queue)")
    try:
        steps = netlab_lab.parse_steps(values.get("steps", ""))
    except ValueError as error:
        raise UsageError(f"{path}: [{section}] steps: {error}") from None
    out = {"steps": values["steps"], "lead_s": None, "rev_rate_mbit": max(r for r, _ in steps) / 1e6,
           "queue": values.get("queue")}
    with contextlib.suppress(KeyError):
        out["lead_s"] = float(values["lead_s"])
    with contextlib.suppress(KeyError):
        out["rev_rate_mbit"] = float(values["rev_rate_mbit"])
    return out


def plan_cells(cfg):
    """The union of the matrices' cross products, once each, x repetitions, in a seeded random order."""
    seen, cells = set(), []
    for matrix in cfg["matrices"].values():
        for combo in itertools.product(*(matrix.get(a, [""]) for a in AXES)):
            for rep in range(cfg["repetitions"]):
                cell = dict(zip(AXES, combo), rep=rep)
                cid = cell_id(cell)
                if cid not in seen:
                    seen.add(cid)
                    cells.append(dict(cell, id=cid))
    random.Random(cfg["seed"]).shuffle(cells)
    return cells


def machine_info():
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
    git = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        git = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10).stdout.strip()
    return {
        "uname": " ".join(platform.uname()),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "os": os_release,
        "python": platform.python_version(),
        "git": git,
        "default_congestion": open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
        if os.path.exists("/proc/sys/net/ipv4/tcp_congestion_control") else "",
    }


# ---------------------------------------------------------------- processes


def wait_child(proc, timeout_s):
    """Waits for a Popen child with a bound; returns its resource usage (wait4).
    `pps-netlab exec` and `ip netns exec` exec in place, so the child is the program itself."""
    if proc.returncode is not None:
        return NO_USAGE
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:  # reaped already: no usage to read
        proc.wait(timeout=max(0.0, timeout_s))
        return NO_USAGE
    try:
        readable, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
    finally:
        os.close(fd)
    if not readable:
        return None
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()
        return NO_USAGE
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage


class _NoUsage:
    ru_utime = ru_stime = float("nan")


NO_USAGE = _NoUsage()


def stop_child(proc):
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    if wait_child(proc, STOP_TIMEOUT_S) is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        wait_child(proc, STOP_TIMEOUT_S)


# The lab itself: netlab_lab.Lab (tools/netlab/netlab_lab.py), shared with the other drivers.
Lab = netlab_lab.Lab


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
    return (cfg["warmup_s"] if cell["flows"] > 0 else 0.0) + 2.0


def link_args(cell, cfg, celldir):
    """--rate, or a capacity-step trace written into the cell folder (link.trace)."""
    if not cell.get("trace"):
        return ["--rate", "%gmbit" % cell["rate_mbit"]]
    tr = cfg["traces"][cell["trace"]]
    path = netlab_lab.step_trace_write(os.path.join(celldir, "link.trace"), netlab_lab.parse_steps(tr["steps"]),
                                       trace_lead_s(cell, cfg))
    return ["--trace", path, "--rev-rate", "%gmbit" % tr["rev_rate_mbit"]]


def lab_args(cell, cfg, duration_s, celldir):
    queue = QUEUES[cell["queue"]]
    args = link_args(cell, cfg, celldir) + ["--delay", "%gms" % (cell["rtt_ms"] / 2.0),
            "--aqm", queue["aqm"], "--ecn", "on" if queue["ecn"] else "off",
            "--congestion", "cubic", "--duration", "%ds" % int(duration_s),
            "--queue", (cell.get("trace") and cfg["traces"][cell["trace"]].get("queue")) or cfg["lab"].get("queue", "auto"),
            "--stats", os.path.join(celldir, "linkem.json"), "--log", os.path.join(celldir, "linkem.log")]
    if queue["aqm"] == "drd":
        args += ["--drd-min", cfg["lab"].get("drd_min_bdp", PPS_DEFAULT_DRD_MIN_BDP),
                 "--drd-congest", cfg["lab"].get("drd_congest_bdp", PPS_DEFAULT_DRD_CONGEST_BDP)]
    return args


def server_argv(ctx, cell, cfg, addr, port_fifo, celldir):
    transport = parse_transport(cell["transport"])
    sets = {
        "transport.mode": transport["mode"],
        "transport.minbuf_a": transport["a"],
        "transport.minbuf_b": transport["b"],
        "transport.congestion": cell["congestion"],
        "transport.ecn": "true" if QUEUES[cell["queue"]]["ecn"] else "false",
        "pps.window_frames": cell["window_frames"],
        "source.fps": FPS,
    }
    sets.update(cfg["server_set"])
    if cell.get("pattern"):
        sets["source.pattern"] = cell["pattern"]
    if cell.get("server_set") and cell["server_set"] != "default":
        sets.update(cfg.get("server_sets", {})[cell["server_set"]])
    argv = [ctx.server, "--listen", f"{addr}:0", "--port-file", port_fifo, "--quiet",
            "--duration", "%g" % cfg["duration_s"], "--stats-json", os.path.join(celldir, "server.json")]
    if ctx.server_has_log:
        # Issue 10: the path estimate and the rate allocation, once a second (JSON Lines).
        argv += ["--log", os.path.join(celldir, "server.jsonl")]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    return argv, sets


def cell_pattern(cell, cfg):
    return cell.get("pattern") or cfg["server_set"].get("source.pattern") or "ball"


def client_argv(ctx, cfg, addr, port, celldir, log_name="client.jsonl", output_name="shown.y4m", psnr=None,
                playout=None):
    argv = [ctx.client, f"{addr}:{port}", "--display", "none", "--quiet",
            # The server's end ends the client; this bound is only a backstop.
            "--duration", "%g" % (cfg["duration_s"] + CLIENT_EXIT_GRACE_S),
            "--log", os.path.join(celldir, log_name), "--policy", playout or cfg["playout"]]
    if cfg.get("psnr") if psnr is None else psnr:
        argv += ["--output", os.path.join(celldir, output_name)]
    if cfg["tolerance_ms"]:
        argv += ["--tolerance", str(cfg["tolerance_ms"])]
    for key, value in cfg["client_set"].items():
        argv += ["--set", f"{key}={value}"]
    return argv


def read_port(fifo_fd, server, timeout_s):
    """The server writes its bound port to the FIFO once it listens: no polling."""
    try:
        return netlab_lab.read_port(fifo_fd, server, timeout_s)
    except netlab_lab.LabError as error:
        raise CellError(f"pps-server: {error} (see server.err)") from None


def run_cell(ctx, cell, celldir):
    """Runs one cell; returns the measurements; the lab is down whatever happens."""
    cfg = ctx.cfg
    os.makedirs(celldir, exist_ok=True)
    for stale in ("cell.json", "client.jsonl", "server.json", "server.jsonl", "linkem.json", "linkem.log", "elephants.json",
                  "shown.y4m", "scores.tsv"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(celldir, stale))
    lab = Lab(ctx.netlab, ctx.lab_name)
    lab_duration = cfg["warmup_s"] + cfg["duration_s"] + LAB_SLACK_S
    server = client = traffic = None
    fifo_fd = None
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
        info = lab.run("info", lab.name).stdout
        with open(os.path.join(celldir, "lab.json"), "w") as f:
            f.write(info)
        lab_info = json.loads(info)
        snd_addr = lab_info["addr"]["snd"]
        # Clock pair: pps-linkem's log is in CLOCK_MONOTONIC, the client's in CLOCK_REALTIME.
        times["realtime_minus_monotonic_ns"] = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if cell["flows"] > 0:
            traffic_s = cfg["warmup_s"] + cfg["duration_s"] + TRAFFIC_TAIL_S + 2.0
            times["traffic_start_unix"] = time.time()
            traffic = subprocess.Popen(
                [ctx.netlab, "traffic", lab.name, "--elephants", str(cell["flows"]), "--congestion", "cubic",
                 "--duration", "%gs" % traffic_s, "--wait"],
                stdin=subprocess.DEVNULL, stdout=open(os.path.join(celldir, "traffic.txt"), "w"), stderr=subprocess.STDOUT,
                start_new_session=True)
            times["traffic_duration_s"] = traffic_s
            interruptible_sleep(cfg["warmup_s"])
        port_fifo = os.path.join(celldir, "port.fifo")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(port_fifo)
        os.mkfifo(port_fifo, 0o600)
        fifo_fd = os.open(port_fifo, os.O_RDONLY | os.O_NONBLOCK)
        argv, sets = server_argv(ctx, cell, cfg, snd_addr, port_fifo, celldir)
        result["server_set"] = sets
        times["server_start_unix"] = time.time()
        server = subprocess.Popen(lab.exec_argv("snd", argv), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(celldir, "server.err"), "w"),
                                  start_new_session=True)
        port = read_port(fifo_fd, server, SERVER_READY_TIMEOUT_S)
        psnr = cfg.get("psnr") and cell_pattern(cell, cfg) in sweep_report.PSNR_PATTERNS and ctx.score is not None
        cargv = client_argv(ctx, cfg, snd_addr, port, celldir, psnr=psnr, playout=cell.get("playout"))
        times["client_start_unix"] = time.time()
        client = subprocess.Popen(lab.exec_argv("rcv", cargv), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(celldir, "client.err"), "w"),
                                  start_new_session=True)
        result["server_rusage"] = wait_child(server, cfg["duration_s"] + SERVER_EXIT_GRACE_S)
        if result["server_rusage"] is None:
            raise CellError("pps-server did not stop at its --duration")
        times["server_end_unix"] = time.time()
        result["client_rusage"] = wait_child(client, CLIENT_EXIT_GRACE_S)
        if result["client_rusage"] is None:
            raise CellError("pps-client did not stop after the server ended")
        times["client_end_unix"] = time.time()
        if server.returncode != 0:
            raise CellError(f"pps-server exit {server.returncode}: {tail(os.path.join(celldir, 'server.err'))}")
        ran_s = times["server_end_unix"] - times["server_start_unix"]
        if ran_s < 0.9 * cfg["duration_s"]:
            raise CellError(f"pps-server stopped after {ran_s:.1f} s of {cfg['duration_s']:g} (signalled from outside?)")
        if client.returncode != 0:
            # pps-server ends at --duration with the client still connected; a
            # reset then is the end of the run, not a failed one, as long as the
            # client wrote its summary. Recorded in cell.json either way.
            result["client_exit"] = {"status": client.returncode, "stderr": tail(os.path.join(celldir, "client.err"))}
            if not client_log_has_summary(os.path.join(celldir, "client.jsonl")):
                raise CellError(f"pps-client exit {client.returncode}: {result['client_exit']['stderr']}")
        if traffic is not None:
            if wait_child(traffic, times["traffic_duration_s"] + TRAFFIC_EXIT_GRACE_S) is None:
                raise CellError("cross traffic did not end")
            src = os.path.join(lab.state_dir(), "traffic-0", "elephants-client.json")
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(celldir, "elephants.json"))
    finally:
        with SignalsDeferred():
            if fifo_fd is not None:
                os.close(fifo_fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(port_fifo)
            for proc in (client, server, traffic):
                stop_child(proc)
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
        with open(os.path.join(celldir, scores_name), "w") as out:
            r = subprocess.run([ctx.score, "--pattern", pattern, y4m], stdout=out, stderr=subprocess.PIPE, text=True, timeout=900)
        if r.returncode != 0:
            log(f"pps-peer-score failed: {r.stderr.strip()[-300:]}")
    finally:
        os.unlink(y4m)


def other_labs(own):
    with contextlib.suppress(OSError):
        return sorted(n for n in os.listdir(NETLAB_STATE_ROOT) if not n.startswith(".") and n != own)
    return []


def client_log_has_summary(path):
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            return b'"type":"summary"' in f.read()
    return False


def tail(path, n=3):
    with contextlib.suppress(OSError):
        with open(path) as f:
            return " | ".join(f.read().strip().splitlines()[-n:])
    return ""


# ---------------------------------------------------------------- signals


def raise_interrupt(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def handle_signals():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupt)


class SignalsDeferred:
    """While tearing a cell down: a Ctrl-C must not leave the lab half removed.
    A signal that arrives meanwhile is remembered and raised once the lab is down."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self.caught = None
        self.previous = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
        for sig in self.SIGNALS:
            signal.signal(sig, self._remember)
        return self

    def _remember(self, signum, frame):
        self.caught = self.caught or signum

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if self.caught:
            raise Interrupted(signal.Signals(self.caught).name)
        return False


# ---------------------------------------------------------------- run


class Context:
    pass


def find_programs(args):
    build = args.build or BUILD_DEFAULT
    ctx = Context()
    ctx.build = build
    ctx.netlab = args.netlab or os.path.join(build, "tools", "netlab", "pps-netlab")
    ctx.server = args.server or os.path.join(build, "server", "pps-server")
    ctx.client = args.client or os.path.join(build, "client", "pps-client")
    for exe in (ctx.netlab, ctx.server, ctx.client):
        if not os.access(exe, os.X_OK):
            raise UsageError(f"missing {exe} (build first, or pass --build/--netlab/--server/--client)")
    ctx.netlab, ctx.server, ctx.client = (os.path.abspath(p) for p in (ctx.netlab, ctx.server, ctx.client))
    score = os.path.join(build, "tools", "peers", "pps-peer-score")
    ctx.score = score if os.access(score, os.X_OK) else None
    ctx.server_has_log = netlab_lab.server_has_option(ctx.server, "--log")
    return ctx


def preset_path(name):
    path = os.path.join(PRESETS_DIR, name + ".ini")
    if not os.path.exists(path):
        known = sorted(p[:-4] for p in os.listdir(PRESETS_DIR) if p.endswith(".ini"))
        raise UsageError(f"no preset '{name}' (presets: {', '.join(known)})")
    return path


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def cmd_run(args):
    sets = []
    for item in args.server_set or []:
        key, eq, value = item.partition("=")
        if not eq or "." not in key:
            raise UsageError(f"--server-set {item}: expected SECTION.KEY=VALUE")
        sets.append((key.strip(), value.strip()))
    overrides = {"duration_s": args.duration, "warmup_s": args.warmup, "repetitions": args.reps, "seed": args.seed,
                 "server_set_cli": sets}
    out = args.resume or args.out
    plan_path = os.path.join(out, "plan.json") if out else None
    if args.resume and not os.path.exists(plan_path):
        raise UsageError(f"--resume {args.resume}: no plan.json there")
    if args.resume or (plan_path and os.path.exists(plan_path)):
        with open(plan_path) as f:
            plan = json.load(f)
        if args.preset or args.config:
            # Same --out with a matrix again: resume only if it is the same one.
            cfg = load_config(preset_path(args.preset) if args.preset else args.config, overrides)
            if [c["id"] for c in plan_cells(cfg)] != [c["id"] for c in plan["cells"]] or cfg["duration_s"] != plan["config"]["duration_s"]:
                raise UsageError(f"{out} holds a different sweep (plan.json); use another --out")
        cfg = plan["config"]
        resuming = True
    else:
        if not (args.preset or args.config):
            raise UsageError("give --preset NAME, --config FILE or --resume DIR")
        cfg = load_config(preset_path(args.preset) if args.preset else args.config, overrides)
        out = out or os.path.join(os.getcwd(), "sweep-%s-%s" % (args.preset or "custom", time.strftime("%Y%m%d-%H%M%S")))
        plan = {
            "preset": args.preset,
            "command": " ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]]),
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "config": cfg,
            "cells": plan_cells(cfg),
            "fps": FPS,
        }
        resuming = False
    cells = plan["cells"]
    est = len(cells) * (cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
    if args.dry_run:
        for c in cells:
            print(c["id"])
        print(f"{len(cells)} cells, about {fmt_duration(est)}", file=sys.stderr)
        return 0
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        log("needs root and /dev/net/tun (network namespaces, TUN devices); skipping")
        return EXIT_SKIP
    ctx = find_programs(args)
    ctx.cfg = cfg
    ctx.lab_name = args.lab_name or "sweep%d" % (os.getpid() % 100000)
    os.makedirs(os.path.join(out, "cells"), exist_ok=True)
    plan.setdefault("machine", machine_info())
    plan.setdefault("build", ctx.build)
    plan["out"] = os.path.abspath(out)
    write_json(os.path.join(out, "plan.json"), plan)

    def finished(c):
        path = os.path.join(out, "cells", c["id"], "cell.json")
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                return json.load(f).get("status") == "ok"
        return False

    todo = [c for c in cells if not finished(c)]
    log(f"{'resuming' if resuming else 'sweep'} {out}: {len(cells)} cells ({len(cells) - len(todo)} done), "
        f"seed {cfg['seed']}, {cfg['duration_s']:g} s + {cfg['warmup_s']:g} s warm-up each, about "
        f"{fmt_duration(len(todo) * (cfg['warmup_s'] + cfg['duration_s'] + CELL_OVERHEAD_GUESS_S))}")
    handle_signals()
    progress = Progress(len(cells), len(cells) - len(todo), cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
    failures = 0
    try:
        for cell in todo:
            celldir = os.path.join(out, "cells", cell["id"])
            progress.start_cell(cell["id"])
            record = {"cell": cell, "status": "failed"}
            try:
                measured = run_cell(ctx, cell, celldir)
                record.update(sweep_report.analyse_cell(celldir, cell, cfg, measured, keep_linkem_log=args.keep_linkem_log))
                record["status"] = "ok"
                line = sweep_report.cell_line(record)
            except (CellError, netlab_lab.LabError, netlab_lab.NotPermitted, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as error:
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
    text = sweep_report.report(out, markdown=None, plots_dir=None)
    print(text)
    log(f"results in {out} ({failures} failed cells)" if failures else f"results in {out}")
    return 1 if failures else 0


def cmd_report(args):
    if not os.path.exists(os.path.join(args.dir, "plan.json")):
        raise UsageError(f"{args.dir}: no plan.json (not a sweep folder)")
    text = sweep_report.report(args.dir, markdown=args.markdown, plots_dir=args.plots_dir)
    if not args.markdown:
        print(text)
    return 0


def cmd_presets(args):
    for name in sorted(p[:-4] for p in os.listdir(PRESETS_DIR) if p.endswith(".ini")):
        cfg = load_config(preset_path(name), {})
        cells = plan_cells(cfg)
        est = len(cells) * (cfg["warmup_s"] + cfg["duration_s"] + CELL_OVERHEAD_GUESS_S)
        print(f"{name:8s} {len(cells):5d} cells, about {fmt_duration(est):>7s}  {cfg['description']}")
    return 0


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Latency-tolerance sweeps of ppstream in the network lab: each cell one pps-server and one "
        "pps-client with long-lived cubic cross traffic. Subcommands: run (default), report, presets.",
        epilog="Exit status: 0 done, 1 some cells failed, 2 bad settings, 77 no root or /dev/net/tun, 130 interrupted "
        "(resume with --resume DIR). See docs/BENCHMARKS.md.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    r = sub.add_parser("run", help="run (or resume) a sweep (the default command)")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--preset", help="a matrix from presets/ (quick, paper, full, steps, steps-tiny, mustshow, benchmarks, playout, congestion-alone)")
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
    r.add_argument("--build", help="meson build directory (default: the one this script is in)")
    r.add_argument("--netlab", help="pps-netlab program")
    r.add_argument("--server", help="pps-server program")
    r.add_argument("--client", help="pps-client program")
    r.add_argument("--lab-name", help="lab name (default sweepPID)")
    rep = sub.add_parser("report", help="summary, CSV, plots and report.md of a sweep folder again")
    rep.add_argument("dir")
    rep.add_argument("--markdown", help="also write the report here (e.g. docs/BENCHMARKS.md)")
    rep.add_argument("--plots-dir", help="copy the plots here and link them from --markdown (default: beside it, benchmarks/)")
    sub.add_parser("presets", help="list the presets with their size")
    return p


def main(argv):
    if not argv or argv[0] not in ("run", "report", "presets", "-h", "--help"):
        argv = ["run"] + list(argv)
    args = build_parser().parse_args(argv)
    global BUILD
    BUILD = getattr(args, "build", None) or BUILD_DEFAULT
    try:
        return {"run": cmd_run, "report": cmd_report, "presets": cmd_presets}[args.command](args)
    except UsageError as error:
        log(str(error))
        return EXIT_USAGE
    except Interrupted as error:
        log(f"interrupted ({error})")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
