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
import contextlib
import fcntl
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

PROGRAM = "pps-netlab"
EXIT_USAGE = 2
EXIT_SKIP = 77

STATE_ROOT = os.environ.get("PPS_NETLAB_STATE", "/run/ppstream-netlab")
DEV = "pps0"
MAX_LABS = 256

PPS_DEFAULT_NAME = "lab"
PPS_DEFAULT_RATE = "10mbit"
PPS_DEFAULT_DELAY = "25ms"
PPS_DEFAULT_QUEUE = "auto"  # one bandwidth-delay product
PPS_DEFAULT_AQM = "droptail"
PPS_DEFAULT_CONGESTION = "cubic"
PPS_DEFAULT_DURATION_S = 600
PPS_DEFAULT_TRAFFIC_DURATION_S = 60
PPS_DEFAULT_MICE_BYTES = 20000
PPS_DEFAULT_MICE_INTERVAL = "1s"
CONGESTION_CHOICES = ("cubic", "reno", "bbr")

# Bounded waits: how long a lab or a server may take to become ready.
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
# pps-linkem's own bound outlives the lab's by this much, in case the supervisor is killed.
LINKEM_GRACE_S = 30
LINKEM_RT_PRIORITY = 20


class UsageError(Exception):
    """Bad settings: exit 2 before anything is created."""


class NotPermitted(Exception):
    """No root or no /dev/net/tun: exit 77 so test suites skip."""


class LabError(Exception):
    """A runtime failure; the lab is torn down."""


class Interrupted(Exception):
    """SIGINT/SIGTERM/SIGHUP while setting up: tear down and leave."""


