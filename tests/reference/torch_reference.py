#!/usr/bin/env python3
"""Independent PyTorch (or numpy) reference for rankd's scores.

Rebuilds a rankd model version as the PyTorch module its tensor names come
from -- facebookresearch/dlrm's DLRM_Net for DOT / CAT models, a TorchRec
DLRM_DCN-shaped module for DCN_V2 -- loads `weights.safetensors` into it with
`load_state_dict(strict=True)` (so the tensor naming is verified), replays the
requests of a `rankd score` run and compares the server's scores with the
reference computed in float64 (and, for information, with the same module run
in float32).

    python3 torch_reference.py --model MODEL_ROOT/mini/1 --config mini.json \
        --requests requests.jsonl --responses responses.jsonl

--config is the model's resolved config as proto3 JSON (`rankd inspect --model
DIR --json`), --requests / --responses are JSON lines of rankd.v1.ScoreRequest /
ScoreResponse. Exit status: 0 = every score within --tolerance (max relative
error), 1 = a score out of tolerance or any other mismatch (counts, errors),
2 = bad arguments, config or weights.

Without torch (or with --backend numpy) the same semantics run in plain numpy
(float64 and float32), and without the `safetensors` package a minimal numpy
safetensors reader is used. See README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

# torch is optional and imported on demand (ensure_torch): the numpy backend
# runs without it, and does not pay for importing it.
torch = None
nn = None
F = None
st_torch = None  # safetensors.torch, when importable


def ensure_torch() -> bool:
    """Imports torch (and safetensors.torch) and defines the torch modules.
    False if torch is not importable."""
    global torch, nn, F, st_torch
    if torch is not None:
        return True
    try:
        import torch as _torch
        import torch.nn as _nn
        import torch.nn.functional as _F
    except Exception:  # pragma: no cover - depends on the machine
        return False
    torch, nn, F = _torch, _nn, _F
    try:
        import safetensors.torch as _st
        st_torch = _st
    except Exception:  # pragma: no cover
        st_torch = None
    _define_torch_classes()
    return True


class ModelError(Exception):
    """The config or the weights file is unusable (exit status 2)."""


class RequestError(Exception):
    """The request is invalid: the server must reject it (INVALID_ARGUMENT)."""


# --------------------------------------------------------------------------
# Config (proto3 JSON of rankd.v1.ModelConfig)
# --------------------------------------------------------------------------

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_keys(obj: Any) -> Any:
    """Recursively rewrites dict keys lowerCamelCase -> snake_case."""
    if isinstance(obj, dict):
        return {_CAMEL_RE.sub(r"_\1", k).lower() if isinstance(k, str) else k:
                snake_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [snake_keys(v) for v in obj]
    return obj


_ENUMS = {
    "table_kind": (["TABLE_KIND_UNSPECIFIED", "STATIC", "DYNAMIC"], "STATIC"),
    "dtype": (["DATA_TYPE_UNSPECIFIED", "FP32", "FP16", "BF16"], "FP32"),
    "pooling": (["POOLING_MODE_UNSPECIFIED", "SUM", "MEAN", "MAX"], "SUM"),
    "id_policy": (["ID_POLICY_UNSPECIFIED", "ERROR", "ZERO"], None),
    "interaction": (["INTERACTION_KIND_UNSPECIFIED", "DOT", "CAT", "DCN_V2"], "DOT"),
}


def enum_name(value: Any, which: str, where: str) -> Optional[str]:
    """Enum value (name or number, possibly absent) -> resolved name.

    UNSPECIFIED / absent -> the documented default (None for id_policy, whose
    default depends on the table kind)."""
    names, default = _ENUMS[which]
    if value is None:
        return default
    if isinstance(value, bool):
        raise ModelError(f"{where}: bad enum value {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        i = int(value)
        if not 0 <= i < len(names):
            raise ModelError(f"{where}: unknown enum number {i}")
        value = names[i]
    if not isinstance(value, str):
        raise ModelError(f"{where}: bad enum value {value!r}")
    value = value.strip().upper()
    if value.endswith("UNSPECIFIED"):
        return default
    if value not in names:
        raise ModelError(f"{where}: unknown value {value!r} (one of {names[1:]})")
    return value


def as_int(value: Any, where: str, default: int = 0) -> int:
    """proto3 JSON int (int64 may be a string; absent = 0)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ModelError(f"{where}: expected an integer, got {value!r}")
    try:
        if isinstance(value, float):
            if value != int(value):
                raise ValueError
            return int(value)
        return int(value)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected an integer, got {value!r}") from None


def as_float(value: Any) -> float:
    """proto3 JSON float: number, or "NaN" / "Infinity" / "-Infinity" / a numeric string."""
    if isinstance(value, bool):
        raise ValueError(f"bad float {value!r}")
    return float(value)


@dataclass
class TableSpec:
    index: int
    name: str
    dynamic: bool
    num_rows: int
    dim: int
    dtype: str            # FP32 | FP16 | BF16
    pooling: str          # SUM | MEAN | MAX
    id_policy: str        # ERROR | ZERO (resolved)
    default_vector: Optional[np.ndarray]  # float32 [dim], or None = zeros


@dataclass
class FeatureSpec:
    index: int
    name: str
    table: int            # index into ModelSpec.tables
    request_level: bool
    max_ids_per_bag: int


@dataclass
class ModelSpec:
    name: str
    num_dense: int
    tables: List[TableSpec]
    features: List[FeatureSpec]
    bottom_mlp: List[int]
    top_mlp: List[int]
    interaction: str      # DOT | CAT | DCN_V2
    self_interaction: bool
    dcn_num_layers: int
    dcn_low_rank: int
    dense_out: int = 0    # width of x
    interaction_width: int = 0
    feature_by_name: Dict[str, int] = field(default_factory=dict)


def find_config_object(obj: Any) -> dict:
    """Accepts the ModelConfig itself or an object that wraps it."""
    keys = ("tables", "sparse_features", "top_mlp", "num_dense")
    if isinstance(obj, dict):
        if any(k in obj for k in keys):
            return obj
        for v in obj.values():
            if isinstance(v, dict) and any(k in v for k in keys):
                return v
    raise ModelError("config JSON: no rankd.v1.ModelConfig found (no 'tables' / 'sparse_features' / 'top_mlp')")


