"""Tests of rankd_client against an in-process fake rankd (grpc.server).

Run by client/python/tests/run_py_test.sh (Bazel: //client:python_client_test)
with PYTHONPATH=client/python: the package and its shipped stubs.
"""

import asyncio
import socket
import time
import unittest
from concurrent import futures

import grpc
import numpy as np

import rankd_client
from rankd_client import AdminClient, RankdError, RankingClient, aio
from rankd_client import health_pb2
from rankd_client import model_control_pb2
from rankd_client import model_control_pb2_grpc
from rankd_client import ranking_pb2
from rankd_client import ranking_pb2_grpc

ERROR_MESSAGE = "dense: NaN at index 3"
LABELS = {"stable": 1, "canary": 2}
BROKEN_REASON = "weights.safetensors: emb_l.0.weight is [10, 8], want [10, 16]"


def resolve_label(request, context):
    """The version a request names: its version, else its label's (LABELS)."""
    if request.version or not request.version_label:
        return request.version
    if request.version_label not in LABELS:
        context.abort(grpc.StatusCode.NOT_FOUND,
                      'model "%s" has no version label "%s" (labels: canary, stable)'
                      % (request.model, request.version_label))
    return LABELS[request.version_label]


class FakeRanking(ranking_pb2_grpc.RankingServicer):
    """model "mini": scores (i+1)/1024; "error": INVALID_ARGUMENT; "slow":
    sleeps 0.5 s; others NOT_FOUND. Labels: LABELS."""

    def __init__(self):
        self.last_metadata = {}

    def Score(self, request, context):
        self.last_metadata = dict(context.invocation_metadata())
        self.last_request = request
        if request.model == "error":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, ERROR_MESSAGE)
        if request.model == "slow":
            time.sleep(0.5)
        elif request.model != "mini":
            context.abort(grpc.StatusCode.NOT_FOUND, 'model "%s" is not served' % request.model)
        version = resolve_label(request, context)
        return ranking_pb2.ScoreResponse(
            scores=[(i + 1) / 1024.0 for i in range(request.num_candidates)],
            model=request.model, version=version or 1)

    def GetModelInfo(self, request, context):
        if request.model != "mini":
            context.abort(grpc.StatusCode.NOT_FOUND, 'model "%s" is not served' % request.model)
        info = ranking_pb2.ModelInfo(name="mini", version=resolve_label(request, context) or 2,
                                     versions=[1, 2], num_dense=13, backend="cpu",
                                     labels=LABELS)
        info.features.add(name="user_id", table="t_user", request_level=True, dim=16,
                          num_rows=1000)
        return info


