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
        # Online embedding updates (numpy arrays), resumed and retried:
        admin.update_embeddings("mini", "t_item", ids, rows, delete_keys=gone)
        admin.save_snapshot("mini")

    update_all_replicas("rankd-headless.ns.svc.cluster.local:8503", "mini", "t_item",
                        ids, rows)                 # every pod behind the name

Failed calls raise RankdError carrying the server's gRPC status code and
message unchanged (the C++ client's absl::Status keeps the same two).
"""

import concurrent.futures
import importlib.util
import os
import socket
import sys
import time

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
# One UpdateEmbeddings stream (each attempt) and SaveSnapshot.
DEFAULT_UPDATE_TIMEOUT_S = 600.0
DEFAULT_ROWS_PER_MESSAGE = 4096
# Row payload per message: under gRPC's default 4 MiB receive limit.
DEFAULT_MAX_PAYLOAD_BYTES = 3 << 20
DEFAULT_RETRIES = 3


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


def _read_small_file(name, path):
    try:
        with open(path, "rb") as f:
            data = f.read((1 << 20) + 1)
    except OSError as e:
        raise ValueError("%s: %s: %s" % (name, path, e.strerror)) from e
    if len(data) > 1 << 20:
        raise ValueError("%s: %s: larger than 1 MiB" % (name, path))
    return data


def _tls_credentials(ca_file, cert_file, key_file):
    """grpc.ssl_channel_credentials from PEM files (client certificate: mTLS)."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("tls_cert_file and tls_key_file: give both or neither")
    root = _read_small_file("tls_ca_file", ca_file)
    if b"-----BEGIN CERTIFICATE-----" not in root:
        raise ValueError("tls_ca_file: %s: no PEM certificate in it" % ca_file)
    chain = _read_small_file("tls_cert_file", cert_file) if cert_file else None
    key = _read_small_file("tls_key_file", key_file) if key_file else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                        certificate_chain=chain)


def _read_token(path):
    token = _read_small_file("token_file", path).decode("ascii", "replace").strip()
    if not token or any(c <= " " or c > "~" for c in token):
        raise ValueError("token_file: %s: the token must be printable ASCII without spaces"
                         % path)
    return token


