#!/bin/bash
# End to end (issue 17, defect 3): the server never answers a NaN or Inf
# score with OK, and refuses inputs whose magnitude overflows float32.
# The model "nf" (CAT, no bottom MLP, top MLP [1]) is finite on its warm-up
# inputs (row 0) but its row 5 is [3e38, -3e38]: a bag of ids [5, 5]
# sum-pools to [+Inf, -Inf] and the logit to NaN, from finite weights and
# small inputs. Before the fix that request was answered OK with a NaN
# score, and dense 3e38 / weights 1e30 were accepted.
# Checks, through rankctl (stderr `file:line: CODE: message`) and /metrics:
#   line 1  ids [0]            OK, finite
#   line 2  ids [0] / [5, 5]   INTERNAL naming candidate 1
#   line 3  dense 3e38         INVALID_ARGUMENT naming dense[...] and --max_abs_input
#   line 4  weights 1e30       INVALID_ARGUMENT naming sparse feature "f0".weights[0]
#   line 5  = line 1           OK (the server keeps serving)
#   rankd_nonfinite_scores_total{model="nf"} = 1, one INTERNAL request counted.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
mkdir -p "$MODELS/nf/1"
cat >"$MODELS/nf/1/model.pbtxt" <<'EOF'
name: "nf"
num_dense: 2
tables { name: "t0" num_rows: 10 dim: 2 }
sparse_features { name: "f0" table: "t0" }
interaction { kind: CAT }
top_mlp: [ 1 ]
EOF
"$PY" - "$MODELS/nf/1/weights.safetensors" <<'PYEOF' || die "cannot write the weights"
import json, struct, sys
rows = [[0.1 * (r + 1), -0.05 * (r + 1)] for r in range(10)]
rows[5] = [3e38, -3e38]  # finite; two of them overflow
tensors = {
    "emb_l.0.weight": ([10, 2], [v for row in rows for v in row]),
    "top_l.0.weight": ([1, 4], [0.5, -0.25, 1.0, 1.0]),
    "top_l.0.bias": ([1], [0.1]),
}
header, data = {}, b""
for name, (shape, values) in tensors.items():
    blob = struct.pack("<%df" % len(values), *values)
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + data)
PYEOF

cat >"$TMP/req.jsonl" <<'EOF'
{"model": "nf", "numCandidates": 2, "dense": [1, 2, 3, 4], "sparse": [{"name": "f0", "ids": ["0", "1"], "lengths": [1, 1]}]}
{"model": "nf", "numCandidates": 2, "dense": [1, 2, 3, 4], "sparse": [{"name": "f0", "ids": ["0", "5", "5"], "lengths": [1, 2]}]}
{"model": "nf", "numCandidates": 2, "dense": [1, 2, 3e38, 4], "sparse": [{"name": "f0", "ids": ["0", "1"], "lengths": [1, 1]}]}
{"model": "nf", "numCandidates": 2, "dense": [1, 2, 3, 4], "sparse": [{"name": "f0", "ids": ["0", "1"], "lengths": [1, 1], "weights": [1e30, 1]}]}
{"model": "nf", "numCandidates": 2, "dense": [1, 2, 3, 4], "sparse": [{"name": "f0", "ids": ["0", "1"], "lengths": [1, 1]}]}
EOF

# The model loads (its rows and weights are finite) and warms up.
run_bounded 60 "$RANKD" inspect --model "$MODELS/nf/1" --check >"$TMP/check.out" 2>&1
expect_eq "inspect --check of nf" "$?" 0

start_rankd "$MODELS"
rankctl score --input "$TMP/req.jsonl" --output "$TMP/out.jsonl" --concurrency 1 \
  2>"$TMP/score.err" >/dev/null
expect_eq "rankctl exit code (some lines failed)" "$?" 1
cat "$TMP/score.err" >&2
expect_grep "NaN score refused" "$TMP/score.err" \
  ':2: INTERNAL: score of candidate 1 is nan \(1 of 2 scores are not finite\): model "nf" version 1'
expect_grep "huge dense refused" "$TMP/score.err" \
  ':3: INVALID_ARGUMENT: dense\[2\] \(candidate 1, feature 0\): 3e\+38 exceeds the server.s bound of 1e\+09 on input magnitudes \(--max_abs_input'
expect_grep "huge weight refused" "$TMP/score.err" \
  ':4: INVALID_ARGUMENT: sparse feature "f0".weights\[0\]: 1e\+30 exceeds'
expect_eq "answered lines" "$(wc -l <"$TMP/out.jsonl")" 2
if grep -qiE 'nan|inf' "$TMP/out.jsonl"; then fail "a non-finite score was returned: $(cat "$TMP/out.jsonl")"; fi

scrape "$TMP/metrics.txt"
expect_eq "rankd_nonfinite_scores_total" \
  "$(metric_int "$TMP/metrics.txt" rankd_nonfinite_scores_total 'model="nf"')" 1
expect_eq "INTERNAL answers counted" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="nf"' 'version="1"' 'code="INTERNAL"')" 1
expect_eq "OK answers counted" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="nf"' 'version="1"' 'code="OK"')" 2

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