class FakeModelControl(model_control_pb2_grpc.ModelControlServicer):
    """The admin API over an in-memory repository, with its documented errors:
    "mini" versions 1, 2 READY (stable -> 1, canary -> 2) and 3 not loaded;
    "broken" 1 FAILED (loading fails again); "slow" 1 takes 0.5 s to load."""

    REPOSITORY = {"broken": [1], "mini": [1, 2, 3], "slow": [1]}

    def __init__(self):
        self.reset()

    def reset(self):
        self.versions = {"broken": {1: self._loaded("broken", 1)},
                         "mini": {1: self._loaded("mini", 1), 2: self._loaded("mini", 2)},
                         "slow": {}}
        self.labels = {"broken": {}, "mini": dict(LABELS), "slow": {}}
        self.last_metadata = {}
        # Embedding updates: (model, version) -> {(producer, table): (seq, ts)},
        # every message read, applied count, injected failures.
        self.positions = {}
        self.received = []
        self.applied = 0
        self.streams = 0
        self.fail_streams = 0       # the next N streams end with fail_code
        self.fail_code = grpc.StatusCode.UNAVAILABLE
        self.fail_after = 0         # ... after reading this many messages

    @staticmethod
    def _loaded(model, version):
        if model == "broken":
            return model_control_pb2.VersionStatus(
                version=version, state=model_control_pb2.FAILED, reason=BROKEN_REASON)
        return model_control_pb2.VersionStatus(
            version=version, state=model_control_pb2.READY, load_seconds=0.25 * version,
            device_bytes=version << 26, directory="/models/%s/%d" % (model, version))

    def _find(self, model, context):
        if not model:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "model: must not be empty")
        if model not in self.REPOSITORY:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          'model "%s" is not in the repository (models: %s)'
                          % (model, ", ".join(sorted(self.REPOSITORY))))

    def _check_versions(self, model, versions, context):
        for version in versions:
            if version not in self.REPOSITORY[model]:
                context.abort(grpc.StatusCode.NOT_FOUND,
                              'model "%s" has no version %d in the repository (versions: %s)'
                              % (model, version, ", ".join(map(str, self.REPOSITORY[model]))))

    def _status(self, model):
        status = model_control_pb2.ModelStatus(name=model, policy="all",
                                               labels=self.labels[model])
        for number in sorted(self.versions[model]):
            version = status.versions.add()
            version.CopyFrom(self.versions[model][number])
            for (producer, table), (seq, ts) in sorted(
                    self.positions.get((model, number), {}).items()):
                version.update_positions.add(producer_id=producer, table=table,
                                             last_sequence=seq, last_timestamp_unix_us=ts)
            version.labels.extend(sorted(l for l, v in self.labels[model].items() if v == number))
        return status

    def ListModels(self, request, context):
        self.last_metadata = dict(context.invocation_metadata())
        if request.model:
            self._find(request.model, context)
        names = [request.model] if request.model else sorted(self.REPOSITORY)
        return model_control_pb2.ListModelsResponse(models=[self._status(m) for m in names])

    def LoadModel(self, request, context):
        if request.model == "slow":
            time.sleep(0.5)
        self._find(request.model, context)
        self._check_versions(request.model, request.versions, context)
        for version in request.versions or self.REPOSITORY[request.model]:
            self.versions[request.model][version] = self._loaded(request.model, version)
        return model_control_pb2.LoadModelResponse(model=self._status(request.model))

    def UnloadModel(self, request, context):
        self._find(request.model, context)
        self._check_versions(request.model, request.versions, context)
        for number, version in self.versions[request.model].items():
            if not request.versions or number in request.versions:
                version.state = model_control_pb2.UNLOADED
                version.device_bytes = 0
        return model_control_pb2.UnloadModelResponse(model=self._status(request.model))

    def SetVersionLabel(self, request, context):
        self._find(request.model, context)
        if not request.label:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "label: must not be empty")
        versions = self.versions[request.model]
        if request.version == 0:
            self.labels[request.model].pop(request.label, None)
        elif (request.version not in versions
              or versions[request.version].state != model_control_pb2.READY):
            ready = [n for n, v in sorted(versions.items())
                     if v.state == model_control_pb2.READY]
            state = ("not loaded" if request.version not in versions else "%s, not READY"
                     % model_control_pb2.VersionState.Name(versions[request.version].state))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          'model "%s" version %d is %s (ready: %s)'
                          % (request.model, request.version, state,
                             ", ".join(map(str, ready)) or "none"))
        else:
            self.labels[request.model][request.label] = request.version
        return model_control_pb2.SetVersionLabelResponse(model=self._status(request.model))

    # Tables of "mini": t_user (STATIC, 1000 rows, F32) and t_item (DYNAMIC,
    # F16), dim 4. A message whose sequence is <= the version's last one of
    # its (producer_id, table) is a duplicate.
    TABLES = {"t_user": 4, "t_item": 2}

    def UpdateEmbeddings(self, request_iterator, context):
        self.streams += 1
        fail = self.fail_streams > 0
        if fail:
            self.fail_streams -= 1
        summaries = {}
        count = 0
        for m in request_iterator:
            if fail and count == self.fail_after:
                context.abort(self.fail_code, "injected failure")
            self.received.append(m)
            self._find(m.model, context)
            where = 'table "%s", message %d (sequence %d): ' % (m.table, count, m.sequence)
            ready = [n for n, v in sorted(self.versions[m.model].items())
                     if v.state == model_control_pb2.READY]
            targets = ready if m.version == 0 else [m.version] if m.version in ready else []
            if not targets:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, where + "no READY version")
            if m.model != "mini" or m.table not in self.TABLES:
                context.abort(grpc.StatusCode.NOT_FOUND, where + 'no table "%s"' % m.table)
            n = len(m.ids)
            if n and len(m.rows) != n * 4 and len(m.raw_rows) != n * 4 * self.TABLES[m.table]:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, where + "rows: wrong size")
            if m.table == "t_user" and any(i < 0 or i >= 1000 for i in m.ids):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              where + "id out of range [0, 1000) (%d messages before it "
                              "applied)" % count)
            for number in targets:
                s = summaries.setdefault((number, m.table), model_control_pb2.TableUpdateSummary(
                    model=m.model, version=number, table=m.table))
                positions = self.positions.setdefault((m.model, number), {})
                last = positions.get((m.producer_id, m.table), (0, 0))[0]
                if m.sequence and m.sequence <= last:
                    s.duplicates += 1
                    continue
                if m.sequence:
                    positions[(m.producer_id, m.table)] = (m.sequence, m.timestamp_unix_us)
                self.applied += 1
                s.messages += 1
                s.rows_applied += n
                s.keys_not_found += len(m.delete_keys)
            count += 1
        return model_control_pb2.UpdateSummary(
            messages=count, tables=[summaries[k] for k in sorted(summaries)])

    def SaveSnapshot(self, request, context):
        self._find(request.model, context)
        ready = [n for n, v in sorted(self.versions[request.model].items())
                 if v.state == model_control_pb2.READY]
        source = request.version or (ready[-1] if ready else 0)
        if source not in ready:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          'model "%s" version %d is not READY' % (request.model, source))
        target = request.new_version or max(self.REPOSITORY[request.model]) + 1
        self.versions[request.model][target] = model_control_pb2.VersionStatus(
            version=target, state=model_control_pb2.READY, snapshot_of=source,
            directory="/models/%s/%d" % (request.model, target))
        self.positions[(request.model, target)] = dict(
            self.positions.get((request.model, source), {}))
        return model_control_pb2.SaveSnapshotResponse(
            version=target, directory="/models/%s/%d" % (request.model, target),
            bytes=1 << 20, seconds=0.25, model=self._status(request.model))