class _Client:
    """One gRPC channel and the calls over it; the clients below share this."""

    def __init__(self, target, timeout_s, max_message_bytes, options, credentials,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None):
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
        if tls_ca_file:
            if credentials is not None:
                raise ValueError("give credentials or tls_ca_file, not both")
            credentials = _tls_credentials(tls_ca_file, tls_cert_file, tls_key_file)
        elif tls_cert_file or tls_key_file:
            raise ValueError("tls_cert_file / tls_key_file: need tls_ca_file (mTLS is TLS first)")
        self._token = _read_token(token_file) if token_file else ""
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

    def _metadata(self, metadata):
        """`metadata` plus the bearer token of token_file, if any."""
        if not self._token:
            return metadata
        return list(metadata or ()) + [("authorization", "Bearer " + self._token)]

    def _call(self, method, request, timeout_s, metadata, default_timeout_s=None):
        if timeout_s is None:
            timeout_s = self.timeout_s if default_timeout_s is None else default_timeout_s
        try:
            return method(request, timeout=timeout_s, metadata=self._metadata(metadata))
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
      tls_ca_file: PEM CAs of the server's certificate: TLS (instead of
        `credentials`); tls_cert_file / tls_key_file: this client's
        certificate and key, for a server that requires one (mTLS).
      token_file: a file holding a bearer token sent with every call.
    """

    def __init__(self, target=DEFAULT_TARGET, timeout_s=DEFAULT_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None):
        super().__init__(target, timeout_s, max_message_bytes, options, credentials,
                         tls_ca_file, tls_cert_file, tls_key_file, token_file)
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
      update_timeout_s: deadline of each UpdateEmbeddings stream and of
        save_snapshot.
      retry_backoff_s: wait before the first retry of an update stream
        (doubled for each next one, at most 10 s).
      max_message_bytes, options, credentials, tls_ca_file, tls_cert_file,
        tls_key_file, token_file: as for RankingClient. Off loopback the admin
        listener wants mTLS or a token (rankd serve --admin_token_file).
    """

    def __init__(self, target=DEFAULT_ADMIN_TARGET, timeout_s=DEFAULT_ADMIN_TIMEOUT_S,
                 load_timeout_s=DEFAULT_LOAD_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None,
                 update_timeout_s=DEFAULT_UPDATE_TIMEOUT_S, retry_backoff_s=0.2,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None):
        if model_control_pb2 is None:
            raise ImportError(
                "rankd_client: rankd/v1/model_control_pb2.py is not importable: regenerate "
                "the stubs with client/python/gen_stubs.sh OUT_DIR")
        if load_timeout_s is None or load_timeout_s <= 0:
            raise ValueError("load_timeout_s: must be > 0, got %r" % (load_timeout_s,))
        super().__init__(target, timeout_s, max_message_bytes, options, credentials,
                         tls_ca_file, tls_cert_file, tls_key_file, token_file)
        if update_timeout_s is None or update_timeout_s <= 0:
            raise ValueError("update_timeout_s: must be > 0, got %r" % (update_timeout_s,))
        if retry_backoff_s < 0:
            raise ValueError("retry_backoff_s: must be >= 0, got %r" % (retry_backoff_s,))
        self.load_timeout_s = load_timeout_s
        self.update_timeout_s = update_timeout_s
        self.retry_backoff_s = retry_backoff_s
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

    def save_snapshot(self, model, version=0, new_version=0, timeout_s=None, metadata=None):
        """Writes `version` of `model` (0 = its newest READY one), every
        update applied, as version `new_version` (0 = one above the
        repository's highest), which the server then serves in place.
        Returns the rankd.v1.SaveSnapshotResponse (version, directory, bytes,
        seconds, model). Never retried."""
        request = model_control_pb2.SaveSnapshotRequest(model=model, version=version,
                                                        new_version=new_version)
        return self._call(self._control.SaveSnapshot, request, timeout_s, metadata,
                          self.update_timeout_s)

    def next_sequence(self, model, table, producer_id, version=0, timeout_s=None,
                      metadata=None):
        """One past the last sequence `producer_id` applied to `table` of
        `model` (ListModels; the highest over the targeted versions: `version`,
        or with 0 every LOADING or READY one); 1 when it never did."""
        models = self.list_models(model, timeout_s=timeout_s, metadata=metadata).models
        last = 0
        for status in models:
            last = max(last, last_sequences(status, version, producer_id).get(table, 0))
        return last + 1

    def send_updates(self, messages, retries=DEFAULT_RETRIES, timeout_s=None, metadata=None):
        """Streams rankd.v1.EmbeddingUpdate `messages` in order over one
        UpdateEmbeddings call; returns (UpdateSummary, attempts). A stream
        that failed with UNAVAILABLE or DEADLINE_EXCEEDED (no answer) is sent
        again whole, same sequence numbers (the server skips what it already
        applied), up to `retries` times with doubling backoff; other errors
        raise RankdError with the server's message at once."""
        messages = list(messages)
        timeout_s = self.update_timeout_s if timeout_s is None else timeout_s
        backoff = self.retry_backoff_s
        attempt = 0
        while True:
            attempt += 1
            try:
                summary = self._control.UpdateEmbeddings(iter(messages), timeout=timeout_s,
                                                         metadata=self._metadata(metadata))
                return summary, attempt
            except grpc.RpcError as e:
                code = e.code()
                retryable = code in (grpc.StatusCode.UNAVAILABLE,
                                     grpc.StatusCode.DEADLINE_EXCEEDED)
                if not retryable or attempt > retries:
                    details = e.details() or ""
                    if retryable and attempt > 1:
                        details += " (after %d attempts)" % attempt
                    raise RankdError(code, details) from e
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    def update_embeddings(self, model, table, ids, rows, delete_keys=None, version=0,
                          producer_id=None, start_sequence=None,
                          rows_per_message=DEFAULT_ROWS_PER_MESSAGE, retries=DEFAULT_RETRIES,
                          timeout_s=None, metadata=None):
        """Writes `rows` of `ids` into `table` of `model` (version 0 = every
        live version) and deletes `delete_keys` (dynamic tables), streamed as
        UpdateEmbeddings messages (split_table_delta) with retries
        (send_updates). Returns the rankd.v1.UpdateSummary.

        ids: int64 [n]; rows: [n, dim] numpy float32 (sent as `rows`),
        float16 (raw fp16 bytes) or uint16 (raw bf16 bytes), or None with no
        ids; delete_keys: int64 [m] or None. producer_id: default
        "rankd_client@<hostname>". start_sequence None: resume after the
        server's last sequence of this producer and table (ListModels).
        """
        producer_id = producer_id or default_producer_id("rankd_client")
        if start_sequence is None:
            start_sequence = self.next_sequence(model, table, producer_id, version,
                                                metadata=metadata)
        messages = split_table_delta(model, table, ids, rows, delete_keys, version=version,
                                     producer_id=producer_id, start_sequence=start_sequence,
                                     rows_per_message=rows_per_message)
        summary, _ = self.send_updates(messages, retries, timeout_s, metadata)
        return summary

    def set_version_label(self, model, label, version, timeout_s=None, metadata=None):
        """Points `label` of `model` at `version` (which must be READY), or
        removes the label (version 0); returns the
        rankd.v1.SetVersionLabelResponse."""
        request = model_control_pb2.SetVersionLabelRequest(model=model, label=label,
                                                           version=version)
        return self._call(self._control.SetVersionLabel, request, timeout_s, metadata)


