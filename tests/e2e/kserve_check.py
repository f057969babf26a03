#!/usr/bin/env python3
"""The KServe v2 (Open Inference Protocol) front end of rankd, driven with
Python grpcio and stubs compiled from the test's own copy of the protocol
(tests/e2e/kserve/grpc_predict_v2.proto), as a Triton or KServe client
would.

  infer:  each rankd.v1.ScoreRequest of --input (JSON lines) sent as a
          ModelInferRequest (--form typed | raw); the scores written as
          ScoreResponse JSON lines (for e2e_util.py compare).
  checks: live / ready, server and model metadata, and the protocol's
          errors (wrong datatype, wrong shape, missing tensor, unknown
          model), each answered with the right code and a message naming
          the tensor.
"""
import argparse
import json
import struct
import sys

import grpc
import numpy as np

import grpc_predict_v2_pb2 as pb
import grpc_predict_v2_pb2_grpc as pb_grpc


def to_infer(req, form):
    """A ScoreRequest (proto3 JSON dict) as a ModelInferRequest."""
    n = int(req["numCandidates"])
    out = pb.ModelInferRequest(model_name=req["model"], id="req-%d" % n)
    if req.get("version"):
        out.model_version = str(req["version"])
    tensors = []  # (name, datatype, shape, numpy array)
    dense = np.array(req.get("dense", []), dtype=np.float32)
    if dense.size:
        tensors.append(("dense", "FP32", [n, dense.size // n], dense))
    for f in req["sparse"]:
        ids = np.array([int(i) for i in f.get("ids", [])], dtype=np.int64)
        lengths = np.array(f.get("lengths", []), dtype=np.int32)
        tensors.append((f["name"], "INT64", [ids.size], ids))
        tensors.append((f["name"] + ".lengths", "INT32", [lengths.size], lengths))
        if f.get("weights"):
            w = np.array(f["weights"], dtype=np.float32)
            tensors.append((f["name"] + ".weights", "FP32", [w.size], w))
    for name, dt, shape, arr in tensors:
        t = out.inputs.add(name=name, datatype=dt, shape=shape)
        if form == "raw":
            out.raw_input_contents.append(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        elif dt == "FP32":
            t.contents.fp32_contents.extend(arr.tolist())
        elif dt == "INT64":
            t.contents.int64_contents.extend(arr.tolist())
        else:
            t.contents.int_contents.extend(arr.tolist())
    return out


def scores_of(resp, form):
    assert len(resp.outputs) == 1, resp
    o = resp.outputs[0]
    assert o.name == "scores" and o.datatype == "FP32", o
    n = o.shape[0]
    if form == "raw":
        assert len(resp.raw_output_contents) == 1 and not o.HasField("contents"), resp
        return list(struct.unpack("<%df" % n, resp.raw_output_contents[0]))
    assert len(resp.raw_output_contents) == 0, "typed request answered raw"
    return list(o.contents.fp32_contents)


def cmd_infer(args, stub):
    with open(args.input) as f, open(args.output, "w") as out:
        for line in f:
            req = json.loads(line)
            resp = stub.ModelInfer(to_infer(req, args.form), timeout=60)
            assert resp.id == "req-%d" % int(req["numCandidates"]), resp.id
            scores = scores_of(resp, args.form)
            # Each float32 exactly: repr of the double it widens to.
            out.write(json.dumps({"scores": [float(s) for s in scores],
                                  "model": resp.model_name,
                                  "version": resp.model_version}) + "\n")


def expect_error(stub, req, code, *needles):
    try:
        stub.ModelInfer(req, timeout=30)
    except grpc.RpcError as e:
        if e.code() != code or not all(s in e.details() for s in needles):
            sys.exit("want %s with %s, got %s: %s" % (code, needles, e.code(), e.details()))
        return
    sys.exit("want %s with %s, got OK" % (code, needles))


def cmd_checks(args, stub):
    assert stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10)
    assert meta.name == "rankd" and meta.version, meta
    assert stub.ModelReady(pb.ModelReadyRequest(name=args.model), timeout=10).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name=args.model, version="1"), timeout=10).ready
    try:
        stub.ModelReady(pb.ModelReadyRequest(name="no_such_model"), timeout=10)
        sys.exit("ModelReady of an unknown model answered OK")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e
    req = json.loads(open(args.input).readline())
    mm = stub.ModelMetadata(pb.ModelMetadataRequest(name=args.model), timeout=10)
    assert mm.name == args.model and "1" in mm.versions, mm
    got = [(t.name, t.datatype, list(t.shape)) for t in mm.inputs]
    want = [("dense", "FP32", [-1, len(req["dense"]) // int(req["numCandidates"])])]
    for f in req["sparse"]:
        want += [(f["name"], "INT64", [-1]), (f["name"] + ".lengths", "INT32", [-1]),
                 (f["name"] + ".weights", "FP32", [-1])]
    assert got == want, "ModelMetadata inputs %s, want %s" % (got, want)
    assert [(t.name, t.datatype, list(t.shape)) for t in mm.outputs] == [("scores", "FP32", [-1])]

    good = to_infer(req, "typed")
    bad = pb.ModelInferRequest(); bad.CopyFrom(good)
    bad.inputs[0].datatype = "FP64"
    expect_error(stub, bad, grpc.StatusCode.INVALID_ARGUMENT, 'input "dense"', "FP32")
    bad.CopyFrom(good); bad.inputs[0].shape[1] += 1
    expect_error(stub, bad, grpc.StatusCode.INVALID_ARGUMENT, 'input "dense"', "shape")
    bad.CopyFrom(good); del bad.inputs[1]
    expect_error(stub, bad, grpc.StatusCode.INVALID_ARGUMENT, req["sparse"][0]["name"], "missing")
    bad.CopyFrom(good); bad.model_name = "no_such_model"
    expect_error(stub, bad, grpc.StatusCode.NOT_FOUND, "no_such_model")
    bad.CopyFrom(good); bad.raw_input_contents.append(b"\0" * 4)
    expect_error(stub, bad, grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents")
    print("kserve checks: ok")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["infer", "checks"])
    p.add_argument("--target", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output")
    p.add_argument("--form", choices=["typed", "raw"], default="typed")
    p.add_argument("--model", default="")
    args = p.parse_args()
    with grpc.insecure_channel(args.target) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        (cmd_infer if args.command == "infer" else cmd_checks)(args, stub)


if __name__ == "__main__":
    main()
