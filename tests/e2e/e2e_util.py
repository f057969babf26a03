"""Helpers of the end-to-end tests (run with Debian's /usr/bin/python3).

  compare      bit-exact comparison of ScoreResponse JSON lines
  py-score     score JSON request lines through the Python client
  bad-requests write one bad ScoreRequest per input-validation class
  rankctl-errors  parse rankctl's per-line error report

Only the standard library at import time; py-score imports the Python client
(PYTHONPATH = client/python: the rankd_client package).
"""

import argparse
import json
import math
import re
import struct
import sys


def f32_bits(value):
    """The bit pattern of a score as float32 (JSON numbers or "NaN"/"Infinity")."""
    if isinstance(value, str):
        value = float(value)
    return struct.pack("<f", value)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def compare_responses(name, expected, got, skip=()):
    """expected: responses of every request; got: of every request whose
    1-based line number is not in `skip`, in order. Returns error strings."""
    errors = []
    kept = [r for i, r in enumerate(expected, start=1) if i not in skip]
    if len(kept) != len(got):
        return ["%s: %d responses, want %d" % (name, len(got), len(kept))]
    line_numbers = [i for i in range(1, len(expected) + 1) if i not in skip]
    for line, want, have in zip(line_numbers, kept, got):
        ws, hs = want.get("scores", []), have.get("scores", [])
        if len(ws) != len(hs):
            errors.append("%s: request %d: %d scores, want %d" % (name, line, len(hs), len(ws)))
            continue
        for k, (w, h) in enumerate(zip(ws, hs)):
            if f32_bits(w) != f32_bits(h):
                errors.append("%s: request %d: score[%d] = %r, want %r (bit-exact)"
                              % (name, line, k, h, w))
                break
        # `rankd score` leaves version out (its model has none: it loads a
        # version directory, not a model root); compare it when it is there.
        for field in ("model", "version"):
            if field not in want:
                continue
            if str(want.get(field)) != str(have.get(field)):
                errors.append("%s: request %d: %s = %r, want %r"
                              % (name, line, field, have.get(field), want.get(field)))
        if len(errors) > 10:
            errors.append("...")
            break
    return errors


def cmd_compare(args):
    skip = set()
    if args.skip_lines:
        skip = {int(x) for x in args.skip_lines.split(",") if x}
    expected = read_jsonl(args.expected)
    got = read_jsonl(args.got)
    if args.min_count and len(expected) < args.min_count:
        print("%s: only %d expected responses" % (args.name, len(expected)), file=sys.stderr)
        return 1
    errors = compare_responses(args.name, expected, got, skip)
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print("%s: %d responses bit-exact" % (args.name, len(got)), file=sys.stderr)
    return 1 if errors else 0


def cmd_py_score(args):
    """Scores every line with the Python client (a few threads, so the server
    batches them together) and writes ScoreResponse JSON lines in order."""
    from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel
    from google.protobuf import json_format  # pylint: disable=import-outside-toplevel
    import rankd_client  # pylint: disable=import-outside-toplevel

    with open(args.input) as f:
        lines = [line for line in f if line.strip()]
    with rankd_client.RankingClient(args.target, timeout_s=args.timeout_s) as client:
        if client.health() != "SERVING":
            print("py-score: server not SERVING", file=sys.stderr)
            return 1
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            responses = list(pool.map(client.score_response, lines))
    with open(args.output, "w") as out:
        for r in responses:
            d = json_format.MessageToDict(r)
            # Keep the float32 value exactly: repr of the double it widens to.
            d["scores"] = [float(s) for s in r.scores]
            out.write(json.dumps(d) + "\n")
    print("py-score: %d responses" % len(responses), file=sys.stderr)
    return 0


# --- bad requests ------------------------------------------------------------

