# SPDX-License-Identifier: MIT
"""`pps-netlab down` leaves nothing behind: no namespaces, no pps-linkem, no
supervisor, no cross traffic, no process started with `exec`, no state. Also:
two labs run side by side with their own addresses, taking one down leaves
the other working, and a lab whose --duration runs out tears itself down."""

import json
import os
import select
import subprocess
import time

from netlab_test import NETLAB, PROBE, STATE_ROOT, Check, Lab, require_lab_permission, wait_listening


def netns_list():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def lab_pids(lab):
    pids = {}
    sdir = os.path.join(STATE_ROOT, lab.name)
    for entry in os.listdir(sdir):
        if entry.endswith(".pid"):
            with open(os.path.join(sdir, entry)) as f:
                pids[entry] = int(f.read())
    for side in ("snd", "rcv"):
        out = subprocess.run(["ip", "netns", "pids", lab.info["netns"][side]], capture_output=True, text=True).stdout
        for pid in out.split():
            pids[f"{side}:{pid}"] = int(pid)
    return pids


def ping_ok(lab):
    rcv = lab.addr("rcv")
    echo = lab.start("rcv", [PROBE, "echo", "--bind", rcv, "--duration", "10s"], wait_ready=True)
    result = subprocess.run(lab.exec_argv("snd", [PROBE, "ping", "--to", rcv, "--count", "3", "--interval", "10ms", "--json"]), capture_output=True, text=True)
    echo.terminate()
    echo.wait()
    return result.returncode == 0 and json.loads(result.stdout)["received"] == 3


require_lab_permission(need_iperf3=True)
check = Check()
with Lab("down-a", "--rate", "10mbit", "--delay", "5ms") as a, Lab("down-b", "--rate", "20mbit", "--delay", "5ms") as b:
    check(a.addr("snd") != b.addr("snd") and a.addr("rcv") != b.addr("rcv"), f"labs have their own addresses ({a.addr('snd')}, {b.addr('snd')})")
    check(ping_ok(a) and ping_ok(b), "both labs forward packets")
    traffic = subprocess.run([NETLAB, "traffic", a.name, "--elephants", "2", "--mice", "2", "--cbr", "1mbit", "--duration", "30"], capture_output=True, text=True)
    check(traffic.returncode == 0, "cross traffic started: " + traffic.stdout.strip())
    reverse = subprocess.run([NETLAB, "traffic", a.name, "--elephants", "1", "--reverse", "--duration", "30"], capture_output=True, text=True)
    check(reverse.returncode == 0, "reverse cross traffic started")
    # A program started with `exec` that would outlive the test: `down` must end it.
    sleeper = subprocess.Popen(a.exec_argv("snd", ["sleep", "300"]))
    wait_listening(a, "rcv", 5201)  # the elephants' server: traffic is running
    # The sender's side fills as `ip netns exec` and the elephants' clients
    # enter it, after their servers listen: look again until one is there
    # (no event says so; bounded like wait_listening).
    pids = lab_pids(a)
    deadline = time.monotonic() + 10
    while not any(k.startswith("snd:") for k in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = lab_pids(a)
    check(any(k.startswith("snd:") for k in pids) and "linkem.pid" in pids and "supervisor.pid" in pids, f"lab A runs {len(pids)} processes")
    a.down()
    check(a.down_result.returncode == 0, "down succeeded")
    sleeper.wait(timeout=10)
    alive = [f"{k}={pid}" for k, pid in pids.items() if os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    check(not alive, f"no process of lab A survives ({', '.join(alive) or 'none'})")
    check(not processes_mentioning(f"pps-{a.name}-"), "no process mentions lab A's namespaces")
    check(f"pps-{a.name}-" not in netns_list(), "lab A's namespaces are gone")
    check(not os.path.exists(os.path.join(STATE_ROOT, a.name)), "lab A's state directory is gone")
    check(ping_ok(b), "lab B still forwards packets")

check(f"pps-{b.name}-" not in netns_list(), "lab B's namespaces are gone")

# A lab bounded to 2 s tears itself down: wait on its supervisor's exit.
with Lab("down-t", "--rate", "10mbit", "--duration", "2") as t:
    supervisor = t.info["supervisor_pid"]
    fd = os.pidfd_open(supervisor)
    exited = bool(select.select([fd], [], [], 20)[0])
    os.close(fd)
    check(exited, "the supervisor ended at the lab's deadline")
    check(f"pps-{t.name}-" not in netns_list() and not os.path.exists(os.path.join(STATE_ROOT, t.name)), "the expired lab left nothing behind")
check.exit()
