#!/usr/bin/env python3
"""Grows the DYNAMIC table of a model directory written by `rankd gen-model` (init
FILE) to N keys, in place: model.pbtxt's num_rows and the table's two tensors in
weights.safetensors (`emb_l.{k}.weight` random fp32 rows, `emb_l.{k}.keys` distinct
int64 keys). For the GPU suite's dyn100m section: a 100 M-key table whose keys are
read from the file (`rankd gen-model --init random` makes them at load instead).
Usage: make_dyn_file.py MODEL_DIR NUM_KEYS
"""
import json
import re
import struct
import sys

import numpy as np


def main():
    model_dir, n = sys.argv[1], int(sys.argv[2])
    pbtxt_path = f"{model_dir}/model.pbtxt"
    pbtxt = open(pbtxt_path).read()
    blocks = re.split(r"(?m)^tables \{", pbtxt)
    dynamic = [i - 1 for i, b in enumerate(blocks) if i > 0 and "kind: DYNAMIC" in b]
    if len(dynamic) != 1:
        sys.exit(f"{pbtxt_path}: expected one DYNAMIC table, found {len(dynamic)}")
    k = dynamic[0]
    block = blocks[k + 1]
    dim = int(re.search(r"\n  dim: (\d+)", block).group(1))
    if "dtype: FP16" in block or "dtype: BF16" in block:
        sys.exit(f"{pbtxt_path}: table {k} must be FP32")
    block = re.sub(r"\n  num_rows: \d+", f"\n  num_rows: {n}", block, count=1)
    block = re.sub(r"\n  capacity: \d+", "", block)
    blocks[k + 1] = block
    open(pbtxt_path, "w").write("tables {".join(blocks))

    st_path = f"{model_dir}/weights.safetensors"
    raw = open(st_path, "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + hlen])
    data = raw[8 + hlen :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[b:e])
    rng = np.random.default_rng(7)
    keys = (np.arange(1, n + 1, dtype=np.int64) * np.int64(2654435761))
    rng.shuffle(keys)
    rows = rng.uniform(-0.05, 0.05, size=(n, dim)).astype(np.float32)
    tensors[f"emb_l.{k}.keys"] = ("I64", [n], keys.tobytes())
    tensors[f"emb_l.{k}.weight"] = ("F32", [n, dim], rows.tobytes())
    # 8-byte tensors first, then 4-byte ones: every tensor aligned to its size.
    order = sorted(tensors, key=lambda t: (-{"I64": 8, "F64": 8}.get(tensors[t][0], 4), t))
    new_header, offset = {}, 0
    for name in order:
        dtype, shape, blob = tensors[name]
        new_header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
    h = json.dumps(new_header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(st_path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in order:
            f.write(tensors[name][2])
    print(f"table {k}: {n} keys, dim {dim}; {st_path}: {8 + len(h) + offset} bytes")


if __name__ == "__main__":
    main()