def bad_requests(good, num_dense, big_good=None):
    """(case name, expected gRPC code, fragment the message must contain, request)."""
    cases = []

    def case(name, code, fragment, mutate, base=None):
        r = json.loads(json.dumps(base if base is not None else good))
        mutate(r)
        cases.append((name, code, fragment, r))

    b = good["numCandidates"]
    per_cand = [f for f in good["sparse"] if len(f["lengths"]) == b]
    assert per_cand, "need a per-candidate sparse feature"
    f0 = good["sparse"].index(per_cand[0])
    name0 = good["sparse"][f0]["name"]

    def unknown_feature(r):
        r["sparse"][f0]["name"] = "no_such_feature"
    case("unknown feature", "INVALID_ARGUMENT", 'unknown feature "no_such_feature"', unknown_feature)

    def twice(r):
        r["sparse"].append(json.loads(json.dumps(r["sparse"][f0])))
    case("feature sent twice", "INVALID_ARGUMENT", '"%s" appears twice' % name0, twice)

    def missing(r):
        del r["sparse"][f0]
    case("missing feature", "INVALID_ARGUMENT", 'feature "%s" is missing' % name0, missing)

    def wrong_lengths(r):
        f = r["sparse"][f0]
        n = f["lengths"].pop()  # b - 1 entries (b > 2): neither b nor 1
        f["ids"] = f["ids"][:len(f["ids"]) - n]
    case("wrong lengths count", "INVALID_ARGUMENT", '"%s".lengths: has %d entries' % (name0, b - 1),
         wrong_lengths)

    def negative_length(r):
        f = r["sparse"][f0]
        f["lengths"][1] = -1
    case("negative length", "INVALID_ARGUMENT", '"%s".lengths[1]: -1 is negative' % name0,
         negative_length)

    def ids_count(r):
        r["sparse"][f0]["ids"].append("0")
    case("ids count != sum(lengths)", "INVALID_ARGUMENT", '"%s".ids: has' % name0, ids_count)

    def weights_count(r):
        f = r["sparse"][f0]
        f["weights"] = [1.0] * (len(f["ids"]) - 1)
    case("weights count mismatch", "INVALID_ARGUMENT", '"%s".weights: has' % name0, weights_count)

    def dense_count(r):
        r["dense"].pop()
    case("dense count wrong", "INVALID_ARGUMENT",
         "dense: has %d values; expected %d" % (b * num_dense - 1, b * num_dense), dense_count)

    def dense_nan(r):
        r["dense"][num_dense + 2] = "NaN"
    case("NaN dense value", "INVALID_ARGUMENT", "dense[%d] (candidate 1" % (num_dense + 2),
         dense_nan)

    def dense_inf(r):
        r["dense"][2 * num_dense] = "-Infinity"
    case("infinite dense value", "INVALID_ARGUMENT", "dense[%d] (candidate 2, feature 0)" % (2 * num_dense),
         dense_inf)

    def weight_nan(r):
        f = r["sparse"][f0]
        f["weights"] = [1.0] * len(f["ids"])
        f["weights"][1] = "NaN"
    case("NaN weight", "INVALID_ARGUMENT", '"%s".weights[1]: nan is not a finite' % name0, weight_nan)

    def id_out_of_range(r):
        r["sparse"][f0]["ids"][0] = str(1 << 40)
    case("out-of-range id", "INVALID_ARGUMENT", '"%s".ids[0]: id %d is out of range' % (name0, 1 << 40),
         id_out_of_range)

    def zero_candidates(r):
        r["numCandidates"] = 0
    case("num_candidates 0", "INVALID_ARGUMENT", "num_candidates: must be > 0", zero_candidates)

    if big_good is not None:
        case("num_candidates above --max_candidates", "INVALID_ARGUMENT",
             "num_candidates: %d exceeds" % big_good["numCandidates"], lambda r: None, big_good)

    def unknown_model(r):
        r["model"] = "no_such_model"
    case("unknown model", "NOT_FOUND", "no_such_model", unknown_model)

    def unknown_version(r):
        r["version"] = "99"
    case("unknown version", "NOT_FOUND", "99", unknown_version)
    return cases


