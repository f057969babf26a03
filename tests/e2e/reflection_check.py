"""Checks rankd's server reflection with the standard grpc.reflection.v1alpha
protocol, as grpcurl would use it: list_services, file_containing_symbol, and
a Score call made only from the descriptors the server sent.

Usage (Debian's /usr/bin/python3, python3-grpcio + python3-grpc-tools):
  reflection_check.py --target 127.0.0.1:PORT --stubs_dir DIR \
      [--request_json REQ.jsonl --expected_json RESP.jsonl]

The Python stubs of tests/e2e/grpc/reflection/v1alpha/reflection.proto are
generated into --stubs_dir with grpc_tools.protoc. They are generated with the
proto's own directory as the include root (modules `reflection_pb2`,
`reflection_pb2_grpc`): under the standard path they would be
`grpc.reflection.v1alpha.*`, which grpcio's own `grpc` package shadows.
The wire protocol (service and message names) is the standard one either way.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format

try:  # protobuf >= 4.21
    from google.protobuf.message_factory import GetMessageClass as _get_message_class
except ImportError:  # Debian's 3.x
    _get_message_class = None
    from google.protobuf import message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "grpc", "reflection", "v1alpha")

failures = []


def check(cond, what):
    if cond:
        print("ok: " + what, file=sys.stderr)
    else:
        print("FAIL: " + what, file=sys.stderr)
        failures.append(what)


def generate_stubs(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR,
                    "--python_out=" + out_dir, "--grpc_python_out=" + out_dir,
                    os.path.join(PROTO_DIR, "reflection.proto")], check=True, timeout=60)
    sys.path.insert(0, out_dir)


def message_class(pool, name):
    desc = pool.FindMessageTypeByName(name)
    if _get_message_class is not None:
        return _get_message_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--stubs_dir", required=True)
    p.add_argument("--service", default="rankd.v1.Ranking")
    p.add_argument("--request_json", default="")
    p.add_argument("--expected_json", default="")
    args = p.parse_args()

    generate_stubs(args.stubs_dir)
    import reflection_pb2  # pylint: disable=import-outside-toplevel,import-error
    import reflection_pb2_grpc  # pylint: disable=import-outside-toplevel,import-error

    channel = grpc.insecure_channel(args.target)
    grpc.channel_ready_future(channel).result(timeout=10)
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    def ask(requests):
        return list(stub.ServerReflectionInfo(iter(requests), timeout=10))

    # 1. list_services.
    [resp] = ask([reflection_pb2.ServerReflectionRequest(list_services="")])
    check(resp.WhichOneof("message_response") == "list_services_response",
          "list_services answered with list_services_response (got %s)"
          % resp.WhichOneof("message_response"))
    names = sorted(s.name for s in resp.list_services_response.service)
    print("services: %s" % names, file=sys.stderr)
    for want in (args.service, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"):
        check(want in names, "list_services lists %s" % want)

    # 2. file_containing_symbol for the service, its method, a message; and an
    # unknown symbol, on one stream.
    resps = ask([
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=args.service),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=args.service + ".Score"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="rankd.v1.ScoreRequest"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="rankd.v1.NoSuchThing"),
    ])
    check(len(resps) == 4, "4 answers on one stream (got %d)" % len(resps))
    files = {}
    for r in resps[:3]:
        check(r.WhichOneof("message_response") == "file_descriptor_response",
              "file_containing_symbol %s answered with file_descriptor_response (got %s: %s)"
              % (r.original_request.file_containing_symbol, r.WhichOneof("message_response"),
                 r.error_response.error_message))
        for raw in r.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[fd.name] = fd
    print("files: %s" % sorted(files), file=sys.stderr)
    if len(resps) == 4:
        err = resps[3]
        check(err.WhichOneof("message_response") == "error_response"
              and err.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0],
              "unknown symbol answered NOT_FOUND (got %s %s)"
              % (err.WhichOneof("message_response"), err.error_response))

    ranking = [fd for fd in files.values() if any(
        fd.package + "." + s.name == args.service for s in fd.service)]
    check(len(ranking) == 1, "one file declares %s" % args.service)
    if not ranking:
        return 1
    fd = ranking[0]
    check(fd.name == "rankd/v1/ranking.proto", "it is rankd/v1/ranking.proto (got %s)" % fd.name)
    svc = [s for s in fd.service if fd.package + "." + s.name == args.service][0]
    methods = {m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
               for m in svc.method}
    check(methods.get("Score") == (".rankd.v1.ScoreRequest", ".rankd.v1.ScoreResponse", False, False),
          "Score(ScoreRequest) returns (ScoreResponse), unary (got %s)" % (methods.get("Score"),))
    check(methods.get("GetModelInfo") == (".rankd.v1.GetModelInfoRequest", ".rankd.v1.ModelInfo",
                                          False, False),
          "GetModelInfo(GetModelInfoRequest) returns (ModelInfo) (got %s)"
          % (methods.get("GetModelInfo"),))

    # 3. The wire contract (DESIGN.md) from the reflected descriptors alone.
    pool = descriptor_pool.DescriptorPool()
    pending = dict(files)
    while pending:  # add dependencies first
        progress = False
        for name, f in list(pending.items()):
            if all(d not in pending for d in f.dependency):
                pool.Add(f)
                del pending[name]
                progress = True
        if not progress:
            check(False, "reflected files' dependencies are all sent (missing for %s)"
                  % sorted(pending))
            return 1
    contract = {
        "rankd.v1.ScoreRequest": {"model": 1, "version": 2, "num_candidates": 3, "dense": 4,
                                  "sparse": 5},
        "rankd.v1.SparseFeature": {"name": 1, "ids": 2, "lengths": 3, "weights": 4},
        "rankd.v1.ScoreResponse": {"scores": 1, "model": 2, "version": 3},
    }
    for msg, fields in contract.items():
        desc = pool.FindMessageTypeByName(msg)
        got = {f.name: f.number for f in desc.fields if f.name in fields}
        check(got == fields, "%s field numbers %s (got %s)" % (msg, fields, got))

    # 4. A Score call built from the reflected descriptors only (like grpcurl).
    if args.request_json:
        req_cls = message_class(pool, "rankd.v1.ScoreRequest")
        resp_cls = message_class(pool, "rankd.v1.ScoreResponse")
        with open(args.request_json) as f:
            line = f.readline()
        with open(args.expected_json) as f:
            expected = json.loads(f.readline())
        request = json_format.Parse(line, req_cls())
        score = channel.unary_unary("/%s/Score" % args.service,
                                    request_serializer=req_cls.SerializeToString,
                                    response_deserializer=resp_cls.FromString)
        response = score(request, timeout=10)
        got = [struct.pack("<f", s) for s in response.scores]
        want = [struct.pack("<f", float(s)) for s in expected["scores"]]
        check(got == want, "Score through reflected descriptors: %d scores bit-exact"
              % len(want))
    channel.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