def parse_config(obj: Any, fallback_name: str = "") -> ModelSpec:
    cfg = find_config_object(snake_keys(obj))
    name = str(cfg.get("name") or fallback_name)
    num_dense = as_int(cfg.get("num_dense"), "num_dense")
    tables: List[TableSpec] = []
    table_index: Dict[str, int] = {}
    for i, t in enumerate(cfg.get("tables") or []):
        where = f"tables[{i}]"
        tname = str(t.get("name", ""))
        if not tname:
            raise ModelError(f"{where}.name: empty")
        if tname in table_index:
            raise ModelError(f"{where}.name: duplicate table {tname!r}")
        kind = enum_name(t.get("kind"), "table_kind", where + ".kind")
        dynamic = kind == "DYNAMIC"
        policy = enum_name(t.get("id_policy"), "id_policy", where + ".id_policy")
        if policy is None:
            policy = "ZERO" if dynamic else "ERROR"
        dim = as_int(t.get("dim"), where + ".dim")
        rows = as_int(t.get("num_rows"), where + ".num_rows")
        if dim <= 0:
            raise ModelError(f"{where}.dim: must be > 0, got {dim}")
        if rows < 0:
            raise ModelError(f"{where}.num_rows: must be >= 0, got {rows}")
        dv = t.get("default_vector") or []
        if dv and len(dv) != dim:
            raise ModelError(f"{where}.default_vector: {len(dv)} values, expected 0 or dim={dim}")
        # `repeated float`: what the server holds is the fp32 rounding.
        default = np.array([as_float(v) for v in dv], dtype=np.float32) if dv else None
        table_index[tname] = i
        tables.append(TableSpec(
            index=i, name=tname, dynamic=dynamic, num_rows=rows, dim=dim,
            dtype=enum_name(t.get("dtype"), "dtype", where + ".dtype"),
            pooling=enum_name(t.get("pooling"), "pooling", where + ".pooling"),
            id_policy=policy, default_vector=default))
    features: List[FeatureSpec] = []
    by_name: Dict[str, int] = {}
    for i, f in enumerate(cfg.get("sparse_features") or []):
        where = f"sparse_features[{i}]"
        fname = str(f.get("name", ""))
        if not fname or fname in by_name:
            raise ModelError(f"{where}.name: empty or duplicate {fname!r}")
        tname = str(f.get("table", ""))
        if tname not in table_index:
            raise ModelError(f"{where}.table: unknown table {tname!r}")
        by_name[fname] = i
        features.append(FeatureSpec(
            index=i, name=fname, table=table_index[tname],
            request_level=bool(f.get("request_level", False)),
            max_ids_per_bag=as_int(f.get("max_ids_per_bag"), where + ".max_ids_per_bag")))
    inter = cfg.get("interaction") or {}
    spec = ModelSpec(
        name=name, num_dense=num_dense, tables=tables, features=features,
        bottom_mlp=[as_int(v, "bottom_mlp") for v in (cfg.get("bottom_mlp") or [])],
        top_mlp=[as_int(v, "top_mlp") for v in (cfg.get("top_mlp") or [])],
        interaction=enum_name(inter.get("kind"), "interaction", "interaction.kind"),
        self_interaction=bool(inter.get("self_interaction", False)),
        dcn_num_layers=as_int(inter.get("dcn_num_layers"), "interaction.dcn_num_layers"),
        dcn_low_rank=as_int(inter.get("dcn_low_rank"), "interaction.dcn_low_rank"),
        feature_by_name=by_name)
    finish_spec(spec)
    return spec


def finish_spec(spec: ModelSpec) -> None:
    """Derived widths + the checks the reference relies on."""
    if spec.num_dense < 0 or (spec.bottom_mlp and spec.num_dense == 0):
        raise ModelError(f"num_dense: must be >= 0 (> 0 with a bottom MLP), got {spec.num_dense}")
    if not spec.features:
        raise ModelError("sparse_features: empty")
    for w in spec.bottom_mlp + spec.top_mlp:
        if w <= 0:
            raise ModelError(f"MLP widths must be > 0: bottom {spec.bottom_mlp} top {spec.top_mlp}")
    if not spec.top_mlp or spec.top_mlp[-1] != 1:
        raise ModelError(f"top_mlp: must end in 1, got {spec.top_mlp}")
    spec.dense_out = spec.bottom_mlp[-1] if spec.bottom_mlp else spec.num_dense
    nf = len(spec.features)
    fdims = [spec.tables[f.table].dim for f in spec.features]
    if spec.interaction in ("DOT", "DCN_V2"):
        for f in spec.features:
            d = spec.tables[f.table].dim
            if d != spec.dense_out:
                raise ModelError(f"{spec.interaction}: table {spec.tables[f.table].name!r} dim {d} "
                                 f"!= bottom MLP output {spec.dense_out}")
    if spec.interaction == "DOT":
        n = 1 + nf
        pairs = n * (n + 1) // 2 if spec.self_interaction else n * (n - 1) // 2
        spec.interaction_width = spec.dense_out + pairs
    elif spec.interaction == "CAT":
        spec.interaction_width = spec.dense_out + sum(fdims)
    else:
        if spec.dcn_num_layers <= 0 or spec.dcn_low_rank <= 0:
            raise ModelError(f"DCN_V2: dcn_num_layers ({spec.dcn_num_layers}) and dcn_low_rank "
                             f"({spec.dcn_low_rank}) must be > 0")
        for t in spec.tables:
            if "." in t.name:
                raise ModelError(f"DCN_V2: table name {t.name!r} contains '.', not a valid module name")
        spec.interaction_width = (1 + nf) * spec.dense_out


# --------------------------------------------------------------------------
# Tensor names (the model-format contract)
# --------------------------------------------------------------------------

_TABLE_ST_DTYPE = {"FP32": "F32", "FP16": "F16", "BF16": "BF16"}


def table_prefix(spec: ModelSpec, k: int) -> str:
    if spec.interaction == "DCN_V2":
        return f"sparse_arch.embedding_bag_collection.embedding_bags.{spec.tables[k].name}"
    return f"emb_l.{k}"


def mlp_names(spec: ModelSpec) -> Tuple[List[str], List[str]]:
    """Prefixes ("<prefix>.weight" / "<prefix>.bias") of bottom and top Linear layers."""
    nb, nt = len(spec.bottom_mlp), len(spec.top_mlp)
    if spec.interaction == "DCN_V2":
        bottom = [f"dense_arch.model._mlp.{i}._linear" for i in range(nb)]
        top = [f"over_arch.model.0._mlp.{i}._linear" for i in range(nt - 1)] + ["over_arch.model.1"]
    else:
        bottom = [f"bot_l.{2 * i}" for i in range(nb)]
        top = [f"top_l.{2 * i}" for i in range(nt)]
    return bottom, top


def expected_tensors(spec: ModelSpec) -> Dict[str, Tuple[List[Tuple[int, ...]], Optional[str]]]:
    """name -> (allowed shapes, required safetensors dtype or None = any float)."""
    exp: Dict[str, Tuple[List[Tuple[int, ...]], Optional[str]]] = {}
    for t in spec.tables:
        p = table_prefix(spec, t.index)
        exp[p + ".weight"] = ([(t.num_rows, t.dim)], _TABLE_ST_DTYPE[t.dtype])
        if t.dynamic:
            exp[p + ".keys"] = ([(t.num_rows,)], "I64")
    bottom, top = mlp_names(spec)
    widths_b = [spec.num_dense] + spec.bottom_mlp
    for i, p in enumerate(bottom):
        exp[p + ".weight"] = ([(widths_b[i + 1], widths_b[i])], None)
        exp[p + ".bias"] = ([(widths_b[i + 1],)], None)
    widths_t = [spec.interaction_width] + spec.top_mlp
    for i, p in enumerate(top):
        exp[p + ".weight"] = ([(widths_t[i + 1], widths_t[i])], None)
        exp[p + ".bias"] = ([(widths_t[i + 1],)], None)
    if spec.interaction == "DCN_V2":
        n, r = spec.interaction_width, spec.dcn_low_rank
        for l in range(spec.dcn_num_layers):
            exp[f"inter_arch.crossnet.V_kernels.{l}"] = ([(r, n)], None)
            exp[f"inter_arch.crossnet.W_kernels.{l}"] = ([(n, r)], None)
            exp[f"inter_arch.crossnet.bias.{l}"] = ([(n,), (n, 1)], None)
    return exp


