#!/usr/bin/env python3
"""Helpers of live_embeddings_test.sh (online embedding updates, issue 16).

  grow MODEL_DIR TABLE EXTRA          sets max_keys = num_rows + EXTRA on a DYNAMIC table
  make-delta MODEL_DIR OUT SIDE SEED  writes a delta safetensors file (one STATIC and one
                                      DYNAMIC table: updated rows, updated keys, new keys,
                                      deleted keys) and a JSON of what it touches
  make-delta-static MODEL_DIR OUT SIDE SEED [ROWS [TABLES]]
                                      rows of the largest STATIC tables only
  apply-delta MODEL_DIR DELTA OUT_DIR the model with the delta applied by this script
                                      (the independent expectation)
  touch-requests IN SIDE OUT          rewrites requests so each touches the delta's ids
"""
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "I64": np.int64, "F16": np.float16}


def read_st(path):
    raw = open(path, "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def write_st(path, tensors):
    names = sorted(tensors, key=lambda n: (-tensors[n].dtype.itemsize, n))
    header, offset, blobs = {}, 0, []
    for n in names:
        a = np.ascontiguousarray(tensors[n])
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64",
              np.dtype(np.float16): "F16"}[a.dtype]
        blob = a.tobytes()
        header[n] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def tables_of(model_dir):
    """[(name, kind, num_rows, dim)] in config order."""
    text = open(os.path.join(model_dir, "model.pbtxt")).read()
    out = []
    for block in re.split(r"(?m)^tables \{", text)[1:]:
        name = re.search(r'\n  name: "([^"]+)"', block).group(1)
        kind = re.search(r"\n  kind: (\w+)", block).group(1)
        rows = int(re.search(r"\n  num_rows: (\d+)", block).group(1))
        dim = int(re.search(r"\n  dim: (\d+)", block).group(1))
        out.append((name, kind, rows, dim))
    return out


def set_table_field(model_dir, table, field, value):
    path = os.path.join(model_dir, "model.pbtxt")
    blocks = re.split(r"(?m)^tables \{", open(path).read())
    for i in range(1, len(blocks)):
        if f'\n  name: "{table}"' in blocks[i]:
            b = re.sub(rf"\n  {field}: \d+", "", blocks[i])
            blocks[i] = b.replace("\n  dim:", f"\n  {field}: {value}\n  dim:", 1)
    open(path, "w").write("tables {".join(blocks))


def cmd_grow(model_dir, table, extra):
    for name, kind, rows, _ in tables_of(model_dir):
        if name == table:
            assert kind == "DYNAMIC", f"{table} is {kind}"
            set_table_field(model_dir, table, "max_keys", rows + int(extra))


def cmd_make_delta(model_dir, out, side, seed, all_dynamic="0"):
    """6 rows of the largest STATIC table; of the first DYNAMIC table (every
    one with all_dynamic=1): 5 updated keys, 6 new keys, 3 deleted keys."""
    rng = np.random.default_rng(int(seed))
    tensors = read_st(os.path.join(model_dir, "weights.safetensors"))
    tables = tables_of(model_dir)
    static = max((t for t in tables if t[1] == "STATIC"), key=lambda t: t[2])
    dynamic = [i for i, t in enumerate(tables) if t[1] == "DYNAMIC"]
    delta, touched = {}, {}
    ids = rng.choice(static[2], size=6, replace=False).astype(np.int64)
    delta[f"{static[0]}.ids"] = ids
    delta[f"{static[0]}.rows"] = rng.uniform(-1, 1, (6, static[3])).astype(np.float32)
    touched[static[0]] = [int(i) for i in ids]
    for dyn_k in dynamic if all_dynamic == "1" else dynamic[:1]:
        dyn = tables[dyn_k]
        keys = tensors[f"emb_l.{dyn_k}.keys"]
        pick = rng.choice(len(keys), size=8, replace=False)
        updated, deleted = keys[pick[:5]], keys[pick[5:]]
        new = rng.integers(1 << 50, 1 << 60, size=6, dtype=np.int64)
        dyn_ids = np.concatenate([updated, new]).astype(np.int64)
        delta[f"{dyn[0]}.ids"] = dyn_ids
        delta[f"{dyn[0]}.rows"] = rng.uniform(-1, 1, (len(dyn_ids), dyn[3])).astype(np.float32)
        delta[f"{dyn[0]}.delete"] = deleted.astype(np.int64)
        touched[dyn[0]] = [int(k) for k in np.concatenate([dyn_ids, deleted])]
    write_st(out, delta)
    json.dump(touched, open(side, "w"))


def cmd_make_delta_static(model_dir, out, side, seed, rows_per_table="6", num_tables="3"):
    """A delta of the `num_tables` largest STATIC tables, `rows_per_table` rows each
    (unique ids, at most the table's rows); `side` lists the ids per table."""
    rng = np.random.default_rng(int(seed))
    tables = sorted((t for t in tables_of(model_dir) if t[1] == "STATIC"), key=lambda t: -t[2])
    delta, touched = {}, {}
    for name, _, rows, dim in tables[:int(num_tables)]:
        n = min(int(rows_per_table), rows)
        ids = rng.choice(rows, size=n, replace=False).astype(np.int64)
        delta[f"{name}.ids"] = ids
        delta[f"{name}.rows"] = rng.uniform(-1, 1, (n, dim)).astype(np.float32)
        touched[name] = [int(i) for i in ids[:64]]
    write_st(out, delta)
    json.dump(touched, open(side, "w"))


def cmd_apply_delta(model_dir, delta_path, out_dir):
    shutil.copytree(model_dir, out_dir)
    tensors = dict(read_st(os.path.join(model_dir, "weights.safetensors")))
    delta = read_st(delta_path)
    for k, (name, kind, rows, dim) in enumerate(tables_of(model_dir)):
        if f"{name}.ids" not in delta:
            continue
        ids, new_rows = delta[f"{name}.ids"], delta[f"{name}.rows"]
        w = tensors[f"emb_l.{k}.weight"].copy()
        if kind == "STATIC":
            w[ids] = new_rows
            tensors[f"emb_l.{k}.weight"] = w
            continue
        keys = list(tensors[f"emb_l.{k}.keys"])
        table = {int(key): w[i] for i, key in enumerate(keys)}
        for key in delta.get(f"{name}.delete", []):
            table.pop(int(key), None)
        for key, row in zip(ids, new_rows):
            table[int(key)] = row
        order = sorted(table)
        tensors[f"emb_l.{k}.keys"] = np.array(order, dtype=np.int64)
        tensors[f"emb_l.{k}.weight"] = np.stack([table[key] for key in order]).astype(np.float32)
        set_table_field(out_dir, name, "num_rows", len(order))
        set_table_field(out_dir, name, "capacity", 0)
    write_st(os.path.join(out_dir, "weights.safetensors"), tensors)


def cmd_touch_requests(inp, side, out):
    touched = json.load(open(side))
    n = 0
    with open(out, "w") as f:
        for line in open(inp):
            req = json.loads(line)
            for feat in req["sparse"]:
                table = "t" + feat["name"].split("_")[1]
                if table in touched:
                    ids = touched[table]
                    feat["ids"] = [str(ids[(n + i) % len(ids)]) for i in range(len(feat["ids"]))]
            n += 1
            f.write(json.dumps(req) + "\n")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"grow": cmd_grow, "make-delta": cmd_make_delta, "make-delta-static": cmd_make_delta_static,
     "apply-delta": cmd_apply_delta,
     "touch-requests": cmd_touch_requests}[cmd](*args)


if __name__ == "__main__":
    main()
