#!/usr/bin/env python3
"""PyTorch peers for rankd's GPU benchmarks, on the same weights and inputs.

forward: a facebookresearch/dlrm DLRM_Net-equivalent module (dot interaction)
  loaded from the model directory's weights.safetensors with
  load_state_dict(strict=True), inputs from the first ScoreRequest of a JSON
  lines file (the one rankd's forward_bench reads), all on the GPU. Times, with
  CUDA events (median of --iters after warm-up): eager, eager captured in a
  CUDA graph, torch.compile (default), and with --max-autotune also
  torch.compile(mode="max-autotune"). Prints one "TORCH ..." line per variant.
lookup: torch.nn.functional.embedding_bag, B 65536, bag 20, dim 128, 4M rows,
  fp32 and bf16, uniform ids; and a device-to-device copy for the bandwidth.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def median_us(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


class DLRMNet(nn.Module):
    """DLRM_Net's structure and state_dict names (emb_l, bot_l, top_l)."""

    def __init__(self, num_dense, rows, dim, bottom, top, dtype):
        super().__init__()
        self.emb_l = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum", dtype=dtype) for n in rows)
        layers, d = [], num_dense
        for w in bottom:
            layers += [nn.Linear(d, w), nn.ReLU()]
            d = w
        self.bot_l = nn.Sequential(*layers)
        n = 1 + len(rows)
        d = dim + n * (n - 1) // 2
        layers = []
        for i, w in enumerate(top):
            layers += [nn.Linear(d, w), nn.Sigmoid() if i == len(top) - 1 else nn.ReLU()]
            d = w
        self.top_l = nn.Sequential(*layers)
        li, lj = zip(*[(i, j) for i in range(n) for j in range(i)])
        self.register_buffer("li", torch.tensor(li), persistent=False)
        self.register_buffer("lj", torch.tensor(lj), persistent=False)

    def forward(self, dense, indices, offsets):
        x = self.bot_l(dense)
        ly = [emb(indices[k], offsets[k]).float() for k, emb in enumerate(self.emb_l)]
        t = torch.cat([x] + ly, dim=1).view(x.shape[0], -1, x.shape[1])
        z = torch.bmm(t, t.transpose(1, 2))
        r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
        return self.top_l(r)


def forward_bench(args):
    from safetensors.torch import load_file

    cfg = json.load(open(args.config))
    if cfg.get("interaction", {}).get("kind", "DOT") != "DOT":
        print("torch_bench: only DOT models", file=sys.stderr)
        return 2
    tables = cfg["tables"]
    dim = int(tables[0]["dim"])
    dtype = {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}[tables[0].get("dtype", "FP32")]
    model = DLRMNet(int(cfg["num_dense"]), [int(t["num_rows"]) for t in tables], dim,
                    [int(w) for w in cfg["bottom_mlp"]], [int(w) for w in cfg["top_mlp"]], dtype)
    sd = load_file(args.model + "/weights.safetensors", device="cuda")
    model = model.cuda().eval()
    model.load_state_dict(sd, strict=True)
    model.requires_grad_(False)

    req = json.loads(open(args.request).readline())
    b = int(req.get("numCandidates", req.get("num_candidates")))
    dense = torch.tensor(req["dense"], dtype=torch.float32, device="cuda").view(b, -1)
    by_name = {s["name"]: s for s in req["sparse"]}
    indices, offsets = [], []
    for f in cfg["sparse_features"]:
        s = by_name[f["name"]]
        lengths = torch.tensor([int(x) for x in s["lengths"]], dtype=torch.int64)
        if lengths.numel() != b:
            print("torch_bench: shared bags not supported here", file=sys.stderr)
            return 2
        indices.append(torch.tensor([int(x) for x in s["ids"]], dtype=torch.int64, device="cuda"))
        offsets.append(torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]]).cuda())

    torch.backends.cuda.matmul.allow_tf32 = args.math == "tf32"
    torch.backends.cudnn.allow_tf32 = args.math == "tf32"
    label = f"label={args.label} batch={b} math={args.math}"

    with torch.inference_mode():
        eager = lambda: model(dense, indices, offsets)
        ref = eager()
        print(f"TORCH {label} variant=eager us={median_us(eager, args.iters, args.warmup):.2f}", flush=True)

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                eager()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = model(dense, indices, offsets)
        print(f"TORCH {label} variant=cuda_graph us={median_us(g.replay, args.iters, args.warmup):.2f}", flush=True)

        modes = [] if args.no_compile else ["default"] + (["max-autotune"] if args.max_autotune else [])
        for mode in modes:
            try:
                t0 = time.time()
                compiled = torch.compile(model, mode=None if mode == "default" else mode)
                got = compiled(dense, indices, offsets)
                torch.cuda.synchronize()
                compile_s = time.time() - t0
                err = (got - ref).abs().max().item()
                us = median_us(lambda: compiled(dense, indices, offsets), args.iters, args.warmup)
                print(f"TORCH {label} variant=compile_{mode} us={us:.2f} compile_s={compile_s:.1f} "
                      f"max_abs_diff_vs_eager={err:.2e}", flush=True)
            except Exception as e:  # report, keep the other numbers
                print(f"TORCH {label} variant=compile_{mode} error={type(e).__name__}: {str(e)[:200]}", flush=True)
            torch._dynamo.reset()
    return 0


def lookup_bench(args):
    b, bag, dim, rows = 65536, 20, 128, 4 << 20
    n = b * bag
    big = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB
    dst = torch.empty_like(big)
    us = median_us(lambda: dst.copy_(big), 20, 3)
    copy_tbs = 2 * big.numel() * 4 / (us * 1e-6) / 1e12
    print(f"TORCH lookup variant=d2d_copy us={us:.1f} tb_s={copy_tbs:.3f}", flush=True)
    del big, dst
    for dtype in (torch.float32, torch.bfloat16):
        table = torch.randn(rows, dim, device="cuda").to(dtype)
        ids = torch.randint(0, rows, (n,), device="cuda")
        offsets = torch.arange(0, n, bag, device="cuda")
        f = lambda: F.embedding_bag(ids, table, offsets, mode="sum")
        us = median_us(f, 50, 5)
        moved = n * dim * table.element_size() + b * dim * table.element_size() + n * 8
        print(f"TORCH lookup variant=embedding_bag dtype={str(dtype).split('.')[-1]} us={us:.1f} "
              f"gkeys_s={n / (us * 1e-6) / 1e9:.3f} tb_s={moved / (us * 1e-6) / 1e12:.3f} "
              f"pct_copy={100 * moved / (us * 1e-6) / 1e12 / copy_tbs:.1f}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["forward", "lookup"])
    ap.add_argument("--model")
    ap.add_argument("--config", help="rankd inspect --json output")
    ap.add_argument("--request", help="JSON lines; the first request is used")
    ap.add_argument("--math", choices=["fp32", "tf32"], default="fp32")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--max-autotune", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves minutes)")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    return forward_bench(args) if args.mode == "forward" else lookup_bench(args)


if __name__ == "__main__":
    sys.exit(main())
