"""Python client of the rankd gRPC API (rankd.v1.Ranking, grpc.health.v1.Health)
and of its admin API (rankd.v1.ModelControl, on the admin listener).

The protobuf/gRPC stubs are generated, never committed:

    client/python/gen_stubs.sh /tmp/rankd_stubs
    PYTHONPATH=/tmp/rankd_stubs:client/python /usr/bin/python3 my_script.py

Run it with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf).

    from rankd_client import RankingClient
    with RankingClient("localhost:8500", timeout_s=1.0) as client:
        scores = client.score({"model": "mini", "numCandidates": 2, ...})

    from rankd_client import AdminClient
    with AdminClient("localhost:8503") as admin:   # loopback-only by default
        admin.load_model("mini", versions=[3])      # waits: READY or FAILED
        admin.set_version_label("mini", "stable", 3)

Failed calls raise RankdError carrying the server's gRPC status code and
message unchanged (the C++ client's absl::Status keeps the same two).
"""

import importlib.util
import os
import sys

import grpc
from google.protobuf import json_format

try:
    from rankd.v1 import ranking_pb2
    from rankd.v1 import ranking_pb2_grpc
except ImportError as e:  # pragma: no cover - setup error
    raise ImportError(
        "rankd_client: the generated stubs are not importable: run "
        "client/python/gen_stubs.sh OUT_DIR and put OUT_DIR on PYTHONPATH "
        "(" + str(e) + ")") from e

try:
    from rankd.v1 import model_control_pb2
    from rankd.v1 import model_control_pb2_grpc
except ImportError:  # stubs generated before the admin API existed
    model_control_pb2 = model_control_pb2_grpc = None


