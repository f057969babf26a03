#!/usr/bin/env python3
"""Helpers of http_test.sh (rankd's HTTP listener, called with curl).

  bodies:  each rankd.v1.ScoreRequest of --input (JSON lines) written as
           DIR/native_<i>.json (the line itself, for POST /v1/models/{m}:score)
           and DIR/kserve_<i>.json (KServe v2 REST JSON tensors, written from
           the published protocol: dense as nested rows, the rest flat).
  collect: the answers curl saved (DIR/<kind>_<i>.out) as ScoreResponse JSON
           lines, for e2e_util.py compare.
  bad:     KServe bodies that break the protocol, one file per case.
  idle:    opens idle and trickling connections to the HTTP port, then checks
           that a new connection is still answered at once.
"""
import argparse
import json
import os
import socket
import sys
import time


def kserve_body(req):
    n = int(req["numCandidates"])
    inputs = []
    dense = req.get("dense", [])
    if dense:
        width = len(dense) // n
        rows = [dense[i * width:(i + 1) * width] for i in range(n)]
        inputs.append({"name": "dense", "datatype": "FP32", "shape": [n, width], "data": rows})
    for f in req["sparse"]:
        ids = [int(i) for i in f.get("ids", [])]
        inputs.append({"name": f["name"], "datatype": "INT64", "shape": [len(ids)], "data": ids})
        lengths = f.get("lengths", [])
        inputs.append({"name": f["name"] + ".lengths", "datatype": "INT32",
                       "shape": [len(lengths)], "data": lengths})
        if f.get("weights"):
            inputs.append({"name": f["name"] + ".weights", "datatype": "FP32",
                           "shape": [len(f["weights"])], "data": f["weights"]})
    return {"id": "req-%d" % n, "inputs": inputs, "outputs": [{"name": "scores"}]}


def cmd_bodies(args):
    with open(args.input) as f:
        lines = [line for line in f if line.strip()]
    for i, line in enumerate(lines):
        with open(os.path.join(args.dir, "native_%d.json" % i), "w") as out:
            out.write(line)
        with open(os.path.join(args.dir, "kserve_%d.json" % i), "w") as out:
            json.dump(kserve_body(json.loads(line)), out)
    print(len(lines))


def cmd_collect(args):
    with open(args.output, "w") as out:
        for i in range(args.count):
            with open(os.path.join(args.dir, "%s_%d.out" % (args.kind, i))) as f:
                resp = json.load(f)
            if args.kind == "kserve":
                (o,) = resp["outputs"]
                assert o["name"] == "scores" and o["datatype"] == "FP32", o
                assert o["shape"] == [len(o["data"])], o
                assert resp["id"].startswith("req-"), resp
                scores, model, version = o["data"], resp["model_name"], resp["model_version"]
            else:
                scores, model, version = resp["scores"], resp["model"], resp["version"]
            out.write(json.dumps({"scores": [float(s) for s in scores], "model": model,
                                  "version": version}) + "\n")


def cmd_bad(args):
    with open(args.input) as f:
        req = json.loads(f.readline())
    good = kserve_body(req)

    def write(name, body):
        with open(os.path.join(args.dir, "bad_%s.json" % name), "w") as out:
            json.dump(body, out)

    b = json.loads(json.dumps(good))
    b["inputs"][0]["datatype"] = "INT64"
    b["inputs"][0]["data"] = [[int(x) for x in row] for row in b["inputs"][0]["data"]]
    write("datatype", b)
    b = json.loads(json.dumps(good))
    b["inputs"][0]["shape"] = [b["inputs"][0]["shape"][0] * b["inputs"][0]["shape"][1]]
    write("shape", b)
    b = json.loads(json.dumps(good))
    b["inputs"] = [t for t in b["inputs"] if not t["name"].endswith(".lengths")]
    write("missing", b)


def cmd_idle(args):
    """Holds --idle silent connections and --slow ones that sent half a
    request line, then times a request on a new connection."""
    held = []
    for _ in range(args.idle):
        held.append(socket.create_connection(("127.0.0.1", args.port), timeout=5))
    for _ in range(args.slow):
        s = socket.create_connection(("127.0.0.1", args.port), timeout=5)
        s.sendall(b"GET /v2/health/li")
        held.append(s)
    time.sleep(0.3)  # every held connection has been accepted and handed a thread
    start = time.monotonic()
    s = socket.create_connection(("127.0.0.1", args.port), timeout=args.within_s)
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    took = time.monotonic() - start
    for h in held:
        h.close()
    head = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    print("idle: %d held, answered %r in %.3f s" % (len(held), head, took))
    if not head.startswith("HTTP/1.1 200") or took > args.within_s:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(required=True)
    c = sub.add_parser("bodies")
    c.add_argument("--input", required=True)
    c.add_argument("--dir", required=True)
    c.set_defaults(fn=cmd_bodies)
    c = sub.add_parser("collect")
    c.add_argument("--dir", required=True)
    c.add_argument("--kind", choices=["native", "kserve"], required=True)
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--output", required=True)
    c.set_defaults(fn=cmd_collect)
    c = sub.add_parser("bad")
    c.add_argument("--input", required=True)
    c.add_argument("--dir", required=True)
    c.set_defaults(fn=cmd_bad)
    c = sub.add_parser("idle")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--idle", type=int, default=40)
    c.add_argument("--slow", type=int, default=40)
    c.add_argument("--within_s", type=float, default=1.0)
    c.set_defaults(fn=cmd_idle)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
