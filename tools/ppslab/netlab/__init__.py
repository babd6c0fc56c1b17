# SPDX-License-Identifier: MIT
"""pps-netlab itself: a lab's names and state (state), its life (lifecycle:
up, the supervisor, teardown), cross traffic (traffic), the commands
(commands) and the helpers under them (proc). Drivers use ppslab.lab's Lab,
which runs pps-netlab, rather than these."""