def log(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- units


def parse_seconds(text, what):
    """'30', '30s', '500ms', '2m' -> seconds (float, > 0)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", str(text))
    if not m:
        raise UsageError(f"{what}: '{text}' is not a duration (e.g. 30, 30s, 500ms, 2m)")
    value = float(m.group(1)) * {None: 1, "s": 1, "ms": 1e-3, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if value <= 0:
        raise UsageError(f"{what}: '{text}' must be > 0")
    return value


def parse_rate_bps(text, what):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(|bit|bps|k|kbit|kbps|m|mbit|mbps|g|gbit|gbps)", str(text).strip().lower())
    if not m:
        raise UsageError(f"{what}: '{text}' is not a rate (e.g. 10mbit, 800kbit)")
    scale = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)[:1]]
    value = float(m.group(1)) * scale
    if value < 1:
        raise UsageError(f"{what}: '{text}' must be > 0")
    return int(round(value))


def lab_name_check(name):
    # Namespace names end up in paths and in `ip` arguments: keep them plain.
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", name or ""):
        raise UsageError(f"lab name '{name}' must be 1-31 characters of a-z, 0-9 and '-'")
    return name


def netns_names(name):
    return f"pps-{name}-snd", f"pps-{name}-rcv"


MAX_RECEIVERS = 8


def receiver_netns(name, k):
    """Receiver k (1-based) of a lab with several receivers: pps-NAME-rcvK."""
    return f"pps-{name}-rcv{k}"


def all_netns(name):
    """Every namespace a lab may own, the receivers of a multi-receiver lab included
    (found by name, so that a stale lab without lab.json is removed whole)."""
    found = list(netns_names(name))
    with contextlib.suppress(OSError):
        for entry in sorted(os.listdir("/var/run/netns")):
            if re.fullmatch(re.escape(f"pps-{name}-rcv") + r"\d+", entry):
                found.append(entry)
    return found


def lab_side(lab, side):
    """A side name as given by the user -> the key in lab.json's netns/addr: with
    several receivers, 'rcv' means 'rcv1'."""
    if side == "rcv" and "rcv" not in lab["netns"] and "rcv1" in lab["netns"]:
        side = "rcv1"
    if side not in lab["netns"]:
        raise UsageError(f"lab '{lab['name']}' has no side '{side}' (sides: {', '.join(lab['netns'])})")
    return side


def side_addresses(index):
    """The sender side is 198.18.N.1, the receiver side 198.19.N.1."""
    return f"198.18.{index}.1", f"198.19.{index}.1"


# ---------------------------------------------------------------- tools and processes


def tool_path(name):
    """Finds a lab program: $PPS_<NAME>, beside this script (installed), the build tree, PATH."""
    env = os.environ.get("PPS_" + name.upper().replace("PPS-", "").replace("-", "_"))
    if env:
        return env
    here = os.path.dirname(os.path.realpath(__file__))
    for candidate in (
        os.path.join(here, name),
        os.path.join(here, "..", "linkem", name),
        os.path.join(here, "..", "traffic", name),
    ):
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return os.path.normpath(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise LabError(f"cannot find {name} (build it, or set PPS_{name.upper().replace('PPS-', '').replace('-', '_')})")


def run(cmd, check=True, quiet=False):
    """Runs a short command (ip, sysctl). Raises LabError with its stderr when it fails."""
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise LabError(f"{shlex.join(cmd)}: {result.stderr.strip() or 'exit ' + str(result.returncode)}")
    if not quiet and result.returncode != 0:
        log(f"{shlex.join(cmd)}: {result.stderr.strip()}")
    return result


def netns_cmd(ns, cmd):
    # `ip netns exec` setns()es and execs in place: the pid we get is the program's.
    return ["ip", "netns", "exec", ns] + list(cmd)


def netns_exists(ns):
    return os.path.exists(os.path.join("/var/run/netns", ns))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def pid_matches(pid, needle):
    """Guards against pid reuse: the process's command line must mention @needle."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return needle.encode() in f.read()
    except OSError:
        return False


def wait_pid_exit(pid, timeout_s):
    """Waits for any process (not only a child) to exit, on a pidfd: no polling loop."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable) or not pid_alive(pid)
    finally:
        os.close(fd)


def stop_pid(pid, needle, timeout_s=STOP_TIMEOUT_S, sig=signal.SIGTERM, group=False):
    """SIGTERM (the process or its group), wait, then SIGKILL. True if it is gone."""
    if not pid or not pid_alive(pid) or not pid_matches(pid, needle):
        return True
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return True
    if wait_pid_exit(pid, timeout_s):
        return True
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    return wait_pid_exit(pid, 2.0)


# ---------------------------------------------------------------- state


def state_dir(name):
    return os.path.join(STATE_ROOT, name)


@contextlib.contextmanager
def state_lock():
    """Serializes index allocation and teardown across pps-netlab processes."""
    os.makedirs(STATE_ROOT, exist_ok=True)
    with open(os.path.join(STATE_ROOT, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lab_read(name):
    try:
        with open(os.path.join(state_dir(name), "lab.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def lab_write(lab):
    path = os.path.join(state_dir(lab["name"]), "lab.json")
    with open(path + ".tmp", "w") as f:
        json.dump(lab, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_pid(path, pid):
    with open(path, "w") as f:
        f.write(f"{pid}\n")


def lab_names():
    try:
        return sorted(n for n in os.listdir(STATE_ROOT) if not n.startswith(".") and os.path.isdir(state_dir(n)))
    except FileNotFoundError:
        return []


def lab_require(name):
    lab = lab_read(name)
    if not lab or lab.get("state") != "up":
        raise UsageError(f"no lab named '{name}' is up (see `{PROGRAM} status`)")
    return lab


# ---------------------------------------------------------------- permission


def require_permission():
    if os.geteuid() != 0:
        raise NotPermitted("needs root (network namespaces, TUN devices); skipping")
    if not os.path.exists("/dev/net/tun"):
        raise NotPermitted("/dev/net/tun does not exist; skipping")
    if not shutil.which("ip"):
        raise NotPermitted("iproute2's `ip` is not installed; skipping")


# ---------------------------------------------------------------- teardown


def teardown(name, from_supervisor=False, show_summary=True):
    """Removes everything a lab owns: traffic, pps-linkem, processes in its
    namespaces, the namespaces, the state directory. Idempotent, safe to race."""
    sdir = state_dir(name)
    with state_lock():
        if os.path.isdir(sdir):
            for entry in sorted(os.listdir(sdir)):
                if re.fullmatch(r"traffic-\d+\.pid", entry):
                    stop_pid(read_pid(os.path.join(sdir, entry)), "_traffic", group=True)
        # pps-linkem first (one per receiver), so that it writes its counters and
        # log in peace; its supervisor then wakes up and waits on this lock, and can go.
        with contextlib.suppress(OSError):
            for entry in sorted(os.listdir(sdir)):
                if re.fullmatch(r"linkem(-\d+)?\.pid", entry):
                    stop_pid(read_pid(os.path.join(sdir, entry)), "pps-linkem")
        if not from_supervisor:
            stop_pid(read_pid(os.path.join(sdir, "supervisor.pid")), "_supervise", sig=signal.SIGKILL, timeout_s=2)
        if show_summary:
            with contextlib.suppress(OSError):
                for entry in sorted(os.listdir(sdir)):
                    m = re.fullmatch(r"linkem(?:-(\d+))?\.out", entry)
                    if not m:
                        continue
                    with open(os.path.join(sdir, entry)) as f:
                        summary = [line for line in f.read().splitlines() if line != "ready"]
                    if summary:
                        print(f"lab {name}: pps-linkem counters" + (f" (receiver {m.group(1)})" if m.group(1) else ""))
                        print("\n".join(summary), flush=True)
        # Whatever `exec` started in the namespaces goes too.
        for ns in all_netns(name):
            if not netns_exists(ns):
                continue
            for sig in (signal.SIGTERM, signal.SIGKILL):
                pids = [int(p) for p in run(["ip", "netns", "pids", ns], check=False, quiet=True).stdout.split()]
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                for pid in pids:
                    wait_pid_exit(pid, 2.0)
            run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(sdir, ignore_errors=True)


# ---------------------------------------------------------------- up


def linkem_args(args):
    """pps-linkem settings for a lab's options (the netns and fd options come later)."""
    out = []
    fwd = ["--fwd-trace", args.trace] if args.trace else ["--fwd-rate", args.rate]
    if args.rev_trace:
        rev = ["--rev-trace", args.rev_trace]
    elif args.rev_rate:
        rev = ["--rev-rate", args.rev_rate]
    else:
        rev = ["--rev-trace", args.trace] if args.trace else ["--rev-rate", args.rate]
    out += fwd + rev
    out += ["--delay", args.delay, "--queue", args.queue, "--aqm", args.aqm]
    if args.queue_bytes:
        out += ["--queue-bytes", args.queue_bytes]
    if args.drd_min is not None:
        out += ["--drd-min", args.drd_min]
    if args.drd_congest is not None:
        out += ["--drd-congest", args.drd_congest]
    if args.drd_drop_not_ect:
        out += ["--drd-drop-not-ect"]
    out += ["--loss", args.loss, "--seed", str(args.seed)]
    return out


def linkem_check(args):
    """Validates the link settings with pps-linkem itself, before anything exists."""
    cmd = [tool_path("pps-linkem"), "--check"] + linkem_args(args)
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode == EXIT_USAGE:
        raise UsageError(result.stderr.strip().removeprefix("pps-linkem: "))
    if result.returncode != 0:
        raise LabError(f"pps-linkem --check failed: {result.stderr.strip()}")
    return json.loads(result.stdout)["settings"]


def index_allocate(name):
    used = set()
    for other in lab_names():
        lab = lab_read(other)
        if lab and "index" in lab:
            used.add(lab["index"])
    for index in range(MAX_LABS):
        if index not in used:
            return index
    raise LabError(f"all {MAX_LABS} lab slots are in use (see `{PROGRAM} status`)")


def handle_signals_as_interrupt():
    def raise_interrupt(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupt)


def receiver_args(args):
    """--receivers N: one copy of the link options per receiver, where --rate,
    --delay, --queue, --loss and --trace may each give N comma-separated values
    (one value: the same for every receiver)."""
    n = args.receivers
    if not 1 <= n <= MAX_RECEIVERS:
        raise UsageError(f"--receivers: 1..{MAX_RECEIVERS}")
    out = [argparse.Namespace(**vars(args)) for _ in range(n)]
    for key in ("rate", "delay", "queue", "loss", "trace", "rev_rate", "queue_bytes"):
        value = getattr(args, key)
        if value is None:
            continue
        parts = [v.strip() for v in str(value).split(",")]
        if len(parts) == 1:
            parts *= n
        if len(parts) != n:
            raise UsageError(f"--{key.replace('_', '-')}: {len(parts)} values for {n} receivers (give 1 or {n})")
        for a, v in zip(out, parts):
            setattr(a, key, v)
    return out


def per_receiver_path(path, k, n):
    """--stats/--log of a multi-receiver lab: FILE.json -> FILE-rcvK.json."""
    if not path or n == 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}-rcv{k}{ext}"


