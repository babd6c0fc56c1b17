# SPDX-License-Identifier: MIT
"""pps-netlab's names and state: a lab's namespaces, sides and addresses;
its state directory (/run/ppstream-netlab/NAME: lab.json, pid files) and the
one lock over all labs' state; the permission check (root, /dev/net/tun)."""

import contextlib
import fcntl
import json
import os
import re
import shutil

from ..errors import NotPermitted, UsageError
from .proc import PROGRAM

STATE_ROOT = os.environ.get("PPS_NETLAB_STATE", "/run/ppstream-netlab")


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
