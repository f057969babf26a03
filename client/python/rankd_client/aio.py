"""asyncio clients of rankd on grpc.aio: the same API as rankd_client's
RankingClient and AdminClient, with coroutines.

    import asyncio, numpy as np
    from rankd_client import aio

    async def main():
        async with aio.RankingClient("localhost:8500", timeout_s=1.0) as client:
            scores = await client.score("mini", dense, sparse={"cat_0": (ids, lengths)})

    asyncio.run(main())

Make the clients inside the event loop that uses them (in a coroutine):
grpc.aio binds a channel to the loop it was made in.
"""

import asyncio

import grpc
import grpc.aio  # noqa: F401  (grpc.aio is a subpackage in some grpcio versions)

from rankd_client import admin, client, convert
from rankd_client._stubs import health_pb2, model_control_pb2, ranking_pb2
from rankd_client.client import _scores, health_name
from rankd_client.errors import RankdError
from rankd_client.retry import NO_RETRY, async_call_with_retries
from rankd_client.updates import (DEFAULT_RETRIES, DEFAULT_ROWS_PER_MESSAGE, default_producer_id,
                                  last_sequences, next_backoff, split_table_delta,
                                  stream_failure)

__all__ = ["AdminClient", "RankingClient"]


class _Client(client._Client):
    """The grpc.aio side of a client: an aio channel, awaited calls and
    retry sleeps. Mixed in before the sync client class, whose constructor
    (arguments, defaults, checks) it keeps; every public call of that class
    is redefined below as a coroutine."""

    _CHANNEL_KIND = "aio_channel"
    _SLEEP = staticmethod(asyncio.sleep)

    def __enter__(self):
        raise TypeError("rankd_client.aio clients are used with 'async with'")

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _call(self, method, request, timeout_s, metadata, default_timeout_s=None,
                    retry=False):
        if timeout_s is None:
            timeout_s = self.timeout_s if default_timeout_s is None else default_timeout_s
        metadata = self._settings.metadata(metadata)
        if metadata is not None:
            metadata = tuple(metadata)

        async def attempt(attempt_timeout_s):
            return await method(request, timeout=attempt_timeout_s, metadata=metadata)

        return await async_call_with_retries(attempt, self.retry if retry else NO_RETRY,
                                             timeout_s, self._clock, self._sleep, self._random)


class RankingClient(_Client, client.RankingClient):
    """rankd_client.RankingClient on grpc.aio: the same arguments (retry
    included: the same RetryPolicy, backoff awaited with asyncio.sleep) and
    methods, as coroutines. Share one per event loop."""

    async def score_response(self, request, timeout_s=None, metadata=None, version_label=None):
        """Scores one request; returns the rankd.v1.ScoreResponse."""
        request = convert.with_version_label(convert.to_score_request(request), version_label)
        return await self._call(self._ranking.Score, request, timeout_s, metadata, retry=True)

    async def score(self, request, dense=None, sparse=None, *, weights=None, version=0,
                    timeout_s=None, metadata=None, version_label=None):
        """As rankd_client.RankingClient.score: the numpy form
        score(model, dense, sparse={...}) -> np.ndarray float32, or the
        request form score(request) -> list[float]."""
        request, candidates = convert.prepare_score(request, dense, sparse, weights, version,
                                                    version_label)
        response = await self._call(self._ranking.Score, request, timeout_s, metadata,
                                    retry=True)
        if candidates is None:
            return list(response.scores)
        return _scores(response, candidates)

    async def model_info(self, name, version=0, timeout_s=None, version_label=""):
        """The rankd.v1.ModelInfo of a served model."""
        if version and version_label:
            raise ValueError("give version or version_label, not both")
        request = ranking_pb2.GetModelInfoRequest(model=name, version=version,
                                                  version_label=version_label)
        return await self._call(self._ranking.GetModelInfo, request, timeout_s, None,
                                retry=True)

    async def health(self, service="", timeout_s=None):
        """"SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN"; never retried."""
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            response = await self._call(self._health_check, request, timeout_s, None)
        except RankdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise
        return health_name(response.status)


