"""Overload and deadline checks against a running rankd (tests/e2e).

  flood     fires N heavy Score calls at once at a model with a tiny queue
            (max_queue_requests) and one worker: some must be rejected with
            RESOURCE_EXHAUSTED, rejections answered before the admitted
            calls are computed, and every admitted call must succeed with the
            scores of `rankd score`, bit-exact.
  deadline  keeps the worker busy with heavy calls, then sends heavy calls
            with a deadline far below one batch's time: they must end
            DEADLINE_EXCEEDED, while the busy ones still succeed bit-exactly.

Every call uses the async (future) API, so per-call latency is measured from
the moment the call starts. Run with /usr/bin/python3, PYTHONPATH =
client/python (the stubs rankd_client ships). Prints one JSON summary line on stdout.
"""

import argparse
import json
import struct
import sys
import threading
import time

import grpc
from google.protobuf import json_format
from rankd_client import ranking_pb2

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stderr)
    if not cond:
        failures.append(what)


def load(path, cls):
    with open(path) as f:
        return [json_format.Parse(line, cls()) for line in f if line.strip()]


def bits(scores):
    return [struct.pack("<f", s) for s in scores]


class Call:
    """One async Score call and when it ended."""

    def __init__(self, stub, request, index, timeout_s):
        self.index = index
        self.done = threading.Event()
        self.end = None
        self.start = time.monotonic()
        self.future = stub.future(request, timeout=timeout_s)
        self.future.add_done_callback(self._on_done)

    def _on_done(self, _):
        self.end = time.monotonic()
        self.done.set()

    def wait(self, timeout_s):
        return self.done.wait(timeout_s)

    @property
    def latency(self):
        return self.end - self.start

    def code(self):
        exc = self.future.exception()
        return grpc.StatusCode.OK if exc is None else exc.code()


def channel(target):
    ch = grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", 64 << 20),
        ("grpc.max_receive_message_length", 64 << 20)])
    grpc.channel_ready_future(ch).result(timeout=10)
    return ch


def single_call_seconds(stub, request, expected, repeats=2):
    """Best-of time of one heavy call alone (≈ one batch's compute)."""
    best = None
    for _ in range(repeats):
        start = time.monotonic()
        resp = stub(request, timeout=60)
        took = time.monotonic() - start
        check(bits(resp.scores) == expected, "lone heavy call scores bit-exact")
        best = took if best is None else min(best, took)
    return best


def wait_all(calls, timeout_s):
    deadline = time.monotonic() + timeout_s
    for c in calls:
        if not c.wait(max(0.0, deadline - time.monotonic())):
            check(False, "call %d ended within %.0f s" % (c.index, timeout_s))
            return False
    return True