def lab_up(args):
    """Creates the lab and returns its lab.json; tears down on any failure."""
    name = lab_name_check(args.name)
    if args.ecn not in ("on", "off"):
        raise UsageError(f"--ecn: '{args.ecn}' is not on or off")
    duration_s = parse_seconds(args.duration, "--duration")
    per_receiver = receiver_args(args)
    n_rcv = len(per_receiver)
    all_settings = [linkem_check(a) for a in per_receiver]
    settings = all_settings[0]
    require_permission()
    snd_ns, rcv_ns = netns_names(name)

    with state_lock():
        existing = lab_read(name)
        if existing and pid_alive(existing.get("supervisor_pid", 0)):
            raise LabError(f"lab '{name}' is already up (`{PROGRAM} down --name {name}` first)")
    # A lab whose supervisor is gone (killed machine-wide, say) is stale: clear it.
    if os.path.isdir(state_dir(name)) or any(netns_exists(ns) for ns in all_netns(name)):
        teardown(name, show_summary=False)
    with state_lock():
        index = index_allocate(name)
        os.makedirs(state_dir(name))
        snd_addr, rcv_addr = side_addresses(index)
        now_wall = time.time()
        lab = {
            "name": name,
            "state": "starting",
            "index": index,
            "netns": {"snd": snd_ns, "rcv": rcv_ns},
            "addr": {"snd": snd_addr, "rcv": rcv_addr},
            "dev": DEV,
            "link": settings,
            "rtt_ms": (settings["fwd"]["delay_ns"] + settings["rev"]["delay_ns"]) / 1e6,
            "ecn": args.ecn,
            "congestion": args.congestion,
            "duration_s": duration_s,
            "created_unix": now_wall,
            "deadline_unix": now_wall + duration_s,
            "log": os.path.abspath(args.log) if args.log else None,
            "stats": os.path.abspath(args.stats) if args.stats else None,
        }
        if n_rcv > 1:
            # One sender, several receivers each behind its own pps-linkem link:
            # sides rcv1..rcvN, namespaces pps-NAME-rcvK, addresses 198.19.N.K;
            # the sender's device toward receiver K is pps(K-1). `link` and
            # `rtt_ms` above are receiver 1's; every receiver's are in `receivers`.
            lab["netns"] = {"snd": snd_ns}
            lab["addr"] = {"snd": snd_addr}
            lab["receivers"] = []
            for k, st in enumerate(all_settings, 1):
                side = f"rcv{k}"
                lab["netns"][side] = receiver_netns(name, k)
                lab["addr"][side] = rcv_addr.rsplit(".", 1)[0] + f".{k}"
                lab["receivers"].append({
                    "side": side, "snd_dev": f"pps{k - 1}", "link": st,
                    "rtt_ms": (st["fwd"]["delay_ns"] + st["rev"]["delay_ns"]) / 1e6,
                    "stats": per_receiver_path(lab["stats"], k, n_rcv), "log": per_receiver_path(lab["log"], k, n_rcv),
                })
        lab_write(lab)

    try:
        handle_signals_as_interrupt()
        for ns in lab["netns"].values():
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        lab["sysctl"] = namespace_sysctls(lab)
        supervisor_start(lab, per_receiver)
        ecn = ["features", "ecn"] if args.ecn == "on" else []
        if n_rcv == 1:
            for side, ns, local, remote in (("snd", snd_ns, snd_addr, rcv_addr), ("rcv", rcv_ns, rcv_addr, snd_addr)):
                run(["ip", "-n", ns, "link", "set", DEV, "mtu", "1500", "up"])
                run(["ip", "-n", ns, "addr", "add", f"{local}/32", "dev", DEV])
                run(["ip", "-n", ns, "route", "add", remote.rsplit(".", 1)[0] + ".0/24", "dev", DEV, "congctl", args.congestion] + ecn)
        for r in lab.get("receivers", []) if n_rcv > 1 else []:
            ns, local = lab["netns"][r["side"]], lab["addr"][r["side"]]
            # Sender side: its address on every device, one /32 route per receiver.
            run(["ip", "-n", snd_ns, "link", "set", r["snd_dev"], "mtu", "1500", "up"])
            run(["ip", "-n", snd_ns, "addr", "add", f"{snd_addr}/32", "dev", r["snd_dev"]])
            run(["ip", "-n", snd_ns, "route", "add", f"{local}/32", "dev", r["snd_dev"], "congctl", args.congestion] + ecn)
            run(["ip", "-n", ns, "link", "set", DEV, "mtu", "1500", "up"])
            run(["ip", "-n", ns, "addr", "add", f"{local}/32", "dev", DEV])
            run(["ip", "-n", ns, "route", "add", snd_addr.rsplit(".", 1)[0] + ".0/24", "dev", DEV, "congctl", args.congestion] + ecn)
        lab["state"] = "up"
        lab_write(lab)
        return lab
    except BaseException as error:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        teardown(name, show_summary=False)
        if isinstance(error, (LabError, Interrupted, UsageError, NotPermitted)):
            raise
        raise LabError(f"setting up lab '{name}' failed: {error!r}") from error