# --- Online embedding updates ---------------------------------------------------

def default_producer_id(prefix="rankd_client"):
    """"<prefix>@<hostname>": stable across runs on one machine (a rerun
    resumes where the last one stopped), distinct between machines."""
    return "%s@%s" % (prefix, socket.gethostname() or "localhost")


def last_sequences(model_status, version, producer_id):
    """{table: last sequence} that `producer_id` applied to a
    rankd.v1.ModelStatus: the highest over `version`, or with 0 every LOADING
    or READY version."""
    live = (model_control_pb2.READY, model_control_pb2.LOADING)
    last = {}
    for v in model_status.versions:
        if (v.version != version) if version else (v.state not in live):
            continue
        for p in v.update_positions:
            if p.producer_id == producer_id:
                last[p.table] = max(last.get(p.table, 0), p.last_sequence)
    return last


def split_table_delta(model, table, ids, rows, delete_keys=None, version=0, producer_id="",
                      start_sequence=1, rows_per_message=DEFAULT_ROWS_PER_MESSAGE,
                      max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES, timestamp_unix_us=None):
    """One table's delta as rankd.v1.EmbeddingUpdate messages, in order:
    delete keys first (as many per message as fit), then rows; at most
    `rows_per_message` rows and about `max_payload_bytes` of rows, ids and
    keys per message; sequences start_sequence, +1, ... (0: every message 0,
    no de-duplication); every timestamp_unix_us = now unless given.
    ValueError / TypeError naming the problem for bad input."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    if not table:
        raise ValueError("table: must not be empty")
    if start_sequence and not producer_id:
        raise ValueError("producer_id: required with a sequence number")
    if start_sequence < 0:
        raise ValueError("start_sequence: must be >= 0, got %r" % (start_sequence,))
    if rows_per_message < 1:
        raise ValueError("rows_per_message: must be >= 1, got %r" % (rows_per_message,))
    ids = np.asarray([] if ids is None else ids)
    if ids.size == 0:
        ids = ids.astype(np.int64)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError("ids: want a 1-D integer array, got %s %s" % (ids.dtype, ids.shape))
    ids = ids.astype(np.int64, copy=False)
    keys = np.asarray([] if delete_keys is None else delete_keys)
    if keys.size == 0:
        keys = keys.astype(np.int64)
    if keys.ndim != 1 or not np.issubdtype(keys.dtype, np.integer):
        raise TypeError("delete_keys: want a 1-D integer array, got %s %s"
                        % (keys.dtype, keys.shape))
    keys = keys.astype(np.int64, copy=False)
    n = len(ids)
    if n:
        if rows is None:
            raise ValueError("rows: required with ids")
        rows = np.asarray(rows)
        if rows.dtype not in (np.float32, np.float16, np.uint16):
            raise TypeError("rows: want float32, float16 or uint16 (raw bf16), got %s "
                            "(convert with rows.astype(np.float32))" % rows.dtype)
        if rows.ndim != 2 or rows.shape[0] != n or rows.shape[1] < 1:
            raise ValueError("rows: want [%d, dim], got %s" % (n, list(rows.shape)))
        rows = np.ascontiguousarray(rows)
    elif rows is not None and np.asarray(rows).size:
        raise ValueError("rows without ids")
    if len(np.unique(ids)) != n:
        raise ValueError("ids: not unique in table %r" % table)
    both = np.intersect1d(ids, keys)
    if both.size:
        raise ValueError("key %d is both deleted and written in table %r" % (both[0], table))
    if len(np.unique(keys)) != len(keys):
        raise ValueError("delete_keys: not unique in table %r" % table)
    timestamp = timestamp_unix_us or int(time.time() * 1e6)
    row_cost = (rows.shape[1] * rows.dtype.itemsize + 8) if n else 8
    messages = []
    sequence = start_sequence
    next_key = next_row = 0
    while next_key < len(keys) or next_row < n:
        m = model_control_pb2.EmbeddingUpdate(model=model, version=version, table=table,
                                              producer_id=producer_id, sequence=sequence,
                                              timestamp_unix_us=timestamp)
        if start_sequence:
            sequence += 1
        budget = max_payload_bytes
        take = min(len(keys) - next_key, budget // 8)
        m.delete_keys.extend(keys[next_key:next_key + take].tolist())
        next_key += take
        budget -= take * 8
        messages.append(m)
        if next_key < len(keys):
            continue
        count = min(n - next_row, rows_per_message, budget // row_cost)
        if count == 0 and n > next_row and take == 0:
            count = 1  # a row larger than the budget goes alone
        if count == 0:
            continue
        m.ids.extend(ids[next_row:next_row + count].tolist())
        chunk = rows[next_row:next_row + count]
        if chunk.dtype == np.float32:
            m.rows.extend(chunk.reshape(-1).tolist())
        else:
            m.raw_rows = chunk.astype(chunk.dtype.newbyteorder("<"), copy=False).tobytes()
        next_row += count
    return messages


def resolve_replicas(target):
    """Every address "host:port" resolves to (all A and AAAA records, e.g. a
    Kubernetes headless Service), as sorted gRPC targets "10.0.0.7:8503",
    "[fd00::7]:8503". ValueError without a port; RankdError NOT_FOUND when
    the name does not resolve."""
    rest = target[len("dns:///"):] if target.startswith("dns:///") else target
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
    else:
        host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("%r: want host:port" % (target,))
    try:
        infos = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise RankdError(grpc.StatusCode.NOT_FOUND,
                         "cannot resolve %r: %s" % (host, e)) from e
    targets = set()
    for family, _, _, _, address in infos:
        if family == socket.AF_INET:
            targets.add("%s:%s" % (address[0], port))
        elif family == socket.AF_INET6:
            targets.add("[%s]:%s" % (address[0], port))
    return sorted(targets)


def update_all_replicas(target, model, table, ids, rows, delete_keys=None, version=0,
                        producer_id=None, start_sequence=None,
                        rows_per_message=DEFAULT_ROWS_PER_MESSAGE, retries=DEFAULT_RETRIES,
                        targets=None, **client_kwargs):
    """update_embeddings on every replica behind `target` (resolve_replicas;
    or the given `targets`), in parallel, with the same messages: resumed
    after the highest position any replica reports. Returns {address:
    UpdateSummary or the exception that replica raised}; never raises for
    one replica's failure."""
    targets = list(targets) if targets is not None else resolve_replicas(target)
    producer_id = producer_id or default_producer_id("rankd_client")
    clients = {t: AdminClient(t, **client_kwargs) for t in targets}
    results = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            if start_sequence is None:
                nexts = {t: pool.submit(c.next_sequence, model, table, producer_id, version)
                         for t, c in clients.items()}
                start_sequence = 1
                for t, f in nexts.items():
                    try:
                        start_sequence = max(start_sequence, f.result())
                    except Exception as e:  # pylint: disable=broad-except
                        results[t] = e
            messages = split_table_delta(model, table, ids, rows, delete_keys, version=version,
                                         producer_id=producer_id,
                                         start_sequence=start_sequence,
                                         rows_per_message=rows_per_message)
            sends = {t: pool.submit(c.send_updates, messages, retries)
                     for t, c in clients.items() if t not in results}
            for t, f in sends.items():
                try:
                    results[t] = f.result()[0]
                except Exception as e:  # pylint: disable=broad-except
                    results[t] = e
    finally:
        for c in clients.values():
            c.close()
    return results

