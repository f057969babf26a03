#!/usr/bin/env python3
"""Self-test of torch_reference.py on tiny models with hand-computed scores.

    python3 tests/reference/selftest.py        # numpy path always; torch path too if importable

Every case is a 2-candidate model with num_dense 2, two tables of dim 2 and
two features, weights chosen so every intermediate value is exact in binary
floating point. The expected logits below were computed by hand (the working
is in the comments); scores are their sigmoids.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_reference as tr  # noqa: E402

FAILURES = []
HAVE_TORCH = False
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print(f"  FAIL: {what}")


def close(got, want, tol, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    ok = got.shape == want.shape and np.allclose(got, want, rtol=0, atol=tol)
    check(ok, f"{what}: got {got.tolist()} want {want.tolist()}")


def expect_raises(exc, fn, what):
    try:
        fn()
    except exc as e:
        CHECKS[0] += 1
        return str(e)
    except Exception as e:  # wrong exception type
        check(False, f"{what}: raised {type(e).__name__}: {e}, expected {exc.__name__}")
        return None
    check(False, f"{what}: did not raise {exc.__name__}")
    return None


# ---------------------------------------------------------------------------
# The hand model
#
#   dense: c0 = [1, 2], c1 = [2, -1]
#   bottom (bot_l.0): W = [[1, 1], [0.5, -1]], b = [0, 1], ReLU
#     c0: [1+2, 0.5-2+1 = -0.5] -> x = [3, 0]
#     c1: [2-1, 1+1+1 = 3]      -> x = [1, 3]
#   table t0 STATIC 3 rows fp32, SUM, id_policy ZERO, no default:
#     r0 = [1, 2], r1 = [0, -1], r2 = [2, 0.5]
#   table t1 DYNAMIC keys [100, 7] (unsorted on purpose) fp16, MEAN, ZERO,
#     default_vector [0.5, -0.5]:  key100 = [0.5, 1], key7 = [-1, 0.25]
#   feature order in the config: f_item (t0), f_user (t1, request-level);
#   the request sends them in the other order.
#   f_item: ids [0, 2 | 1, 5], weights [1, 0.5 | 2, 3]
#     c0: 1*r0 + 0.5*r2 = [2, 2.25]
#     c1: 2*r1 + 3*zeros (5 is out of range -> default = zeros) = [0, -2]
#   f_user: ids [7, 999, 100], one bag shared by both candidates, no weights:
#     mean(key7, default, key100) = [-1+0.5+0.5, 0.25-0.5+1] / 3 = [0, 0.25]
# ---------------------------------------------------------------------------

def base_config(kind="DOT", self_interaction=False, t0_pooling="SUM", t1_dtype="FP16", top=(1,)):
    cfg = {
        "name": "hand",
        "num_dense": 2,
        "tables": [
            {"name": "t0", "kind": "STATIC", "num_rows": "3", "dim": 2, "dtype": "FP32",
             "pooling": t0_pooling, "id_policy": "ZERO"},
            {"name": "t1", "kind": "DYNAMIC", "num_rows": "2", "dim": 2, "dtype": t1_dtype,
             "pooling": "MEAN", "id_policy": "ZERO", "default_vector": [0.5, -0.5]},
        ],
        "sparse_features": [
            {"name": "f_item", "table": "t0"},
            {"name": "f_user", "table": "t1", "request_level": True},
        ],
        "bottom_mlp": [2],
        "interaction": {"kind": kind},
        "top_mlp": list(top),
    }
    if self_interaction:
        cfg["interaction"]["self_interaction"] = True
    if kind == "DCN_V2":
        cfg["interaction"].update({"dcn_num_layers": 2, "dcn_low_rank": 1})
    return cfg


T0 = np.array([[1, 2], [0, -1], [2, 0.5]], dtype=np.float32)
T1 = np.array([[0.5, 1], [-1, 0.25]], dtype=np.float32)
KEYS = np.array([100, 7], dtype=np.int64)
BOT_W = np.array([[1, 1], [0.5, -1]], dtype=np.float32)
BOT_B = np.array([0, 1], dtype=np.float32)


def t1_tensor(dtype, values=T1):
    if dtype == "FP16":
        return values.astype(np.float16)
    if dtype == "BF16":
        return tr.BF16Array(tr.f32_to_bf16_bits(values))
    return values.astype(np.float32)


def dlrm_tensors(top_w, top_b, t1_dtype="FP16", t1_values=T1):
    return {
        "emb_l.0.weight": T0.copy(),
        "emb_l.1.weight": t1_tensor(t1_dtype, t1_values),
        "emb_l.1.keys": KEYS.copy(),
        "bot_l.0.weight": BOT_W.copy(),
        "bot_l.0.bias": BOT_B.copy(),
        "top_l.0.weight": np.array(top_w, dtype=np.float32),
        "top_l.0.bias": np.array(top_b, dtype=np.float32),
    }


# DCN_V2, N = (1 + 2) * 2 = 6, 2 cross layers of rank 1, top MLP [2, 1]:
#   x0 c0 = [3, 0, 2, 2.25, 0, 0.25], c1 = [1, 3, 0, -2, 0, 0.25]
#   layer 0: V = [[1, 0, 0.5, 0, 0, 1]], W = [[1],[0],[0],[0.5],[0],[2]],
#            b = [-3, 1, 0, 0, 1, 0] (stored as [6, 1])
#     c0: V x0 = 3 + 1 + 0.25 = 4.25; W(.) + b = [1.25, 1, 0, 2.125, 1, 8.5]
#         x1 = x0 * that + x0 = [6.75, 0, 2, 7.03125, 0, 2.375]
#     c1: V x0 = 1 + 0.25 = 1.25;     W(.) + b = [-1.75, 1, 0, 0.625, 1, 2.5]
#         x1 = [-0.75, 6, 0, -3.25, 0, 0.875]
#   layer 1: V = W = 0, b = [0, 0, 0.5, 0, 0, 0] (stored as [6]) -> x2 = x0 * b + x1
#     c0: x2 = [6.75, 0, 3, 7.03125, 0, 2.375]     c1: x2 = x1
#   over_arch.model.0: W = [[1,0,0,0,0,0], [0,0.5,0.25,0.5,0,2]], b = [0, -1], ReLU
#     c0: [6.75, 0.75 + 3.515625 + 4.75 - 1 = 8.015625]
#     c1: [relu(-0.75) = 0, 3 - 1.625 + 1.75 - 1 = 2.125]
#   over_arch.model.1: W = [[0.5, -1]], b = [0.25]
#     c0: 3.375 - 8.015625 + 0.25 = -4.390625     c1: 0 - 2.125 + 0.25 = -1.875
# With f_item as one shared bag (e0 = [2, 2.25] for c1 too):
#     c1: x0 = [1, 3, 2, 2.25, 0, 0.25]; V x0 = 2.25; W(.) + b = [-0.75, 1, 0, 1.125, 1, 4.5]
#         x1 = [0.25, 6, 2, 4.78125, 0, 1.375]; x2 = x1 + [0, 0, 1, 0, 0, 0] = [0.25, 6, 3, 4.78125, 0, 1.375]
#         h = [0.25, 3 + 0.75 + 2.390625 + 2.75 - 1 = 7.890625]
#         logit = 0.125 - 7.890625 + 0.25 = -7.515625
def dcn_tensors():
    p = "sparse_arch.embedding_bag_collection.embedding_bags."
    c = "inter_arch.crossnet."
    return {
        p + "t0.weight": T0.copy(),
        p + "t1.weight": T1.astype(np.float16),
        p + "t1.keys": KEYS.copy(),
        "dense_arch.model._mlp.0._linear.weight": BOT_W.copy(),
        "dense_arch.model._mlp.0._linear.bias": BOT_B.copy(),
        c + "V_kernels.0": np.array([[1, 0, 0.5, 0, 0, 1]], dtype=np.float32),
        c + "W_kernels.0": np.array([[1], [0], [0], [0.5], [0], [2]], dtype=np.float32),
        c + "bias.0": np.array([[-3], [1], [0], [0], [1], [0]], dtype=np.float32),
        c + "V_kernels.1": np.zeros((1, 6), dtype=np.float32),
        c + "W_kernels.1": np.zeros((6, 1), dtype=np.float32),
        c + "bias.1": np.array([0, 0, 0.5, 0, 0, 0], dtype=np.float32),
        "over_arch.model.0._mlp.0._linear.weight": np.array([[1, 0, 0, 0, 0, 0], [0, 0.5, 0.25, 0.5, 0, 2]],
                                                            dtype=np.float32),
        "over_arch.model.0._mlp.0._linear.bias": np.array([0, -1], dtype=np.float32),
        "over_arch.model.1.weight": np.array([[0.5, -1]], dtype=np.float32),
        "over_arch.model.1.bias": np.array([0.25], dtype=np.float32),
    }


def base_request(shared_item=False):
    item = ({"name": "f_item", "ids": ["0", "2"], "lengths": [2], "weights": [1, 0.5]} if shared_item else
            {"name": "f_item", "ids": ["0", "2", "1", "5"], "lengths": [2, 2], "weights": [1, 0.5, 2, 3]})
    return {"model": "hand", "numCandidates": 2, "dense": [1, 2, 2, -1],
            "sparse": [{"name": "f_user", "ids": ["7", "999", "100"], "lengths": [3]}, item]}


# (name, config, tensors, request, expected logits)
CASES = [
    # DOT: T = [x, e0, e1]; pairs (1,0), (2,0), (2,1)
    #   c0: x=[3,0] e0=[2,2.25] e1=[0,0.25] -> R = [3, 0, 6, 0, 0.5625]
    #   c1: x=[1,3] e0=[0,-2]   e1=[0,0.25] -> R = [1, 3, -6, 0.75, -0.5]
    #   top W = [0.25, -0.5, 0.125, 1, -1], b = -0.5
    #   c0: 0.75 + 0.75 - 0.5625 - 0.5 = 0.4375
    #   c1: 0.25 - 1.5 - 0.75 + 0.75 + 0.5 - 0.5 = -1.25
    ("DOT", base_config("DOT"), dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5]),
     base_request(), [0.4375, -1.25]),
    # DOT, f_item sent as one shared bag (lengths [2]) -> e0 = [2, 2.25] for both:
    #   c1: R = [1, 3, <e0,x>=8.75, <e1,x>=0.75, <e1,e0>=0.5625]
    #       0.25 - 1.5 + 1.09375 + 0.75 - 0.5625 - 0.5 = -0.46875
    ("DOT shared bag", base_config("DOT"), dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5]),
     base_request(shared_item=True), [0.4375, -0.46875]),
    # DOT with self_interaction: pairs (0,0),(1,0),(1,1),(2,0),(2,1),(2,2)
    #   c0: R = [3, 0, 9, 6, 9.0625, 0, 0.5625, 0.0625]
    #   c1: R = [1, 3, 10, -6, 4, 0.75, -0.5, 0.0625]
    #   top W = [0.5, 0.5, -0.25, 0.125, 0.25, 1, -1, 2], b = 0
    #   c0: 1.5 - 2.25 + 0.75 + 2.265625 - 0.5625 + 0.125 = 1.828125
    #   c1: 0.5 + 1.5 - 2.5 - 0.75 + 1 + 0.75 + 0.5 + 0.125 = 1.125
    ("DOT self", base_config("DOT", self_interaction=True),
     dlrm_tensors([[0.5, 0.5, -0.25, 0.125, 0.25, 1, -1, 2]], [0]), base_request(), [1.828125, 1.125]),
    # DOT with t0 MAX pooling (weighted): c0 e0 = max([1,2], 0.5*[2,0.5]) = [1, 2]
    #   c1 e0 = max(2*[0,-1], 3*zeros) = [0, 0]
    #   c0: R = [3, 0, 3, 0, 0.5]  -> 0.75 + 0.375 - 0.5 - 0.5 = 0.125
    #   c1: R = [1, 3, 0, 0.75, 0] -> 0.25 - 1.5 + 0.75 - 0.5 = -1.0
    ("DOT max", base_config("DOT", t0_pooling="MAX"), dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5]),
     base_request(), [0.125, -1.0]),
    # CAT: R = [x, e0, e1]; top W = [1, -1, 0.5, 0.25, 2, -2], b = 0.125
    #   c0: [3,0,2,2.25,0,0.25] -> 3 + 1 + 0.5625 - 0.5 + 0.125 = 4.1875
    #   c1: [1,3,0,-2,0,0.25]   -> 1 - 3 - 0.5 - 0.5 + 0.125 = -2.875
    ("CAT", base_config("CAT"), dlrm_tensors([[1, -1, 0.5, 0.25, 2, -2]], [0.125]),
     base_request(), [4.1875, -2.875]),
    # DCN_V2 (see dcn_tensors)
    ("DCN_V2", base_config("DCN_V2", top=(2, 1)), dcn_tensors(), base_request(), [-4.390625, -1.875]),
    ("DCN_V2 shared bag", base_config("DCN_V2", top=(2, 1)), dcn_tensors(), base_request(shared_item=True),
     [-4.390625, -7.515625]),
]


# Cases whose request differs from base_request (not used by the CLI test).
#   CAT with num_dense 0 and no bottom MLP: R = [e0, e1]
#     c0: [2, 2.25, 0, 0.25], c1: [0, -2, 0, 0.25]; top W = [1, -1, 2, 4], b = 0
#     c0: 2 - 2.25 + 1 = 0.75      c1: 2 + 1 = 3
_cfg_nodense = base_config("CAT")
_cfg_nodense.update(num_dense=0, bottom_mlp=[])
_t_nodense = dlrm_tensors([[1, -1, 2, 4]], [0])
del _t_nodense["bot_l.0.weight"], _t_nodense["bot_l.0.bias"]
_req_nodense = base_request()
_req_nodense.pop("dense")
EXTRA_CASES = [("CAT no dense", _cfg_nodense, _t_nodense, _req_nodense, [0.75, 3.0])]


# ---------------------------------------------------------------------------
# Backends under test
# ---------------------------------------------------------------------------

def numpy_builder(spec, tensors):
    return tr.NumpyModel(spec, tensors)


def torch_state_dict(tensors):
    import torch
    sd = {}
    for k, v in tensors.items():
        if isinstance(v, tr.BF16Array):
            sd[k] = torch.from_numpy(np.array(v.bits).view(np.int16)).view(torch.bfloat16)
        else:
            sd[k] = torch.from_numpy(np.array(v))
    return sd


def torch_builder(device):
    def build(spec, tensors):
        import torch
        sd = {k: v.to(device) for k, v in torch_state_dict(tensors).items()}
        return tr.build_torch_model(spec, sd, "<memory>", torch.device(device))
    return build


def backends():
    out = [("numpy", numpy_builder)]
    if HAVE_TORCH:
        out.append(("torch-cpu", torch_builder("cpu")))
        if tr.torch.cuda.is_available():
            out.append(("torch-cuda", torch_builder("cuda:0")))
    return out


def sigmoid(z):
    return [1 / (1 + math.exp(-v)) for v in z]


def test_cases(bname, build):
    for name, cfg, tensors, req, want in CASES + EXTRA_CASES:
        spec = tr.parse_config(cfg)
        model = build(spec, tensors)
        r = tr.parse_request(req, spec)
        z64, p64 = model.score(r, fp64=True)
        z32, p32 = model.score(r, fp64=False)
        close(z64, want, 1e-12, f"[{bname}] {name}: fp64 logits")
        close(p64, sigmoid(want), 1e-12, f"[{bname}] {name}: fp64 scores")
        close(z32, want, 1e-5, f"[{bname}] {name}: fp32 logits")
        close(p32, sigmoid(want), 1e-6, f"[{bname}] {name}: fp32 scores")


def pooled(model, fi, bag_dict, spec, fp64=True):
    """Pools one feature's bags through the backend."""
    bag = tr.Bag(ids=np.array(bag_dict["ids"], dtype=np.int64),
                 lengths=np.array(bag_dict["lengths"], dtype=np.int64),
                 weights=np.array(bag_dict["weights"], dtype=np.float32) if bag_dict.get("weights") else None)
    if isinstance(model, tr.NumpyModel):
        return model.pool(fi, bag, np.float64 if fp64 else np.float32)
    import torch
    with torch.inference_mode():
        out = model.pool(fi, bag, torch.float64 if fp64 else torch.float32, use_embedding_bag=not fp64)
    return out.double().cpu().numpy()


