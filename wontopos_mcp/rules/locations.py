"""Where a database lives, read off its URI alone, and who may write it there.

A local directory (or ``file://``) is coordinated by a file lock; anything else with a
scheme is object storage or LanceDB Cloud, coordinated by leases. Settings check
``--writers`` against ``WRITERS``; storage picks its coordinator with ``is_remote``;
``info`` skips measuring the size of a remote database.
"""

from __future__ import annotations

WRITERS = ("single", "leased")  # object storage: one writing process, or replicas under leases


def is_remote(uri: str) -> bool:
    """Whether ``uri`` names a database that is not a local directory."""
    return "://" in uri and not uri.startswith("file://")
