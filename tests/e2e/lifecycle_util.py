"""Helpers of the model-lifecycle end-to-end tests (Debian's /usr/bin/python3).

  list      print ListModels (rankd.v1.ModelControl) as JSON
  wait      wait until a model version reaches a state; print its
            state_since_unix_ms
  swap      check a rankload --response_log around a version swap and print
            the p99 latencies around the swap and in steady state

`list` and `wait` import stubs generated from protos/rankd/v1/model_control.proto
(PYTHONPATH = the stub directory); `swap` needs only the standard library.
"""

import argparse
import csv
import json
import sys
import time


def stub():
    import grpc
    from google.protobuf import json_format
    from rankd.v1 import model_control_pb2, model_control_pb2_grpc
    return grpc, json_format, model_control_pb2, model_control_pb2_grpc


def list_models(target, model=""):
    grpc, json_format, pb2, pb2_grpc = stub()
    with grpc.insecure_channel(target) as channel:
        reply = pb2_grpc.ModelControlStub(channel).ListModels(
            pb2.ListModelsRequest(model=model), timeout=10)
    return json_format.MessageToDict(reply, preserving_proto_field_name=True)


def version_of(listing, model, version):
    for m in listing.get("models", []):
        if m["name"] != model:
            continue
        for v in m.get("versions", []):
            if int(v["version"]) == version:
                return v
    return None


def cmd_list(args):
    print(json.dumps(list_models(args.target, args.model), indent=1))
    return 0


def cmd_wait(args):
    """Waits for the state; a version that enters FAILED after the wait began
    (not one that was FAILED before: it may be about to be retried) ends it."""
    start_ms = time.time() * 1000
    deadline = time.time() + args.timeout_s
    last = None
    while time.time() < deadline:
        v = version_of(list_models(args.target, args.model), args.model, args.version)
        last = v
        if v is not None and v.get("state") == args.state:
            print(v.get("state_since_unix_ms", "0"))
            return 0
        if (v is not None and v.get("state") == "FAILED" and args.state != "FAILED"
                and int(v.get("state_since_unix_ms", "0")) >= start_ms):
            print("version %d FAILED: %s" % (args.version, v.get("reason")), file=sys.stderr)
            return 1
        time.sleep(0.05)
    print("timeout waiting for %s v%d %s; last: %r" % (args.model, args.version, args.state, last),
          file=sys.stderr)
    return 1


def p99(values):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))]


def cmd_swap(args):
    """Checks every response of the log against the swap's times (unix us):
    - every call OK;
    - sent and answered before v2 was READY: version 1 (the swap cannot have
      reached it; a call sent just before READY and answered after may be
      either, as routing happens when it arrives);
    - sent more than one poll period after READY: version 2;
    - version 2 never answers before it was READY."""
    rows = list(csv.DictReader(open(args.log)))
    ready = args.ready_ms * 1000
    errors, straddling = [], 0
    steady, swap = [], []
    for r in rows:
        sent, done, ver = int(r["sent_unix_us"]), int(r["done_unix_us"]), int(r["version"])
        if r["code"] != "OK":
            errors.append("call sent at %d: %s" % (sent, r["code"]))
            continue
        if sent < ready and done < ready and ver != args.old:
            errors.append("call sent at %d, answered before READY, by version %d" % (sent, ver))
        if sent < ready <= done:
            straddling += 1
        if sent > ready + args.poll_s * 1e6 and ver != args.new:
            errors.append("call sent %.3f s after READY answered by version %d"
                          % ((sent - ready) / 1e6, ver))
        if ver == args.new and done < ready:
            errors.append("version %d answered at %d, before READY" % (ver, done))
        scheduled, latency = int(r["scheduled_unix_us"]), float(r["latency_us"])
        if scheduled < args.publish_ms * 1000:
            steady.append(latency)
        elif scheduled <= args.swapped_ms * 1000:
            swap.append(latency)
    olds = sum(1 for r in rows if r["code"] == "OK" and int(r["version"]) == args.old)
    news = sum(1 for r in rows if r["code"] == "OK" and int(r["version"]) == args.new)
    report = {"calls": len(rows), "by_old": olds, "by_new": news, "straddling_ready": straddling,
              "steady_calls": len(steady), "swap_calls": len(swap),
              "steady_p99_us": p99(steady), "swap_p99_us": p99(swap)}
    report["swap_over_steady"] = report["swap_p99_us"] / max(report["steady_p99_us"], 1)
    print(json.dumps(report))
    if olds == 0 or news == 0:
        errors.append("the log does not straddle the swap (%d by v%d, %d by v%d)"
                      % (olds, args.old, news, args.new))
    if len(rows) < args.min_calls:
        errors.append("only %d calls logged, want >= %d" % (len(rows), args.min_calls))
    for e in errors[:20]:
        print("FAIL: " + e, file=sys.stderr)
    return 1 if errors else 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("list")
    a.add_argument("--target", required=True)
    a.add_argument("--model", default="")
    a.set_defaults(run=cmd_list)
    a = sub.add_parser("wait")
    a.add_argument("--target", required=True)
    a.add_argument("--model", required=True)
    a.add_argument("--version", type=int, required=True)
    a.add_argument("--state", default="READY")
    a.add_argument("--timeout_s", type=float, default=60)
    a.set_defaults(run=cmd_wait)
    a = sub.add_parser("swap")
    a.add_argument("--log", required=True)
    a.add_argument("--old", type=int, default=1)
    a.add_argument("--new", type=int, default=2)
    a.add_argument("--ready_ms", type=int, required=True)
    a.add_argument("--publish_ms", type=int, required=True)
    a.add_argument("--swapped_ms", type=int, required=True, help="old version unloaded")
    a.add_argument("--poll_s", type=float, default=1)
    a.add_argument("--min_calls", type=int, default=100)
    a.set_defaults(run=cmd_swap)
    args = p.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