def cmd_bad_requests(args):
    with open(args.good) as f:
        good = json.loads(f.readline())
    big = None
    if args.big:
        with open(args.big) as f:
            big = json.loads(f.readline())
    cases = bad_requests(good, args.num_dense, big)
    with open(args.output, "w") as out, open(args.cases, "w") as meta:
        for name, code, fragment, r in cases:
            out.write(json.dumps(r) + "\n")
            meta.write(json.dumps({"name": name, "code": code, "fragment": fragment}) + "\n")
            if args.interleave_good:  # the server must go on serving
                out.write(json.dumps(good) + "\n")
                meta.write(json.dumps({"name": "good request after " + name, "code": "OK"}) + "\n")
    return 0


ERROR_LINE = re.compile(r"^rankctl score: (?P<src>.*?):(?P<line>\d+): (?P<code>[A-Z_]+): (?P<msg>.*)$")


def parse_rankctl_errors(path):
    """{line number: (code, message)} from rankctl score's stderr."""
    errors = {}
    with open(path) as f:
        for text in f:
            m = ERROR_LINE.match(text.rstrip("\n"))
            if m:
                errors[int(m.group("line"))] = (m.group("code"), m.group("msg"))
    return errors


def cmd_check_bad(args):
    """Every line of --cases failed with its code and a message naming the field."""
    errors = parse_rankctl_errors(args.stderr)
    with open(args.cases) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    bad = 0
    for i, c in enumerate(cases, start=1):
        got = errors.get(i)
        if c["code"] == "OK":
            if got is not None:
                print("FAIL: %s (line %d): failed with %s: %s" % ((c["name"], i) + got),
                      file=sys.stderr)
                bad += 1
            continue
        if got is None:
            print("FAIL: %s (line %d): no error reported" % (c["name"], i), file=sys.stderr)
            bad += 1
            continue
        code, msg = got
        if code != c["code"] or c["fragment"] not in msg:
            print("FAIL: %s (line %d): got %s: %s; want %s naming %r"
                  % (c["name"], i, code, msg, c["code"], c["fragment"]), file=sys.stderr)
            bad += 1
        else:
            print("ok: %s -> %s: %s" % (c["name"], code, msg), file=sys.stderr)
    extra = sorted(set(errors) - set(range(1, len(cases) + 1)))
    if extra:
        print("FAIL: unexpected error lines %s" % extra, file=sys.stderr)
        bad += 1
    return 1 if bad else 0


def cmd_rankctl_errors(args):
    """Prints 'LINE CODE MESSAGE' per failed line (for shell scripts: awk's $1, $2)."""
    for line, (code, msg) in sorted(parse_rankctl_errors(args.stderr).items()):
        print(line, code, msg)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--name", required=True)
    c.add_argument("--expected", required=True)
    c.add_argument("--got", required=True)
    c.add_argument("--skip_lines", default="")
    c.add_argument("--min_count", type=int, default=1)
    c.set_defaults(fn=cmd_compare)
    s = sub.add_parser("py-score")
    s.add_argument("--target", required=True)
    s.add_argument("--input", required=True)
    s.add_argument("--output", required=True)
    s.add_argument("--threads", type=int, default=4)
    s.add_argument("--timeout_s", type=float, default=30.0)
    s.set_defaults(fn=cmd_py_score)
    b = sub.add_parser("bad-requests")
    b.add_argument("--good", required=True)
    b.add_argument("--big", default="")
    b.add_argument("--num_dense", type=int, required=True)
    b.add_argument("--output", required=True)
    b.add_argument("--cases", required=True)
    b.add_argument("--interleave_good", action="store_true",
                   help="follow every bad request with the good one")
    b.set_defaults(fn=cmd_bad_requests)
    k = sub.add_parser("check-bad")
    k.add_argument("--cases", required=True)
    k.add_argument("--stderr", required=True)
    k.set_defaults(fn=cmd_check_bad)
    e = sub.add_parser("rankctl-errors")
    e.add_argument("--stderr", required=True)
    e.set_defaults(fn=cmd_rankctl_errors)
    args = p.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