def test_pooling(bname, build):
    cfg = base_config("DOT")
    tens = dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5])
    spec = tr.parse_config(cfg)
    m = build(spec, tens)
    for fp64 in (True, False):
        tag = f"[{bname}] {'fp64' if fp64 else 'fp32'}"
        # weighted MEAN with a missing key: (2*key7 + 1*default + 0.5*key100) / 3
        #   = ([-2, 0.5] + [0.5, -0.5] + [0.25, 0.5]) / 3 = [-1.25/3, 0.5/3]
        close(pooled(m, 1, {"ids": [7, 999, 100], "lengths": [3], "weights": [2, 1, 0.5]}, spec, fp64),
              [[-1.25 / 3, 0.5 / 3]], 1e-12 if fp64 else 1e-7, f"{tag} weighted MEAN with default vector")
        # empty bag -> zeros (SUM); bag [2] -> r2
        close(pooled(m, 0, {"ids": [2], "lengths": [0, 1]}, spec, fp64), [[0, 0], [2, 0.5]], 0,
              f"{tag} SUM with an empty bag")
        # all bags empty
        close(pooled(m, 0, {"ids": [], "lengths": [0, 0]}, spec, fp64), [[0, 0], [0, 0]], 0,
              f"{tag} SUM with only empty bags")
        # unweighted SUM, all ids valid (the nn.EmbeddingBag path for fp32): r0 + r1 + r2 = [3, 1.5]
        close(pooled(m, 0, {"ids": [0, 1, 2], "lengths": [3]}, spec, fp64), [[3, 1.5]], 0,
              f"{tag} SUM of 3 rows")
        # empty bag in MEAN -> zeros
        close(pooled(m, 1, {"ids": [100], "lengths": [0, 1]}, spec, fp64), [[0, 0], [0.5, 1]], 0,
              f"{tag} MEAN with an empty bag")
    # MAX: negative values are kept (max is not clamped at 0); empty bag -> zeros
    cfg_max = base_config("DOT", t0_pooling="MAX")
    spec_max = tr.parse_config(cfg_max)
    m = build(spec_max, tens)
    for fp64 in (True, False):
        close(pooled(m, 0, {"ids": [1, 1, 2], "lengths": [1, 0, 2]}, spec_max, fp64),
              [[0, -1], [0, 0], [2, 0.5]], 0, f"[{bname}] MAX: negative row, empty bag, 2 rows")
        close(pooled(m, 0, {"ids": [1, 2], "lengths": [2], "weights": [-1, -2]}, spec_max, fp64),
              [[0, 1]], 0, f"[{bname}] MAX weighted: max(-r1, -2 r2) = max([0,1], [-4,-1])")
    # fp16 rows: 0.1 is stored as 0.0999755859375; bf16 stores it as 0.10009765625
    vals = np.array([[0.1, 1], [-1, 0.25]], dtype=np.float32)
    for dt, want in (("FP16", 0.0999755859375), ("BF16", 0.10009765625)):
        spec_dt = tr.parse_config(base_config("DOT", t1_dtype=dt))
        m = build(spec_dt, dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5], t1_dtype=dt, t1_values=vals))
        for fp64 in (True, False):
            close(pooled(m, 1, {"ids": [100], "lengths": [1]}, spec_dt, fp64), [[want, 1]], 0,
                  f"[{bname}] {dt} row 0.1 -> {want} ({'fp64' if fp64 else 'fp32'})")