_FLOAT_ST = ("F64", "F32", "F16", "BF16")


def check_tensors(spec: ModelSpec, infos: Dict[str, Tuple[str, Tuple[int, ...]]], path: str) -> List[str]:
    """Checks names, shapes and dtypes; raises ModelError; returns warnings."""
    exp = expected_tensors(spec)
    problems, warnings = [], []
    missing = sorted(set(exp) - set(infos))
    extra = sorted(set(infos) - set(exp))
    if missing:
        problems.append(f"missing tensors: {missing}")
    if extra:
        problems.append(f"unexpected tensors: {extra}")
    for name, (shapes, dtype) in exp.items():
        if name not in infos:
            continue
        got_dtype, got_shape = infos[name]
        if tuple(got_shape) not in shapes:
            problems.append(f"tensor {name!r}: expected shape {list(shapes[0])}"
                            f"{' or ' + str(list(shapes[1])) if len(shapes) > 1 else ''}, got {list(got_shape)}")
        if dtype is not None and got_dtype != dtype:
            problems.append(f"tensor {name!r}: expected dtype {dtype}, got {got_dtype}")
        elif dtype is None and got_dtype != "F32":  # MLP / cross-layer tensors: rankd never casts
            problems.append(f"tensor {name!r}: expected dtype F32, got {got_dtype}")
    if problems:
        raise ModelError(f"{path}: " + "; ".join(problems))
    return warnings


def check_dense_values(name: str, finite: bool, path: str) -> None:
    if not finite:
        raise ModelError(f"{path}: tensor {name!r}: non-finite values (rankd rejects the model)")


def check_keys(name: str, sorted_keys: np.ndarray, path: str) -> None:
    """sorted_keys: the keys of a DYNAMIC table, sorted ascending."""
    if sorted_keys.size and int(sorted_keys[0]) == _I64_MIN:
        raise ModelError(f"{path}: tensor {name!r}: key INT64_MIN is reserved")
    if sorted_keys.size > 1:
        dup = sorted_keys[1:][sorted_keys[1:] == sorted_keys[:-1]]
        if dup.size:
            raise ModelError(f"{path}: tensor {name!r}: duplicate key {int(dup[0])}")


# --------------------------------------------------------------------------
# safetensors without the library (numpy)
# --------------------------------------------------------------------------

class BF16Array:
    """bfloat16 tensor held as its uint16 bit patterns (numpy has no bf16)."""

    def __init__(self, bits: np.ndarray):
        bits = np.asarray(bits)
        if bits.dtype.itemsize != 2 or bits.dtype.kind not in "ui":
            raise ValueError(f"BF16Array needs 16-bit integer bit patterns, got {bits.dtype}")
        self.bits = bits.view(np.uint16)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.bits.shape)

    def to_float32(self, rows: Optional[np.ndarray] = None) -> np.ndarray:
        b = self.bits if rows is None else self.bits[rows]
        return bf16_bits_to_f32(b)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bits, round to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out = rounded.astype(np.uint16)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


_ST_NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
          "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
          "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors_numpy(path: str) -> Tuple[Dict[str, Any], Dict[str, str], Dict[str, str]]:
    """-> (tensors, dtypes, metadata). Tensors are read-only views of a memmap
    (BF16 tensors are BF16Array), so big tables are not copied."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ModelError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ModelError(f"{path}: header length {n} beyond the file ({size} bytes)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ModelError(f"{path}: bad header JSON: {e}") from None
    base = 8 + n
    metadata = header.pop("__metadata__", None) or {}
    mm = np.memmap(path, dtype=np.uint8, mode="r") if size > base else np.zeros(0, np.uint8)
    tensors: Dict[str, Any] = {}
    dtypes: Dict[str, str] = {}
    for name, info in header.items():
        dt = info.get("dtype")
        if dt not in _ST_NP:
            raise ModelError(f"{path}: tensor {name!r}: unsupported dtype {dt!r}")
        shape = tuple(int(s) for s in info["shape"])
        b, e = (int(v) for v in info["data_offsets"])
        npdt = np.dtype(_ST_NP[dt]).newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if min(shape, default=0) < 0 or e - b != count * npdt.itemsize or b < 0 or base + e > size:
            raise ModelError(f"{path}: tensor {name!r}: bad shape/offsets {shape} {[b, e]}")
        if count == 0:
            arr = np.zeros(shape, dtype=npdt)
        else:
            arr = mm[base + b: base + e].view(npdt).reshape(shape)
        tensors[name] = BF16Array(arr) if dt == "BF16" else arr
        dtypes[name] = dt
    return tensors, dtypes, metadata


def np_st_dtype(t: Any) -> str:
    if isinstance(t, BF16Array):
        return "BF16"
    a = np.asarray(t)
    for k, v in _ST_NP.items():
        if k != "BF16" and a.dtype == np.dtype(v):
            return k
    raise ModelError(f"unsupported numpy dtype {a.dtype}")


def write_safetensors_numpy(path: str, tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = None) -> None:
    """Minimal writer (tests): tensors are numpy arrays or BF16Array; data packed in order."""
    header: Dict[str, Any] = {}
    blobs = []
    off = 0
    for name, t in tensors.items():
        dt = np_st_dtype(t)
        raw = (t.bits if isinstance(t, BF16Array) else np.asarray(t))
        raw = np.ascontiguousarray(raw, dtype=raw.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# --------------------------------------------------------------------------
# Requests (proto3 JSON of rankd.v1.ScoreRequest)
# --------------------------------------------------------------------------

@dataclass
class Bag:
    """The bags of one feature in one request (validated)."""
    ids: np.ndarray                 # int64 [nnz]
    lengths: np.ndarray             # int64 [nb], nb = B or 1
    weights: Optional[np.ndarray]   # float32 [nnz] or None


@dataclass
class Request:
    num_candidates: int
    dense: np.ndarray               # float32 [B, num_dense]
    bags: List[Bag]                 # in the config's sparse_features order
    model: str = ""


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _int_list(values: Any, what: str) -> List[int]:
    out = []
    for v in values or []:
        if isinstance(v, bool):
            raise RequestError(f"{what}: bad integer {v!r}")
        try:
            i = int(v) if not isinstance(v, float) else (int(v) if v == int(v) else None)
        except (TypeError, ValueError):
            i = None
        if i is None:
            raise RequestError(f"{what}: bad integer {v!r}")
        out.append(i)
    return out


def parse_request(obj: Any, spec: ModelSpec) -> Request:
    """proto3 JSON ScoreRequest -> Request, with the server's validation
    (RequestError for anything the server must reject)."""
    if not isinstance(obj, dict):
        raise RequestError("request is not a JSON object")
    r = snake_keys(obj)
    try:
        b = _int_list([r.get("num_candidates", 0)], "num_candidates")[0]
        dense_list = [as_float(v) for v in (r.get("dense") or [])]
    except ValueError as e:
        raise RequestError(f"dense: {e}") from None
    if b <= 0:
        raise RequestError(f"num_candidates: must be > 0, got {b}")
    if len(dense_list) != b * spec.num_dense:
        raise RequestError(f"dense: {len(dense_list)} values, expected num_candidates * num_dense = "
                           f"{b} * {spec.num_dense}")
    with np.errstate(over="ignore"):
        dense = np.array(dense_list, dtype=np.float64).astype(np.float32).reshape(b, spec.num_dense)
    if not np.isfinite(dense).all():
        i = int(np.argmin(np.isfinite(dense).reshape(-1)))
        raise RequestError(f"dense[{i}]: not finite ({dense.reshape(-1)[i]})")
    seen: Dict[int, Bag] = {}
    for j, sf in enumerate(r.get("sparse") or []):
        name = str(sf.get("name", ""))
        if name not in spec.feature_by_name:
            raise RequestError(f"sparse[{j}].name: unknown feature {name!r}")
        fi = spec.feature_by_name[name]
        if fi in seen:
            raise RequestError(f"sparse[{j}].name: feature {name!r} sent twice")
        feat = spec.features[fi]
        ids = _int_list(sf.get("ids"), f"{name}.ids")
        lengths = _int_list(sf.get("lengths"), f"{name}.lengths")
        try:
            weights = [as_float(v) for v in (sf.get("weights") or [])]
        except ValueError as e:
            raise RequestError(f"{name}.weights: {e}") from None
        if any(i < _I64_MIN or i > _I64_MAX for i in ids):
            raise RequestError(f"{name}.ids: value outside int64")
        if feat.request_level:
            if len(lengths) != 1:
                raise RequestError(f"{name}.lengths: request-level feature needs exactly 1 entry, got {len(lengths)}")
        elif len(lengths) not in (b, 1):
            raise RequestError(f"{name}.lengths: {len(lengths)} entries, expected num_candidates={b} or 1")
        if any(n < 0 for n in lengths):
            raise RequestError(f"{name}.lengths: negative length")
        if sum(lengths) != len(ids):
            raise RequestError(f"{name}.lengths: sum {sum(lengths)} != number of ids {len(ids)}")
        if weights and len(weights) != len(ids):
            raise RequestError(f"{name}.weights: {len(weights)} values for {len(ids)} ids")
        if weights and not all(math.isfinite(w) for w in weights):
            raise RequestError(f"{name}.weights: not finite")
        if feat.max_ids_per_bag > 0 and any(n > feat.max_ids_per_bag for n in lengths):
            raise RequestError(f"{name}.lengths: a bag exceeds max_ids_per_bag={feat.max_ids_per_bag}")
        seen[fi] = Bag(ids=np.array(ids, dtype=np.int64),
                       lengths=np.array(lengths, dtype=np.int64),
                       weights=np.array(weights, dtype=np.float64).astype(np.float32) if weights else None)
    missing = [f.name for f in spec.features if f.index not in seen]
    if missing:
        raise RequestError(f"sparse: missing features {missing}")
    model = str(r.get("model", ""))
    if model and spec.name and model != spec.name:
        raise RequestError(f"model: {model!r} is not the loaded model {spec.name!r}")
    return Request(num_candidates=b, dense=dense, bags=[seen[i] for i in range(len(spec.features))],
                   model=model)


def unresolved_error(spec: ModelSpec, feat: FeatureSpec, bad_id: int) -> RequestError:
    t = spec.tables[feat.table]
    what = "key not stored in DYNAMIC table" if t.dynamic else f"id outside [0, {t.num_rows})"
    return RequestError(f"feature {feat.name!r}: id {bad_id}: {what} {t.name!r} (id_policy ERROR)")


# --------------------------------------------------------------------------
# numpy backend (float64 reference, float32 for comparison)
# --------------------------------------------------------------------------

def np_sigmoid(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def dot_pairs(n: int, self_interaction: bool) -> Tuple[List[int], List[int]]:
    """DLRM_Net.interact_features' li / lj: row-major lower triangle."""
    offset = 1 if self_interaction else 0
    li = [i for i in range(n) for j in range(i + offset)]
    lj = [j for i in range(n) for j in range(i + offset)]
    return li, lj


