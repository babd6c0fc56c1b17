# SPDX-License-Identifier: MIT
"""pps-sweep's matrix: the sweep INI file (presets in tools/sweep/presets),
its axes and their values, the cells (the union of the matrices' cross
products x repetitions x server builds) in their run order, and cell ids.

Every cell of a matrix is one real pps-server (in the lab's snd namespace) and
one real pps-client (rcv), with long-lived cubic elephants as cross traffic,
as in TOMCCAP 2008 section 7. Axes: transport (tcp, minbuf(A,B)), adaptation
window (frames at 30 frames/s), competing flows, RTT, bottleneck rate, queue
variant (drop-tail of one BDP with ECN off, or DRD with ECN on every flow),
the stream's congestion control, repetitions; the source pattern, a
capacity-step trace and named server settings; random loss on the link
(loss_pct) and cross traffic on the reverse path (reverse_flows: elephants
from the receiver to the sender, so that the ACKs and the client's own
records queue behind them); and, given on the command
line, server builds run side by side (each cell once per build, the builds
interleaved cell by cell).
"""
import configparser
import contextlib
import itertools
import os
import random
import re

from . import programs
from .errors import UsageError
from .lab import parse_steps

PRESETS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sweep", "presets")

FPS = 30  # the server's source.fps default; the papers' 30 frames/s

AXES = ("transport", "window_frames", "flows", "rtt_ms", "rate_mbit", "queue", "congestion",
        "pattern", "trace", "server_set", "playout", "loss_pct", "reverse_flows")
# Axes added with the closed loop and later; when a matrix does not name them they
# are "" and stay out of the cell id, so older sweep folders keep their ids (and
# resume). loss_pct and reverse_flows are "" for none as well (0 is written "").
OPTIONAL_AXES = ("pattern", "trace", "server_set", "playout", "loss_pct", "reverse_flows")
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
    "loss_pct": "",
    "reverse_flows": "",
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

# A cell's fields beyond the matrix axes: the server build (pps-sweep
# --server-build NAME=DIR; "" without), which stays out of the cell id when "".
CELL_AXES = AXES + ("build",)

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


def transport_sets(text):
    """'tcp' or 'minbuf(A,B)' -> the server's transport.* keys."""
    t = parse_transport(text)
    return {"transport.mode": t["mode"], "transport.minbuf_a": t["a"], "transport.minbuf_b": t["b"]}


def transport_tag(name):
    return "tcp" if name == "tcp" else "mb" + re.sub(r"\D", "", name)


def playouts(build):
    """[playout] policy's names (client/pps-client-policy.h)."""
    return programs.config_choices(build, "client", "playout", "policy")


def patterns(build):
    """[source] pattern's names (the server's key table, videotestsrc's spelling)."""
    return programs.config_choices(build, "server", "source", "pattern")


def parse_axis(name, text, build, traces=(), server_sets=()):
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
            if v not in patterns(build):
                raise UsageError(f"axis pattern: '{v}' is not one of {', '.join(patterns(build))}")
            out.append(v)
        elif name == "trace":
            if v not in traces:
                raise UsageError(f"axis trace: no [trace {v}] section")
            out.append(v)
        elif name == "playout":
            if v not in playouts(build):
                raise UsageError(f"axis playout: '{v}' is not one of {', '.join(playouts(build))}")
            out.append(v)
        elif name == "loss_pct":
            # Random loss, each direction (pps-netlab --loss, pps-linkem's loss
            # probability = loss_pct / 100); 0 is no loss, written "".
            try:
                x = float(v)
            except ValueError:
                raise UsageError(f"axis loss_pct: '{v}' is not a number") from None
            if not 0 <= x <= 50:
                raise UsageError("axis loss_pct: 0..50 (% of the packets, each direction)")
            out.append("" if x == 0 else (int(x) if x == int(x) else x))
        elif name == "reverse_flows":
            if not v.isdigit():
                raise UsageError(f"axis reverse_flows: '{v}' is not a whole number")
            if int(v) > 128:
                raise UsageError("axis reverse_flows: at most 128 (pps-netlab's limit)")
            out.append(int(v) or "")
        elif name == "server_set":
            if v != "default" and v not in server_sets:
                raise UsageError(f"axis server_set: '{v}' is neither default nor a [server_set {v}] section")
            out.append(v)
    return out


