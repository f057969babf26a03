#!/usr/bin/python3
"""A hostile or careless client of `rankd serve`, for the end-to-end tests of
issue 17's defects 5-8 and the connection settings. It talks raw bytes
(hand-encoded protobuf) through grpc's generic calls, so it needs no stubs
and can send what no well-behaved client would. Every subcommand prints one
line per check ("ok ..." or "FAIL ...") and exits 1 when any failed.

  huge-names   echoed text: huge model / feature / label names are answered
               promptly with short messages a default client can read
  malformed    bytes that are not a ScoreRequest get INVALID_ARGUMENT
  idle-metrics idle and half-open connections do not starve /metrics scrapes
  inflight     many concurrent large requests: some RESOURCE_EXHAUSTED, all
               answered
  inflight-admission  concurrent large valid requests held in the batcher:
               rankd's admission refuses those past the budget
  conn-age     a connection is replaced after --max_connection_age_s while
               its in-flight RPC completes
  ping-flood   keepalive enforcement: a client pinging too often is closed
"""
import argparse
import concurrent.futures
import os
import socket
import struct
import sys
import threading
import time
import urllib.request

# tests/e2e/grpc/ (reflection protos) would shadow the grpc package when this
# runs from the checkout.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
import grpc  # noqa: E402

FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_varint(number, value):
    return varint(number << 3 | 0) + varint(value)


def score_request(model, num_candidates=1, dense=(), features=(), label=b""):
    """features: (name, ids, lengths) tuples; names and model are bytes."""
    out = field_bytes(1, model) + field_varint(3, num_candidates)
    if dense:
        out += field_bytes(4, struct.pack("<%df" % len(dense), *dense))
    for name, ids, lengths in features:
        sf = field_bytes(1, name)
        sf += field_bytes(2, b"".join(varint(i) for i in ids))
        sf += field_bytes(3, b"".join(varint(n) for n in lengths))
        out += field_bytes(5, sf)
    if label:
        out += field_bytes(6, label)
    return out


def channel(target, **options):
    # A default client: it sends anything, but reads at most 4 MiB messages
    # and 8 KiB of metadata (gRPC's defaults), as most clients do.
    opts = [("grpc.max_send_message_length", -1)] + list(options.items())
    return grpc.insecure_channel(target, options=opts)


def call(ch, method, payload, timeout):
    stub = ch.unary_unary(method, request_serializer=None, response_deserializer=None)
    start = time.monotonic()
    try:
        stub(payload, timeout=timeout)
        return grpc.StatusCode.OK, "", time.monotonic() - start
    except grpc.RpcError as e:
        return e.code(), e.details() or "", time.monotonic() - start


def expect_answer(ch, name, method, payload, codes, timeout=20, max_seconds=10, max_len=1100):
    code, details, secs = call(ch, method, payload, timeout)
    check(code in codes and secs <= max_seconds and len(details) <= max_len,
          f"{name}: {code.name} in {secs:.2f} s, message of {len(details)} bytes "
          f"(want {'/'.join(c.name for c in codes)} within {max_seconds} s, <= {max_len} "
          f"bytes): {details[:200]!r}")
    return code, details


