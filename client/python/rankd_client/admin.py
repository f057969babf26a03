"""The synchronous client of rankd's admin API (rankd.v1.ModelControl, on the
admin listener): models, load / unload, version labels, embedding updates and
snapshots."""

import concurrent.futures
import time

import grpc

from rankd_client._stubs import model_control_pb2, model_control_pb2_grpc
from rankd_client.channel import DEFAULT_MAX_MESSAGE_BYTES
from rankd_client.client import _Client, check_timeout
from rankd_client.updates import (DEFAULT_RETRIES, DEFAULT_ROWS_PER_MESSAGE, default_producer_id,
                                  last_sequences, next_backoff, resolve_replicas,
                                  split_table_delta, stream_failure)

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
        tls_key_file, token_file, tls_server_name: as for RankingClient. Off loopback the admin
        listener wants mTLS or a token (rankd serve --admin_token_file).
    """

    def __init__(self, target=DEFAULT_ADMIN_TARGET, timeout_s=DEFAULT_ADMIN_TIMEOUT_S,
                 load_timeout_s=DEFAULT_LOAD_TIMEOUT_S,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(), credentials=None,
                 update_timeout_s=DEFAULT_UPDATE_TIMEOUT_S, retry_backoff_s=0.2,
                 tls_ca_file=None, tls_cert_file=None, tls_key_file=None, token_file=None,
                 tls_server_name=None):
        check_timeout("load_timeout_s", load_timeout_s)
        check_timeout("update_timeout_s", update_timeout_s)
        super().__init__(target, timeout_s, max_message_bytes, options, credentials,
                         tls_ca_file, tls_cert_file, tls_key_file, token_file, tls_server_name)
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
                failure = stream_failure(e, attempt, retries)
                if failure is not None:
                    raise failure from e
            time.sleep(backoff)
            backoff = next_backoff(backoff)

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