class NumpyModel:
    """The model in plain numpy. `tensors` maps state_dict names to numpy
    arrays (F32/F16/F64/I64) or BF16Array."""

    def __init__(self, spec: ModelSpec, tensors: Dict[str, Any], path: str = "<memory>"):
        self.spec = spec
        infos = {k: (np_st_dtype(v), tuple(v.shape)) for k, v in tensors.items()}
        self.warnings = check_tensors(spec, infos, path)
        self.weights = []      # per table: ndarray (F32/F16) or BF16Array
        self.sorted_keys = []  # per table: (sorted keys, permutation) or None
        for t in spec.tables:
            p = table_prefix(spec, t.index)
            self.weights.append(tensors[p + ".weight"])
            if t.dynamic:
                keys = np.asarray(tensors[p + ".keys"], dtype=np.int64)
                perm = np.argsort(keys, kind="stable")
                sk = keys[perm]
                check_keys(p + ".keys", sk, path)
                self.sorted_keys.append((sk, perm))
            else:
                self.sorted_keys.append(None)

        def f64(name):
            v = tensors[name]
            a = (v.to_float32() if isinstance(v, BF16Array) else np.asarray(v)).astype(np.float64)
            check_dense_values(name, bool(np.isfinite(a).all()), path)
            return a

        bottom, top = mlp_names(spec)
        self.bottom = [(f64(p + ".weight"), f64(p + ".bias")) for p in bottom]
        self.top = [(f64(p + ".weight"), f64(p + ".bias")) for p in top]
        self.cross = []
        if spec.interaction == "DCN_V2":
            for l in range(spec.dcn_num_layers):
                c = "inter_arch.crossnet."
                self.cross.append((f64(f"{c}V_kernels.{l}"), f64(f"{c}W_kernels.{l}"),
                                   f64(f"{c}bias.{l}").reshape(-1)))

    # -- embeddings --------------------------------------------------------
    def resolve(self, k: int, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """ids -> (row indices, valid mask)."""
        t = self.spec.tables[k]
        if t.dynamic:
            sk, perm = self.sorted_keys[k]
            if sk.size == 0:
                return np.zeros_like(ids), np.zeros(ids.shape, dtype=bool)
            pos = np.minimum(np.searchsorted(sk, ids), sk.size - 1)
            valid = sk[pos] == ids
            return np.where(valid, perm[pos], 0), valid
        valid = (ids >= 0) & (ids < t.num_rows)
        return np.where(valid, ids, 0), valid

    def gather(self, k: int, rows: np.ndarray, cdt) -> np.ndarray:
        w = self.weights[k]
        if isinstance(w, BF16Array):
            return w.to_float32(rows).astype(cdt)
        return np.asarray(w[rows]).astype(cdt)  # fp16 / fp32 -> exact upcast

    def pool(self, fi: int, bag: Bag, cdt) -> np.ndarray:
        """Pooled vectors of one feature: [nb, dim] in cdt."""
        feat = self.spec.features[fi]
        k = feat.table
        t = self.spec.tables[k]
        nb = bag.lengths.size
        rows, valid = self.resolve(k, bag.ids)
        if not valid.all() and t.id_policy == "ERROR":
            raise unresolved_error(self.spec, feat, int(bag.ids[~valid][0]))
        vals = np.zeros((bag.ids.size, t.dim), dtype=cdt)
        if valid.any():
            vals[valid] = self.gather(k, rows[valid], cdt)
        if (~valid).any() and t.default_vector is not None:
            vals[~valid] = t.default_vector.astype(cdt)
        if bag.weights is not None:
            vals *= bag.weights.astype(cdt)[:, None]
        seg = np.repeat(np.arange(nb), bag.lengths)
        if t.pooling == "MAX":
            out = np.full((nb, t.dim), -np.inf, dtype=cdt)
            np.maximum.at(out, seg, vals)
            out[bag.lengths == 0] = 0
        else:
            out = np.zeros((nb, t.dim), dtype=cdt)
            np.add.at(out, seg, vals)
            if t.pooling == "MEAN":
                out /= np.maximum(bag.lengths, 1).astype(cdt)[:, None]
        return out

    # -- full model ----------------------------------------------------------
    def forward(self, req: Request, cdt=np.float64) -> np.ndarray:
        """Logits [B] (float64 array holding cdt-precision values)."""
        spec = self.spec
        b = req.num_candidates
        x = req.dense.astype(cdt)
        for w, bias in self.bottom:
            x = np.maximum(x @ w.astype(cdt).T + bias.astype(cdt), 0)
        ly = []
        for fi, bag in enumerate(req.bags):
            e = self.pool(fi, bag, cdt)
            ly.append(np.broadcast_to(e, (b, e.shape[1])) if e.shape[0] == 1 else e)
        if spec.interaction == "DOT":
            t = np.stack([x] + ly, axis=1)                      # [B, 1+F, d]
            z = np.matmul(t, t.transpose(0, 2, 1))              # [B, n, n]
            li, lj = dot_pairs(t.shape[1], spec.self_interaction)
            r = np.concatenate([x, z[:, li, lj]], axis=1)
        elif spec.interaction == "CAT":
            r = np.concatenate([x] + ly, axis=1)
        else:
            x0 = np.concatenate([x] + ly, axis=1)               # [B, (1+F) d]
            xl = x0
            for v, w, bias in self.cross:
                xl = x0 * ((xl @ v.astype(cdt).T) @ w.astype(cdt).T + bias.astype(cdt)) + xl
            r = xl
        for i, (w, bias) in enumerate(self.top):
            r = r @ w.astype(cdt).T + bias.astype(cdt)
            if i + 1 < len(self.top):
                r = np.maximum(r, 0)
        return r[:, 0].astype(np.float64)

    def score(self, req: Request, fp64: bool = True) -> Tuple[np.ndarray, np.ndarray]:
        """-> (logits, probabilities) as float64 arrays."""
        cdt = np.float64 if fp64 else np.float32
        z = self.forward(req, cdt)
        if fp64:
            return z, np_sigmoid(z)
        return z, np_sigmoid(z.astype(np.float32)).astype(np.float64)


# --------------------------------------------------------------------------
# torch backend: DLRM_Net / DLRM_DCN-shaped modules
# --------------------------------------------------------------------------

_POOL_MODE = {"SUM": "sum", "MEAN": "mean", "MAX": "max"}

def _define_torch_classes() -> None:
    """Defines the torch modules as globals (called once torch is imported)."""
    global _TORCH_TABLE_DTYPE, _TORCH_ST, _embedding_bag, _RefBase, _create_mlp, DLRMNetRef
    global _Perceptron, _MLP, _DenseArch, _EmbeddingBagCollection, _SparseArch, _LowRankCrossNet
    global _InterArch, _OverArch, DLRMDCNRef
    _TORCH_TABLE_DTYPE = {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}
    _TORCH_ST = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                 torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                 torch.uint8: "U8", torch.bool: "BOOL"}

    def _embedding_bag(t: TableSpec) -> "nn.EmbeddingBag":
        eb = nn.EmbeddingBag(t.num_rows, t.dim, mode=_POOL_MODE[t.pooling],
                             dtype=_TORCH_TABLE_DTYPE[t.dtype])
        if t.dynamic:  # key of each row; a persistent buffer -> `<prefix>.keys` in state_dict
            eb.register_buffer("keys", torch.zeros(t.num_rows, dtype=torch.int64))
        return eb

    class _RefBase(nn.Module):
        """Shared forward of both module shapes. Subclasses provide
        _table(k), _bottom(), _top() (Linear layers) and interact(x, ly)."""

        spec: ModelSpec

        def prepare(self, path: str) -> None:
            """After loading: value checks, and the sorted keys of DYNAMIC
            tables (key -> row via torch.searchsorted)."""
            table_tensors = set()
            self._sorted: Dict[int, Tuple["torch.Tensor", "torch.Tensor"]] = {}
            for t in self.spec.tables:
                eb = self._table(t.index)
                table_tensors.add(id(eb.weight))
                if t.dynamic:
                    table_tensors.add(id(eb.keys))
                    sk, perm = torch.sort(eb.keys, stable=True)
                    check_keys(table_prefix(self.spec, t.index) + ".keys", sk.cpu().numpy(), path)
                    self._sorted[t.index] = (sk, perm)
            for name, p in self.named_parameters():
                if id(p) not in table_tensors:
                    check_dense_values(name, bool(torch.isfinite(p).all()), path)

        def _resolve(self, k: int, ids: "torch.Tensor") -> Tuple["torch.Tensor", "torch.Tensor"]:
            t = self.spec.tables[k]
            if t.dynamic:
                sk, perm = self._sorted[k]
                if sk.numel() == 0:
                    return torch.zeros_like(ids), torch.zeros_like(ids, dtype=torch.bool)
                pos = torch.searchsorted(sk, ids).clamp_(max=sk.numel() - 1)
                valid = sk[pos] == ids
                return torch.where(valid, perm[pos], torch.zeros_like(ids)), valid
            valid = (ids >= 0) & (ids < t.num_rows)
            return torch.where(valid, ids, torch.zeros_like(ids)), valid

        def pool(self, fi: int, bag: Bag, cdt: "torch.dtype", use_embedding_bag: bool) -> "torch.Tensor":
            """[nb, dim] pooled vectors of feature fi in dtype cdt.

            use_embedding_bag: DLRM_Net's path, the nn.EmbeddingBag module
            (F.embedding_bag) whenever it computes the rankd semantics exactly:
            table dtype == cdt, every id resolves, weights only with sum. Else
            (and always for the fp64 reference of fp32/16 tables) plain torch
            ops: gather rows, upcast, substitute defaults, weight, reduce."""
            feat = self.spec.features[fi]
            k = feat.table
            t = self.spec.tables[k]
            eb = self._table(k)
            dev = eb.weight.device
            ids = torch.from_numpy(bag.ids).to(dev)
            lengths = torch.from_numpy(bag.lengths).to(dev)
            nb = lengths.numel()
            rows, valid = self._resolve(k, ids)
            all_valid = bool(valid.all())
            if not all_valid and t.id_policy == "ERROR":
                raise unresolved_error(self.spec, feat, int(bag.ids[~valid.cpu().numpy()][0]))
            w = torch.from_numpy(bag.weights).to(dev).to(cdt) if bag.weights is not None else None
            if ids.numel() == 0:
                return torch.zeros(nb, t.dim, dtype=cdt, device=dev)
            if (use_embedding_bag and all_valid and eb.weight.dtype == cdt
                    and (w is None or eb.mode == "sum")):
                offsets = torch.zeros(nb, dtype=torch.int64, device=dev)
                if nb > 1:
                    offsets[1:] = torch.cumsum(lengths, 0)[:-1]
                return eb(rows, offsets, per_sample_weights=w)
            vals = torch.zeros(ids.numel(), t.dim, dtype=cdt, device=dev)
            vidx = valid.nonzero().squeeze(1)
            if vidx.numel():
                vals[vidx] = eb.weight[rows[vidx]].to(cdt)
            if not all_valid and t.default_vector is not None:
                dv = torch.from_numpy(t.default_vector).to(dev).to(cdt)
                vals[~valid] = dv
            if w is not None:
                vals = vals * w.unsqueeze(1)
            seg = torch.repeat_interleave(torch.arange(nb, device=dev), lengths)
            out = torch.zeros(nb, t.dim, dtype=cdt, device=dev)
            if t.pooling == "MAX":
                return out.scatter_reduce(0, seg.unsqueeze(1).expand(-1, t.dim), vals,
                                          reduce="amax", include_self=False)
            out.index_add_(0, seg, vals)
            if t.pooling == "MEAN":
                out = out / lengths.clamp(min=1).to(cdt).unsqueeze(1)
            return out

        @staticmethod
        def _linear(layer: "nn.Linear", x: "torch.Tensor") -> "torch.Tensor":
            return F.linear(x, layer.weight.to(x.dtype), layer.bias.to(x.dtype))

        def logits(self, req: Request, cdt: "torch.dtype", use_embedding_bag: bool) -> "torch.Tensor":
            dev = self._table(0).weight.device
            b = req.num_candidates
            x = torch.from_numpy(req.dense).to(dev).to(cdt)
            for layer in self._bottom():
                x = torch.relu(self._linear(layer, x))
            ly = []
            for fi, bag in enumerate(req.bags):
                e = self.pool(fi, bag, cdt, use_embedding_bag)
                ly.append(e.expand(b, -1) if e.shape[0] == 1 and b > 1 else e)
            r = self.interact(x, ly)
            top = self._top()
            for i, layer in enumerate(top):
                r = self._linear(layer, r)
                if i + 1 < len(top):
                    r = torch.relu(r)
            return r[:, 0]

        def score(self, req: Request, fp64: bool = True) -> Tuple[np.ndarray, np.ndarray]:
            """-> (logits, probabilities) as float64 numpy arrays. fp64: the
            reference (everything upcast to float64, plain-op pooling); else the
            float32 module (DLRM_Net's nn.EmbeddingBag path where it applies)."""
            cdt = torch.float64 if fp64 else torch.float32
            with torch.inference_mode():
                z = self.logits(req, cdt, use_embedding_bag=not fp64)
                p = torch.sigmoid(z)
            return z.double().cpu().numpy(), p.double().cpu().numpy()

    def _create_mlp(ln: Sequence[int], sigmoid_layer: int) -> "nn.Sequential":
        """facebookresearch/dlrm DLRM_Net.create_mlp (Linear, ReLU|Sigmoid, ...)."""
        layers = nn.ModuleList()
        for i in range(len(ln) - 1):
            layers.append(nn.Linear(int(ln[i]), int(ln[i + 1]), bias=True))
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return nn.Sequential(*layers)

    class DLRMNetRef(_RefBase):
        """facebookresearch/dlrm DLRM_Net (DOT / CAT): emb_l, bot_l, top_l."""

        def __init__(self, spec: ModelSpec):
            super().__init__()
            self.spec = spec
            self.emb_l = nn.ModuleList([_embedding_bag(t) for t in spec.tables])
            ln_bot = [spec.num_dense] + spec.bottom_mlp
            ln_top = [spec.interaction_width] + spec.top_mlp
            self.bot_l = _create_mlp(ln_bot, -1)
            self.top_l = _create_mlp(ln_top, len(ln_top) - 2)

        def _table(self, k):
            return self.emb_l[k]

        def _bottom(self):
            return [m for m in self.bot_l if isinstance(m, nn.Linear)]

        def _top(self):
            return [m for m in self.top_l if isinstance(m, nn.Linear)]

        def interact(self, x, ly):
            """DLRM_Net.interact_features."""
            if self.spec.interaction == "DOT":
                (batch_size, d) = x.shape
                T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
                Z = torch.bmm(T, torch.transpose(T, 1, 2))
                _, ni, nj = Z.shape
                offset = 1 if self.spec.self_interaction else 0
                li = torch.tensor([i for i in range(ni) for j in range(i + offset)], device=x.device)
                lj = torch.tensor([j for i in range(nj) for j in range(i + offset)], device=x.device)
                Zflat = Z[:, li, lj]
                return torch.cat([x] + [Zflat], dim=1)
            return torch.cat([x] + ly, dim=1)

    # --- TorchRec DLRM_DCN shape (written here; torchrec is not needed) ---
    class _Perceptron(nn.Module):
        def __init__(self, n_in: int, n_out: int):
            super().__init__()
            self._linear = nn.Linear(n_in, n_out, bias=True)

        def forward(self, x):
            return torch.relu(self._linear(x))

    class _MLP(nn.Module):
        def __init__(self, n_in: int, sizes: Sequence[int]):
            super().__init__()
            widths = [n_in] + list(sizes)
            self._mlp = nn.Sequential(*[_Perceptron(widths[i], widths[i + 1]) for i in range(len(sizes))])

    class _DenseArch(nn.Module):
        def __init__(self, n_in, sizes):
            super().__init__()
            self.model = _MLP(n_in, sizes)

    class _EmbeddingBagCollection(nn.Module):
        def __init__(self, tables: List[TableSpec]):
            super().__init__()
            self.embedding_bags = nn.ModuleDict({t.name: _embedding_bag(t) for t in tables})

    class _SparseArch(nn.Module):
        def __init__(self, tables):
            super().__init__()
            self.embedding_bag_collection = _EmbeddingBagCollection(tables)

    class _LowRankCrossNet(nn.Module):
        """torchrec.modules.crossnet.LowRankCrossNet parameters."""

        def __init__(self, n: int, num_layers: int, rank: int, bias_shapes: List[Tuple[int, ...]]):
            super().__init__()
            self.V_kernels = nn.ParameterList([nn.Parameter(torch.empty(rank, n)) for _ in range(num_layers)])
            self.W_kernels = nn.ParameterList([nn.Parameter(torch.empty(n, rank)) for _ in range(num_layers)])
            self.bias = nn.ParameterList([nn.Parameter(torch.empty(*s)) for s in bias_shapes])

        def forward(self, x0):
            xl = x0
            for l in range(len(self.V_kernels)):
                v = self.V_kernels[l].to(x0.dtype)
                w = self.W_kernels[l].to(x0.dtype)
                b = self.bias[l].to(x0.dtype).reshape(-1)
                xl = x0 * (F.linear(F.linear(xl, v), w) + b) + xl
            return xl

    class _InterArch(nn.Module):
        def __init__(self, n, num_layers, rank, bias_shapes):
            super().__init__()
            self.crossnet = _LowRankCrossNet(n, num_layers, rank, bias_shapes)

    class _OverArch(nn.Module):
        def __init__(self, n_in: int, sizes: Sequence[int]):
            super().__init__()
            hidden = list(sizes[:-1])
            last_in = hidden[-1] if hidden else n_in
            self.model = nn.Sequential(_MLP(n_in, hidden), nn.Linear(last_in, sizes[-1], bias=True))

    class DLRMDCNRef(_RefBase):
        """TorchRec DLRM_DCN-shaped: dense_arch, sparse_arch, inter_arch, over_arch."""

        def __init__(self, spec: ModelSpec, bias_shapes: List[Tuple[int, ...]]):
            super().__init__()
            self.spec = spec
            self.dense_arch = _DenseArch(spec.num_dense, spec.bottom_mlp)
            self.sparse_arch = _SparseArch(spec.tables)
            self.inter_arch = _InterArch(spec.interaction_width, spec.dcn_num_layers,
                                         spec.dcn_low_rank, bias_shapes)
            self.over_arch = _OverArch(spec.interaction_width, spec.top_mlp)

        def _table(self, k):
            return self.sparse_arch.embedding_bag_collection.embedding_bags[self.spec.tables[k].name]

        def _bottom(self):
            return [p._linear for p in self.dense_arch.model._mlp]

        def _top(self):
            return [p._linear for p in self.over_arch.model[0]._mlp] + [self.over_arch.model[1]]

        def interact(self, x, ly):
            """InteractionDCNArch: crossnet over cat([dense, sparse...]) flattened."""
            return self.inter_arch.crossnet(torch.cat([x] + ly, dim=1))


