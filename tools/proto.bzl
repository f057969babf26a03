"""C++ (and gRPC) code from .proto files with Debian's protoc, offline.

Proto files live under //protos and import each other as "rankd/v1/x.proto".
"""

def rankd_cc_proto(name, src, proto_deps = [], deps = [], grpc = False, visibility = None):
    """Generates <src>.pb.{h,cc} (and .grpc.pb.{h,cc} when grpc) as a cc_library.

    Args:
      name: the cc_library's name.
      src: the .proto file, relative to //protos (e.g. "rankd/v1/ranking.proto").
      proto_deps: other .proto files (same form) that `src` imports.
      deps: cc_library targets generated from those imports.
      grpc: also generate the gRPC service stubs.
      visibility: of the cc_library.
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    plugin = ""
    grpc_out = ""
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        plugin = " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
        grpc_out = " --grpc_out=$(GENDIR)/protos"
    native.genrule(
        name = name + "_gen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = "/usr/bin/protoc -Iprotos --cpp_out=$(GENDIR)/protos" + grpc_out + plugin +
              " protos/" + src,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["@system_protobuf//:lib"] + (["@system_grpc//:lib"] if grpc else []),
        visibility = visibility,
    )
