# SPDX-License-Identifier: MIT
"""pps-scale: many viewers of one stream through a tree of relays, each tier
in network namespaces of its own, every program a process of its own (the
shape that spreads over machines).

    origin (pps-server --publish) -> root (pps-relay) -> edge 1..K (pps-relay --upstream)
                                                      -> viewers: pps-swarm processes behind each edge

Links are plain veth pairs (no emulated rate or delay: the question is what
the relays and the machine can carry, not a path's). Each swarm process holds
--per-swarm viewers from an address of its own. Figures: per viewer (from
pps-swarm's reports: every counted window whole, window latency = its
WINDOW_END's arrival after its first frame's capture, against the stream's
latency budget) and per process (CPU over the measured span from
/proc/PID/stat, resident memory from /proc/PID/status), the machine's CPU
(/proc/stat) and the kernel's TCP memory (/proc/net/sockstat) over the same
span.

Outputs in OUT/N (one directory per viewer count): run.json, results.json,
the programs' logs and pps-swarm reports; OUT/report.md and OUT/results.json
over every count.
"""
import contextlib
import glob
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from . import process
from .attacks import proc_usage
from .errors import EXIT_INTERRUPTED, EXIT_SKIP, Failure, Interrupted, NotPermitted, UsageError
from .files import public_command, read_json
from .netlab.state import require_permission

PROGRAM = "pps-scale"
PORT = 7500
STREAM = "live/scale"
NS_PREFIX = "ppsscale"
START_TIMEOUT_S = 20.0
SETTLE_S = 5.0          # after the ramp, before the measured span
TAIL_S = 2.0            # after the measured span, before the swarms close
EXIT_GRACE_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
# A relay or swarm process counts as keeping up while it uses at most this
# share of one core over the measured span (the machine's other work needs
# the rest); the paper projection sizes machines by it too.
CORE_BUDGET = 0.7