def cmd_huge_names(a):
    ch = channel(a.target)
    feats = [(f.encode(), [0], [1]) for f in a.features.split(",")]
    score = "/rankd.v1.Ranking/Score"
    mib = 1 << 20
    for size in (8 * mib, 60 * mib):
        big = b"m" * size
        expect_answer(ch, f"Score, model name of {size // mib} MiB", score,
                      score_request(big, features=feats), [grpc.StatusCode.NOT_FOUND])
        expect_answer(ch, f"GetModelInfo, model name of {size // mib} MiB",
                      "/rankd.v1.Ranking/GetModelInfo", field_bytes(1, big),
                      [grpc.StatusCode.NOT_FOUND])
    # Past --max_message_bytes (64 MiB): gRPC refuses it before rankd sees it.
    expect_answer(ch, "Score, model name of 70 MiB (> --max_message_bytes)", score,
                  score_request(b"m" * (70 * mib), features=feats),
                  [grpc.StatusCode.RESOURCE_EXHAUSTED])
    big = b"f" * (8 * mib)
    code, details = expect_answer(
        ch, "Score, unknown feature name of 8 MiB", score,
        score_request(a.model.encode(), dense=[0.5] * a.num_dense,
                      features=[(big, [0], [1])] + feats[1:]),
        [grpc.StatusCode.INVALID_ARGUMENT])
    check("unknown feature" in details and "(8388608 bytes)" in details,
          f"the message names the field and the cut name's size: {details[:300]!r}")
    # A known feature sent twice, under a long name that matches nothing:
    # the duplicate-name path with a valid prefix is covered by the unit
    # test; here a huge label.
    expect_answer(ch, "Score, version_label of 8 MiB", score,
                  score_request(a.model.encode(), features=feats, label=b"l" * (8 * mib)),
                  [grpc.StatusCode.INVALID_ARGUMENT])
    # Non-ASCII text is cut on a character boundary (the message stays UTF-8).
    code, details = expect_answer(ch, "Score, model name of 1 MiB of 'é'", score,
                                  score_request("é".encode() * (mib // 2), features=feats),
                                  [grpc.StatusCode.NOT_FOUND])
    check("(1048576 bytes)" in details, f"cut UTF-8 name reported with its size: {details[:200]!r}")
    # The server still serves.
    code, details, _ = call(ch, "/rankd.v1.Ranking/GetModelInfo",
                            field_bytes(1, a.model.encode()), 10)
    check(code == grpc.StatusCode.OK, f"GetModelInfo {a.model} afterwards: {code.name} {details}")


def cmd_malformed(a):
    ch = channel(a.target)
    cases = [
        ("wire type 7", b"\x0f\x01\x02"),
        ("truncated string", b"\x0a\x10abc"),
        ("endless varint", b"\xff" * 12),
        ("model not UTF-8", b"\x0a\x02\xc3\x28"),
    ]
    for name, payload in cases:
        code, details = expect_answer(ch, f"Score, {name}", "/rankd.v1.Ranking/Score", payload,
                                      [grpc.StatusCode.INVALID_ARGUMENT])
        check(details.startswith("request is not a valid rankd.v1.ScoreRequest"),
              f"Score, {name}: message {details[:120]!r}")
    code, details = expect_answer(ch, "GetModelInfo, wire type 7",
                                  "/rankd.v1.Ranking/GetModelInfo", b"\x0f\x01",
                                  [grpc.StatusCode.INVALID_ARGUMENT])
    check(details.startswith("request is not a valid rankd.v1.GetModelInfoRequest"),
          f"GetModelInfo: message {details[:120]!r}")
    print(f"sent {len(cases)} malformed Score requests")


def cmd_utf8_flood(a):
    # The same malformed request again and again: each is refused, and the
    # server's log must not grow a line per request (checked by the caller).
    ch = channel(a.target)
    for i in range(a.count):
        expect_answer(ch, f"Score, model not UTF-8 #{i}", "/rankd.v1.Ranking/Score",
                      b"\x0a\x02\xc3\x28", [grpc.StatusCode.INVALID_ARGUMENT])
    print(f"sent {a.count} Score requests whose model name is not UTF-8")


def scrape_seconds(port, timeout):
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            body = r.read()
        ok = b"rankd_build_info" in body
    except Exception as e:  # noqa: BLE001 (any failure is the finding)
        print(f"scrape failed: {e}")
        ok = False
    return ok, time.monotonic() - start


def cmd_idle_metrics(a):
    socks = []
    for i in range(a.idle):
        s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
        if i % 2:
            s.sendall(b"GET /metr")  # half a request line, then nothing
        socks.append(s)
    time.sleep(0.3)  # the server has accepted them
    ok, secs = scrape_seconds(a.port, a.within + 30)
    check(ok and secs <= a.within,
          f"scrape with {a.idle} idle / half-open connections open: {secs:.2f} s "
          f"(want <= {a.within} s)")
    for s in socks:
        s.close()


def valid_big_request(model, num_dense, features, ids_per_feature):
    """One candidate; every feature one bag of ids_per_feature ids (id 0,
    one byte each on the wire) with weights: ~5 bytes per id on the wire,
    12 once parsed."""
    n = ids_per_feature
    out = field_bytes(1, model) + field_varint(3, 1)
    out += field_bytes(4, struct.pack("<%df" % num_dense, *([0.5] * num_dense)))
    for name in features:
        sf = field_bytes(1, name) + field_bytes(2, b"\0" * n) + field_bytes(3, varint(n))
        sf += field_bytes(4, b"\0\0\x80\x3f" * n)
        out += field_bytes(5, sf)
    return out


def concurrent_calls(target, payload, concurrency):
    codes, messages, lock = {}, {}, threading.Lock()

    def one(i):
        ch = channel(target)
        try:
            code, details, _ = call(ch, "/rankd.v1.Ranking/Score", payload, 120)
        finally:
            ch.close()
        with lock:
            codes[code] = codes.get(code, 0) + 1
            messages.setdefault(code, []).append(details)

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(concurrency)))
    print("codes: " + ", ".join(f"{c.name} {n}" for c, n in codes.items()))
    for c, m in messages.items():
        print(f"  {c.name}: {m[0][:200]}")
    return codes, messages


