# SPDX-License-Identifier: MIT
"""Fixtures for the integration suites: the real pps-server and pps-client on
ephemeral ports (ppslab.programs, as the lab's tools start them), their logs,
raw records (ppslab.records), and cleanup after. The lab's package comes from
PYTHONPATH (meson's test environment: the build tree's tools/)."""
import tempfile

from ppslab import programs
from ppslab.errors import EXIT_SKIP as SKIP, Failure
from ppslab.metrics import percentile
from ppslab.process import wait_until
from ppslab.records import hello, read_all, read_records, record

__all__ = ["SKIP", "Failure", "check", "wait_until", "Server", "Client", "percentile", "record", "hello", "read_all",
           "read_records", "run"]


def check(cond, message):
    if not cond:
        raise Failure(message)


class Server(programs.LoopbackServer):
    """A pps-server on 127.0.0.1 and a port of the kernel's choosing (or @port)."""

    def __init__(self, build, workdir, *settings, duration=None, extra=(), port=0):
        super().__init__(build, workdir, *settings, duration_s=duration, extra=extra, port=port)


class Client(programs.LoopbackClient):
    """A headless pps-client with a JSON Lines log."""

    def __init__(self, build, workdir, address, *settings, duration=10, name="client", extra=()):
        super().__init__(build, workdir, address, *settings, duration_s=duration, name=name, extra=extra)


def run(tests, argv):
    """Runs the named test from argv[2] with argv[1] = build dir."""
    build = argv[1]
    name = argv[2]
    with tempfile.TemporaryDirectory(prefix="pps-it-") as workdir:
        try:
            tests[name](build, workdir)
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
    print("ok")
    return 0
