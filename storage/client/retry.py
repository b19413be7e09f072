"""The retry policy, written down once: which answers and transport errors are tried again, and how
long to wait between tries."""
from __future__ import annotations

import random
from dataclasses import dataclass

import urllib3


@dataclass(frozen=True)
class RetryPolicy:
    """Retry 429 and 5xx answers and transport errors, `attempts` times in all, waiting
    min(cap, base·2^n) with ±25 % jitter — or the server's Retry-After, if it says so (capped too).
    With a `budget`, the waits of one call add up to at most that many seconds, whatever Retry-After
    says (a mount promises an answer in bounded time). Nothing else is retried: a 4xx is an answer,
    not an accident."""

    attempts: int = 5
    base: float = 0.5
    cap: float = 8.0
    statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    budget: float | None = None

    def next_wait(self, attempt: int, waited: float, retry_after: str | None = None) -> float | None:
        """The wait before try number `attempt` + 2, or None when there is to be no such try."""
        if attempt + 1 >= self.attempts:
            return None
        delay = self.delay(attempt, retry_after)
        if self.budget is not None:
            if waited >= self.budget:
                return None
            delay = min(delay, self.budget - waited)
        return delay

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after:
            try:
                return min(self.cap, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(self.cap, self.base * 2**attempt) * random.uniform(0.75, 1.25)


RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)
COMMIT_RETRY = RetryPolicy(attempts=3, statuses=frozenset({429, 503}))
# Completing an upload: also a 409 that says when to come back (Retry-After) — another request is
# completing the same session, or one whose server died, which the hub reopens within a minute or so.
COMPLETE_RETRY = RetryPolicy(attempts=40, cap=10.0, statuses=RETRY.statuses | {409}, budget=300.0)
# Transport errors worth another try: refused/reset connections, timeouts, truncated bodies.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)
