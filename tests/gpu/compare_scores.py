#!/usr/bin/env python3
"""Compares two JSON-lines score files (rankd score / rankctl score output).

Usage: compare_scores.py EXPECTED GOT TOLERANCE [COUNT]
Prints "PASS/FAIL max rel err ..." and exits 0 when every score of GOT is
within TOLERANCE (relative) of EXPECTED and both hold the same number of
responses (COUNT when given).
"""
import json
import sys


def main():
    a = [json.loads(l)["scores"] for l in open(sys.argv[1])]
    b = [json.loads(l)["scores"] for l in open(sys.argv[2])]
    tol = float(sys.argv[3])
    want = int(sys.argv[4]) if len(sys.argv) > 4 else len(a)
    if not (len(a) == len(b) == want) or any(len(x) != len(y) for x, y in zip(a, b)):
        print(f"FAIL: {len(a)} expected responses, {len(b)} got (want {want})")
        return 1
    worst = max(abs(x - y) / max(abs(x), 1e-30) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    ok = worst <= tol
    print(f"{'PASS' if ok else 'FAIL'}: {len(b)} responses, max rel err vs CPU engine {worst:.3e} (bound {tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