HEALTH = {"": health_pb2.HealthCheckResponse.SERVING,
          "mini": health_pb2.HealthCheckResponse.SERVING,
          "draining": health_pb2.HealthCheckResponse.NOT_SERVING}


def health_check(request, context):
    if request.service not in HEALTH:
        context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
    return health_pb2.HealthCheckResponse(status=HEALTH[request.service])


def start_admin_server(port=0):
    """The fake admin API on a port of its own, as rankd serves it."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    fake = FakeModelControl()
    model_control_pb2_grpc.add_ModelControlServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    return server, fake, port


def start_server(port=0):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    fake = FakeRanking()
    ranking_pb2_grpc.add_RankingServicer_to_server(fake, server)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {"Check": grpc.unary_unary_rpc_method_handler(
            health_check,
            request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString)}),))
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    return server, fake, port


class RankdClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server, cls.fake, port = start_server()
        cls.target = "127.0.0.1:%d" % port

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(None)

    def setUp(self):
        self.client = RankingClient(self.target, timeout_s=2.0)

    def tearDown(self):
        self.client.close()

    def test_score_from_dict_message_and_json(self):
        want = [1 / 1024.0, 2 / 1024.0, 3 / 1024.0]
        self.assertEqual(self.client.score({"model": "mini", "numCandidates": 3}), want)
        self.assertEqual(self.client.score({"model": "mini", "num_candidates": 3}), want)
        self.assertEqual(
            self.client.score(ranking_pb2.ScoreRequest(model="mini", num_candidates=3)), want)
        self.assertEqual(self.client.score('{"model": "mini", "numCandidates": 3}'), want)
        response = self.client.score_response({"model": "mini", "numCandidates": 1,
                                               "version": "7"})
        self.assertEqual((response.model, response.version), ("mini", 7))

    def test_score_numpy(self):
        dense = np.arange(6, dtype=np.float64).reshape(3, 2) / 7  # float64: sent as float32
        ids = np.array([4, 5, 6, 7], np.int32)
        scores = self.client.score("mini", dense, sparse={
            "cat_0": (ids, np.array([2, 1, 1])),
            "user": ([9], [1], np.array([0.5], np.float32))}, version_label="canary")
        self.assertEqual(scores.dtype, np.float32)
        np.testing.assert_array_equal(scores, np.array([1, 2, 3], np.float32) / 1024)
        sent = self.fake.last_request
        self.assertEqual((sent.model, sent.num_candidates, sent.version_label),
                         ("mini", 3, "canary"))
        np.testing.assert_array_equal(np.array(sent.dense, np.float32),
                                      dense.astype(np.float32).ravel())
        self.assertEqual([(f.name, list(f.ids), list(f.lengths), list(f.weights))
                          for f in sent.sparse],
                         [("cat_0", [4, 5, 6, 7], [2, 1, 1], []), ("user", [9], [1], [0.5])])
        weights = {"cat_0": np.ones(4, np.float32)}
        self.client.score("mini", dense[:1], sparse={"cat_0": (ids, [4])}, weights=weights)
        self.assertEqual(list(self.fake.last_request.sparse[0].weights), [1.0] * 4)

    def test_score_numpy_validates(self):
        dense = np.zeros((2, 3), np.float32)
        cases = [
            (dict(dense=np.zeros(3, np.float32)), r"dense: want a 2-D array"),
            (dict(dense=np.zeros((2, 3), np.int64)), r"dense: want a float array"),
            (dict(dense=np.zeros((0, 3), np.float32)), r"dense: no candidates"),
            (dict(sparse={"cat_0": ([1.5], [1])}), r"sparse\['cat_0'\] ids: want a 1-D integer"),
            (dict(sparse={"cat_0": ([1, 2], [1, 1, 0])}),
             r"sparse\['cat_0'\] lengths: want 2 entries .* or 1 .*, got 3"),
            (dict(sparse={"cat_0": ([1, 2], [1, 2])}),
             r"sparse\['cat_0'\]: lengths add up to 3, but there are 2 ids"),
            (dict(sparse={"cat_0": ([1], [-1, 2])}), r"sparse\['cat_0'\] lengths: -1 is out of range"),
            (dict(sparse={"cat_0": [1, 2]}), r"want a tuple \(ids, lengths\) .*, got list"),
            (dict(sparse={"cat_0": ([1], [1])}, weights={"cat_1": [1.0]}),
             r"weights\['cat_1'\]: no such feature"),
            (dict(sparse={"cat_0": ([1, 2], [1, 1], [1.0])}),
             r"sparse\['cat_0'\] weights: want one weight per id \(2\), got 1"),
            (dict(version=2, version_label="stable"), "not both"),
        ]
        for kwargs, pattern in cases:
            args = dict(dense=dense)
            args.update(kwargs)
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(ValueError, pattern):
                    self.client.score("mini", **args)
        with self.assertRaisesRegex(TypeError, "first argument must be the model's name"):
            self.client.score({"model": "mini"}, dense)
        with self.assertRaisesRegex(ValueError, "only with dense"):
            self.client.score({"model": "mini"}, sparse={"cat_0": ([1], [1])})

    def test_token_file(self):
        token = self.tmp_file("tok", "s3cret-token\n")
        with RankingClient(self.target, token_file=token) as client:
            client.score({"model": "mini", "numCandidates": 1})
        self.assertEqual(self.fake.last_metadata.get("authorization"), "Bearer s3cret-token")
        with self.assertRaisesRegex(ValueError, "token_file: .*printable ASCII"):
            RankingClient(self.target, token_file=self.tmp_file("bad", "two words"))
        with self.assertRaisesRegex(ValueError, "tls_ca_file: .*no PEM certificate"):
            RankingClient(self.target, tls_ca_file=token)
        with self.assertRaisesRegex(ValueError, "tls_server_name: needs TLS"):
            RankingClient(self.target, tls_server_name="rankd.internal")
        with self.assertRaisesRegex(ValueError, "tls_cert_file / tls_key_file: need tls_ca_file"):
            RankingClient(self.target, tls_cert_file=token, tls_key_file=token)

    def tmp_file(self, name, text):
        import os  # pylint: disable=import-outside-toplevel
        import tempfile  # pylint: disable=import-outside-toplevel
        path = os.path.join(tempfile.mkdtemp(), name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_score_sends_metadata(self):
        self.client.score({"model": "mini", "numCandidates": 1},
                          metadata=[("x-trace-id", "abc123")])
        self.assertEqual(self.fake.last_metadata.get("x-trace-id"), "abc123")

    def test_bad_request_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "not a ScoreRequest"):
            self.client.score({"model": "mini", "numCandidatez": 1})
        with self.assertRaises(TypeError):
            self.client.score(42)

    def test_server_error_keeps_code_and_message(self):
        with self.assertRaises(RankdError) as caught:
            self.client.score({"model": "error", "numCandidates": 1})
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.message, ERROR_MESSAGE)
        self.assertEqual(str(caught.exception), "INVALID_ARGUMENT: " + ERROR_MESSAGE)
        with self.assertRaises(RankdError) as caught:
            self.client.score({"model": "nope"})
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_deadline_exceeded(self):
        start = time.monotonic()
        with self.assertRaises(RankdError) as caught:
            self.client.score({"model": "slow", "numCandidates": 1}, timeout_s=0.05)
        self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertLess(time.monotonic() - start, 0.4)
        # The client's default timeout applies too.
        with RankingClient(self.target, timeout_s=0.05) as short:
            with self.assertRaises(RankdError) as caught:
                short.score({"model": "slow", "numCandidates": 1})
            self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_unreachable_target_is_unavailable(self):
        server, _, port = start_server()
        server.stop(None)  # now nothing listens on `port`
        with RankingClient("127.0.0.1:%d" % port, timeout_s=2.0) as client:
            with self.assertRaises(RankdError) as caught:
                client.health()
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_model_info(self):
        info = self.client.model_info("mini")
        self.assertEqual((info.name, info.version, list(info.versions)), ("mini", 2, [1, 2]))
        self.assertEqual(info.features[0].name, "user_id")
        self.assertEqual(self.client.model_info("mini", version=1).version, 1)
        with self.assertRaises(RankdError) as caught:
            self.client.model_info("nope")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.message, 'model "nope" is not served')

    def test_version_label(self):
        response = self.client.score_response({"model": "mini", "numCandidates": 1},
                                              version_label="canary")
        self.assertEqual(response.version, 2)
        # A label the request carries itself.
        response = self.client.score_response({"model": "mini", "numCandidates": 1,
                                               "versionLabel": "stable"})
        self.assertEqual(response.version, 1)
        # The caller's request is not changed.
        request = ranking_pb2.ScoreRequest(model="mini", num_candidates=1)
        self.assertEqual(self.client.score(request, version_label="stable"), [1 / 1024.0])
        self.assertEqual(request.version_label, "")
        with self.assertRaisesRegex(ValueError, "names version 5"):
            self.client.score({"model": "mini", "version": 5}, version_label="stable")
        with self.assertRaisesRegex(ValueError, "names version_label 'canary'"):
            self.client.score({"model": "mini", "versionLabel": "canary"},
                              version_label="stable")
        with self.assertRaises(RankdError) as caught:
            self.client.score({"model": "mini", "numCandidates": 1}, version_label="nope")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.message,
                         'model "mini" has no version label "nope" (labels: canary, stable)')

    def test_model_info_version_label(self):
        info = self.client.model_info("mini", version_label="stable")
        self.assertEqual(info.version, 1)
        self.assertEqual(dict(info.labels), LABELS)
        with self.assertRaisesRegex(ValueError, "not both"):
            self.client.model_info("mini", version=2, version_label="stable")

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("mini"), "SERVING")
        self.assertEqual(self.client.health("draining"), "NOT_SERVING")
        self.assertEqual(self.client.health("nope"), "SERVICE_UNKNOWN")

    def test_constructor_validates(self):
        with self.assertRaisesRegex(ValueError, "timeout_s"):
            RankingClient(self.target, timeout_s=0)
        with self.assertRaisesRegex(ValueError, "target"):
            RankingClient("")
        with self.assertRaisesRegex(ValueError, "max_message_bytes"):
            RankingClient(self.target, max_message_bytes=0)

    def test_example_builds_a_valid_request(self):
        import random  # pylint: disable=import-outside-toplevel
        import example_score  # pylint: disable=import-outside-toplevel
        request = example_score.build_request(self.client.model_info("mini"), 4,
                                              random.Random(0))
        self.assertEqual(len(request["dense"]), 4 * 13)
        self.assertEqual(request["sparse"][0]["lengths"], [1])  # request-level
        self.assertEqual(len(self.client.score(request)), 4)


class AdminClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server, cls.fake, port = start_admin_server()
        cls.target = "127.0.0.1:%d" % port

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(None)

    def setUp(self):
        self.fake.reset()  # every test starts from the same repository state
        self.admin = AdminClient(self.target)

    def tearDown(self):
        self.admin.close()

    def assert_error(self, code, message, call, *args, **kwargs):
        with self.assertRaises(RankdError) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.code, code)
        if message is not None:
            self.assertEqual(caught.exception.message, message)

    def test_split_table_delta(self):
        ids = np.arange(10, dtype=np.int64)
        rows = np.arange(40, dtype=np.float32).reshape(10, 4)
        messages = rankd_client.split_table_delta(
            "mini", "t_user", ids, rows, producer_id="p", start_sequence=5, rows_per_message=4,
            timestamp_unix_us=77)
        self.assertEqual([m.sequence for m in messages], [5, 6, 7])
        self.assertEqual([len(m.ids) for m in messages], [4, 4, 2])
        self.assertEqual(list(messages[2].ids), [8, 9])
        self.assertEqual(list(messages[2].rows), list(range(32, 40)))
        self.assertEqual({m.timestamp_unix_us for m in messages}, {77})
        # Half types as raw little-endian bytes; deletes first; payload limit.
        half = np.ones((3, 4), np.float16)
        messages = rankd_client.split_table_delta(
            "mini", "t_item", [1, 2, 3], half, delete_keys=np.arange(100, 120),
            producer_id="p", max_payload_bytes=100)
        # 100 bytes: 12 keys; then 8 keys and 2 rows of 4 x 2 + 8 bytes; then 1 row.
        self.assertEqual([len(m.delete_keys) for m in messages], [12, 8, 0])
        self.assertEqual([list(m.ids) for m in messages], [[], [1, 2], [3]])
        self.assertEqual(messages[1].raw_rows + messages[2].raw_rows, half.tobytes())
        bf16 = np.zeros((1, 4), np.uint16)
        self.assertEqual(len(rankd_client.split_table_delta(
            "mini", "t_item", [1], bf16, producer_id="p")[0].raw_rows), 8)
        # Default limits: under 4 MiB per message.
        big = rankd_client.split_table_delta(
            "mini", "t_user", np.arange(5000), np.zeros((5000, 256), np.float32),
            producer_id="p")
        self.assertEqual([len(m.ids) for m in big], [3048, 1952])
        self.assertTrue(all(m.ByteSize() < 4 << 20 for m in big))
        with self.assertRaisesRegex(TypeError, "float32, float16 or uint16"):
            rankd_client.split_table_delta("mini", "t", [1], np.ones((1, 4)), producer_id="p")
        with self.assertRaisesRegex(ValueError, r"rows: want \[2, dim\]"):
            rankd_client.split_table_delta("mini", "t", [1, 2], np.ones((3, 4), np.float32),
                                           producer_id="p")
        with self.assertRaisesRegex(ValueError, "key 2 is both deleted and written"):
            rankd_client.split_table_delta("mini", "t", [1, 2], np.ones((2, 4), np.float32),
                                           delete_keys=[2], producer_id="p")
        with self.assertRaisesRegex(ValueError, "producer_id"):
            rankd_client.split_table_delta("mini", "t", [1], np.ones((1, 4), np.float32))

    def test_update_embeddings_resumes_and_dedups(self):
        ids = np.arange(10, dtype=np.int64)
        rows = np.ones((10, 4), np.float32)
        summary = self.admin.update_embeddings("mini", "t_user", ids, rows, producer_id="job",
                                               rows_per_message=4)
        self.assertEqual(summary.messages, 3)
        by_version = {t.version: t for t in summary.tables}
        self.assertEqual(sorted(by_version), [1, 2])
        self.assertEqual(by_version[2].rows_applied, 10)
        self.assertEqual([m.sequence for m in self.fake.received], [1, 2, 3])
        # Resumes after the server's position.
        self.assertEqual(self.admin.next_sequence("mini", "t_user", "job"), 4)
        summary = self.admin.update_embeddings("mini", "t_user", ids, rows, producer_id="job",
                                               rows_per_message=4, version=2)
        self.assertEqual([m.sequence for m in self.fake.received[3:]], [4, 5, 6])
        self.assertEqual([(t.version, t.messages) for t in summary.tables], [(2, 3)])
        # The same sequences again: duplicates, nothing applied.
        applied = self.fake.applied
        summary = self.admin.update_embeddings("mini", "t_user", ids, rows, producer_id="job",
                                               rows_per_message=4, start_sequence=1)
        self.assertEqual(self.fake.applied, applied)
        self.assertEqual({t.duplicates for t in summary.tables}, {3})
        listed = self.admin.list_models("mini").models[0]
        self.assertEqual(rankd_client.last_sequences(listed, 0, "job"), {"t_user": 6})
        self.assertEqual(rankd_client.last_sequences(listed, 1, "job"), {"t_user": 3})
        # The default producer id.
        self.admin.update_embeddings("mini", "t_item", [5], np.ones((1, 4), np.float16))
        self.assertEqual(self.fake.received[-1].producer_id,
                         "rankd_client@" + socket.gethostname())

    def test_update_embeddings_retries_same_sequences(self):
        admin = AdminClient(self.target, retry_backoff_s=0.01)
        self.fake.fail_streams, self.fake.fail_after = 2, 1
        summary = admin.update_embeddings("mini", "t_user", np.arange(3),
                                          np.ones((3, 4), np.float32), producer_id="r",
                                          rows_per_message=1)
        self.assertEqual(self.fake.streams, 3)
        self.assertEqual([m.sequence for m in self.fake.received], [1, 1, 1, 2, 3])
        self.assertEqual(self.fake.applied, 3 * 2)  # each message once, on versions 1 and 2
        self.assertEqual({t.duplicates for t in summary.tables}, {1})
        # Retries run out: UNAVAILABLE, with the attempts.
        self.fake.fail_streams, self.fake.fail_after = 5, 0
        with self.assertRaises(RankdError) as caught:
            admin.update_embeddings("mini", "t_user", [1], np.ones((1, 4), np.float32),
                                    producer_id="r", retries=1)
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(caught.exception.message, "injected failure (after 2 attempts)")
        # Other errors are final: one stream, the server's message.
        self.fake.fail_streams = 0
        streams = self.fake.streams
        self.assert_error(grpc.StatusCode.INVALID_ARGUMENT,
                          'table "t_user", message 0 (sequence 4): id out of range [0, 1000) '
                          "(0 messages before it applied)",
                          admin.update_embeddings, "mini", "t_user", [1000],
                          np.ones((1, 4), np.float32), producer_id="r")
        self.assertEqual(self.fake.streams, streams + 1)
        admin.close()

    def test_aio_update_embeddings_resumes_retries_and_fails(self):
        async def run():
            async with aio.AdminClient(self.target, retry_backoff_s=0.01) as admin:
                summary = await admin.update_embeddings(
                    "mini", "t_user", np.arange(10, dtype=np.int64), np.ones((10, 4), np.float32),
                    producer_id="aio", rows_per_message=4)
                self.assertEqual(summary.messages, 3)
                self.assertEqual([m.sequence for m in self.fake.received], [1, 2, 3])
                self.assertEqual(await admin.next_sequence("mini", "t_user", "aio"), 4)
                # Two streams fail after one message: sent again whole, the
                # server skipping what it applied.
                self.fake.fail_streams, self.fake.fail_after = 2, 1
                summary = await admin.update_embeddings(
                    "mini", "t_user", np.arange(2), np.ones((2, 4), np.float32),
                    producer_id="aio", rows_per_message=1)
                self.assertEqual([m.sequence for m in self.fake.received[3:]], [4, 4, 4, 5])
                self.assertEqual({t.duplicates for t in summary.tables}, {1})
                # Retries run out.
                self.fake.fail_streams, self.fake.fail_after = 5, 0
                with self.assertRaises(RankdError) as caught:
                    await admin.update_embeddings("mini", "t_user", [1],
                                                  np.ones((1, 4), np.float32),
                                                  producer_id="aio", retries=1)
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
                self.assertEqual(caught.exception.message,
                                 "injected failure (after 2 attempts)")
                # Other errors are final, with the server's message.
                self.fake.fail_streams = 0
                streams = self.fake.streams
                with self.assertRaises(RankdError) as caught:
                    await admin.update_embeddings("mini", "t_user", [1000],
                                                  np.ones((1, 4), np.float32), producer_id="aio")
                self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("id out of range", caught.exception.message)
                self.assertEqual(self.fake.streams, streams + 1)

        asyncio.run(run())

    def test_save_snapshot(self):
        snapshot = self.admin.save_snapshot("mini", version=1)
        self.assertEqual((snapshot.version, snapshot.directory), (4, "/models/mini/4"))
        self.assertEqual(self.states(snapshot.model)[4], "READY")
        self.assert_error(grpc.StatusCode.FAILED_PRECONDITION, None,
                          self.admin.save_snapshot, "broken")
        self.assert_error(grpc.StatusCode.NOT_FOUND, None, self.admin.save_snapshot, "nope")

    def test_update_all_replicas(self):
        self.assertEqual(rankd_client.resolve_replicas("127.0.0.1:8503"), ["127.0.0.1:8503"])
        self.assertEqual(rankd_client.resolve_replicas("dns:///[::1]:9"), ["[::1]:9"])
        self.assertTrue(set(rankd_client.resolve_replicas("localhost:8503"))
                        <= {"127.0.0.1:8503", "[::1]:8503"})
        with self.assertRaises(ValueError):
            rankd_client.resolve_replicas("localhost")
        with self.assertRaises(RankdError):
            rankd_client.resolve_replicas("no-such-host.invalid:8503")
        # Two replicas (this fake and a second one) and an unreachable one.
        server2, fake2, port2 = start_admin_server()
        try:
            # Replica 2 is behind: the stream starts after the highest position.
            self.admin.update_embeddings("mini", "t_user", [1], np.ones((1, 4), np.float32),
                                         producer_id="fan")
            targets = [self.target, "127.0.0.1:%d" % port2, "127.0.0.1:1"]
            results = rankd_client.update_all_replicas(
                None, "mini", "t_user", [7, 8], np.ones((2, 4), np.float32), producer_id="fan",
                targets=targets, retries=0, retry_backoff_s=0.01)
            self.assertEqual(sorted(results), sorted(targets))
            self.assertEqual(results[self.target].messages, 1)
            self.assertEqual(results["127.0.0.1:%d" % port2].messages, 1)
            self.assertIsInstance(results["127.0.0.1:1"], RankdError)
            self.assertEqual([m.sequence for m in fake2.received], [2])
            self.assertEqual(self.fake.received[-1].sequence, 2)
        finally:
            server2.stop(None)

    @staticmethod
    def states(model_status):
        return {v.version: model_control_pb2.VersionState.Name(v.state)
                for v in model_status.versions}

    def test_defaults(self):
        self.assertEqual(rankd_client.DEFAULT_ADMIN_TARGET, "localhost:8503")
        with AdminClient() as admin:
            self.assertEqual(admin.target, "localhost:8503")
            self.assertGreater(admin.load_timeout_s, admin.timeout_s)

    def test_constructor_validates(self):
        with self.assertRaisesRegex(ValueError, "load_timeout_s"):
            AdminClient(self.target, load_timeout_s=0)
        with self.assertRaisesRegex(ValueError, "timeout_s"):
            AdminClient(self.target, timeout_s=-1)
        with self.assertRaisesRegex(ValueError, "target"):
            AdminClient("")

    def test_list_models(self):
        response = self.admin.list_models()
        self.assertEqual([m.name for m in response.models], ["broken", "mini", "slow"])
        mini = self.admin.list_models("mini").models
        self.assertEqual(len(mini), 1)
        self.assertEqual(self.states(mini[0]), {1: "READY", 2: "READY"})
        self.assertEqual(list(mini[0].versions[0].labels), ["stable"])
        self.assertEqual(dict(mini[0].labels), LABELS)
        broken = self.admin.list_models("broken").models[0].versions[0]
        self.assertEqual((broken.state, broken.reason), (model_control_pb2.FAILED, BROKEN_REASON))
        self.assert_error(grpc.StatusCode.NOT_FOUND,
                          'model "nope" is not in the repository (models: broken, mini, slow)',
                          self.admin.list_models, "nope")

    def test_load_model(self):
        response = self.admin.load_model("mini", versions=[3])
        self.assertEqual(self.states(response.model), {1: "READY", 2: "READY", 3: "READY"})
        self.assertEqual(response.model.versions[2].directory, "/models/mini/3")
        self.assert_error(grpc.StatusCode.NOT_FOUND,
                          'model "mini" has no version 9 in the repository (versions: 1, 2, 3)',
                          self.admin.load_model, "mini", [3, 9])
        self.assert_error(grpc.StatusCode.NOT_FOUND, None, self.admin.load_model, "nope")
        # A version that fails to load is an answer, not an exception.
        broken = self.admin.load_model("broken").model.versions[0]
        self.assertEqual((broken.state, broken.reason), (model_control_pb2.FAILED, BROKEN_REASON))

    def test_load_timeouts(self):
        # "slow" loads in 0.5 s: longer than timeout_s, within load_timeout_s.
        with AdminClient(self.target, timeout_s=0.05, load_timeout_s=5.0) as admin:
            self.assertEqual(self.states(admin.load_model("slow").model), {1: "READY"})
            self.assert_error(grpc.StatusCode.DEADLINE_EXCEEDED, None, admin.load_model,
                              "slow", timeout_s=0.05)

    def test_unload_model(self):
        response = self.admin.unload_model("mini", versions=[1])
        self.assertEqual(self.states(response.model), {1: "UNLOADED", 2: "READY"})
        response = self.admin.unload_model("mini")
        self.assertEqual(self.states(response.model), {1: "UNLOADED", 2: "UNLOADED"})
        self.assert_error(grpc.StatusCode.NOT_FOUND, None, self.admin.unload_model, "mini", [7])

    def test_set_version_label(self):
        response = self.admin.set_version_label("mini", "stable", 2)
        self.assertEqual(dict(response.model.labels), {"stable": 2, "canary": 2})
        response = self.admin.set_version_label("mini", "canary", 0)  # removes it
        self.assertEqual(dict(response.model.labels), {"stable": 2})
        self.assert_error(grpc.StatusCode.FAILED_PRECONDITION,
                          'model "mini" version 3 is not loaded (ready: 1, 2)',
                          self.admin.set_version_label, "mini", "stable", 3)
        self.admin.unload_model("mini", [1])
        self.assert_error(grpc.StatusCode.FAILED_PRECONDITION,
                          'model "mini" version 1 is UNLOADED, not READY (ready: 2)',
                          self.admin.set_version_label, "mini", "stable", 1)
        self.assert_error(grpc.StatusCode.INVALID_ARGUMENT, "label: must not be empty",
                          self.admin.set_version_label, "mini", "", 1)

    def test_metadata(self):
        self.admin.list_models(metadata=[("authorization", "Bearer t0ken")])
        self.assertEqual(self.fake.last_metadata.get("authorization"), "Bearer t0ken")

    def test_unreachable_and_wrong_listener(self):
        server, _, port = start_admin_server()
        server.stop(None)  # now nothing listens on `port`
        with AdminClient("127.0.0.1:%d" % port) as admin:
            self.assert_error(grpc.StatusCode.UNAVAILABLE, None, admin.list_models)
        # The public listener has no ModelControl service (as in rankd).
        public, _, public_port = start_server()
        try:
            with AdminClient("127.0.0.1:%d" % public_port) as admin:
                self.assert_error(grpc.StatusCode.UNIMPLEMENTED, None, admin.list_models)
        finally:
            public.stop(None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
