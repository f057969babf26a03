"""Tests of rankd_client against an in-process fake rankd (grpc.server).

Run by client/python/rankd_client_test.sh (Bazel: //client:python_client_test),
which generates the stubs first and puts them on PYTHONPATH.
"""

import time
import unittest
from concurrent import futures

import grpc

import rankd_client
from rankd_client import RankdError, RankingClient
from rankd.v1 import ranking_pb2
from rankd.v1 import ranking_pb2_grpc

health_pb2 = rankd_client.health_pb2

ERROR_MESSAGE = "dense: NaN at index 3"


class FakeRanking(ranking_pb2_grpc.RankingServicer):
    """model "mini": scores (i+1)/1024; "error": INVALID_ARGUMENT; "slow":
    sleeps 0.5 s; others NOT_FOUND."""

    def __init__(self):
        self.last_metadata = {}

    def Score(self, request, context):
        self.last_metadata = dict(context.invocation_metadata())
        if request.model == "error":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, ERROR_MESSAGE)
        if request.model == "slow":
            time.sleep(0.5)
        elif request.model != "mini":
            context.abort(grpc.StatusCode.NOT_FOUND, 'model "%s" is not served' % request.model)
        return ranking_pb2.ScoreResponse(
            scores=[(i + 1) / 1024.0 for i in range(request.num_candidates)],
            model=request.model, version=request.version or 1)

    def GetModelInfo(self, request, context):
        if request.model != "mini":
            context.abort(grpc.StatusCode.NOT_FOUND, 'model "%s" is not served' % request.model)
        info = ranking_pb2.ModelInfo(name="mini", version=request.version or 2,
                                     versions=[1, 2], num_dense=13, backend="cpu")
        info.features.add(name="user_id", table="t_user", request_level=True, dim=16,
                          num_rows=1000)
        return info


HEALTH = {"": health_pb2.HealthCheckResponse.SERVING,
          "mini": health_pb2.HealthCheckResponse.SERVING,
          "draining": health_pb2.HealthCheckResponse.NOT_SERVING}


def health_check(request, context):
    if request.service not in HEALTH:
        context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
    return health_pb2.HealthCheckResponse(status=HEALTH[request.service])


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
