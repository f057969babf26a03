"""Retries of rankd_client: the policy with an injected clock, sleep and random
source (no real sleeps), then the sync and the grpc.aio clients against an
in-process fake server that answers RESOURCE_EXHAUSTED (or UNAVAILABLE) a few
times before OK, and deadlines shorter than the backoff.

Run by client/python/tests/run_py_test.sh (Bazel: //client:python_retry_test).
"""

import asyncio
import threading
import time
import unittest
from concurrent import futures

import grpc
import numpy as np

from rankd_client import NO_RETRY, RankdError, RankingClient, RetryPolicy, aio
from rankd_client import ranking_pb2, ranking_pb2_grpc
from rankd_client.retry import async_call_with_retries, call_with_retries

RE = grpc.StatusCode.RESOURCE_EXHAUSTED
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        super().__init__()
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class FakeTime:
    """A clock that only moves when slept on, or by `tick` per attempt."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds):
        self.sleep(seconds)


class Attempts:
    """attempt(timeout) that fails with `errors` (codes) in turn, then returns
    "ok"; each attempt takes `took` seconds of the fake clock."""

    def __init__(self, fake_time, errors, took=0.01):
        self.time = fake_time
        self.errors = list(errors)
        self.took = took
        self.timeouts = []

    def __call__(self, timeout_s):
        self.timeouts.append(timeout_s)
        self.time.now += min(self.took, timeout_s)
        if self.errors:
            code = self.errors.pop(0)
            raise FakeRpcError(code, "queue full" if code == RE else "connection refused")
        return "ok"


class RetryPolicyTest(unittest.TestCase):

    def test_backoff_caps_grow_exponentially_to_the_maximum(self):
        policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=0.5, multiplier=2)
        self.assertEqual([policy.backoff_cap_s(n) for n in range(1, 6)],
                         [0.1, 0.2, 0.4, 0.5, 0.5])

    def test_full_jitter(self):
        policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=0.5)
        self.assertEqual(policy.backoff_s(2, lambda: 0.5), 0.1)
        self.assertEqual(policy.backoff_s(3, lambda: 0.0), 0.0)
        import random  # pylint: disable=import-outside-toplevel
        rng = random.Random(7)
        draws = [policy.backoff_s(3, rng.random) for _ in range(1000)]
        self.assertTrue(all(0 <= d < 0.4 for d in draws))
        self.assertGreater(max(draws), 0.35)  # spread over the whole range
        self.assertLess(min(draws), 0.05)

    def test_validation(self):
        with self.assertRaisesRegex(ValueError, "max_attempts"):
            RetryPolicy(max_attempts=0)
        with self.assertRaisesRegex(ValueError, "initial_backoff_s"):
            RetryPolicy(initial_backoff_s=-1)
        with self.assertRaisesRegex(ValueError, "max_backoff_s"):
            RetryPolicy(initial_backoff_s=1, max_backoff_s=0.5)
        with self.assertRaisesRegex(ValueError, "multiplier"):
            RetryPolicy(multiplier=0.5)
        with self.assertRaisesRegex(TypeError, "retry: want a rankd_client.RetryPolicy"):
            RankingClient("127.0.0.1:1", retry=3)

    def run_call(self, errors, policy, timeout_s=1.0, took=0.01, rng=lambda: 0.5):
        t = FakeTime()
        attempts = Attempts(t, errors, took)
        start = t.now
        try:
            result = call_with_retries(attempts, policy, timeout_s, t.clock, t.sleep, rng)
        except RankdError as e:
            result = e
        return result, attempts, t, t.now - start

    def test_retries_resource_exhausted_then_ok(self):
        policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.1, max_backoff_s=1.0)
        result, attempts, t, _ = self.run_call([RE, UNAVAILABLE, RE], policy)
        self.assertEqual(result, "ok")
        self.assertEqual(t.sleeps, [0.05, 0.1, 0.2])  # rng 0.5 x caps 0.1, 0.2, 0.4
        # Each attempt gets the time left of the one deadline.
        want = [1.0, 1.0 - 0.01 - 0.05, 1.0 - 0.02 - 0.15, 1.0 - 0.03 - 0.35]
        for got, w in zip(attempts.timeouts, want):
            self.assertAlmostEqual(got, w)
        self.assertEqual(len(attempts.timeouts), 4)

    def test_attempts_run_out_with_the_last_code(self):
        policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.01)
        result, attempts, t, _ = self.run_call([RE] * 5, policy)
        self.assertIsInstance(result, RankdError)
        self.assertEqual((result.code, result.message, result.attempts),
                         (RE, "queue full (after 3 attempts)", 3))
        self.assertEqual(len(attempts.timeouts), 3)
        self.assertEqual(len(t.sleeps), 2)

    def test_other_codes_are_final(self):
        for code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DEADLINE_EXCEEDED,
                     grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INTERNAL):
            result, attempts, t, _ = self.run_call([code], RetryPolicy())
            self.assertEqual((result.code, result.attempts), (code, 1))
            self.assertEqual(t.sleeps, [])
            self.assertEqual(len(attempts.timeouts), 1)

    def test_no_retry(self):
        result, attempts, _, _ = self.run_call([RE], NO_RETRY)
        self.assertEqual((result.code, result.message), (RE, "queue full"))
        self.assertEqual(len(attempts.timeouts), 1)

    def test_backoff_past_the_deadline_ends_with_deadline_exceeded_at_once(self):
        policy = RetryPolicy(max_attempts=10, initial_backoff_s=1.0, max_backoff_s=1.0)
        result, attempts, t, elapsed = self.run_call([RE] * 10, policy, timeout_s=0.2)
        self.assertIsInstance(result, RankdError)
        self.assertEqual(result.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIn("RESOURCE_EXHAUSTED: queue full", result.message)
        self.assertEqual(t.sleeps, [])  # never slept into the deadline
        self.assertEqual(len(attempts.timeouts), 1)
        self.assertAlmostEqual(elapsed, 0.01)

    def test_never_past_the_deadline(self):
        import random  # pylint: disable=import-outside-toplevel
        for seed in range(50):
            rng = random.Random(seed)
            policy = RetryPolicy(max_attempts=1000, initial_backoff_s=0.01, max_backoff_s=0.2)
            result, attempts, _, elapsed = self.run_call([UNAVAILABLE] * 1000, policy,
                                                         timeout_s=1.0, took=0.03,
                                                         rng=rng.random)
            self.assertEqual(result.code, grpc.StatusCode.DEADLINE_EXCEEDED)
            self.assertLessEqual(elapsed, 1.0 + 1e-9)
            self.assertGreater(len(attempts.timeouts), 3)
            self.assertTrue(all(0 < x <= 1.0 for x in attempts.timeouts))

    def test_async_same_policy(self):
        t = FakeTime()
        attempts = Attempts(t, [RE, RE])

        async def attempt(timeout_s):
            return attempts(timeout_s)

        policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.1)
        result = asyncio.run(async_call_with_retries(attempt, policy, 1.0, t.clock,
                                                     t.async_sleep, lambda: 0.5))
        self.assertEqual(result, "ok")
        self.assertEqual(t.sleeps, [0.05, 0.1])
        t = FakeTime()
        attempts = Attempts(t, [RE] * 3)
        with self.assertRaises(RankdError) as caught:
            asyncio.run(async_call_with_retries(attempt, policy, 1.0, t.clock, t.async_sleep,
                                                lambda: 0.5))
        self.assertEqual((caught.exception.code, caught.exception.attempts), (RE, 3))


class FlakyRanking(ranking_pb2_grpc.RankingServicer):
    """Fails the next `fail` Score calls with `code` (each after `delay` s),
    then answers scores (i+1)/1024; records each call's time remaining."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset(0)

    def reset(self, fail, code=RE, delay=0.0):
        with self.lock:
            self.fail, self.code, self.calls, self.remaining = fail, code, 0, []
            self.delay = delay

    def Score(self, request, context):
        with self.lock:
            self.calls += 1
            self.remaining.append(context.time_remaining())
            failing = self.fail > 0
            if failing:
                self.fail -= 1
        if failing:
            time.sleep(self.delay)
            context.abort(self.code, "queue of model \"%s\" is full" % request.model)
        return ranking_pb2.ScoreResponse(
            scores=[(i + 1) / 1024.0 for i in range(request.num_candidates)],
            model=request.model, version=1)