def log(msg):
    print(f"{PROGRAM}: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- namespaces


def _ip(*args, ns=None, check=True):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise Failure(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


def _netns_list():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _ns_kill_and_delete(ns):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        pids = [int(p) for p in r.stdout.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
            time.sleep(0.05)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def clean_stale():
    """Namespaces of earlier runs whose pps-scale is gone (named after its pid)."""
    for ns in _netns_list():
        m = re.fullmatch(NS_PREFIX + r"(\d+)-\w+", ns)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            log(f"removing {ns}, left by an earlier run")
            _ns_kill_and_delete(ns)


class Tree:
    """The namespaces and veth links of one run; deleted on exit, whatever happened."""

    def __init__(self, edges, swarms_per_edge):
        self.tag = f"{NS_PREFIX}{os.getpid()}"
        self.edges = edges
        self.swarms_per_edge = swarms_per_edge
        self.namespaces = []

    def ns(self, role):
        return f"{self.tag}-{role}"

    def _add_ns(self, role):
        name = self.ns(role)
        _ip("ip", "netns", "add", name)
        self.namespaces.append(name)
        _ip("ip", "link", "set", "lo", "up", ns=name)
        # Thousands of connections to one listener: a deep accept queue.
        _ip("sysctl", "-qw", "net.core.somaxconn=65535", ns=name)
        _ip("sysctl", "-qw", "net.ipv4.tcp_max_syn_backlog=65535", ns=name)
        return name

    def _link(self, a, b, subnet, b_addresses=1):
        """veth a <-> b in 10.77.SUBNET.0/24: a is .1, b .2 up to .(1 + b_addresses)."""
        va, vb = f"s{subnet}a", f"s{subnet}b"
        _ip("ip", "link", "add", va, "netns", a, "type", "veth", "peer", "name", vb, "netns", b)
        _ip("ip", "addr", "add", f"10.77.{subnet}.1/24", "dev", va, ns=a)
        for k in range(b_addresses):
            _ip("ip", "addr", "add", f"10.77.{subnet}.{2 + k}/24", "dev", vb, ns=b)
        _ip("ip", "link", "set", va, "up", ns=a)
        _ip("ip", "link", "set", vb, "up", ns=b)
        return f"10.77.{subnet}.1", [f"10.77.{subnet}.{2 + k}" for k in range(b_addresses)]

    def __enter__(self):
        try:
            root = self._add_ns("root")
            origin = self._add_ns("origin")
            self.root_addr_for_origin, _ = self._link(root, origin, 0)
            self.viewer_groups = []  # (relay ns, relay address, viewer ns, [swarm source addresses])
            if self.edges == 0:
                viewers = self._add_ns("v1")
                addr, sources = self._link(root, viewers, 100, self.swarms_per_edge)
                self.viewer_groups.append((root, addr, viewers, sources))
            else:
                self.root_addr_for_edge = []
                for k in range(1, self.edges + 1):
                    edge = self._add_ns(f"e{k}")
                    addr, _ = self._link(root, edge, k)
                    self.root_addr_for_edge.append(addr)
                    viewers = self._add_ns(f"v{k}")
                    eaddr, sources = self._link(edge, viewers, 100 + k, self.swarms_per_edge)
                    self.viewer_groups.append((edge, eaddr, viewers, sources))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for name in reversed(self.namespaces):
            _ns_kill_and_delete(name)
        self.namespaces = []


# ---------------------------------------------------------------- processes


def _cpu_s(pid):
    """utime + stime of @pid in seconds, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def _machine_cpu():
    """(busy, total) jiffies of the whole machine (/proc/stat's cpu line)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def _tcp_mem_kib():
    """The kernel's TCP buffer memory, whole machine (/proc/net/sockstat's mem, pages)."""
    with contextlib.suppress(OSError, StopIteration, ValueError):
        with open("/proc/net/sockstat") as f:
            line = next(line for line in f if line.startswith("TCP:"))
        words = line.split()
        return int(words[words.index("mem") + 1]) * PAGE_KIB
    return None


class Proc:
    def __init__(self, role, argv, ns, out):
        self.role = role
        self.argv = argv
        self.log_path = os.path.join(out, f"{role}.log")
        self.log = open(self.log_path, "w")
        self.proc = process.popen(["ip", "netns", "exec", ns] + argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.cpu = {}
        self.rss = {}

    @property
    def pid(self):
        # `ip netns exec` execs the program: the pid is the program's.
        return self.proc.pid

    def sample(self, label):
        self.cpu[label] = _cpu_s(self.pid)
        self.rss[label] = proc_usage(self.pid)[0]

    def log_has(self, pattern):
        with open(self.log_path, errors="replace") as f:
            return re.search(pattern, f.read()) is not None

    def stop(self):
        if self.proc.poll() is None:
            process.stop(self.proc)
        self.log.close()


# ---------------------------------------------------------------- one run


def stream_sets(args):
    """The origin's settings: a small stream, so that the machine's two cores
    are spent on fan-out rather than on one encode."""
    sets = {"source.pattern": args.pattern, "source.width": args.width, "source.height": args.height,
            "source.fps": args.fps, "encoder.base_vbv_kbps": args.base_kbps,
            "encoder.enhancement_vbv_kbps": args.enhancement_kbps,
            "adapt.min_base_kbps": min(args.base_kbps, 100), "audio.source": "off"}
    for item in getattr(args, "origin_set", None) or []:
        key, _, value = item.partition("=")
        sets[key.strip()] = value.strip()
    return sets


def relay_sets(subscribers, args):
    return {"server.max_clients": max(16, subscribers), "server.max_clients_per_address": max(8, args.per_swarm),
            "server.max_pending": 1024, "server.evict_after_s": 10}


def run_one(build, args, viewers, out):
    os.makedirs(out, exist_ok=True)
    edges = args.edges
    groups = max(1, edges)
    per_group = math.ceil(viewers / groups)
    swarms_per_group = math.ceil(per_group / args.per_swarm)
    measure_s = args.measure
    rate_per_swarm = max(20.0, args.connect_rate / (groups * swarms_per_group))
    ramp_s = args.per_swarm / rate_per_swarm
    procs = []
    runinfo = {"command": public_command(" ".join([PROGRAM] + [shlex.quote(a) for a in sys.argv[1:]])), "viewers": viewers,
               "edges": edges, "per_swarm": args.per_swarm, "swarms": groups * swarms_per_group,
               "connect_rate_per_swarm": rate_per_swarm, "ramp_s": ramp_s, "measure_s": measure_s,
               "stream": stream_sets(args), "congestion": "the relays' and the origin's default (bbr); viewers: "
               "the kernel's default", "links": "veth, no emulation"}
    with Tree(edges, swarms_per_group) as tree:
        try:
            root_subs = viewers if edges == 0 else edges
            relay_common = [build.relay, "--listen", f"0.0.0.0:{PORT}"]
            root = Proc("relay-root", relay_common + _sets(relay_sets(root_subs, args)), tree.ns("root"), out)
            procs.append(root)
            _wait_log(root, r"relay listening", "the root relay")
            # The origin first: an edge's subscription is refused (and not
            # retried) while the root does not carry the stream yet.
            total_s = ramp_s + SETTLE_S + measure_s + TAIL_S + 10
            origin = Proc("origin", [build.server, "--publish", f"{tree.root_addr_for_origin}:{PORT}/{STREAM}",
                                     "--duration", "%g" % (total_s + 15 + 5 * edges)] + _sets(stream_sets(args)),
                          tree.ns("origin"), out)
            procs.append(origin)
            _wait_log(root, r"stream " + re.escape(STREAM) + r": \d+x\d+", "the root relay's stream")
            edge_procs = []
            for k in range(1, edges + 1):
                e = Proc(f"relay-e{k}", relay_common + ["--upstream", f"{tree.root_addr_for_edge[k - 1]}:{PORT}/{STREAM}"]
                         + _sets(relay_sets(per_group, args)), tree.ns(f"e{k}"), out)
                procs.append(e)
                edge_procs.append(e)
            for e in edge_procs:
                _wait_log(e, r"stream " + re.escape(STREAM) + r": \d+x\d+", f"{e.role}'s stream")
            for p in procs:
                p.sample("base")
            start = time.time()
            measure_from = start + ramp_s + SETTLE_S
            measure_until = measure_from + measure_s
            swarm_duration = measure_until - start + TAIL_S
            runinfo.update(start_unix=start, measure_from_unix=measure_from, measure_until_unix=measure_until)
            log(f"{viewers} viewers: {groups} x {swarms_per_group} pps-swarm of up to {args.per_swarm}, "
                f"ramp {ramp_s:.0f} s, measured {measure_s:g} s")
            swarms = []
            left = viewers
            for g, (relay_ns, relay_addr, viewer_ns, sources) in enumerate(tree.viewer_groups):
                group_left = min(left, per_group)
                left -= group_left
                for j, source in enumerate(sources):
                    n = min(args.per_swarm, group_left)
                    group_left -= n
                    if n <= 0:
                        break
                    report = os.path.join(out, f"swarm-{g + 1}-{j + 1}.json")
                    argv = [build.swarm, f"{relay_addr}:{PORT}/{STREAM}", "--viewers", n, "--bind", source,
                            "--connect-rate", "%g" % rate_per_swarm, "--duration", "%.1f" % swarm_duration,
                            "--measure-from", int(measure_from * 1e6), "--measure-until", int(measure_until * 1e6),
                            "--out", report, "--name", f"v{g + 1}-{j + 1}", "--status-interval", 10]
                    s = Proc(f"swarm-{g + 1}-{j + 1}", [str(a) for a in argv], viewer_ns, out)
                    s.report = report
                    swarms.append(s)
                    procs.append(s)
            _sleep_until(measure_from, procs)
            machine0, tcp0 = _machine_cpu(), _tcp_mem_kib()
            for p in procs:
                p.sample("from")
            _sleep_until(measure_until, procs)
            machine1, tcp1 = _machine_cpu(), _tcp_mem_kib()
            for p in procs:
                p.sample("until")
            for s in swarms:
                process.wait_exit(s.proc, TAIL_S + EXIT_GRACE_S)
        finally:
            for p in reversed(procs):
                p.stop()
    runinfo["machine_busy"] = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count()
    runinfo["tcp_mem_kib"] = {"from": tcp0, "until": tcp1}
    runinfo["processes"] = [{"role": p.role, "cpu": p.cpu, "rss_kib": p.rss, "argv": p.argv,
                             "subscribers": (viewers if p is root and edges == 0 else edges if p is root else
                                             per_group if p.role.startswith("relay-e") else None)}
                            for p in procs]
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(runinfo, f, indent=1)
    return results_one(out)


def _sets(sets):
    out = []
    for key, value in sets.items():
        out += ["--set", f"{key}={value}"]
    return out


def _wait_log(p, pattern, what):
    process.wait_until(lambda: p.log_has(pattern), what, timeout_s=START_TIMEOUT_S, proc=p.proc)


def _sleep_until(t, procs):
    while time.time() < t:
        for p in procs:
            if p.role.startswith(("relay", "origin")) and p.proc.poll() is not None:
                raise Failure(f"{p.role} exited early ({p.proc.returncode}); its log: {p.log_path}")
        time.sleep(min(0.5, max(0.0, t - time.time())))


# ---------------------------------------------------------------- figures


def _merge_percentiles(reports, key):
    """A conservative merge of the swarms' percentiles: the largest (each swarm
    holds an equal share of the viewers, so the merged p99 is at most the
    largest swarm's)."""
    values = [r["window_latency_ms"].get(key) for r in reports if r.get("window_latency_ms")]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def results_one(out):
    run = read_json(os.path.join(out, "run.json"))
    reports = []
    for path in sorted(glob.glob(os.path.join(out, "swarm-*.json"))):
        with contextlib.suppress(OSError, ValueError):
            reports.append(read_json(path))
    span = run["measure_until_unix"] - run["measure_from_unix"]
    windows = {k: sum(r.get("windows", {}).get(k, 0) for r in reports) for k in ("counted", "whole", "with_drops", "dropped", "gaps")}
    budget = max((r.get("latency_budget_ms") or 0 for r in reports), default=None)
    res = {
        "viewers": run["viewers"], "edges": run["edges"], "swarms": run["swarms"], "swarm_reports": len(reports),
        "got_stream_info": sum(r.get("got_stream_info", 0) for r in reports),
        "streaming_at_end": sum(r.get("streaming_at_end", 0) for r in reports),
        "viewers_full": sum(r.get("viewers_full", 0) for r in reports),
        "windows": windows,
        "whole_pct": 100.0 * windows["whole"] / windows["counted"] if windows["counted"] else None,
        "latency_budget_ms": budget,
        "windows_per_s": max((r["fps"] / r["window_frames"] for r in reports if r.get("fps") and r.get("window_frames")),
                             default=None),
        "window_latency_ms": {k: _merge_percentiles(reports, k) for k in ("p50", "p95", "p99", "p999", "max")},
        "per_viewer_kbps_min": min((r.get("per_viewer_kbps", {}).get("min") for r in reports
                                    if r.get("per_viewer_kbps", {}).get("min") is not None), default=None),
        "per_viewer_kbps_p50": _median([r.get("per_viewer_kbps", {}).get("p50") for r in reports]),
        "machine_busy_cores": run.get("machine_busy"),
        "tcp_mem_kib": run.get("tcp_mem_kib"),
        "closed_early": _sum_maps(r.get("closed_early", {}) for r in reports),
        "refused": _sum_maps(r.get("refused", {}) for r in reports),
        "connect_errors": _sum_maps(r.get("connect_errors", {}) for r in reports),
    }
    tiers = {}
    for p in run["processes"]:
        tier = "root relay" if p["role"] == "relay-root" else "edge relay" if p["role"].startswith("relay-e") else \
            "origin" if p["role"] == "origin" else "swarm"
        cpu = p["cpu"]
        busy = (cpu["until"] - cpu["from"]) / span if cpu.get("until") is not None and cpu.get("from") is not None else None
        rss = p["rss_kib"]
        t = tiers.setdefault(tier, {"processes": 0, "cpu_cores": [], "rss_kib": [], "rss_growth_kib": [], "subscribers": []})
        t["processes"] += 1
        t["cpu_cores"].append(busy)
        t["rss_kib"].append(rss.get("until"))
        if rss.get("until") is not None and rss.get("base") is not None:
            t["rss_growth_kib"].append(rss["until"] - rss["base"])
        if p.get("subscribers") is not None:
            t["subscribers"].append(p["subscribers"])
    for tier, t in tiers.items():
        cores = [c for c in t["cpu_cores"] if c is not None]
        t["cpu_cores_max"] = max(cores) if cores else None
        t["cpu_cores_sum"] = sum(cores) if cores else None
        subs = sum(t["subscribers"]) if t["subscribers"] else None
        if tier in ("edge relay", "root relay") and subs:
            t["cpu_core_us_per_viewer_s"] = t["cpu_cores_sum"] * 1e6 / subs if cores else None
            growth = [g for g in t["rss_growth_kib"] if g is not None]
            t["rss_kib_per_viewer"] = sum(growth) / subs if growth else None
        if tier == "swarm":
            t["cpu_core_us_per_viewer_s"] = t["cpu_cores_sum"] * 1e6 / run["viewers"] if cores else None
            t["rss_kib_per_viewer"] = sum(x for x in t["rss_kib"] if x) / run["viewers"]
    res["tiers"] = tiers
    lat99 = res["window_latency_ms"]["p99"]
    res["checks"] = {
        "every viewer got the full stream": res["viewers_full"] == run["viewers"],
        "p99 window latency within the budget": lat99 is not None and budget is not None and lat99 <= budget,
        "no relay above %d%% of a core" % (CORE_BUDGET * 100): all(
            (tiers[t]["cpu_cores_max"] or 0) <= CORE_BUDGET for t in ("root relay", "edge relay") if t in tiers),
    }
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def _median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _sum_maps(maps):
    out = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def _f(v, fmt="%.1f"):
    return "–" if v is None else fmt % v


def report(out):
    """report.md over every count measured in @out."""
    runs = []
    for d in sorted(glob.glob(os.path.join(out, "v*")), key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0)):
        if os.path.exists(os.path.join(d, "run.json")):
            runs.append((read_json(os.path.join(d, "run.json")), results_one(d)))
    if not runs:
        raise UsageError(f"{out}: no run.json under {out}/v*")
    first = runs[0][0]
    stream = first["stream"]
    lines = [f"# pps-scale: viewers of one stream through a relay tree", "",
             f"`{public_command(first['command'])}`; edges (leaf relays) {first['edges']}, pps-swarm processes of up to "
             f"{first['per_swarm']} viewers, each in the edge's viewer namespace with an address of its own; "
             f"links: {first['links']}; measured span {first['measure_s']:g} s after the ramp and {SETTLE_S:g} s more. "
             f"Stream: {stream['source.width']}x{stream['source.height']} at {stream['source.fps']} frames/s, "
             f"pattern {stream['source.pattern']}; the origin's settings: "
             + ", ".join(f"`{k}={v}`" for k, v in stream.items()) + f". Congestion control: {first['congestion']}. "
             f"Machine: {os.cpu_count()} cores.", "",
             "Window latency: a window's WINDOW_END at the viewer after its first frame's capture (one clock: every "
             "namespace shares CLOCK_REALTIME); merged over swarms as the largest swarm's percentile. Full stream: every "
             "window of the span arrived whole (no ADU dropped, no window missing). CPU: share of one core over the "
             "measured span (/proc/PID/stat); memory: resident set at the span's end, and per viewer its growth from "
             "before the first viewer.", "",
             "| viewers | full stream | windows whole % | window latency p50 / p99 / max ms (budget) | kbit/s per viewer (min) "
             "| edge relay: CPU (max) / µs per viewer-s / KiB per viewer | root relay CPU | swarm µs per viewer-s | origin CPU "
             "| machine busy (cores) | kernel TCP memory MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for run, res in runs:
        t = res["tiers"]
        edge = t.get("edge relay") or t.get("root relay") or {}
        root = t.get("root relay", {})
        lat = res["window_latency_ms"]
        tcp = (res.get("tcp_mem_kib") or {}).get("until")
        lines.append(
            f"| {res['viewers']} | {res['viewers_full']} / {res['viewers']} | {_f(res['whole_pct'], '%.2f')} | "
            f"{_f(lat['p50'])} / {_f(lat['p99'])} / {_f(lat['max'], '%.0f')} ({_f(res['latency_budget_ms'], '%.0f')}) | "
            f"{_f(res['per_viewer_kbps_p50'], '%.0f')} ({_f(res['per_viewer_kbps_min'], '%.0f')}) | "
            f"{_f(edge.get('cpu_cores_max'), '%.2f')} / {_f(edge.get('cpu_core_us_per_viewer_s'), '%.0f')} / "
            f"{_f(edge.get('rss_kib_per_viewer'), '%.1f')} | {_f(root.get('cpu_cores_max'), '%.2f')} | "
            f"{_f(t.get('swarm', {}).get('cpu_core_us_per_viewer_s'), '%.0f')} | {_f(t.get('origin', {}).get('cpu_cores_max'), '%.2f')} | "
            f"{_f(res['machine_busy_cores'], '%.2f')} | {_f(tcp / 1024 if tcp is not None else None)} |")
    lines += ["", "| viewers | check | verdict |", "|---|---|---|"]
    limit = None
    for run, res in runs:
        for check, ok in res["checks"].items():
            lines.append(f"| {res['viewers']} | {check} | {'met' if ok else 'missed'} |")
        if limit is None and not all(res["checks"].values()):
            limit = res["viewers"]
        w = res["windows"]
        extra = {k: v for k, v in (("windows with ADUs dropped", w["with_drops"]), ("windows dropped whole", w["dropped"]),
                                   ("windows missing", w["gaps"]), ("closed early", res["closed_early"]),
                                   ("refused", res["refused"]), ("connect errors", res["connect_errors"])) if v}
        if extra:
            lines.append(f"| {res['viewers']} | what went wrong | {json.dumps(extra)} |")
    lines += ["", "## On N machines (from the measured costs, on paper)", ""]
    lines += projection(runs)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump([res for _, res in runs], f, indent=1)
    return text


def projection(runs):
    """Viewers one relay process can carry at CORE_BUDGET of a core, from the
    largest run's edge cost per viewer, and the tree a number of viewers needs."""
    best = None
    # The largest run that kept up (every check met), else the largest.
    for run, res in sorted(runs, key=lambda rr: (all(rr[1]["checks"].values()), rr[1]["viewers"])):
        tier = res["tiers"].get("edge relay") or res["tiers"].get("root relay")
        if tier and tier.get("cpu_core_us_per_viewer_s"):
            best = (res, tier)
    if not best:
        return ["No relay cost measured."]
    res, tier = best
    cost = tier["cpu_core_us_per_viewer_s"]
    by_cpu = CORE_BUDGET * 1e6 / cost
    # A relay writes each window to its viewers one after another: the last
    # of them waits for all the others, which must fit half the budget.
    windows_s = res.get("windows_per_s") or 0
    budget_ms = res.get("latency_budget_ms") or 0
    by_latency = (budget_ms / 2 * 1e3) / (cost / windows_s) if windows_s and budget_ms else by_cpu
    per_core = min(by_cpu, by_latency)
    kbps = res.get("per_viewer_kbps_p50") or 0
    out = [f"From the {res['viewers']}-viewer run: an edge relay spends {cost:.0f} µs of CPU per viewer per second "
           f"at {kbps:.0f} kbit/s per viewer, and {_f(tier.get('rss_kib_per_viewer'), '%.1f')} KiB of its own memory "
           f"per viewer. On one machine that CPU includes the viewers' side of TCP: a veth pair delivers a packet in "
           f"the sender's system call, so the receiving socket's processing and wake-up are charged to the relay "
           f"(about half of its time in a perf profile of this shape); across machines a relay pays less, and the "
           f"figures below, which take the measured cost whole, are an upper bound. One relay process carries about "
           f"{per_core:.0f} viewers of this stream: the fewer of {by_cpu:.0f} (its CPU at {CORE_BUDGET:.0%} of a core) and "
           f"{by_latency:.0f} (a window written to every viewer within half the {budget_ms:.0f} ms budget, at "
           f"{windows_s:.1f} windows/s, {cost / windows_s if windows_s else 0:.0f} µs per window and viewer); a machine "
           f"with C cores runs C such processes (one event loop each).", ""]
    out.append("| viewers | edge relay processes | machines of 2 cores | of 16 cores | uplink per 16-core machine Gbit/s |")
    out.append("|---|---|---|---|---|")
    for n in (10_000, 100_000, 1_000_000):
        relays = math.ceil(n / per_core)
        out.append(f"| {n:,} | {relays} | {math.ceil(relays / 2)} | {math.ceil(relays / 16)} | "
                   f"{min(n, per_core * 16) * kbps / 1e6:.2f} |")
    out += ["", "The root relay feeds each edge one copy, so a tree of fan-out F has depth log_F(edges); the cost of a "
            "stream's bit rate scales the per-viewer figure roughly in proportion to the packets written (the measured "
            "cost is at this stream's rate, not a model of another's)."]
    return out


# ---------------------------------------------------------------- entry


def run(build, args):
    build.require("server", "relay", "swarm")
    try:
        require_permission()
    except NotPermitted as error:
        log(str(error))
        return EXIT_SKIP
    counts = [int(v) for v in str(args.viewers).split(",") if v.strip()]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    process.raise_on_signals()
    clean_stale()
    try:
        for n in counts:
            res = run_one(build, args, n, os.path.join(out, f"v{n}"))
            lat = res["window_latency_ms"]
            log(f"{n} viewers: full stream {res['viewers_full']}/{n}, windows whole {_f(res['whole_pct'], '%.2f')}%, "
                f"p99 {_f(lat['p99'])} ms (budget {_f(res['latency_budget_ms'], '%.0f')}), machine {_f(res['machine_busy_cores'], '%.2f')} cores busy")
    except Interrupted:
        log("interrupted")
        return EXIT_INTERRUPTED
    sys.stdout.write(report(out))
    return 0
