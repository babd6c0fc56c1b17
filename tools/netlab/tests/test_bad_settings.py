# SPDX-License-Identifier: MIT
"""Bad settings are refused with one clear line and exit status 2, before
anything is created; without root the lab says so and exits 77. Runs without
privileges (the root-only part is skipped when not root)."""

import os
import shutil
import subprocess
import tempfile

from netlab_test import LINKEM, NETLAB, Check

check = Check()


def refused(cmd, expect_text):
    result = subprocess.run(cmd, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    ok = result.returncode == 2 and len(lines) == 1 and expect_text in lines[0] and not result.stdout
    check(ok, f"{' '.join(os.path.basename(c) for c in cmd[:1]) + ' ' + ' '.join(cmd[1:])} -> {result.returncode}: {lines}")


with tempfile.TemporaryDirectory(prefix="pps-netlab-bad-") as tmp:
    empty, zero, backwards = (os.path.join(tmp, n) for n in ("empty.trace", "zero.trace", "backwards.trace"))
    for path, text in ((empty, ""), (zero, "0\n0\n"), (backwards, "5\n3\n")):
        with open(path, "w") as f:
            f.write(text)
    ns = ["--snd-netns", "pps-bad-snd", "--rcv-netns", "pps-bad-rcv"]
    refused([LINKEM] + ns + ["--rate", "0"], "not a rate > 0")
    refused([LINKEM] + ns + ["--rate", "10mbit", "--delay", "-5ms"], "not a delay >= 0")
    refused([LINKEM] + ns + ["--fwd-trace", empty, "--rev-rate", "1mbit"], "no delivery opportunities")
    refused([LINKEM] + ns + ["--trace", zero], "last timestamp must be > 0")
    refused([LINKEM] + ns + ["--trace", backwards], "must not decrease")
    refused([LINKEM] + ns + ["--rate", "10mbit", "--queue", "0"], "not a number > 0")
    refused([LINKEM] + ns + ["--rate", "10mbit", "--loss", "1.5"], "probability")
    refused([LINKEM] + ns + ["--rate", "10mbit", "--aqm", "drd", "--drd-min", "2", "--drd-congest", "1"], "must be below --drd-congest")
    refused([LINKEM] + ns + ["--rate", "10mbit", "--trace", zero], "not both")
    refused([LINKEM] + ns + ["--delay", "5ms"], "rate")

    name = f"tbad-{os.getpid()}"
    refused([NETLAB, "up", "--name", name, "--rate", "0"], "not a rate > 0")
    refused([NETLAB, "up", "--name", name, "--delay=-1ms"], "not a delay >= 0")
    refused([NETLAB, "up", "--name", name, "--trace", empty], "no delivery opportunities")
    refused([NETLAB, "up", "--name", name, "--duration", "0"], "must be > 0")
    refused([NETLAB, "up", "--name", "Bad_Name"], "lab name")
    refused([NETLAB, "up", "--name", name, "--ecn", "maybe"], "not on or off")
    check(not os.path.exists(f"/var/run/netns/pps-{name}-snd"), "no namespace was created")

    if os.geteuid() == 0 and shutil.which("setpriv"):
        unprivileged = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        result = subprocess.run(unprivileged + [NETLAB, "up", "--name", name], capture_output=True, text=True)
        check(result.returncode == 77 and "root" in result.stderr, f"without root: exit {result.returncode}: {result.stderr.strip()}")
check.exit()
