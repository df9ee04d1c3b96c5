"""Wrong API keys counted over every client together: the HTTP face's 429
``rate_limit_error`` with ``retry_after_ms`` once 10 have come in a minute.

One budget for the whole server, not one per client address: any local process can send
from any address of 127.0.0.0/8 (and a remote one from many), so a count per address
would give a guesser ten tries a minute per address it picks, and lock out every honest
client sharing 127.0.0.1 with it. ``http.app.Guard`` compares a sent key first (in
constant time); a right key passes whatever the budget says, and only a wrong one asks
:meth:`KeyFailures.wait_ms` and, when it is 0, spends a try with :meth:`KeyFailures.failed`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

__all__ = ["KeyFailures"]


class KeyFailures:
    """The wrong API keys of the last ``window_s`` seconds, over every client.

    The policy: once ``limit`` wrong keys (10) came within ``window_s`` (60 s), every
    further wrong key is refused (429) without counting, until the oldest of those is
    ``window_s`` old; so at most ``limit`` wrong keys a minute are ever answered 401.
    A missing key guesses nothing and is never counted. A right key is never refused
    by this and does not reset the count (a guesser could reset it with a key it
    already holds). The clock is an argument, so a test can pass the minute without
    waiting for it. Used from the event loop only.
    """

    def __init__(self, *, limit: int = 10, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._failures: deque[float] = deque(maxlen=limit)

    def wait_ms(self) -> int:
        """How long until a wrong key is counted again (0: now)."""
        if len(self._failures) < self.limit:
            return 0
        left = self._failures[0] + self.window_s - self.clock()
        return max(1, math.ceil(left * 1000)) if left > 0 else 0

    def failed(self) -> None:
        """One more wrong key (the oldest of the window drops out)."""
        self._failures.append(self.clock())