class AdminClient(_Client, admin.AdminClient):
    """rankd_client.AdminClient on grpc.aio, as coroutines: the model
    lifecycle calls (list_models, load_model, unload_model,
    set_version_label, save_snapshot; none retried) and the embedding
    updates (next_sequence, send_updates, update_embeddings: update streams
    sent again whole on UNAVAILABLE or DEADLINE_EXCEEDED, as in the sync
    client). Fanning out to every replica (update_all_replicas) is in the
    sync module."""

    async def list_models(self, model="", timeout_s=None, metadata=None):
        request = model_control_pb2.ListModelsRequest(model=model)
        return await self._call(self._control.ListModels, request, timeout_s, metadata)

    async def load_model(self, model, versions=(), timeout_s=None, metadata=None):
        request = model_control_pb2.LoadModelRequest(model=model, versions=list(versions))
        return await self._call(self._control.LoadModel, request, timeout_s, metadata,
                                self.load_timeout_s)

    async def unload_model(self, model, versions=(), timeout_s=None, metadata=None):
        request = model_control_pb2.UnloadModelRequest(model=model, versions=list(versions))
        return await self._call(self._control.UnloadModel, request, timeout_s, metadata,
                                self.load_timeout_s)

    async def set_version_label(self, model, label, version, timeout_s=None, metadata=None):
        request = model_control_pb2.SetVersionLabelRequest(model=model, label=label,
                                                           version=version)
        return await self._call(self._control.SetVersionLabel, request, timeout_s, metadata)

    async def save_snapshot(self, model, version=0, new_version=0, timeout_s=None,
                            metadata=None):
        request = model_control_pb2.SaveSnapshotRequest(model=model, version=version,
                                                        new_version=new_version)
        return await self._call(self._control.SaveSnapshot, request, timeout_s, metadata,
                                self.update_timeout_s)

    async def next_sequence(self, model, table, producer_id, version=0, timeout_s=None,
                            metadata=None):
        """One past the last sequence `producer_id` applied to `table` of
        `model` (see rankd_client.AdminClient.next_sequence)."""
        response = await self.list_models(model, timeout_s=timeout_s, metadata=metadata)
        last = 0
        for status in response.models:
            last = max(last, last_sequences(status, version, producer_id).get(table, 0))
        return last + 1

    async def send_updates(self, messages, retries=DEFAULT_RETRIES, timeout_s=None,
                           metadata=None):
        """Streams rankd.v1.EmbeddingUpdate `messages` over one
        UpdateEmbeddings call; returns (UpdateSummary, attempts), with the
        sync client's retries (stream_failure)."""
        messages = list(messages)
        timeout_s = self.update_timeout_s if timeout_s is None else timeout_s
        metadata = self._settings.metadata(metadata)
        if metadata is not None:
            metadata = tuple(metadata)
        backoff = self.retry_backoff_s
        attempt = 0
        while True:
            attempt += 1
            try:
                summary = await self._control.UpdateEmbeddings(iter(messages),
                                                               timeout=timeout_s,
                                                               metadata=metadata)
                return summary, attempt
            except grpc.RpcError as e:
                failure = stream_failure(e, attempt, retries)
                if failure is not None:
                    raise failure from e
            await self._sleep(backoff)
            backoff = next_backoff(backoff)

    async def update_embeddings(self, model, table, ids, rows, delete_keys=None, version=0,
                                producer_id=None, start_sequence=None,
                                rows_per_message=DEFAULT_ROWS_PER_MESSAGE,
                                retries=DEFAULT_RETRIES, timeout_s=None, metadata=None):
        """Writes `rows` of `ids` into `table` of `model` and deletes
        `delete_keys`; returns the rankd.v1.UpdateSummary (arguments as
        rankd_client.AdminClient.update_embeddings)."""
        producer_id = producer_id or default_producer_id("rankd_client")
        if start_sequence is None:
            start_sequence = await self.next_sequence(model, table, producer_id, version,
                                                      metadata=metadata)
        messages = split_table_delta(model, table, ids, rows, delete_keys, version=version,
                                     producer_id=producer_id, start_sequence=start_sequence,
                                     rows_per_message=rows_per_message)
        summary, _ = await self.send_updates(messages, retries, timeout_s, metadata)
        return summary