def namespace_sysctls(lab):
    """Per-namespace settings the kernel allows; records what it refused."""
    wanted = {
        # 1: request ECN on outgoing connections and accept it; 0: neither.
        "net.ipv4.tcp_ecn": "1" if lab["ecn"] == "on" else "0",
        # No cached ssthresh/RTT from an earlier flow in the same lab.
        "net.ipv4.tcp_no_metrics_save": "1",
        # New namespaces allow only reno and bbr by default, and refuse cubic
        # as their default; every lab flow names its algorithm and the routes
        # carry `congctl`, so this is only a best effort for the rest.
        "net.ipv4.tcp_congestion_control": lab["congestion"],
        # The lab is IPv4 only: no router solicitations or MLD reports through the link.
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1",
    }
    applied = {}
    for key, value in wanted.items():
        results = []
        for ns in lab["netns"].values():
            r = run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}"], check=False, quiet=True)
            results.append(r.returncode == 0)
        applied[key] = value if all(results) else f"refused (wanted {value})"
    return applied


def supervisor_start(lab, per_receiver):
    """Starts the supervisor, which starts pps-linkem (one per receiver);
    returns once every TUN device exists."""
    name = lab["name"]
    sdir = state_dir(name)
    n = len(per_receiver)
    cmds = []
    for k, args in enumerate(per_receiver, 1):
        side = "rcv" if n == 1 else f"rcv{k}"
        cmd = [tool_path("pps-linkem")] + linkem_args(args)
        cmd += ["--snd-netns", lab["netns"]["snd"], "--rcv-netns", lab["netns"][side],
                "--snd-dev", DEV if n == 1 else f"pps{k - 1}", "--rcv-dev", DEV]
        cmd += ["--duration", f"{int(lab['duration_s']) + LINKEM_GRACE_S}s", "--die-with-parent"]
        # Real-time priority keeps deliveries on time while the lab's own traffic loads the CPUs.
        cmd += ["--rt-priority", str(LINKEM_RT_PRIORITY)]
        if args.log:
            cmd += ["--log", per_receiver_path(os.path.abspath(args.log), k, n)]
        if args.stats:
            cmd += ["--stats", per_receiver_path(os.path.abspath(args.stats), k, n)]
        cmds.append(cmd)
    with open(os.path.join(sdir, "linkem.cmd"), "w") as f:
        json.dump(cmds[0] if n == 1 else cmds, f)

    ready_r, ready_w = os.pipe()
    env = dict(os.environ, PPS_NETLAB_READY_FD=str(ready_w))
    supervisor = subprocess.Popen(
        [sys.executable, os.path.realpath(__file__), "_supervise", name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(sdir, "supervisor.err"), "w"),
        pass_fds=(ready_w,),
        start_new_session=True,
        env=env,
    )
    os.close(ready_w)
    lab["supervisor_pid"] = supervisor.pid
    write_pid(os.path.join(sdir, "supervisor.pid"), supervisor.pid)
    lab_write(lab)
    # pps-linkem writes "ready" once both devices exist; EOF first means it failed.
    with os.fdopen(ready_r) as ready:
        readable, _, _ = select.select([ready], [], [], READY_TIMEOUT_S)
        line = ready.readline() if readable else ""
    if line.strip() != "ready":
        err = ""
        for fname in ("linkem.err", "supervisor.err"):
            with contextlib.suppress(OSError):
                with open(os.path.join(sdir, fname)) as f:
                    err = err or f.read().strip()
        if not readable:
            raise LabError(f"pps-linkem did not get ready within {READY_TIMEOUT_S:.0f} s {err}")
        raise LabError(f"pps-linkem failed to start: {err or 'no message'}")


