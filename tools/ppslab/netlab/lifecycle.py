# SPDX-License-Identifier: MIT
"""A lab's life: `up` (namespaces, pps-linkem, addresses, routes, sysctls),
the supervisor that bounds it in time and watches pps-linkem, and the
teardown that leaves nothing behind."""

import argparse
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from ..errors import EXIT_USAGE, Interrupted, LabError, NotPermitted, UsageError
from .proc import (
    DEV, LINKEM_GRACE_S, LINKEM_RT_PRIORITY, MAX_LABS, PROGRAM, READY_TIMEOUT_S, netns_exists, parse_seconds,
    pid_alive, run, self_argv, stop_pid, tool_path, wait_pid_exit,
)
from .state import (
    MAX_RECEIVERS, all_netns, lab_name_check, lab_names, lab_read, lab_write, netns_names, read_pid,
    receiver_netns, require_permission, side_addresses, state_dir, state_lock, write_pid,
)


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
        self_argv("_supervise", name),
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
