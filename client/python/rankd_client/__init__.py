"""Python client of rankd: its gRPC API (rankd.v1.Ranking, grpc.health.v1.Health)
and its admin API (rankd.v1.ModelControl, on the admin listener).

Install (offline, with Debian's python3-grpcio / python3-protobuf / python3-numpy
or pip's grpcio / protobuf / numpy): pip install --no-build-isolation --no-index client/python
The protobuf/gRPC stubs ship generated inside the package (rankd_client._proto).

    import numpy as np
    from rankd_client import RankingClient
    with RankingClient("localhost:8500", timeout_s=1.0) as client:
        scores = client.score("mini", dense,                      # float32 [B, 13]
                              sparse={"cat_0": (ids, lengths)})   # -> float32 [B]
        scores = client.score({"model": "mini", "numCandidates": 2, ...})  # -> list

    from rankd_client import aio                                 # grpc.aio, same API
    from rankd_client import AdminClient
    with AdminClient("localhost:8503") as admin:   # loopback-only by default
        admin.load_model("mini", versions=[3])      # waits: READY or FAILED
        admin.set_version_label("mini", "stable", 3)
        admin.update_embeddings("mini", "t_item", ids, rows, delete_keys=gone)

Failed calls raise RankdError carrying the server's gRPC status code and
message unchanged (the C++ client's absl::Status keeps the same two). Score
and GetModelInfo are retried on UNAVAILABLE and RESOURCE_EXHAUSTED with
exponential backoff and full jitter within the call's deadline (RetryPolicy).
"""

from rankd_client._stubs import (health_pb2, model_control_pb2, model_control_pb2_grpc,
                                 ranking_pb2, ranking_pb2_grpc)
from rankd_client.admin import (DEFAULT_ADMIN_TARGET, DEFAULT_ADMIN_TIMEOUT_S,
                                DEFAULT_LOAD_TIMEOUT_S, DEFAULT_UPDATE_TIMEOUT_S, AdminClient,
                                update_all_replicas)
from rankd_client.channel import DEFAULT_MAX_MESSAGE_BYTES
from rankd_client.client import DEFAULT_TARGET, DEFAULT_TIMEOUT_S, RankingClient
from rankd_client.convert import build_score_request, scores_array
from rankd_client.errors import RankdError
from rankd_client.retry import NO_RETRY, RETRYABLE_CODES, RetryPolicy
from rankd_client.updates import (DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_RETRIES,
                                  DEFAULT_ROWS_PER_MESSAGE, default_producer_id, last_sequences,
                                  resolve_replicas, split_table_delta)

__version__ = "0.2.0"

__all__ = [
    "AdminClient", "RankingClient", "RankdError", "RetryPolicy", "NO_RETRY", "RETRYABLE_CODES",
    "build_score_request", "scores_array", "update_all_replicas", "split_table_delta",
    "resolve_replicas", "default_producer_id", "last_sequences",
    "health_pb2", "model_control_pb2", "model_control_pb2_grpc", "ranking_pb2",
    "ranking_pb2_grpc",
    "DEFAULT_TARGET", "DEFAULT_TIMEOUT_S", "DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_ADMIN_TARGET",
    "DEFAULT_ADMIN_TIMEOUT_S", "DEFAULT_LOAD_TIMEOUT_S", "DEFAULT_UPDATE_TIMEOUT_S",
    "DEFAULT_ROWS_PER_MESSAGE", "DEFAULT_MAX_PAYLOAD_BYTES", "DEFAULT_RETRIES",
]