def _load_health_pb2():
    """The grpc.health.v1 messages.

    The generated module lives at OUT_DIR/grpc/health/v1/health_pb2.py, but
    `grpc` is grpcio's own package, so `import grpc.health.v1` cannot reach it
    (upstream ships these stubs as grpcio-health-checking's `grpc_health`,
    which Debian does not package). Use that package when it is installed;
    otherwise load the generated file by path under a private module name.
    """
    try:
        from grpc_health.v1 import health_pb2  # pylint: disable=import-outside-toplevel
        return health_pb2
    except ImportError:
        pass
    # OUT_DIR is three levels above rankd/v1/ranking_pb2.py; then sys.path.
    roots = [os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(ranking_pb2.__file__))))]
    roots += [p for p in sys.path if p]
    for root in roots:
        path = os.path.join(root, "grpc", "health", "v1", "health_pb2.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_rankd_health_pb2", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError(
        "rankd_client: grpc/health/v1/health_pb2.py not found next to the rankd "
        "stubs: generate both with client/python/gen_stubs.sh OUT_DIR")


health_pb2 = _load_health_pb2()

DEFAULT_TARGET = "localhost:8500"
DEFAULT_TIMEOUT_S = 1.0
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
# The admin listener (rankd serve --admin_host, --admin_port): 127.0.0.1 only
# unless the server is configured otherwise.
DEFAULT_ADMIN_TARGET = "localhost:8503"
DEFAULT_ADMIN_TIMEOUT_S = 10.0
# LoadModel returns when every version is READY or FAILED (files read, tables
# placed, warm-up done) and UnloadModel when they are drained: minutes for a
# large model.
DEFAULT_LOAD_TIMEOUT_S = 600.0


class RankdError(Exception):
    """A failed call: `code` is a grpc.StatusCode, `message` the server's text."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message


def _to_score_request(request):
    """A ScoreRequest from a message, a proto3 JSON dict, or a JSON string."""
    if isinstance(request, ranking_pb2.ScoreRequest):
        return request
    try:
        if isinstance(request, (str, bytes)):
            return json_format.Parse(request, ranking_pb2.ScoreRequest())
        if isinstance(request, dict):
            return json_format.ParseDict(request, ranking_pb2.ScoreRequest())
    except json_format.ParseError as e:
        raise ValueError("not a ScoreRequest in proto3 JSON: %s" % e) from e
    raise TypeError("request: want a rankd.v1.ScoreRequest, a dict or a JSON string, got %s"
                    % type(request).__name__)


def _with_version_label(request, version_label):
    """`request` with version_label set (a copy; the caller's is left alone).

    A request that names a version, or another label, conflicts: ValueError
    rather than silently one or the other (as rankctl score --version_label).
    """
    if not version_label:
        return request
    if request.version != 0:
        raise ValueError("version_label=%r, but the request names version %d"
                         % (version_label, request.version))
    if request.version_label and request.version_label != version_label:
        raise ValueError("version_label=%r, but the request names version_label %r"
                         % (version_label, request.version_label))
    labelled = ranking_pb2.ScoreRequest()
    labelled.CopyFrom(request)
    labelled.version_label = version_label
    return labelled


class _Client:
    """One gRPC channel and the calls over it; the clients below share this."""

    def __init__(self, target, timeout_s, max_message_bytes, options, credentials):
        if not target:
            raise ValueError("target: must not be empty")
        if timeout_s is None or timeout_s <= 0:
            raise ValueError("timeout_s: must be > 0, got %r" % (timeout_s,))
        if max_message_bytes <= 0 or max_message_bytes >= 1 << 31:
            raise ValueError("max_message_bytes: must be in [1, 2^31), got %r"
                             % (max_message_bytes,))
        self.target = target
        self.timeout_s = timeout_s
        channel_options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ] + list(options)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=channel_options)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout_s, metadata, default_timeout_s=None):
        if timeout_s is None:
            timeout_s = self.timeout_s if default_timeout_s is None else default_timeout_s
        try:
            return method(request, timeout=timeout_s, metadata=metadata)
        except grpc.RpcError as e:
            raise RankdError(e.code(), e.details() or "") from e


class RankingClient(_Client):
    """One gRPC channel to a rankd server; thread-safe, meant to be shared.

    Args:
      target: "host:port" (any gRPC target string).
      timeout_s: deadline of each call unless the call passes its own; rankd
        ranks at a latency SLO, so a late answer is failed (DEADLINE_EXCEEDED).
      max_message_bytes: largest message sent or received (gRPC's receive
        default, 4 MiB, is too small for requests of thousands of candidates).
      options: further gRPC channel options, as (name, value) pairs.
      credentials: grpc.ChannelCredentials; None = plaintext.
    """

    def __init__(self, target=DEFAULT_TARGET, timeout_s=DEFAULT_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None):
        super().__init__(target, timeout_s, max_message_bytes, options, credentials)
        self._ranking = ranking_pb2_grpc.RankingStub(self._channel)
        # Only Check is used; built here rather than through the generated
        # health_pb2_grpc, which imports `grpc.health.v1` (see _load_health_pb2).
        self._health_check = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)

    def score_response(self, request, timeout_s=None, metadata=None, version_label=None):
        """Scores one request; returns the rankd.v1.ScoreResponse."""
        request = _with_version_label(_to_score_request(request), version_label)
        return self._call(self._ranking.Score, request, timeout_s, metadata)

    def score(self, request, timeout_s=None, metadata=None, version_label=None):
        """Scores one request; returns its scores, one float per candidate.

        `request`: a rankd.v1.ScoreRequest, its proto3 JSON dict
        ({"model": "mini", "numCandidates": 2, "dense": [...], "sparse": [...]};
        field names in either lowerCamel or snake_case), or a JSON string.
        `version_label`: score with the version a label of the model points at
        (e.g. "stable"); the request may carry one itself ("versionLabel").
        """
        return list(self.score_response(request, timeout_s, metadata, version_label).scores)

    def model_info(self, name, version=0, timeout_s=None, version_label=""):
        """The rankd.v1.ModelInfo of a served model (version 0 = newest ready,
        or the version `version_label` points at)."""
        if version and version_label:
            raise ValueError("give version or version_label, not both")
        request = ranking_pb2.GetModelInfoRequest(model=name, version=version,
                                                  version_label=version_label)
        return self._call(self._ranking.GetModelInfo, request, timeout_s, None)

    def health(self, service="", timeout_s=None):
        """The serving status name: "SERVING", "NOT_SERVING", "UNKNOWN" or
        "SERVICE_UNKNOWN" (a service the server does not know; NOT_FOUND in
        the health protocol). service "" = the server, or a model name."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            response = self._call(self._health_check, request, timeout_s, None)
        except RankdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


class AdminClient(_Client):
    """One gRPC channel to rankd's admin listener (rankd.v1.ModelControl).

    The server serves this API only there (default 127.0.0.1:8503), never on
    its public port. Thread-safe. Failed calls raise RankdError with the
    server's code and message: NOT_FOUND naming what exists for an unknown
    model or version, FAILED_PRECONDITION for a label on a version that is
    not READY.

    Args:
      target: the admin listener's "host:port".
      timeout_s: deadline of list_models and set_version_label.
      load_timeout_s: deadline of load_model and unload_model, which wait for
        versions to load (or fail) and to drain.
      max_message_bytes, options, credentials: as for RankingClient. Off
        loopback the admin listener wants mTLS (credentials) or a token
        (pass it as `metadata` of each call).
    """

    def __init__(self, target=DEFAULT_ADMIN_TARGET, timeout_s=DEFAULT_ADMIN_TIMEOUT_S,
                 load_timeout_s=DEFAULT_LOAD_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None):
        if model_control_pb2 is None:
            raise ImportError(
                "rankd_client: rankd/v1/model_control_pb2.py is not importable: regenerate "
                "the stubs with client/python/gen_stubs.sh OUT_DIR")
        if load_timeout_s is None or load_timeout_s <= 0:
            raise ValueError("load_timeout_s: must be > 0, got %r" % (load_timeout_s,))
        super().__init__(target, timeout_s, max_message_bytes, options, credentials)
        self.load_timeout_s = load_timeout_s
        self._control = model_control_pb2_grpc.ModelControlStub(self._channel)

    def list_models(self, model="", timeout_s=None, metadata=None):
        """The rankd.v1.ListModelsResponse: every model (model "" ) or one,
        with each version's state, reason, labels, timings and memory."""
        request = model_control_pb2.ListModelsRequest(model=model)
        return self._call(self._control.ListModels, request, timeout_s, metadata)

    def load_model(self, model, versions=(), timeout_s=None, metadata=None):
        """Loads (or reloads) `versions` of `model` (none = what its version
        policy selects); returns the rankd.v1.LoadModelResponse once each is
        READY or FAILED. A version that failed to load is not an exception:
        see its state and reason in response.model.versions."""
        request = model_control_pb2.LoadModelRequest(model=model, versions=list(versions))
        return self._call(self._control.LoadModel, request, timeout_s, metadata,
                          self.load_timeout_s)

    def unload_model(self, model, versions=(), timeout_s=None, metadata=None):
        """Drains and unloads `versions` of `model` (none = all of them);
        returns the rankd.v1.UnloadModelResponse."""
        request = model_control_pb2.UnloadModelRequest(model=model, versions=list(versions))
        return self._call(self._control.UnloadModel, request, timeout_s, metadata,
                          self.load_timeout_s)

    def set_version_label(self, model, label, version, timeout_s=None, metadata=None):
        """Points `label` of `model` at `version` (which must be READY), or
        removes the label (version 0); returns the
        rankd.v1.SetVersionLabelResponse."""
        request = model_control_pb2.SetVersionLabelRequest(model=model, label=label,
                                                           version=version)
        return self._call(self._control.SetVersionLabel, request, timeout_s, metadata)
