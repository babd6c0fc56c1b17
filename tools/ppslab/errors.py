# SPDX-License-Identifier: MIT
"""The exceptions and exit statuses the lab's tools and tests share."""

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SKIP = 77  # not permitted here (no root, no /dev/net/tun, a program missing): skipped
EXIT_INTERRUPTED = 130


class Failure(Exception):
    """A run did not go as it must: a program exited before the event waited
    for, an event did not come within its bound, a program failed."""


class LabError(Failure):
    """A lab operation failed (a pps-netlab command, with its stderr)."""


class NotPermitted(Exception):
    """The lab cannot run here: no root, no /dev/net/tun (pps-netlab exits 77)."""


class UsageError(Exception):
    """Bad settings: exit 2 before anything is started."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP while running: clean up and leave."""
