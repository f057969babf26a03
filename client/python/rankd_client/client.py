"""The synchronous client of rankd's public API (rankd.v1.Ranking, health)."""

import random
import time

import grpc

from rankd_client import convert
from rankd_client._stubs import HEALTH_CHECK_METHOD, health_pb2, ranking_pb2, ranking_pb2_grpc
from rankd_client.channel import DEFAULT_MAX_MESSAGE_BYTES, ChannelSettings
from rankd_client.errors import RankdError
from rankd_client.retry import NO_RETRY, RetryPolicy, call_with_retries

DEFAULT_TARGET = "localhost:8500"
DEFAULT_TIMEOUT_S = 1.0


def check_timeout(name, value):
    if value is None or value <= 0:
        raise ValueError("%s: must be > 0, got %r" % (name, value))


def check_retry(retry):
    """The RetryPolicy a client uses: `retry`, or none for None."""
    if retry is None:
        return NO_RETRY
    if not isinstance(retry, RetryPolicy):
        raise TypeError("retry: want a rankd_client.RetryPolicy or None, got %s"
                        % type(retry).__name__)
    return retry


def health_name(status):
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


class _Client:
    """One gRPC channel and the calls over it; the sync clients share this,
    and rankd_client.aio's clients build on it with their own channel kind
    and sleep (the two class attributes below)."""

    _CHANNEL_KIND = "sync_channel"  # the ChannelSettings method that opens the channel
    _SLEEP = staticmethod(time.sleep)  # waits between retries

    def __init__(self, target, timeout_s, max_message_bytes, options, credentials,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None,
                 tls_server_name=None, retry=None):
        check_timeout("timeout_s", timeout_s)
        self._settings = ChannelSettings(target, max_message_bytes, options, credentials,
                                         tls_ca_file, tls_cert_file, tls_key_file, token_file,
                                         tls_server_name)
        self.target = target
        self.timeout_s = timeout_s
        self.retry = check_retry(retry)
        self._channel = getattr(self._settings, self._CHANNEL_KIND)()
        # Tests replace these to run retries without real time.
        self._clock = time.monotonic
        self._sleep = self._SLEEP
        self._random = random.random

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _metadata(self, metadata):
        return self._settings.metadata(metadata)

    def _call(self, method, request, timeout_s, metadata, default_timeout_s=None, retry=False):
        """method(request) with the call's deadline; retried per self.retry
        when `retry` (idempotent calls only). Raises RankdError."""
        if timeout_s is None:
            timeout_s = self.timeout_s if default_timeout_s is None else default_timeout_s
        metadata = self._metadata(metadata)

        def attempt(attempt_timeout_s):
            return method(request, timeout=attempt_timeout_s, metadata=metadata)

        return call_with_retries(attempt, self.retry if retry else NO_RETRY, timeout_s,
                                 self._clock, self._sleep, self._random)


class RankingClient(_Client):
    """One gRPC channel to a rankd server; thread-safe, meant to be shared.

    Args:
      target: "host:port" (any gRPC target string).
      timeout_s: the deadline of each call unless the call passes its own,
        retries included; rankd ranks at a latency SLO, so a late answer is
        failed (DEADLINE_EXCEEDED).
      retry: RetryPolicy of score and model_info (UNAVAILABLE and
        RESOURCE_EXHAUSTED, exponential backoff with full jitter, within the
        call's deadline); None = no retries. health is never retried.
      max_message_bytes: largest message sent or received (gRPC's receive
        default, 4 MiB, is too small for requests of thousands of candidates).
      options: further gRPC channel options, as (name, value) pairs.
      credentials: grpc.ChannelCredentials; None = plaintext.
      tls_ca_file: PEM CAs of the server's certificate: TLS (instead of
        `credentials`); tls_cert_file / tls_key_file: this client's
        certificate and key, for a server that requires one (mTLS).
      tls_server_name: the name to check the server's certificate against,
        when the target's host is not in it (e.g. an IP address).
      token_file: a file holding a bearer token sent with every call
        ("authorization: Bearer <token>").
    """

    def __init__(self, target=DEFAULT_TARGET, timeout_s=DEFAULT_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None,
                 retry=RetryPolicy(), tls_server_name=None):
        super().__init__(target, timeout_s, max_message_bytes, options, credentials,
                         tls_ca_file, tls_cert_file, tls_key_file, token_file, tls_server_name,
                         retry)
        self._ranking = ranking_pb2_grpc.RankingStub(self._channel)
        # Only Check is used; built here rather than through a generated
        # Health stub, so grpcio-health-checking's messages work as well.
        self._health_check = self._channel.unary_unary(
            HEALTH_CHECK_METHOD,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)

    def score_response(self, request, timeout_s=None, metadata=None, version_label=None):
        """Scores one request; returns the rankd.v1.ScoreResponse."""
        request = convert.with_version_label(convert.to_score_request(request), version_label)
        return self._call(self._ranking.Score, request, timeout_s, metadata, retry=True)

    def score(self, request, dense=None, sparse=None, *, weights=None, version=0,
              timeout_s=None, metadata=None, version_label=None):
        """Scores one request.

        Numpy form: score(model, dense, sparse={"cat_0": (ids, lengths)},
        weights=None, version=0, version_label=None) -> np.ndarray float32
        [candidates]. dense: float [candidates, num_dense]; sparse: per
        feature (ids, lengths) or (ids, lengths, weights), lengths [B] or
        [1] (one bag shared by all candidates); see build_score_request.

        Request form: score(request) -> list[float], one per candidate;
        `request` a rankd.v1.ScoreRequest, its proto3 JSON dict
        ({"model": "mini", "numCandidates": 2, "dense": [...], "sparse": [...]};
        lowerCamel or snake_case names), or a JSON string.

        `version_label`: score with the version a label of the model points
        at (e.g. "stable"); a request may carry one itself ("versionLabel").
        Failures raise RankdError; bad arguments ValueError / TypeError.
        """
        request, candidates = convert.prepare_score(request, dense, sparse, weights, version,
                                                    version_label)
        response = self._call(self._ranking.Score, request, timeout_s, metadata, retry=True)
        if candidates is None:
            return list(response.scores)
        return _scores(response, candidates)

    def model_info(self, name, version=0, timeout_s=None, version_label=""):
        """The rankd.v1.ModelInfo of a served model (version 0 = newest ready,
        or the version `version_label` points at)."""
        if version and version_label:
            raise ValueError("give version or version_label, not both")
        request = ranking_pb2.GetModelInfoRequest(model=name, version=version,
                                                  version_label=version_label)
        return self._call(self._ranking.GetModelInfo, request, timeout_s, None, retry=True)

    def health(self, service="", timeout_s=None):
        """The serving status name: "SERVING", "NOT_SERVING", "UNKNOWN" or
        "SERVICE_UNKNOWN" (a service the server does not know; NOT_FOUND in
        the health protocol). service "" = the server, or a model name.
        Never retried: it reports what it sees."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            response = self._call(self._health_check, request, timeout_s, None)
        except RankdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise
        return health_name(response.status)


def _scores(response, candidates):
    try:
        return convert.scores_array(response, candidates)
    except ValueError as e:
        raise RankdError(grpc.StatusCode.INTERNAL, str(e)) from e
