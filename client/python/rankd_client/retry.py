"""Retries with exponential backoff and full jitter, within the call's deadline.

A call has one deadline (`timeout_s`), however many attempts it takes: each
attempt gets the time that is left, and a retry whose backoff would end past
the deadline is not started: the call fails with DEADLINE_EXCEEDED at once
(naming the last error) instead of sleeping into the deadline.

Only UNAVAILABLE (the server could not be reached, or is shutting down) and
RESOURCE_EXHAUSTED (its queue was full: rankd answers it at once, before any
work) are retried by default; any other code is final. Backoff before retry
n (n = 1, 2, ...) is uniform in [0, min(max_backoff_s, initial_backoff_s *
multiplier^(n-1))) ("full jitter"), so clients that were turned away together
do not come back together.

The clock, the sleep and the random source are parameters, so the policy is
tested without real sleeps (client/python/tests/retry_test.py).
"""

import asyncio
import random
import time

import grpc

from rankd_client.errors import RankdError

RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class RetryPolicy:
    """How a call is retried (immutable; share one between clients).

    Args:
      max_attempts: attempts in all, the first included (1 = no retries).
      initial_backoff_s: the cap of the first backoff.
      max_backoff_s: the largest cap.
      multiplier: the cap's growth per retry.
      retryable_codes: the grpc.StatusCodes that are retried.
    """

    def __init__(self, max_attempts=3, initial_backoff_s=0.05, max_backoff_s=1.0,
                 multiplier=2.0, retryable_codes=RETRYABLE_CODES):
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError("max_attempts: must be an integer >= 1, got %r" % (max_attempts,))
        if initial_backoff_s < 0:
            raise ValueError("initial_backoff_s: must be >= 0, got %r" % (initial_backoff_s,))
        if max_backoff_s < initial_backoff_s:
            raise ValueError("max_backoff_s: must be >= initial_backoff_s (%r), got %r"
                             % (initial_backoff_s, max_backoff_s))
        if multiplier < 1:
            raise ValueError("multiplier: must be >= 1, got %r" % (multiplier,))
        self.max_attempts = max_attempts
        self.initial_backoff_s = float(initial_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.multiplier = float(multiplier)
        self.retryable_codes = frozenset(retryable_codes)

    def __repr__(self):
        return ("RetryPolicy(max_attempts=%d, initial_backoff_s=%g, max_backoff_s=%g, "
                "multiplier=%g, retryable_codes=%s)"
                % (self.max_attempts, self.initial_backoff_s, self.max_backoff_s, self.multiplier,
                   sorted(c.name for c in self.retryable_codes)))

    def backoff_cap_s(self, retry):
        """The upper bound of the backoff before retry `retry` (1, 2, ...)."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (retry - 1))

    def backoff_s(self, retry, random_fn):
        """Full jitter: uniform in [0, backoff_cap_s(retry)); random_fn() in [0, 1)."""
        return random_fn() * self.backoff_cap_s(retry)

    def start(self, timeout_s, clock=time.monotonic, random_fn=random.random):
        """The state of one call with deadline `timeout_s` from now."""
        return RetryState(self, timeout_s, clock, random_fn)


NO_RETRY = RetryPolicy(max_attempts=1, initial_backoff_s=0.0, max_backoff_s=0.0)


class RetryState:
    """One call's attempts: attempt_timeout_s() before each attempt,
    after_error() after each failed one (returns the backoff, or raises the
    RankdError that ends the call)."""

    def __init__(self, policy, timeout_s, clock, random_fn):
        self.policy = policy
        self.timeout_s = timeout_s
        self.attempts = 0
        self._clock = clock
        self._random = random_fn
        self._deadline = clock() + timeout_s
        self._last = None  # (code, details) of the last failed attempt

    def remaining_s(self):
        return self._deadline - self._clock()

    def attempt_timeout_s(self):
        """The timeout of the next attempt: the time left. DEADLINE_EXCEEDED
        when none is left."""
        remaining = self.remaining_s()
        if remaining <= 0:
            raise self._deadline_error("no time left")
        self.attempts += 1
        return remaining

    def after_error(self, code, details):
        """The seconds to wait before the next attempt; raises RankdError when
        the call is over (a final code, attempts used up, no time left)."""
        details = details or ""
        self._last = (code, details)
        if code not in self.policy.retryable_codes:
            raise RankdError(code, self._with_attempts(details), self.attempts)
        if self.attempts >= self.policy.max_attempts:
            raise RankdError(code, self._with_attempts(details), self.attempts)
        delay = self.policy.backoff_s(self.attempts, self._random)
        remaining = self.remaining_s()
        if delay >= remaining:
            raise self._deadline_error("the next retry's backoff (%.3f s) would end past it "
                                       "(%.3f s left)" % (delay, max(remaining, 0.0)))
        return delay

    def _with_attempts(self, details):
        return details if self.attempts <= 1 else "%s (after %d attempts)" % (details,
                                                                              self.attempts)

    def _deadline_error(self, why):
        message = "deadline of %.3f s: %s" % (self.timeout_s, why)
        if self._last is not None:
            message += "; %d attempt(s), the last failed with %s: %s" % (
                self.attempts, self._last[0].name, self._last[1])
        return RankdError(grpc.StatusCode.DEADLINE_EXCEEDED, message, self.attempts)


def call_with_retries(attempt, policy, timeout_s, clock=time.monotonic, sleep=time.sleep,
                      random_fn=random.random):
    """attempt(timeout_s) -> result, retried per `policy` within `timeout_s`.
    attempt raises grpc.RpcError on failure; the call raises RankdError."""
    state = policy.start(timeout_s, clock, random_fn)
    while True:
        attempt_timeout = state.attempt_timeout_s()
        try:
            return attempt(attempt_timeout)
        except grpc.RpcError as e:
            delay = state.after_error(e.code(), e.details())
        sleep(delay)


async def async_call_with_retries(attempt, policy, timeout_s, clock=time.monotonic,
                                  sleep=asyncio.sleep, random_fn=random.random):
    """call_with_retries for coroutines: `await attempt(timeout_s)`, `await sleep(s)`."""
    state = policy.start(timeout_s, clock, random_fn)
    while True:
        attempt_timeout = state.attempt_timeout_s()
        try:
            return await attempt(attempt_timeout)
        except grpc.RpcError as e:  # grpc.aio.AioRpcError is one
            delay = state.after_error(e.code(), e.details())
        await sleep(delay)
