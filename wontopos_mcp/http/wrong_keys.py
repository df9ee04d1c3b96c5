"""Wrong API keys counted per client address: the HTTP face's 429 (SPEC "Errors":
"repeated wrong keys from one client", ``rate_limit_error`` with ``retry_after_ms``).

``http.app.Guard`` asks :meth:`KeyFailures.wait_ms` before it looks at a key and calls
:meth:`KeyFailures.failed` when a sent key is wrong. The client address is the TCP peer
(``http.server`` trusts no ``X-Forwarded-For``), so a client cannot pick the address it is
counted under.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

__all__ = ["KeyFailures"]


class KeyFailures:
    """Wrong API keys per client address.

    The policy: an address that sent ``limit`` wrong keys (10) within ``window_s`` (60 s)
    is refused, without its key being looked at, until the oldest of those is
    ``window_s`` old; so a guesser gets ``limit`` tries a minute, whatever it sends
    meanwhile. Only a key that was sent and is wrong counts (a missing key guesses
    nothing), and a right key does not wipe the count: on a shared address (every local
    process is 127.0.0.1) it would let a guesser go on while its neighbour works. Other
    addresses are not affected. At most ``max_clients`` addresses are remembered (the
    ones whose last failure is oldest are forgotten first). The clock is an argument, so
    a test can pass the minute without waiting for it. Used from the event loop only.
    """

    def __init__(
        self,
        *,
        limit: int = 10,
        window_s: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_clients = max_clients
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    def wait_ms(self, client: str) -> int:
        """How long ``client`` must wait before its key is looked at again (0: not at all)."""
        failures = self._failures.get(client)
        if failures is None or len(failures) < self.limit:
            return 0
        left = failures[0] + self.window_s - self.clock()
        return max(1, math.ceil(left * 1000)) if left > 0 else 0

    def failed(self, client: str) -> None:
        failures = self._failures.pop(client, None) or deque(maxlen=self.limit)
        failures.append(self.clock())
        self._failures[client] = failures  # last in the dict: the most recent failure
        while len(self._failures) > self.max_clients:
            del self._failures[next(iter(self._failures))]