def test_request_errors(bname, build):
    cfg = base_config("DOT")
    tens = dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5])
    spec = tr.parse_config(cfg)
    m = build(spec, tens)

    def run(req):
        return m.score(tr.parse_request(req, spec))

    def mutate(fn):
        r = copy.deepcopy(base_request())
        fn(r)
        return r

    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"][0].update(lengths=[2, 1]))),
                  f"[{bname}] request-level feature with 2 lengths")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"][1].update(lengths=[1, 2]))),
                  f"[{bname}] lengths sum != ids")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"][1].update(lengths=[1, 1, 2]))),
                  f"[{bname}] 3 lengths for 2 candidates")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"][1].update(weights=[1]))),
                  f"[{bname}] weights count")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"].pop(0))), f"[{bname}] missing feature")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"].append({"name": "nope", "lengths": [0]}))),
                  f"[{bname}] unknown feature")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r.update(dense=[1, "NaN", 2, -1]))),
                  f"[{bname}] NaN dense")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r.update(dense=[1, 2, 3]))), f"[{bname}] dense size")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r.pop("numCandidates"))), f"[{bname}] no candidates")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r.update(model="other"))), f"[{bname}] other model")
    expect_raises(tr.RequestError, lambda: run(mutate(lambda r: r["sparse"][1].update(weights=[1, "Infinity", 1, 1]))),
                  f"[{bname}] infinite weight")
    run(mutate(lambda r: r.pop("model")))  # no model name: fine
    # id policy ERROR (the STATIC default): id 5 of t0 is out of range
    cfg_err = base_config("DOT")
    del cfg_err["tables"][0]["id_policy"]
    spec_err = tr.parse_config(cfg_err)
    check(spec_err.tables[0].id_policy == "ERROR", f"[{bname}] STATIC default id_policy is ERROR")
    m_err = build(spec_err, tens)
    msg = expect_raises(tr.RequestError, lambda: m_err.score(tr.parse_request(base_request(), spec_err)),
                        f"[{bname}] out-of-range id under ERROR")
    check(msg is None or ("f_item" in msg and "5" in msg), f"[{bname}] error names feature and id: {msg}")
    # negative id too
    r = mutate(lambda r: r["sparse"][1].update(ids=["0", "2", "1", "-1"]))
    expect_raises(tr.RequestError, lambda: m_err.score(tr.parse_request(r, spec_err)), f"[{bname}] negative id under ERROR")
    # DYNAMIC key missing under ERROR
    cfg_err2 = base_config("DOT")
    cfg_err2["tables"][1]["id_policy"] = "ERROR"
    spec_err2 = tr.parse_config(cfg_err2)
    m_err2 = build(spec_err2, tens)
    expect_raises(tr.RequestError, lambda: m_err2.score(tr.parse_request(base_request(), spec_err2)),
                  f"[{bname}] missing key under ERROR")
    # DYNAMIC default policy is ZERO
    del cfg_err2["tables"][1]["id_policy"]
    check(tr.parse_config(cfg_err2).tables[1].id_policy == "ZERO", f"[{bname}] DYNAMIC default id_policy is ZERO")


