"""The one rate limiter of the project: a token bucket shared by threads, behind the client's
--limit-rate (pull, push, cp) and the hub's mirror jobs (max_rate). Dependency-free."""
from __future__ import annotations

import threading
import time


class RateLimiter:
    """At most `rate` bytes per second over all threads that take() from it, with bursts of up to
    `burst` seconds' worth (a full bucket at the start). No rate (None or 0): no limit.

    Kept as the time `ready` at which the bucket is empty again: each take(n) moves it n/rate
    later (from no earlier than `burst` seconds ago: idle time fills the bucket, but only so far),
    and the caller sleeps until it is no longer ahead of now."""

    def __init__(self, rate: float | None, *, burst: float = 1.0) -> None:
        self.rate = rate
        self.burst = burst
        self.lock = threading.Lock()
        self.ready = time.monotonic() - burst

    def take(self, n: int) -> None:
        """Accounts for n bytes, sleeping as long as the rate requires (outside the lock)."""
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.ready = max(self.ready, now - self.burst) + n / self.rate
            wait = self.ready - now
        if wait > 0:
            time.sleep(wait)