def cmd_inflight_admission(a):
    payload = valid_big_request(a.model.encode(), a.num_dense,
                                [f.encode() for f in a.features.split(",")], a.ids_per_feature)
    print(f"{a.concurrency} requests of {len(payload) >> 20} MiB on the wire")
    codes, messages = concurrent_calls(a.target, payload, a.concurrency)
    check(sum(codes.values()) == a.concurrency, "every request answered")
    check(codes.get(grpc.StatusCode.OK, 0) >= 1, "at least one admitted and scored")
    ours = [m for m in messages.get(grpc.StatusCode.RESOURCE_EXHAUSTED, [])
            if "--max_inflight_request_bytes" in m]
    check(len(ours) >= 1, f"{len(ours)} refused by rankd's admission, saying why")
    bad = {c: n for c, n in codes.items()
           if c not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OK)}
    check(not bad, f"no other codes: {bad}")
    with open(a.codes_out, "w") as f:
        f.write(f"OURS {len(ours)}\n")


def cmd_inflight(a):
    payload = valid_big_request(a.model.encode(), a.num_dense,
                                [f.encode() for f in a.features.split(",")], a.ids_per_feature)
    print(f"{a.concurrency} requests of {len(payload) >> 20} MiB on the wire")
    codes, messages = concurrent_calls(a.target, payload, a.concurrency)
    check(sum(codes.values()) == a.concurrency, "every request answered")
    exhausted = codes.get(grpc.StatusCode.RESOURCE_EXHAUSTED, 0)
    check(exhausted >= 1, f"{exhausted} answered RESOURCE_EXHAUSTED")
    # Not checked: that one was admitted and answered OK. The admitted ones
    # (one or two: the batcher holds each 1.5 s) can be among the streams
    # the transport resets under its quota.
    bad = {c: n for c, n in codes.items()
           if c not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OK)}
    check(not bad, f"no other codes: {bad}")
    # Refused by rankd (the message names the flag) or, still arriving, by
    # gRPC's transport under its memory quota (RST_STREAM ENHANCE_YOUR_CALM).
    for m in messages.get(grpc.StatusCode.RESOURCE_EXHAUSTED, []):
        if not ("--max_inflight_request_bytes" in m or "error code 11" in m):
            check(False, f"RESOURCE_EXHAUSTED says why: {m[:200]!r}")
    ours = sum(1 for m in messages.get(grpc.StatusCode.RESOURCE_EXHAUSTED, [])
               if "--max_inflight_request_bytes" in m)
    resets = sum(1 for m in messages.get(grpc.StatusCode.RESOURCE_EXHAUSTED, [])
                 if "error code 11" in m)
    with open(a.codes_out, "w") as f:
        f.write(f"OURS {ours}\nRESETS {resets}\n")


def client_ports(server_port):
    """Local ports of this process's ESTABLISHED TCP connections to server_port."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote, state, inode = parts[1], parts[2], parts[3], parts[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == server_port:
                ports.add(int(local.split(":")[1], 16))
    return ports


def cmd_conn_age(a):
    port = int(a.target.rsplit(":", 1)[1])
    ch = channel(a.target)
    slow = score_request(a.model.encode(), dense=[0.5] * a.num_dense,
                         features=[(f.encode(), [0], [1]) for f in a.features.split(",")])
    # A first call makes the connection.
    code, details, _ = call(ch, "/rankd.v1.Ranking/Score", slow, 30)
    check(code == grpc.StatusCode.OK, f"first call: {code.name} {details}")
    first = client_ports(port)
    check(len(first) == 1, f"one connection to the server: {sorted(first)}")
    # Calls that each take --slow_s (the model's batching delay), back to
    # back over more than 2 connection ages: every one must succeed,
    # including those in flight when a GOAWAY comes.
    seen, results = set(first), []
    deadline = time.monotonic() + a.run_s
    while time.monotonic() < deadline:
        code, details, secs = call(ch, "/rankd.v1.Ranking/Score", slow, 30)
        results.append((code, secs))
        if code != grpc.StatusCode.OK:
            print(f"call failed: {code.name} {details}")
        seen |= client_ports(port)
    n_ok = sum(1 for c, _ in results if c == grpc.StatusCode.OK)
    check(n_ok == len(results) and n_ok >= 3,
          f"{n_ok} of {len(results)} calls OK while connections were recycled")
    slowest = max(s for _, s in results)
    check(slowest >= a.slow_s * 0.8,
          f"calls were slow enough to be in flight at a GOAWAY (slowest {slowest:.2f} s)")
    check(len(seen) >= 2, f"the client used {len(seen)} connections over {a.run_s} s "
          f"(local ports {sorted(seen)}): the server recycled the first")
    ch.close()


def h2_frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def h2_pinger(port, interval_s, duration_s):
    """A raw HTTP/2 connection sending a PING every interval_s, no streams.
    Returns (goaway debug text or None, seconds until the server closed the
    connection or None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0))
    s.setblocking(False)
    buf, goaway, start, next_ping, n = b"", None, time.monotonic(), 0.0, 0
    while time.monotonic() - start < duration_s:
        now = time.monotonic() - start
        if now >= next_ping:
            n += 1
            try:
                s.sendall(h2_frame(6, 0, 0, struct.pack(">Q", n)))
            except OSError:
                return goaway, now
            next_ping = now + interval_s
        try:
            data = s.recv(65536)
            if not data:
                s.close()
                return goaway, time.monotonic() - start
            buf += data
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            return goaway, time.monotonic() - start
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            ftype, flags, payload = buf[3], buf[4], buf[9:9 + length]
            buf = buf[9 + length:]
            if ftype == 4 and not flags & 1:
                s.sendall(h2_frame(4, 1, 0))  # SETTINGS ack
            if ftype == 7:  # GOAWAY: last stream, error code, debug data
                goaway = f"code {int.from_bytes(payload[4:8], 'big')} {payload[8:].decode(errors='replace')}"
    s.close()
    return goaway, None