def test_strict_names(bname, build):
    cfg = base_config("DOT")
    spec = tr.parse_config(cfg)
    good = dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5])
    bad_sets = {
        "missing keys": {k: v for k, v in good.items() if k != "emb_l.1.keys"},
        "extra tensor": dict(good, **{"emb_l.2.weight": T0.copy()}),
        "renamed": {("top_l.1.weight" if k == "top_l.0.weight" else k): v for k, v in good.items()},
        "bad shape": dict(good, **{"bot_l.0.weight": np.zeros((2, 3), np.float32)}),
        "table dtype": dict(good, **{"emb_l.1.weight": T1.copy()}),  # FP32 for an FP16 table
        "keys dtype": dict(good, **{"emb_l.1.keys": KEYS.astype(np.int32)}),
        "duplicate keys": dict(good, **{"emb_l.1.keys": np.array([7, 7], np.int64)}),
        "INT64_MIN key": dict(good, **{"emb_l.1.keys": np.array([7, -(1 << 63)], np.int64)}),
        "F16 MLP weight": dict(good, **{"top_l.0.weight": good["top_l.0.weight"].astype(np.float16)}),
        "NaN MLP weight": dict(good, **{"bot_l.0.bias": np.array([0, np.nan], np.float32)}),
    }
    for what, tens in bad_sets.items():
        expect_raises(tr.ModelError, lambda: build(spec, tens), f"[{bname}] strict load rejects: {what}")
    # DCN bias as [N] and [N, 1] both load (dcn_tensors mixes them); [1, N] does not
    spec_dcn = tr.parse_config(base_config("DCN_V2", top=(2, 1)))
    bad = dcn_tensors()
    bad["inter_arch.crossnet.bias.1"] = np.zeros((1, 6), np.float32)
    expect_raises(tr.ModelError, lambda: build(spec_dcn, bad), f"[{bname}] DCN bias [1, N] rejected")