def record_timeouts(client):
    """The timeout of every Score attempt of `client` (sync or aio), as a list."""
    timeouts = []
    score = client._ranking.Score  # pylint: disable=protected-access

    def recorded(request, timeout=None, metadata=None):
        timeouts.append(timeout)
        return score(request, timeout=timeout, metadata=metadata)

    client._ranking.Score = recorded  # pylint: disable=protected-access
    return timeouts


FAST = RetryPolicy(max_attempts=4, initial_backoff_s=0.01, max_backoff_s=0.02)
SLOW = RetryPolicy(max_attempts=4, initial_backoff_s=5.0, max_backoff_s=5.0)
DENSE = np.zeros((3, 2), np.float32)
SPARSE = {"cat_0": (np.array([1, 2, 3]), np.array([1, 1, 1]))}
WANT = np.array([1, 2, 3], np.float32) / 1024


class ClientRetryTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        cls.fake = FlakyRanking()
        ranking_pb2_grpc.add_RankingServicer_to_server(cls.fake, cls.server)
        cls.target = "127.0.0.1:%d" % cls.server.add_insecure_port("127.0.0.1:0")
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(None)

    def check_one_deadline(self, timeouts, timeout_s):
        """One deadline: every attempt got less time than the one before (at
        least the 0.05 s the failed one took), and the first no more than
        the call's; the server saw no more than that either."""
        self.assertEqual(len(timeouts), 4)
        self.assertLessEqual(timeouts[0], timeout_s)
        self.assertTrue(all(a - b > 0.05 for a, b in zip(timeouts, timeouts[1:])), timeouts)
        self.assertTrue(all(r <= timeout_s + 0.01 for r in self.fake.remaining),
                        self.fake.remaining)

    # --- sync ---------------------------------------------------------------

    def test_sync_retries_resource_exhausted_then_scores(self):
        for code in (RE, UNAVAILABLE):
            self.fake.reset(3, code, delay=0.05)
            with RankingClient(self.target, timeout_s=5.0, retry=FAST) as client:
                timeouts = record_timeouts(client)
                scores = client.score("mini", DENSE, sparse=SPARSE)
            np.testing.assert_array_equal(scores, WANT)
            self.assertEqual(self.fake.calls, 4)
            self.check_one_deadline(timeouts, 5.0)

    def test_sync_gives_up_after_max_attempts(self):
        self.fake.reset(10)
        with RankingClient(self.target, timeout_s=5.0, retry=FAST) as client:
            with self.assertRaises(RankdError) as caught:
                client.score({"model": "mini", "numCandidates": 1})
        self.assertEqual(caught.exception.code, RE)
        self.assertEqual(caught.exception.message,
                         'queue of model "mini" is full (after 4 attempts)')
        self.assertEqual(self.fake.calls, 4)

    def test_sync_deadline_shorter_than_backoff(self):
        self.fake.reset(10)
        with RankingClient(self.target, timeout_s=0.3, retry=SLOW) as client:
            client._random = lambda: 0.9  # pylint: disable=protected-access
            start = time.monotonic()
            with self.assertRaises(RankdError) as caught:
                client.score("mini", DENSE, sparse=SPARSE)
            elapsed = time.monotonic() - start
        self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIn("RESOURCE_EXHAUSTED", caught.exception.message)
        self.assertEqual(self.fake.calls, 1)
        self.assertLess(elapsed, 0.3)  # failed at once, not at (or past) the deadline

    def test_sync_no_retry(self):
        self.fake.reset(1)
        with RankingClient(self.target, timeout_s=5.0, retry=None) as client:
            with self.assertRaises(RankdError) as caught:
                client.score({"model": "mini", "numCandidates": 1})
        self.assertEqual((caught.exception.code, self.fake.calls), (RE, 1))

    def test_sync_unreachable_is_retried_then_unavailable(self):
        sock_server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        port = sock_server.add_insecure_port("127.0.0.1:0")
        sock_server.start()
        sock_server.stop(None)  # nothing listens on `port` now
        with RankingClient("127.0.0.1:%d" % port, timeout_s=5.0, retry=FAST) as client:
            with self.assertRaises(RankdError) as caught:
                client.score({"model": "mini", "numCandidates": 1})
        self.assertEqual(caught.exception.code, UNAVAILABLE)
        self.assertEqual(caught.exception.attempts, 4)

    # --- grpc.aio -------------------------------------------------------------

    def test_aio_retries_resource_exhausted_then_scores(self):
        async def run():
            async with aio.RankingClient(self.target, timeout_s=5.0, retry=FAST) as client:
                timeouts = record_timeouts(client)
                return (await client.score("mini", DENSE, sparse=SPARSE),
                        await client.score({"model": "mini", "numCandidates": 2}), timeouts)

        for code in (RE, UNAVAILABLE):
            self.fake.reset(3, code, delay=0.05)
            scores, listed, timeouts = asyncio.run(run())
            np.testing.assert_array_equal(scores, WANT)
            self.assertEqual(listed, [1 / 1024, 2 / 1024])
            self.assertEqual(self.fake.calls, 5)
            self.check_one_deadline(timeouts[:4], 5.0)

    def test_aio_gives_up_after_max_attempts(self):
        async def run():
            async with aio.RankingClient(self.target, timeout_s=5.0, retry=FAST) as client:
                await client.score("mini", DENSE, sparse=SPARSE)

        self.fake.reset(10)
        with self.assertRaises(RankdError) as caught:
            asyncio.run(run())
        self.assertEqual((caught.exception.code, caught.exception.attempts), (RE, 4))
        self.assertEqual(self.fake.calls, 4)

    def test_aio_deadline_shorter_than_backoff(self):
        async def run():
            async with aio.RankingClient(self.target, timeout_s=0.3, retry=SLOW) as client:
                client._random = lambda: 0.9  # pylint: disable=protected-access
                await client.score("mini", DENSE, sparse=SPARSE)

        self.fake.reset(10)
        start = time.monotonic()
        with self.assertRaises(RankdError) as caught:
            asyncio.run(run())
        self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(self.fake.calls, 1)
        self.assertLess(time.monotonic() - start, 0.3)

    def test_aio_health_and_model_info_errors(self):
        async def run():
            async with aio.RankingClient(self.target, timeout_s=2.0) as client:
                return await client.health()

        # The fake serves no health service: UNIMPLEMENTED, never retried.
        with self.assertRaises(RankdError) as caught:
            asyncio.run(run())
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNIMPLEMENTED)


if __name__ == "__main__":
    unittest.main(verbosity=2)