def torch_device(name: str) -> "torch.device":
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def load_state_dict_file(path: str, device: "torch.device") -> Tuple[Dict[str, "torch.Tensor"], str]:
    if st_torch is not None:
        return st_torch.load_file(path, device=str(device)), "safetensors.torch.load_file"
    tensors, _, _ = read_safetensors_numpy(path)
    sd = {}
    for k, v in tensors.items():
        if isinstance(v, BF16Array):
            t = torch.from_numpy(np.array(v.bits).view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.array(v))
        sd[k] = t.to(device)
    return sd, "numpy safetensors reader"


def build_torch_model(spec: ModelSpec, state_dict: Dict[str, "torch.Tensor"], path: str,
                      device: "torch.device") -> "_RefBase":
    """Builds the module (on the meta device), checks names/shapes/dtypes, and
    loads the tensors with load_state_dict(strict=True, assign=True)."""
    infos = {k: (_TORCH_ST.get(v.dtype, str(v.dtype)), tuple(v.shape)) for k, v in state_dict.items()}
    warnings = check_tensors(spec, infos, path)
    with torch.device("meta"):
        if spec.interaction == "DCN_V2":
            shapes = [tuple(state_dict[f"inter_arch.crossnet.bias.{l}"].shape) for l in range(spec.dcn_num_layers)]
            model = DLRMDCNRef(spec, shapes)
        else:
            model = DLRMNetRef(spec)
    result = model.load_state_dict(state_dict, strict=True, assign=True)
    bad = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if bad or getattr(result, "missing_keys", None) or getattr(result, "unexpected_keys", None):
        raise ModelError(f"{path}: not loaded: {bad} {result}")
    model = model.to(device).eval()
    model.requires_grad_(False)
    model.prepare(path)
    model.warnings = warnings
    return model


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------