def test_config_parsing():
    # proto3 JSON with defaults omitted, int64 as strings, lowerCamelCase keys and enum numbers
    cfg = {
        "name": "m", "numDense": 2,
        "tables": [{"name": "a", "numRows": "3", "dim": 2},
                   {"name": "b", "kind": 2, "numRows": "2", "dim": 2, "dtype": "FP16", "pooling": "MAX",
                    "idPolicy": "ID_POLICY_UNSPECIFIED"}],
        "sparseFeatures": [{"name": "f", "table": "a"}, {"name": "g", "table": "b", "requestLevel": True,
                                                        "maxIdsPerBag": 4}],
        "bottomMlp": [4, 2], "topMlp": [3, 1],
    }
    spec = tr.parse_config(cfg)
    a, b = spec.tables
    check((a.dynamic, a.dtype, a.pooling, a.id_policy, a.num_rows) == (False, "FP32", "SUM", "ERROR", 3),
          f"defaults of table a: {a}")
    check((b.dynamic, b.dtype, b.pooling, b.id_policy) == (True, "FP16", "MAX", "ZERO"), f"table b: {b}")
    check(spec.interaction == "DOT" and not spec.self_interaction, "interaction default DOT")
    check(spec.interaction_width == 2 + 3, f"DOT width 2 + 3 pairs: {spec.interaction_width}")
    check(spec.features[1].request_level and spec.features[1].max_ids_per_bag == 4, "feature g")
    wrapped = tr.parse_config({"config": cfg})
    check(wrapped.interaction_width == 5, "config wrapped in an object")
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["interaction"] = {"kind": "CAT"}
    check(tr.parse_config(cfg2).interaction_width == 2 + 2 + 2, "CAT width")
    cfg2["interaction"] = {"kind": "DOT", "selfInteraction": True}
    check(tr.parse_config(cfg2).interaction_width == 2 + 6, "DOT self width")
    cfg2["interaction"] = {"kind": "DCN_V2", "dcnNumLayers": 3, "dcnLowRank": 8}
    check(tr.parse_config(cfg2).interaction_width == 6, "DCN width")
    cfg2["topMlp"] = [3, 2]
    expect_raises(tr.ModelError, lambda: tr.parse_config(cfg2), "top MLP must end in 1")
    # max_ids_per_bag enforced
    spec = tr.parse_config(cfg)
    req = {"numCandidates": 1, "dense": [0, 0], "sparse": [
        {"name": "f", "ids": [0], "lengths": [1]}, {"name": "g", "ids": ["1"] * 5, "lengths": [5]}]}
    expect_raises(tr.RequestError, lambda: tr.parse_request(req, spec), "max_ids_per_bag")
    # snake_case request keys work too; int ids
    req2 = {"num_candidates": 1, "dense": [0.1, 0], "sparse": [
        {"name": "f", "ids": [0], "lengths": [1]}, {"name": "g", "ids": [1, 2], "lengths": [2]}]}
    r = tr.parse_request(req2, spec)
    check(r.num_candidates == 1 and r.dense.dtype == np.float32 and r.dense[0, 0] == np.float32(0.1),
          "snake_case request; dense rounded to float32")


