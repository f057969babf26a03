"""Online embedding updates: the messages of one table's delta, update
positions, and every replica behind a DNS name (admin API, issue 16)."""

import socket
import time

import grpc
import numpy as np

from rankd_client._stubs import model_control_pb2
from rankd_client.errors import RankdError

DEFAULT_ROWS_PER_MESSAGE = 4096
# Row payload per message: under gRPC's default 4 MiB receive limit.
DEFAULT_MAX_PAYLOAD_BYTES = 3 << 20
DEFAULT_RETRIES = 3


def default_producer_id(prefix="rankd_client"):
    """"<prefix>@<hostname>": stable across runs on one machine (a rerun
    resumes where the last one stopped), distinct between machines."""
    return "%s@%s" % (prefix, socket.gethostname() or "localhost")


def stream_failure(error, attempt, retries):
    """What a failed UpdateEmbeddings stream (grpc.RpcError `error`, on
    attempt `attempt`, 1 = the first) leads to: None when it is to be sent
    again whole (UNAVAILABLE or DEADLINE_EXCEEDED: no answer came, and the
    server skips the sequences it already applied), with retries left; else
    the RankdError to raise, with the server's message (and the attempts
    made, after retries)."""
    code = error.code()
    retryable = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    if retryable and attempt <= retries:
        return None
    details = error.details() or ""
    if retryable and attempt > 1:
        details += " (after %d attempts)" % attempt
    return RankdError(code, details)


def next_backoff(backoff_s):
    """The wait before the retry after one of `backoff_s`: doubled, at most
    10 s."""
    return min(backoff_s * 2, 10.0)


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
