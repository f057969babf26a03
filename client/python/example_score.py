"""Scores one random request against a running rankd.

    PYTHONPATH=client/python /usr/bin/python3 \
        client/python/example_score.py --target localhost:8500 --model mini
    (or with the package installed: python3 client/python/example_score.py ...)

Reads the model's features from GetModelInfo, so the request it builds fits
any served model: B candidates, random dense values, one random id per bag
(one shared bag for request-level features).
"""

import argparse
import random
import sys

from rankd_client import RankdError, RankingClient


def build_request(info, candidates, rng):
    request = {
        "model": info.name,
        "version": info.version,
        "numCandidates": candidates,
        "dense": [rng.random() for _ in range(candidates * info.num_dense)],
        "sparse": [],
    }
    for feature in info.features:
        bags = 1 if feature.request_level else candidates
        request["sparse"].append({
            "name": feature.name,
            "ids": [rng.randrange(max(feature.num_rows, 1)) for _ in range(bags)],
            "lengths": [1] * bags,
        })
    return request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:8500")
    parser.add_argument("--model", default="mini")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--timeout_s", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    with RankingClient(args.target, timeout_s=args.timeout_s) as client:
        try:
            print("health:", client.health(), "/", args.model, client.health(args.model))
            info = client.model_info(args.model)
            scores = client.score(build_request(info, args.candidates, random.Random(args.seed)))
        except RankdError as e:
            print("example_score: %s" % e, file=sys.stderr)
            return 1
    print("model %s version %d: %s" % (info.name, info.version,
                                       " ".join("%.4f" % s for s in scores)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
