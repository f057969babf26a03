"""The rankd_client package against the real rankd (tests/e2e/python_client_test.sh).

  numpy  every request of a .jsonl file, as numpy arrays, through the sync
         client (4 threads) and the grpc.aio client (all at once), and as
         JSON through both: scores bit-equal to `rankd score`'s.
  retry  N heavy calls at once at a model whose queue holds fewer: with a
         RetryPolicy every call must end OK (bit-exact) although the server
         rejected some with RESOURCE_EXHAUSTED (the shell checks its counter);
         without retries some must fail RESOURCE_EXHAUSTED (so the first part
         proves something).

Run with /usr/bin/python3, PYTHONPATH=client/python. Exit 1 on any failure.
"""

import argparse
import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rankd_client import NO_RETRY, RankdError, RankingClient, RetryPolicy, aio

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stderr)
    if not cond:
        failures.append(what)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def to_numpy(request):
    """(model, dense [B, num_dense] float32, sparse {name: (ids, lengths[, weights])})."""
    b = request["numCandidates"]
    dense = np.array(request.get("dense", []), np.float32).reshape(b, -1)
    sparse = {}
    for f in request.get("sparse", []):
        bag = (np.array([int(i) for i in f.get("ids", [])], np.int64),
               np.array(f.get("lengths", []), np.int32))
        if f.get("weights"):
            bag += (np.array(f["weights"], np.float32),)
        sparse[f["name"]] = bag
    return request["model"], dense, sparse


def bits(scores):
    return np.asarray(scores, np.float32).view(np.uint32).tolist()


def compare(name, expected, got):
    bad = [i for i, (w, g) in enumerate(zip(expected, got)) if bits(w) != bits(g)]
    check(len(expected) == len(got) and not bad,
          "%s: %d responses bit-equal to rankd score%s"
          % (name, len(got), "" if not bad else " (request %d differs: %r vs %r)"
             % (bad[0], list(got[bad[0]])[:4], list(expected[bad[0]])[:4])))


def cmd_numpy(args):
    requests = read_jsonl(args.requests)
    expected = [r["scores"] for r in read_jsonl(args.expected)]
    arrays = [to_numpy(r) for r in requests]
    with RankingClient(args.target, timeout_s=30.0) as client:
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda a: client.score(a[0], a[1], sparse=a[2]), arrays))
            as_json = list(pool.map(lambda r: client.score(json.dumps(r)), requests))
    check(all(isinstance(g, np.ndarray) and g.dtype == np.float32 for g in got),
          "sync numpy scores are float32 arrays")
    compare("sync numpy", expected, got)
    compare("sync JSON", expected, as_json)

    async def run():
        async with aio.RankingClient(args.target, timeout_s=30.0) as client:
            health = await client.health()
            info = await client.model_info(arrays[0][0])
            got = await asyncio.gather(*[client.score(m, d, sparse=s) for m, d, s in arrays])
            as_dict = await asyncio.gather(*[client.score(r) for r in requests])
            return health, info, got, as_dict

    health, info, got, as_dict = asyncio.run(run())
    check(health == "SERVING", "aio health: %s" % health)
    check(info.num_dense == arrays[0][1].shape[1], "aio model_info: num_dense %d" % info.num_dense)
    compare("aio numpy", expected, got)
    compare("aio dict", expected, as_dict)


def cmd_retry(args):
    requests = read_jsonl(args.requests)
    expected = [r["scores"] for r in read_jsonl(args.expected)]
    picks = [i % len(requests) for i in range(args.calls)]
    arrays = [to_numpy(requests[i]) for i in picks]
    want = [expected[i] for i in picks]
    policy = RetryPolicy(max_attempts=200, initial_backoff_s=0.02, max_backoff_s=0.25)

    def outcome(call):
        try:
            return call()
        except RankdError as e:
            return e

    def sync_round(retry):
        with RankingClient(args.target, timeout_s=60.0, retry=retry) as client:
            with ThreadPoolExecutor(max_workers=args.calls) as pool:
                return list(pool.map(
                    lambda a: outcome(lambda: client.score(a[0], a[1], sparse=a[2])), arrays))

    async def aio_round(retry):
        async with aio.RankingClient(args.target, timeout_s=60.0, retry=retry) as client:
            async def one(a):
                try:
                    return await client.score(a[0], a[1], sparse=a[2])
                except RankdError as e:
                    return e
            return await asyncio.gather(*[one(a) for a in arrays])

    for name, results in (("sync", sync_round(policy)), ("aio", asyncio.run(aio_round(policy)))):
        errors = [r for r in results if isinstance(r, RankdError)]
        check(not errors, "%s with retries: %d calls, all OK%s"
              % (name, len(results), "" if not errors else " (first error: %s)" % errors[0]))
        if not errors:
            compare(name + " with retries", want, results)
    # Without retries the same flood must be turned away in part, or the
    # rounds above retried nothing.
    results = sync_round(None)
    codes = sorted({r.code.name for r in results if isinstance(r, RankdError)})
    check(codes == ["RESOURCE_EXHAUSTED"],
          "without retries some calls fail RESOURCE_EXHAUSTED (codes: %s)" % codes)
    assert NO_RETRY.max_attempts == 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("numpy", "retry"):
        s = sub.add_parser(name)
        s.add_argument("--target", required=True)
        s.add_argument("--requests", required=True)
        s.add_argument("--expected", required=True)
        s.add_argument("--calls", type=int, default=8)
    args = p.parse_args()
    {"numpy": cmd_numpy, "retry": cmd_retry}[args.cmd](args)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed",
          file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
