"""How many connections this process can hold open at once, and the cap it puts on a cell.

Why: at ``workload.concurrency=[30000]`` the client ran out of file
descriptors (each in-flight stream is one socket) and every request became a
``connect`` error -- measured as a cell with no tokens, not as the client's
limit. So before a cell opens its connections the soft ``RLIMIT_NOFILE`` is
raised to the hard one (what an unprivileged process may do), and a cell
asking for more in-flight requests than the remaining descriptors (minus a
margin for the log, the coding eval's client, MLflow, ...) runs at that many
instead: one log line says so and the cell records it (``concurrency_capped``).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

MARGIN = 64  # descriptors kept free for everything else the process opens during a cell
_raised = False


def raise_soft_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (once per process); the (soft, hard) after."""
    global _raised
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if not _raised and hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # a container that forbids it: keep the soft limit
            log.debug("could not raise RLIMIT_NOFILE to %d: %s", hard, exc)
    _raised = True
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return soft, hard


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: assume a few dozen
        return 32


def connection_budget() -> int:
    """Connections this process can open now (at least 1)."""
    soft, _ = raise_soft_limit()
    return max(1, soft - open_descriptors() - MARGIN)


def in_flight(concurrency: int, label: str = "") -> tuple[int, int | None]:
    """(connections to use, the cap if one applied) for a cell asking for ``concurrency``."""
    budget = connection_budget()
    if concurrency <= budget:
        return concurrency, None
    soft, hard = raise_soft_limit()
    log.warning("%sconcurrency %d capped at %d in-flight connections: this process may open %d files "
                "(RLIMIT_NOFILE soft %d, hard %d; raise it with ulimit -n)", f"{label}: " if label else "",
                concurrency, budget, soft, soft, hard)
    return budget, budget