def cell_id(cell):
    """A cell's folder name: its axes' values, the optional ones where set,
    the server build (-bNAME) where the sweep has several, the repetition."""
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
    if cell.get("loss_pct"):
        extra += "-l" + ("%g" % cell["loss_pct"]).replace(".", "p")
    if cell.get("reverse_flows"):
        extra += f"-rf{cell['reverse_flows']}"
    if cell.get("build"):
        extra += f"-b{cell['build']}"
    return (f"{transport_tag(cell['transport'])}-w{cell['window_frames']}-f{cell['flows']}-{link}-{rtt}ms-"
            f"{cell['queue']}-{cell['congestion']}{extra}-r{cell['rep']}")


def load_config(path, overrides, build):
    """Reads a sweep INI file -> a plain dict (the plan's 'config'); @build
    names the key tables (pps-config-doc) that the axes' names come from."""
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
        # once scored) and a pattern pps-peer-score regenerates (metrics.PSNR_PATTERNS).
        "psnr": sweep.get("psnr", "false").strip().lower() in ("1", "true", "yes", "on"),
        "server_set": dict(parser["server"]) if parser.has_section("server") else {},
        "server_sets": {},
        "traces": {},
        "client_set": dict(parser["client"]) if parser.has_section("client") else {},
        "lab": dict(parser["lab"]) if parser.has_section("lab") else {},
        "matrices": {},
        # pps-sweep --server-build NAME=DIR: every cell runs once with each
        # build's pps-server and pps-client, in this order.
        "server_builds": server_builds(overrides.get("server_builds") or []),
    }
    if cfg["duration_s"] < 5 or cfg["warmup_s"] < 0 or cfg["repetitions"] < 1:
        raise UsageError(f"{path}: duration_s >= 5, warmup_s >= 0, repetitions >= 1")
    if cfg["playout"] not in playouts(build):
        raise UsageError(f"{path}: playout: {', '.join(playouts(build))}")
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
        cfg["matrices"][m.group(1) or "main"] = {axis: parse_axis(axis, values.get(axis, AXIS_DEFAULTS[axis]), build, cfg["traces"], cfg["server_sets"])
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
        steps = parse_steps(values.get("steps", ""))
    except ValueError as error:
        raise UsageError(f"{path}: [{section}] steps: {error}") from None
    out = {"steps": values["steps"], "lead_s": None, "rev_rate_mbit": max(r for r, _ in steps) / 1e6,
           "queue": values.get("queue")}
    with contextlib.suppress(KeyError):
        out["lead_s"] = float(values["lead_s"])
    with contextlib.suppress(KeyError):
        out["rev_rate_mbit"] = float(values["rev_rate_mbit"])
    return out


def server_builds(items):
    """[(NAME, BUILD_DIR)] -> [[NAME, absolute BUILD_DIR]] in the order given
    (a list: plan.json keeps the order, where a mapping's keys are sorted)."""
    out = {}
    for name, path in items:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}", name):
            raise UsageError(f"--server-build {name}={path}: NAME is 1-32 of A-Z, a-z, 0-9, '_', '.', '-'")
        if name in out:
            raise UsageError(f"--server-build {name}: given twice")
        build = programs.Build(path)
        for program in ("server", "client"):
            if not build.has(program):
                raise UsageError(f"--server-build {name}={path}: no {getattr(build, program)} (build it first)")
        out[name] = build.path
    if len(out) == 1:
        raise UsageError("--server-build: give two builds or more (one build: --build)")
    return [[name, path] for name, path in out.items()]


def build_names(cfg):
    """The server builds' names, in the order they run ([] without builds)."""
    return [name for name, _ in cfg.get("server_builds") or []]


def base_id(cell):
    """The id of a cell without its server build: the cell the builds share."""
    return cell_id(dict(cell, build=""))


def plan_cells(cfg):
    """The union of the matrices' cross products, once each, x repetitions, in
    a seeded random order; with server builds, each cell once per build, the
    builds interleaved cell by cell so that drift of a shared machine falls on
    every build alike, their order rotated from one cell to the next (A, B;
    B, A; ...): the first of a pair ran measurably better than the second
    (frames shown, 20 pairs of a 40-flow cell), so each build goes first
    equally often."""
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
    builds = build_names(cfg)
    if not builds:
        return cells
    out = []
    for k, cell in enumerate(cells):
        for j in range(len(builds)):
            c = dict(cell, build=builds[(k + j) % len(builds)])
            out.append(dict(c, id=cell_id(c)))
    return out


def preset_path(name):
    path = os.path.join(PRESETS_DIR, name + ".ini")
    if not os.path.exists(path):
        raise UsageError(f"no preset '{name}' (presets: {', '.join(preset_names())})")
    return path


def preset_names():
    return sorted(p[:-4] for p in os.listdir(PRESETS_DIR) if p.endswith(".ini"))