def logit_of(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(p) - np.log1p(-p)


LOGIT_REL_FLOOR = 0.01


class Stats:
    """Running max abs / rel error of `got` against `ref`."""

    def __init__(self, label: str):
        self.label = label
        self.n = 0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.where_abs = None
        self.where_rel = None
        self.logit_max_abs = 0.0
        self.logit_max_rel = 0.0
        self.logit_skipped = 0  # got == 0 or 1: no finite logit
        self.nonfinite = 0
        self.logit_from_prob = True

    def update(self, req_index: int, got: np.ndarray, ref: np.ndarray, ref_logit: Optional[np.ndarray],
               got_logit: Optional[np.ndarray] = None) -> None:
        """got_logit: None = recovered from the (fp32) probability `got`."""
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        self.n += got.size
        finite = np.isfinite(got) & np.isfinite(ref)
        self.nonfinite += int((~finite).sum())
        err = np.where(finite, np.abs(got - ref), np.inf)
        rel = err / np.maximum(np.abs(ref), 1e-30)
        if err.size:
            i = int(np.argmax(err))
            if err[i] > self.max_abs or self.where_abs is None:
                self.max_abs, self.where_abs = float(err[i]), (req_index, i, float(got[i]), float(ref[i]))
            i = int(np.argmax(rel))
            if rel[i] > self.max_rel or self.where_rel is None:
                self.max_rel, self.where_rel = float(rel[i]), (req_index, i, float(got[i]), float(ref[i]))
        if ref_logit is not None and got.size:
            gl = logit_of(got) if got_logit is None else np.asarray(got_logit, dtype=np.float64)
            ok = np.isfinite(gl) & np.isfinite(ref_logit)
            self.logit_skipped += int((~ok).sum())
            if ok.any():
                le = np.abs(gl[ok] - ref_logit[ok])
                self.logit_max_abs = max(self.logit_max_abs, float(le.max()))
                # relative error of logits near 0 says nothing: only |logit| >= LOGIT_REL_FLOOR
                big = np.abs(ref_logit[ok]) >= LOGIT_REL_FLOOR
                if big.any():
                    self.logit_max_rel = max(self.logit_max_rel,
                                             float((le[big] / np.abs(ref_logit[ok][big])).max()))
        self.logit_from_prob = got_logit is None

    def lines(self) -> List[str]:
        out = [f"{self.label}: {self.n} scores, max abs err {self.max_abs:.3e}, max rel err {self.max_rel:.3e}"]
        if self.where_rel is not None:
            r, c, g, f = self.where_rel
            out.append(f"    worst rel: request {r} candidate {c}: got {g!r} ref {f!r}")
        if self.nonfinite:
            out.append(f"    NON-FINITE scores: {self.nonfinite}")
        if self.logit_max_abs or self.logit_max_rel or self.logit_skipped:
            src = "logit of the fp32 score" if self.logit_from_prob else "fp32 logit"
            out.append(f"    {src} vs fp64 logit: max abs err {self.logit_max_abs:.3e}, "
                       f"max rel err {self.logit_max_rel:.3e} (where |logit| >= {LOGIT_REL_FLOOR:g})"
                       + (f" ({self.logit_skipped} scores of 0/1 skipped)" if self.logit_skipped else ""))
        return out


def read_jsonl(path: str) -> List[Any]:
    out = []
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise ModelError(f"{path}:{lineno}: bad JSON: {e}") from None
    return out


def response_scores(resp: Any) -> Tuple[Optional[List[float]], Optional[str]]:
    """ScoreResponse JSON -> (scores, None), or (None, error text) for an error line."""
    if not isinstance(resp, dict):
        return None, f"not a JSON object: {resp!r}"[:200]
    r = snake_keys(resp)
    if "error" in r or ("scores" not in r and ("code" in r or "message" in r or "status" in r)):
        return None, str(r.get("error") or r.get("message") or r.get("code") or r.get("status"))[:300]
    try:
        return [as_float(v) for v in (r.get("scores") or [])], None
    except ValueError as e:
        return None, f"bad scores: {e}"


def fmt_score(v: float) -> Any:
    v = float(np.float32(v))
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model version directory holding weights.safetensors "
                    "(or the .safetensors file itself)")
    ap.add_argument("--config", required=True, help="resolved config, proto3 JSON (rankd inspect --json)")
    ap.add_argument("--requests", required=True, help="ScoreRequest JSON lines")
    ap.add_argument("--responses", help="ScoreResponse JSON lines from `rankd score` (same order)")
    ap.add_argument("--write-responses", metavar="OUT", help="write the reference scores as ScoreResponse JSON lines")
    ap.add_argument("--backend", choices=["auto", "torch", "numpy"], default="auto",
                    help="auto = torch when importable, else numpy")
    ap.add_argument("--device", default="auto", help="torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:1")
    ap.add_argument("--dtype-compute", choices=["fp64", "fp32"], default="fp64",
                    help="reference the tolerance is checked against (both are always reported)")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="max relative error allowed (default 1e-5)")
    ap.add_argument("--max-requests", type=int, default=0, help="check only the first N requests (0 = all)")
    args = ap.parse_args(argv)

    if not args.responses and not args.write_responses:
        ap.error("nothing to do: give --responses and/or --write-responses")
    backend = args.backend
    if backend == "auto":
        backend = "torch" if ensure_torch() else "numpy"
    if backend == "torch" and not ensure_torch():
        print("error: --backend torch but torch is not importable", file=sys.stderr)
        return 2

    weights_path = args.model
    if os.path.isdir(weights_path):
        weights_path = os.path.join(weights_path, "weights.safetensors")
    model_dir = os.path.dirname(os.path.abspath(weights_path))
    version = os.path.basename(model_dir)
    fallback_name = os.path.basename(os.path.dirname(model_dir))

    t0 = time.time()
    try:
        with open(args.config, "r", encoding="utf-8") as f:
            spec = parse_config(json.load(f), fallback_name)
        if backend == "torch":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
            device = torch_device(args.device)
            sd, how = load_state_dict_file(weights_path, device)
            model = build_torch_model(spec, sd, weights_path, device)
            del sd
            where = f"torch {torch.__version__} on {device}, weights via {how}, TF32 off"
        else:
            tensors, _, _ = read_safetensors_numpy(weights_path)
            model = NumpyModel(spec, tensors, weights_path)
            where = f"numpy {np.__version__}"
        requests = read_jsonl(args.requests)
        responses = read_jsonl(args.responses) if args.responses else None
    except (ModelError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for w in model.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.max_requests > 0:
        requests = requests[: args.max_requests]
        if responses is not None:
            responses = responses[: args.max_requests]

    tables_desc = ", ".join(t.name + ":" + t.dtype + "/" + t.pooling + ("/dynamic" if t.dynamic else "")
                            for t in spec.tables)
    print(f"model {spec.name!r}: {spec.interaction}{' self' if spec.self_interaction else ''}, "
          f"num_dense {spec.num_dense}, {len(spec.features)} features, {len(spec.tables)} tables "
          f"({tables_desc}), bottom {spec.bottom_mlp}, top {spec.top_mlp}")
    print(f"backend: {where}; loaded in {time.time() - t0:.2f} s")

    # Pass 1: the reference for every request (scores, or the reason it must be rejected).
    results: List[Any] = []  # per request: (req, z64, p64, z32, p32) or an error string
    n_cand = 0
    t1 = time.time()
    for robj in requests:
        try:
            req = parse_request(robj, spec)
            z64, p64 = model.score(req, fp64=True)
            z32, p32 = model.score(req, fp64=False)
            results.append((req, z64, p64, z32, p32))
            n_cand += req.num_candidates
        except RequestError as e:
            results.append(str(e))
    elapsed = time.time() - t1
    n_rejected = sum(isinstance(r, str) for r in results)
    print(f"requests: {len(requests)} ({n_rejected} rejected by the reference), candidates: {n_cand}, "
          f"reference time {elapsed:.2f} s")

    st_int = Stats("fp32 module vs fp64 reference")
    out_lines: List[str] = []
    for i, res in enumerate(results):
        if isinstance(res, str):
            out_lines.append(json.dumps({"error": res}))
            continue
        req, z64, p64, z32, p32 = res
        st_int.update(i, p32, p64, z64, got_logit=z32)
        ref_scores = p64 if args.dtype_compute == "fp64" else p32
        out_lines.append(json.dumps({"scores": [fmt_score(v) for v in ref_scores], "model": spec.name,
                                     **({"version": version} if version.isdigit() else {})}))
    if args.write_responses:
        with open(args.write_responses, "w", encoding="utf-8") as f:
            f.write("\n".join(out_lines) + ("\n" if out_lines else ""))
        print(f"wrote {len(out_lines)} reference responses ({args.dtype_compute}; "
              f"{{\"error\": ...}} for rejected requests) to {args.write_responses}")
    if responses is None:
        for line in st_int.lines():
            print(line)
        return 0

    # Pass 2: pair responses with requests. One line per request; or, as
    # `rankd score --keep_going` writes, no line for the requests it rejects.
    failures: List[str] = []
    pairs: List[Tuple[int, Any]] = []
    if len(responses) == len(requests):
        pairs = list(enumerate(responses))
    elif n_rejected and len(responses) == len(requests) - n_rejected:
        print(f"note: {len(responses)} responses for {len(requests)} requests: taking them as the responses "
              f"to the {len(responses)} requests the reference accepts (rejected requests left out)")
        accepted = [i for i, r in enumerate(results) if not isinstance(r, str)]
        pairs = list(zip(accepted, responses))
    else:
        failures.append(f"{len(requests)} requests but {len(responses)} responses "
                        f"({n_rejected} rejected by the reference); comparing line by line")
        pairs = list(enumerate(responses[: len(requests)]))

    st64 = Stats("server vs fp64 reference")
    st32 = Stats("server vs fp32 module")
    for i, resp in pairs:
        res = results[i]
        got, got_err = response_scores(resp)
        if isinstance(res, str):
            if got_err is None:
                failures.append(f"request {i}: reference rejects it ({res}) but the server scored it")
            continue
        req, z64, p64, z32, p32 = res
        if got_err is not None:
            failures.append(f"request {i}: server error ({got_err}) but the reference scores it")
            continue
        if len(got) != req.num_candidates:
            failures.append(f"request {i}: {len(got)} scores for {req.num_candidates} candidates")
            continue
        g = np.array(got, dtype=np.float64)
        st64.update(i, g, p64, z64)
        st32.update(i, g, p32, None)

    gate, other = (st64, st32) if args.dtype_compute == "fp64" else (st32, st64)
    for st in (gate, other, st_int):  # the gated comparison first
        for line in st.lines():
            print(line)
    if gate.nonfinite:
        failures.append(f"{gate.nonfinite} non-finite scores")
    if gate.max_rel > args.tolerance:
        failures.append(f"max rel err {gate.max_rel:.3e} > tolerance {args.tolerance:g} ({gate.label})")
    for f_ in failures[:20]:
        print(f"FAIL: {f_}")
    if len(failures) > 20:
        print(f"FAIL: ... and {len(failures) - 20} more")
    if failures:
        return 1
    print(f"PASS: max rel err {gate.max_rel:.3e} <= {args.tolerance:g} ({gate.label}), "
          f"{gate.n} scores of {len(pairs) - sum(isinstance(results[i], str) for i, _ in pairs)} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