def cmd_ping_flood(a):
    port = int(a.target.rsplit(":", 1)[1])
    # Pings every 2 s without calls: within --keepalive_min_client_interval_s
    # (1 s here), allowed without calls: kept for the whole time. (gRPC's
    # defaults, 5 minutes and no pings without calls, close it.)
    goaway, closed = h2_pinger(port, 2.0, a.wait_s)
    check(goaway is None and closed is None,
          f"a client pinging every 2 s without calls keeps its connection for {a.wait_s} s "
          f"(GOAWAY {goaway}, closed after {closed})")
    # Pings every 100 ms: GOAWAY ENHANCE_YOUR_CALM (11) too_many_pings.
    goaway, closed = h2_pinger(port, 0.1, a.wait_s)
    check(closed is not None and goaway is not None and "too_many_pings" in goaway,
          f"a client pinging every 100 ms is sent GOAWAY too_many_pings and closed "
          f"(GOAWAY {goaway}, closed after {closed})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("huge-names")
    h.add_argument("--target", required=True)
    h.add_argument("--model", required=True)
    h.add_argument("--num_dense", type=int, required=True)
    h.add_argument("--features", required=True, help="the model's features, comma-separated")
    m = sub.add_parser("malformed")
    m.add_argument("--target", required=True)
    u = sub.add_parser("utf8-flood")
    u.add_argument("--target", required=True)
    u.add_argument("--count", type=int, default=200)
    i = sub.add_parser("idle-metrics")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--idle", type=int, required=True)
    i.add_argument("--within", type=float, required=True)
    f = sub.add_parser("inflight")
    f.add_argument("--target", required=True)
    f.add_argument("--model", required=True)
    f.add_argument("--num_dense", type=int, required=True)
    f.add_argument("--features", required=True)
    f.add_argument("--concurrency", type=int, default=24)
    f.add_argument("--ids_per_feature", type=int, default=2 << 20)
    f.add_argument("--codes_out", required=True)
    g = sub.add_parser("inflight-admission")
    g.add_argument("--target", required=True)
    g.add_argument("--model", required=True)
    g.add_argument("--num_dense", type=int, required=True)
    g.add_argument("--features", required=True)
    g.add_argument("--concurrency", type=int, default=4)
    g.add_argument("--ids_per_feature", type=int, default=2 << 20)
    g.add_argument("--codes_out", required=True)
    c = sub.add_parser("conn-age")
    c.add_argument("--target", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--num_dense", type=int, required=True)
    c.add_argument("--features", required=True)
    c.add_argument("--slow_s", type=float, required=True)
    c.add_argument("--run_s", type=float, required=True)
    k = sub.add_parser("ping-flood")
    k.add_argument("--target", required=True)
    k.add_argument("--wait_s", type=float, default=4)
    a = p.parse_args()
    {"huge-names": cmd_huge_names, "malformed": cmd_malformed, "utf8-flood": cmd_utf8_flood, "idle-metrics": cmd_idle_metrics,
     "inflight": cmd_inflight, "inflight-admission": cmd_inflight_admission,
     "conn-age": cmd_conn_age, "ping-flood": cmd_ping_flood}[a.cmd](a)
    if FAILED:
        print(f"{len(FAILED)} check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