def test_safetensors_and_bf16(tmp):
    # bf16 conversions: 1.0 = 0x3F80; 0.1 (0x3DCCCCCD) rounds up to 0x3DCD = 0.10009765625;
    # 1 + 2^-8 (0x3F808000) is a tie -> even 0x3F80; 1 + 3*2^-8 (0x3F818000) tie -> 0x3F82
    bits = tr.f32_to_bf16_bits(np.array([1.0, 0.1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5], np.float32))
    check(bits.tolist() == [0x3F80, 0x3DCD, 0x3F80, 0x3F82, 0xC020], f"bf16 bits {[hex(b) for b in bits]}")
    check(tr.bf16_bits_to_f32(bits).tolist() == [1.0, 0.10009765625, 1.0, 1.0 + 2 ** -6, -2.5], "bf16 -> f32")
    tens = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1.5, -0.1], dtype=np.float16),
        "c": tr.BF16Array(tr.f32_to_bf16_bits(np.array([[0.1, 2.0]], np.float32))),
        "d": np.array([1 << 40, -3], dtype=np.int64),
        "e": np.zeros((0, 4), dtype=np.float32),
    }
    path = os.path.join(tmp, "t.safetensors")
    tr.write_safetensors_numpy(path, tens, {"format": "pt"})
    got, dtypes, meta = tr.read_safetensors_numpy(path)
    check(dtypes == {"a": "F32", "b": "F16", "c": "BF16", "d": "I64", "e": "F32"}, f"dtypes {dtypes}")
    check(meta == {"format": "pt"}, f"metadata {meta}")
    check(np.array_equal(got["a"], tens["a"]) and np.array_equal(got["b"], tens["b"])
          and np.array_equal(got["d"], tens["d"]) and got["e"].shape == (0, 4), "safetensors round trip")
    check(isinstance(got["c"], tr.BF16Array) and got["c"].to_float32().tolist() == [[0.10009765625, 2.0]],
          "bf16 tensor round trip")
    with open(path, "r+b") as f:  # corrupt: header length beyond the file
        f.write((1 << 40).to_bytes(8, "little"))
    expect_raises(tr.ModelError, lambda: tr.read_safetensors_numpy(path), "corrupt header length")
    if tr.st_torch is not None:  # our writer's files load with the real library too
        tr.write_safetensors_numpy(path, tens)
        sd = tr.st_torch.load_file(path)
        import torch
        check(sd["c"].dtype == torch.bfloat16 and sd["c"].float().tolist() == [[0.10009765625, 2.0]],
              "safetensors.torch reads our BF16")
        check(sd["b"].dtype == torch.float16 and sd["d"].tolist() == [1 << 40, -3], "safetensors.torch reads F16/I64")