def supervise(name):
    """The lab's watchdog: runs pps-linkem, and tears the lab down when the
    deadline passes, when pps-linkem exits, or on SIGTERM/SIGINT/SIGHUP."""
    sdir = state_dir(name)
    lab = lab_read(name)
    with open(os.path.join(sdir, "linkem.cmd")) as f:
        cmds = json.load(f)
    if cmds and isinstance(cmds[0], str):
        cmds = [cmds]  # one receiver: one pps-linkem
    ready_fd = int(os.environ.pop("PPS_NETLAB_READY_FD"))

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: None)

    linkems = []
    if len(cmds) == 1:
        # pps-linkem tells `up` itself that it is ready.
        with open(os.path.join(sdir, "linkem.out"), "w") as out, open(os.path.join(sdir, "linkem.err"), "w") as err:
            linkems.append(subprocess.Popen(cmds[0] + ["--ready-fd", str(ready_fd)], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                            pass_fds=(ready_fd,)))
        os.close(ready_fd)
        write_pid(os.path.join(sdir, "linkem.pid"), linkems[0].pid)
    else:
        # Several: each reports to us, and we tell `up` once all are ready
        # (EOF without "ready" if one fails: `up` then tears the lab down).
        readers = []
        for k, cmd in enumerate(cmds, 1):
            r, w = os.pipe()
            suffix = "" if k == 1 else f"-{k}"
            with open(os.path.join(sdir, f"linkem{suffix}.out"), "w") as out, open(os.path.join(sdir, f"linkem{suffix}.err"), "w") as err:
                proc = subprocess.Popen(cmd + ["--ready-fd", str(w)], stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(w,))
            os.close(w)
            write_pid(os.path.join(sdir, f"linkem{suffix}.pid"), proc.pid)
            linkems.append(proc)
            readers.append(os.fdopen(r))
        deadline = time.monotonic() + READY_TIMEOUT_S
        all_ready = True
        for reader in readers:
            readable, _, _ = select.select([reader], [], [], max(0.0, deadline - time.monotonic()))
            all_ready = all_ready and bool(readable) and reader.readline().strip() == "ready"
            reader.close()
        if all_ready:
            os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
    linkem_fds = {os.pidfd_open(p.pid): p for p in linkems}
    reason = "deadline"
    while True:
        left = lab["deadline_unix"] - time.time()
        if left <= 0:
            break
        readable, _, _ = select.select(list(linkem_fds) + [wake_r], [], [], left)
        gone = [linkem_fds[fd] for fd in readable if fd in linkem_fds]
        if gone:
            reason = f"pps-linkem exited ({gone[0].wait()})"
            break
        if wake_r in readable:
            reason = "signal"
            break
    print(f"{PROGRAM}: lab {name}: tearing down ({reason})", file=sys.stderr, flush=True)
    teardown(name, from_supervisor=True, show_summary=False)


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