def cmd_flood(args, stub, requests, expected):
    lone = single_call_seconds(stub, requests[0], expected[0])
    print("lone heavy call: %.3f s" % lone, file=sys.stderr)
    calls = [Call(stub, requests[i % len(requests)], i, 60) for i in range(args.calls)]
    issued = time.monotonic() - calls[0].start
    if not wait_all(calls, 120):
        return {}
    by_code = {}
    for c in calls:
        by_code.setdefault(c.code().name, []).append(c)
    summary = {k: len(v) for k, v in by_code.items()}
    rejected = sorted(c.latency for c in by_code.get("RESOURCE_EXHAUSTED", []))
    ok = by_code.get("OK", [])
    print("flood of %d (issued in %.3f s): %s" % (args.calls, issued, summary), file=sys.stderr)
    check(set(by_code) <= {"OK", "RESOURCE_EXHAUSTED"},
          "every call OK or RESOURCE_EXHAUSTED (got %s)" % summary)
    # A queue of max_queue_requests behind one worker: of 64 calls arriving
    # together only a handful fit; most must be turned away.
    check(len(rejected) >= args.calls // 2,
          "at least half rejected with RESOURCE_EXHAUSTED (%d of %d)" % (len(rejected), args.calls))
    check(len(ok) >= args.min_ok, "at least %d admitted and OK (%d)" % (args.min_ok, len(ok)))
    if rejected:
        p50 = rejected[len(rejected) // 2]
        worst = rejected[-1]
        summary["rejected_p50_s"] = round(p50, 4)
        summary["rejected_max_s"] = round(worst, 4)
        summary["lone_call_s"] = round(lone, 4)
        # A rejection never waits for compute. Judged by order, not by a
        # clock (CI cores are shared): the median rejection ends before the
        # first admitted call has been computed, and every rejection before
        # the last admitted call ends (that one waits for every batch ahead).
        first_ok = min(c.latency for c in ok) if ok else 0
        check(p50 < first_ok, "median rejection %.4f s ends before the first admitted call "
              "(%.4f s)" % (p50, first_ok))
        slowest_ok = max(c.latency for c in ok) if ok else 0
        check(worst < slowest_ok, "rejections (max %.4f s) end before the admitted calls "
              "(max %.4f s)" % (worst, slowest_ok))
    wrong = [c.index for c in ok
             if bits(c.future.result().scores) != expected[c.index % len(requests)]]
    check(not wrong, "admitted calls' scores bit-exact (wrong: %s)" % wrong[:10])
    # Still serving after the flood.
    after = stub(requests[0], timeout=60)
    check(bits(after.scores) == expected[0], "a call after the flood succeeds bit-exactly")
    summary["ok"] = len(ok)
    return summary


def cmd_deadline(args, stub, requests, expected):
    lone = single_call_seconds(stub, requests[0], expected[0])
    short_s = max(0.002, min(lone / 4, 0.05))
    print("lone heavy call: %.3f s; short deadline %.3f s" % (lone, short_s), file=sys.stderr)
    busy = [Call(stub, requests[i % len(requests)], i, 60) for i in range(args.busy)]
    time.sleep(min(lone / 4, 0.02))  # the busy calls are queued / running
    short = [Call(stub, requests[i % len(requests)], 1000 + i, short_s) for i in range(args.calls)]
    if not wait_all(busy + short, 120):
        return {}
    short_codes = [c.code().name for c in short]
    busy_codes = [c.code().name for c in busy]
    check(all(c == "DEADLINE_EXCEEDED" for c in short_codes),
          "every short-deadline call DEADLINE_EXCEEDED (got %s)" % short_codes)
    late = [round(c.latency, 3) for c in short if c.latency > short_s + 1.0]
    check(not late, "short-deadline calls end near their deadline (late: %s)" % late)
    check(all(c == "OK" for c in busy_codes), "every busy call OK (got %s)" % busy_codes)
    wrong = [c.index for c in busy if c.code() == grpc.StatusCode.OK
             and bits(c.future.result().scores) != expected[c.index % len(requests)]]
    check(not wrong, "busy calls' scores bit-exact (wrong: %s)" % wrong)
    after = stub(requests[0], timeout=60)
    check(bits(after.scores) == expected[0], "a call after the deadlines succeeds bit-exactly")
    return {"lone_call_s": round(lone, 4), "short_deadline_s": short_s,
            "busy_ok": busy_codes.count("OK"), "short_deadline_exceeded":
            short_codes.count("DEADLINE_EXCEEDED")}


def cmd_cancel(args, stub, requests, expected):
    """Calls cancelled by their client while queued behind busy ones: the
    server must see the cancellation, so they are never computed (the test
    checks rankd_candidates_total and the CANCELLED count)."""
    lone = single_call_seconds(stub, requests[0], expected[0])
    busy = [Call(stub, requests[i % len(requests)], i, 60) for i in range(args.busy)]
    time.sleep(min(lone / 4, 0.02))  # the busy calls are queued / running
    cancelled = [Call(stub, requests[i % len(requests)], 1000 + i, 60) for i in range(args.calls)]
    time.sleep(min(lone / 2, 0.05))
    for c in cancelled:
        c.future.cancel()
    if not wait_all(busy + cancelled, 120):
        return {}
    busy_codes = [c.code().name for c in busy]
    check(all(c == "OK" for c in busy_codes), "every busy call OK (got %s)" % busy_codes)
    check(all(c.future.cancelled() for c in cancelled), "every cancelled call cancelled")
    # Enough time for the server to reach the cancelled calls in its queue.
    time.sleep(lone * (args.busy + 1))
    after = stub(requests[0], timeout=60)
    check(bits(after.scores) == expected[0], "a call after the cancellations succeeds bit-exactly")
    return {"lone_call_s": round(lone, 4), "busy_ok": busy_codes.count("OK"),
            "cancelled": len(cancelled)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["flood", "deadline", "cancel"])
    p.add_argument("--target", required=True)
    p.add_argument("--requests", required=True, help="heavy ScoreRequest JSON lines")
    p.add_argument("--expected", required=True, help="their `rankd score` responses")
    p.add_argument("--calls", type=int, default=64)
    p.add_argument("--busy", type=int, default=6)
    p.add_argument("--min_ok", type=int, default=2)
    args = p.parse_args()
    # Serialized once: the calls then cost the client next to nothing, so the
    # measured latency is the server's answer, not Python's serialization.
    requests = [r.SerializeToString() for r in load(args.requests, ranking_pb2.ScoreRequest)]
    expected = [bits(r.scores) for r in load(args.expected, ranking_pb2.ScoreResponse)]
    ch = channel(args.target)
    stub = ch.unary_unary("/rankd.v1.Ranking/Score", request_serializer=None,
                          response_deserializer=ranking_pb2.ScoreResponse.FromString)
    fn = {"flood": cmd_flood, "deadline": cmd_deadline, "cancel": cmd_cancel}[args.mode]
    summary = fn(args, stub, requests, expected)
    ch.close()
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