def run_cli(args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "torch_reference.py")] + args,
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_cli(tmp, backend, cases):
    for name, cfg, tensors, req, want in cases:
        d = os.path.join(tmp, backend, name.replace(" ", "_"), "hand", "1")
        os.makedirs(d)
        tr.write_safetensors_numpy(os.path.join(d, "weights.safetensors"), tensors)
        cfg_path = os.path.join(d, "..", "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        bad_req = copy.deepcopy(base_request())
        bad_req["sparse"][0]["lengths"] = [1, 2]  # request-level with 2 entries: rejected
        reqs = [req, base_request(shared_item=True), bad_req,
                {"model": "hand", "num_candidates": 1, "dense": [0.5, -0.25],
                 "sparse": [{"name": "f_item", "ids": [1], "lengths": [1]},
                            {"name": "f_user", "ids": [100, 100], "lengths": [2], "weights": [0.5, 0.5]}]}]
        req_path = os.path.join(d, "..", "requests.jsonl")
        with open(req_path, "w") as f:
            f.write("\n".join(json.dumps(r) for r in reqs) + "\n")
        ref_path = os.path.join(d, "..", "ref.jsonl")
        common = ["--model", d, "--config", cfg_path, "--requests", req_path, "--backend", backend,
                  "--device", "auto"]
        rc, out = run_cli(common + ["--write-responses", ref_path])
        check(rc == 0, f"[cli {backend}] {name}: --write-responses rc {rc}\n{out}")
        if rc != 0:
            continue
        lines = [json.loads(l) for l in open(ref_path)]
        check(len(lines) == 4 and "error" in lines[2] and lines[0].get("version") == "1", f"[cli] {name}: ref lines {lines}")
        close(lines[0]["scores"], sigmoid(want), 1e-7, f"[cli {backend}] {name}: written scores")
        rc, out = run_cli(common + ["--responses", ref_path])
        check(rc == 0 and "PASS" in out, f"[cli {backend}] {name}: self-compare rc {rc}\n{out}")
        # fp32-rounded hand scores, as a server would send them (the error line stays an error)
        server = [dict(l) for l in lines]
        server[0] = {"scores": [float(np.float32(s)) for s in sigmoid(want)]}
        srv_path = os.path.join(d, "..", "server.jsonl")
        with open(srv_path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in server) + "\n")
        rc, out = run_cli(common + ["--responses", srv_path, "--tolerance", "1e-7"])
        check(rc == 0, f"[cli {backend}] {name}: hand scores pass at 1e-7: rc {rc}\n{out}")
        # one score off by 1e-4 relative -> exit 1
        off = [dict(l) for l in server]
        off[1] = {"scores": [lines[1]["scores"][0], lines[1]["scores"][1] * (1 + 1e-4)]}
        with open(srv_path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in off) + "\n")
        rc, out = run_cli(common + ["--responses", srv_path])
        check(rc == 1 and "FAIL" in out and "request 1 candidate 1" in out,
              f"[cli {backend}] {name}: perturbed score fails: rc {rc}\n{out}")
        # the server scoring the invalid request, or erroring on a valid one -> exit 1
        off = [dict(l) for l in server]
        off[2], off[3] = {"scores": [0.5, 0.5]}, {"error": "INVALID_ARGUMENT: whatever"}
        with open(srv_path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in off) + "\n")
        rc, out = run_cli(common + ["--responses", srv_path])
        check(rc == 1 and "request 2" in out and "request 3" in out,
              f"[cli {backend}] {name}: error mismatches fail: rc {rc}\n{out}")
        # `rankd score --keep_going` leaves the rejected request's line out: still aligned
        with open(srv_path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in server[:2] + server[3:]) + "\n")
        rc, out = run_cli(common + ["--responses", srv_path])
        check(rc == 0 and "rejected requests left out" in out,
              f"[cli {backend}] {name}: keep_going alignment: rc {rc}\n{out}")
        # too few responses -> exit 1
        with open(srv_path, "w") as f:
            f.write("\n".join(json.dumps(l) for l in server[:2]) + "\n")
        rc, out = run_cli(common + ["--responses", srv_path])
        check(rc == 1 and "4 requests but 2 responses" in out,
              f"[cli {backend}] {name}: missing response fails: rc {rc}\n{out}")
        # the first "max rel err" printed is the gated one (tests/gpu/run_on_device.sh greps it)
        rc, out = run_cli(common + ["--responses", ref_path])
        first = [l for l in out.splitlines() if "max rel err" in l][0]
        check(first.startswith("server vs fp64 reference"), f"[cli {backend}] gated line first: {first}")
    # a bad weights file -> exit 2
    d = os.path.join(tmp, backend, "bad", "hand", "1")
    os.makedirs(d)
    tens = dlrm_tensors([[0.25, -0.5, 0.125, 1, -1]], [-0.5])
    tens["emb_l.7.weight"] = T0.copy()
    tr.write_safetensors_numpy(os.path.join(d, "weights.safetensors"), tens)
    cfg_path = os.path.join(d, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(base_config("DOT"), f)
    req_path = os.path.join(d, "r.jsonl")
    with open(req_path, "w") as f:
        f.write(json.dumps(base_request()) + "\n")
    rc, out = run_cli(["--model", d, "--config", cfg_path, "--requests", req_path, "--backend", backend,
                       "--write-responses", os.path.join(d, "o.jsonl")])
    check(rc == 2 and "emb_l.7.weight" in out, f"[cli {backend}] unexpected tensor -> exit 2: rc {rc}\n{out}")


def random_case(kind, rng, self_interaction=False):
    """A random model (mixed dtypes, pooling, a DYNAMIC table, two features on
    one table, a request-level feature) and random requests that hit shared
    bags, empty bags, weights, unresolved ids and default vectors."""
    dim = 4 if kind != "CAT" else None
    tables, tensors = [], {}
    specs = [("FP32", "SUM", False), ("FP16", "MEAN", False), ("BF16", "MAX", False), ("FP32", "SUM", True),
             ("FP16", "MAX", True)]
    for k, (dt, pool, dyn) in enumerate(specs):
        d = dim or int(rng.integers(1, 6))
        rows = int(rng.integers(3, 40))
        t = {"name": f"tab{k}", "kind": "DYNAMIC" if dyn else "STATIC", "num_rows": str(rows), "dim": d,
             "dtype": dt, "pooling": pool, "id_policy": "ZERO"}
        if k % 2 == 0:
            t["default_vector"] = rng.normal(size=d).astype(np.float32).tolist()
        tables.append(t)
        vals = rng.normal(size=(rows, d)).astype(np.float32)
        w = (vals.astype(np.float16) if dt == "FP16" else
             tr.BF16Array(tr.f32_to_bf16_bits(vals)) if dt == "BF16" else vals)
        if kind == "DCN_V2":
            pre = f"sparse_arch.embedding_bag_collection.embedding_bags.tab{k}"
        else:
            pre = f"emb_l.{k}"
        tensors[pre + ".weight"] = w
        if dyn:
            tensors[pre + ".keys"] = rng.choice(10 ** 12, size=rows, replace=False).astype(np.int64) - 5 * 10 ** 11
    feats = [{"name": f"f{i}", "table": f"tab{t}"} for i, t in enumerate([0, 1, 2, 3, 4, 0])]
    feats[4]["request_level"] = True
    num_dense = 5
    bottom = [8, dim] if dim else [6]
    cfg = {"name": "rnd", "num_dense": num_dense, "tables": tables, "sparse_features": feats,
           "bottom_mlp": bottom, "interaction": {"kind": kind}, "top_mlp": [7, 1]}
    if self_interaction:
        cfg["interaction"]["self_interaction"] = True
    if kind == "DCN_V2":
        cfg["interaction"].update({"dcn_num_layers": 3, "dcn_low_rank": 3})
    spec = tr.parse_config(cfg)

    def lin(prefix, n_in, n_out, scale=None):
        sc = scale or 1 / math.sqrt(n_in)
        tensors[prefix + ".weight"] = (rng.normal(size=(n_out, n_in)) * sc).astype(np.float32)
        tensors[prefix + ".bias"] = (rng.normal(size=n_out) * 0.1).astype(np.float32)

    bot, top = tr.mlp_names(spec)
    wb = [num_dense] + bottom
    for i, pfx in enumerate(bot):
        lin(pfx, wb[i], wb[i + 1])
    wt = [spec.interaction_width] + [7, 1]
    for i, pfx in enumerate(top):
        lin(pfx, wt[i], wt[i + 1])
    if kind == "DCN_V2":
        n = spec.interaction_width
        for l in range(3):
            tensors[f"inter_arch.crossnet.V_kernels.{l}"] = (rng.normal(size=(3, n)) * 0.3).astype(np.float32)
            tensors[f"inter_arch.crossnet.W_kernels.{l}"] = (rng.normal(size=(n, 3)) * 0.3).astype(np.float32)
            shape = (n, 1) if l == 1 else (n,)
            tensors[f"inter_arch.crossnet.bias.{l}"] = (rng.normal(size=shape) * 0.1).astype(np.float32)
    reqs = []
    for r in range(4):
        b = int(rng.integers(1, 40))
        sparse = []
        for i, f in enumerate(feats):
            t = spec.tables[spec.features[i].table]
            nb = 1 if (f.get("request_level") or (r + i) % 3 == 0) else b
            lengths = rng.integers(0, 5, size=nb).tolist()
            nnz = sum(lengths)
            if t.dynamic:
                keys = tensors[tr.table_prefix(spec, t.index) + ".keys"]
                ids = [int(keys[j]) for j in rng.integers(0, t.num_rows, size=nnz)]
                ids = [v if rng.random() > 0.15 else v + 1 for v in ids]  # some missing keys
            else:
                ids = rng.integers(-2, t.num_rows + 2, size=nnz).tolist()  # some out of range
            feat = {"name": f["name"], "ids": [str(v) for v in ids], "lengths": lengths}
            if rng.random() < 0.6:
                feat["weights"] = rng.uniform(-2, 2, size=nnz).astype(np.float32).tolist()
            sparse.append(feat)
        rng.shuffle(sparse)
        reqs.append({"numCandidates": b, "dense": rng.normal(size=b * num_dense).astype(np.float32).tolist(),
                     "sparse": sparse})
    return cfg, tensors, reqs


def test_random_cross(builders):
    """numpy vs torch (when present), fp64 vs fp32, on random models."""
    rng = np.random.default_rng(1234)
    for kind, self_i in (("DOT", False), ("DOT", True), ("CAT", False), ("DCN_V2", False)):
        cfg, tensors, reqs = random_case(kind, rng, self_i)
        spec = tr.parse_config(cfg)
        models = [(name, build(spec, tensors)) for name, build in builders]
        for ri, req in enumerate(reqs):
            r = tr.parse_request(req, spec)
            z_ref, p_ref = models[0][1].score(r, fp64=True)
            check(np.isfinite(z_ref).all(), f"random {kind}: finite logits")
            for name, m in models:
                z64, p64 = m.score(r, fp64=True)
                z32, p32 = m.score(r, fp64=False)
                tag = f"random {kind}{' self' if self_i else ''} req {ri} [{name}]"
                close(z64, z_ref, 1e-10 * max(1.0, float(np.abs(z_ref).max())), f"{tag}: fp64 vs numpy fp64")
                rel = np.abs(p32 - p_ref) / np.abs(p_ref)
                check(rel.max() < 1e-5, f"{tag}: fp32 vs fp64 rel err {rel.max():.3e}")


def main():
    global HAVE_TORCH
    HAVE_TORCH = tr.ensure_torch()
    print(f"numpy {np.__version__}; torch: {tr.torch.__version__ if HAVE_TORCH else 'not importable'}; "
          f"safetensors: {'yes' if tr.st_torch is not None else 'no (numpy reader)'}")
    test_config_parsing()
    with tempfile.TemporaryDirectory() as tmp:
        test_safetensors_and_bf16(tmp)
        for bname, build in backends():
            print(f"backend {bname}", flush=True)
            for t in (test_cases, test_pooling, test_request_errors, test_strict_names):
                try:
                    t(bname, build)
                except Exception:
                    check(False, f"[{bname}] {t.__name__} crashed:\n{traceback.format_exc()}")
        try:
            test_random_cross(backends())
        except Exception:
            check(False, f"random cross-check crashed:\n{traceback.format_exc()}")
        for backend in ["numpy"] + (["torch"] if HAVE_TORCH else []):
            print(f"CLI, backend {backend}", flush=True)
            try:
                # torch CLI runs cost seconds each (import, CUDA init): two cases suffice there
                test_cli(tmp, backend, CASES if backend == "numpy" else [CASES[0], CASES[5]])
            except Exception:
                check(False, f"[cli {backend}] crashed:\n{traceback.format_exc()}")
    if FAILURES:
        print(f"selftest: {len(FAILURES)} of {CHECKS[0]} checks FAILED")
        return 1
    print(f"selftest: all {CHECKS[0]} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