def lab_print_summary(lab):
    fwd, rev = lab["link"]["fwd"], lab["link"]["rev"]

    def describe(d):
        what = f"trace {d['trace']} (mean {d['rate_bps'] / 1e6:g} Mbit/s)" if d["trace"] else f"{d['rate_bps'] / 1e6:g} Mbit/s"
        q = f"queue {d['queue_limit_pkts']} pkts/{d['queue_limit_bytes']} B {d['aqm']}"
        if d["aqm"] == "drd":
            q += f" (min {d['drd_min_bytes']} B, congest {d['drd_congest_bytes']} B)"
        return f"{what}, delay {d['delay_ns'] / 1e6:g} ms, {q}, loss {d['loss']:g}"

    print(f"lab {lab['name']} up for {lab['duration_s']:g} s (rtt {lab['rtt_ms']:g} ms, congestion {lab['congestion']}, ecn {lab['ecn']})")
    print(f"  snd: netns {lab['netns']['snd']} addr {lab['addr']['snd']}")
    if not lab.get("receivers"):
        print(f"  rcv: netns {lab['netns']['rcv']} addr {lab['addr']['rcv']}")
        print(f"  fwd snd->rcv: {describe(fwd)}")
        print(f"  rev rcv->snd: {describe(rev)}", flush=True)
        return
    for r in lab["receivers"]:
        side = r["side"]
        print(f"  {side}: netns {lab['netns'][side]} addr {lab['addr'][side]} (sender device {r['snd_dev']})")
        print(f"    fwd snd->{side}: {describe(r['link']['fwd'])}")
        print(f"    rev {side}->snd: {describe(r['link']['rev'])}", flush=True)


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
        [sys.executable, os.path.realpath(__file__), "_traffic", lab["name"], str(tid)],
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
            spawn(netns_cmd(dst_ns, ["iperf3", "-s", "-1", "-B", dst_addr, "-p", str(port)]), f"elephants-server.txt", "server", i, port)
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
