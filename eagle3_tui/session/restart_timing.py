"""The restart's timings, in one place for every way a server is restarted (the console's own relaunch,
a container's engine, systemd, a group of nodes) and for the monitor that watches a server end. A leaf: every part may read it."""

from __future__ import annotations

STOP_GRACE_S = 30.0
"""TERM, then this long before KILL."""
FAILED_STOP_GRACE_S = 10.0
"""The same for a server that failed to start (it holds no requests worth waiting for)."""
PORT_HELD_S = 10.0
"""After the old server stopped, how long its port may stay taken before the restart gives up."""
ALIVE_CHECK_S = 1.0
"""How often a starting server's process group is checked for life."""
POLL_S = 0.2
"""How often readiness and the port are looked at."""
FIND_POLL_S = 0.3
"""How often a restarted container's or unit's new server is looked for."""
LAST_LINES_GRACE_S = 0.5
"""After the group is gone, the follower still delivers its last lines."""
