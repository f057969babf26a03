# scripts/build_image.sh, part: the smoke steps (step 5). Sourced by build_image.sh (never run
# alone); uses its options and globals (build_image.sh documents them).
# ---- smoke steps
# wait_healthy NAME: the image's HEALTHCHECK command, inside the container,
# until it passes (within the start period, bounded); HEALTH_OUT = its output.
wait_healthy() {
  local name="$1" limit="$IMG_HC_START_S" end
  [[ "$limit" -gt 0 && "$limit" -le 180 ]] || limit=180
  end=$((SECONDS + limit))
  while [[ $SECONDS -lt $end ]]; do
    ctr_alive "$name" || fail "$name: rankd exited before answering the HEALTHCHECK: $(ctr_logs "$name" 10 | tr '\n' ' ')"
    if HEALTH_OUT="$(ctr_exec "$name" $((IMG_HC_TIMEOUT_S + 10)) "${IMG_HC[@]}" 2>&1)"; then
      grep -qw SERVING <<<"$HEALTH_OUT" || fail "$name: HEALTHCHECK passed but printed no SERVING: $HEALTH_OUT"
      return 0
    fi
    [[ $SECONDS -lt $DEADLINE ]] || fail "out of time (--timeout $TIMEOUT) waiting for $name to be healthy"
    sleep 1
  done
  fail "$name: the HEALTHCHECK (${IMG_HC[*]}) did not pass within $limit s: $HEALTH_OUT; rankd: $(ctr_logs "$name" 10 | tr '\n' ' ')"
}

# check_server_uid NAME: the serving process runs as the image's user.
check_server_uid() {
  local pid uid
  pid="$(ctr_pid "$1" || true)"
  uid="$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)"
  [[ "$uid" == "${IMG_USER%%:*}" ]] || fail "$1: rankd (pid $pid) runs as uid '$uid', the image's USER is $IMG_USER"
}

# stop_and_check NAME GRACE_S: drains on the STOPSIGNAL and exits 0 in time.
stop_and_check() {
  ctr_stop "$1" "$2"
  [[ "$CTR_RC" == 0 ]] ||
    fail "$1: rankd exited with $CTR_RC after ${IMG_STOPSIGNAL} (want 0 within $2 s): $(tail -5 "${CTR_LOG[$1]}" | tr '\n' ' ')"
}

# volumes: models (made by the demo init container), io (requests, scores),
# writable by the image's user, as a volume provisioner would make them.
make_volumes() {
  local d
  for d in models io compose-models; do
    mkdir -p "$WORK/$d"
    chown "$IMG_USER" "$WORK/$d"
  done
}

# smoke_models: the demo overlay's init container (k8s `args` = the image's
# CMD replaced) generates the model into the models volume.
smoke_models() {
  RUN_ENTRYPOINT=()
  RUN_ARGS=("${INIT_ARGS[@]}")
  RUN_VOLUMES=("$WORK/models:/models")
  RUN_HARDENED=1
  [[ "${#RUN_ARGS[@]}" -gt 0 ]] || fail "the demo overlay has no init container args to generate the model with"
  ctr_run init-models 300 || fail "init container (${RUN_ARGS[*]}) failed: $(tail -5 "${CTR_LOG[init-models]}" | tr '\n' ' ')"
  MODEL_DIR="$(find "$WORK/models" -name model.pbtxt -printf '%h\n' | head -1 || true)"
  [[ -n "$MODEL_DIR" ]] || fail "the init container (${RUN_ARGS[*]}) wrote no model.pbtxt under /models"
  pass "demo model: the k8s demo init container (args ${RUN_ARGS[*]}) in the image wrote /models${MODEL_DIR#"$WORK/models"}"
}

# smoke_serve: the image's ENTRYPOINT + CMD, unchanged, serve the model;
# health via the HEALTHCHECK; scores inside == `rankd score` outside.
smoke_serve() {
  RUN_ENTRYPOINT=()
  RUN_ARGS=()
  RUN_VOLUMES=("$WORK/models:/models:ro" "$WORK/io:/smoke")
  RUN_HARDENED=0
  bounded 120 "$RANKD_HOST" gen-requests --model "$MODEL_DIR" --output "$WORK/io/requests.jsonl" \
    --count 16 --candidates 32 --seed 5 2>"$WORK/gen-requests.err" ||
    fail "rankd gen-requests: $(tr '\n' ' ' <"$WORK/gen-requests.err")"
  chown "$IMG_USER" "$WORK/io/requests.jsonl"
  bounded 300 "$RANKD_HOST" score --model "$MODEL_DIR" --input "$WORK/io/requests.jsonl" \
    --output "$WORK/scores.outside.jsonl" 2>"$WORK/score.err" || fail "rankd score (outside): $(tr '\n' ' ' <"$WORK/score.err")"
  ctr_start serve
  wait_healthy serve
  check_server_uid serve
  pass "image CMD (${IMG_ENTRYPOINT[*]} ${IMG_CMD[*]}): HEALTHCHECK says '$(tr '\n' ' ' <<<"$HEALTH_OUT" | sed 's/ *$//')', rankd runs as uid ${IMG_USER%%:*}"
  if [[ "$RUNNER" == podman ]]; then
    # podman's own reading of the image's HEALTHCHECK agrees.
    bounded 60 podman healthcheck run "$RUN_ID-serve" >/dev/null 2>&1 || fail "podman healthcheck run: unhealthy"
  fi
  ctr_exec serve 300 rankctl score --target "$IMG_HC_TARGET" --input /smoke/requests.jsonl \
    --output /smoke/scores.image.jsonl >"$WORK/rankctl.out" 2>&1 || fail "rankctl score in the image: $(tail -3 "$WORK/rankctl.out" | tr '\n' ' ')"
  cmp -s "$WORK/scores.outside.jsonl" "$WORK/io/scores.image.jsonl" ||
    fail "scores differ: rankctl score in the image ($WORK/io/scores.image.jsonl) vs rankd score outside ($WORK/scores.outside.jsonl)"
  pass "scores: rankctl score in the image == rankd score outside, byte for byte ($(wc -l <"$WORK/scores.outside.jsonl") responses)"
  stop_and_check serve 40
  pass "image STOPSIGNAL ($IMG_STOPSIGNAL): drained, exit 0"
}

# serve_with NAME PORT GRACE_S: RUN_* as set; healthy via the image's
# HEALTHCHECK (so PORT, the args' --grpc_port, must be the one it checks),
# then a drain within GRACE_S.
serve_with() {
  local name="$1" port="$2" grace="$3"
  [[ "$port" == "$IMG_HC_PORT" ]] ||
    fail "$name serves gRPC on $port but the image's HEALTHCHECK checks $IMG_HC_PORT: Docker would call it unhealthy"
  ctr_start "$name"
  wait_healthy "$name"
  check_server_uid "$name"
  if [[ "$RUN_HARDENED" -eq 1 ]] && ctr_exec "$name" 30 touch /rankd-write-probe >/dev/null 2>&1; then
    fail "$name: the root filesystem is writable, the read-only run tested nothing"
  fi
  stop_and_check "$name" "$grace"
}

# smoke_compose: the compose stack's models service into an empty volume,
# then its rankd service (command, read_only, tmpfs) serving it.
smoke_compose() {
  local files=("$ROOT/deploy/compose/compose.yaml")
  [[ "$TARGET" == gpu ]] && files+=("$ROOT/deploy/compose/compose.gpu.yaml")
  load_config compose "$WORK/serve-help.txt" "${files[@]}"
  RUN_ENTRYPOINT=("${COMPOSE_MODELS_ENTRYPOINT[@]}")
  RUN_ARGS=("${COMPOSE_MODELS_CMD[@]}")
  RUN_VOLUMES=("$WORK/compose-models:$COMPOSE_MODELS_TARGET")
  RUN_HARDENED=0
  ctr_run compose-models 600 || fail "compose models service failed: $(tail -5 "${CTR_LOG[compose-models]}" | tr '\n' ' ')"
  [[ -n "$(find "$WORK/compose-models" -name model.pbtxt)" ]] || fail "the compose models service wrote no model"
  pass "compose models service: $(find "$WORK/compose-models" -name model.pbtxt | wc -l) model(s) generated in the image"
  if [[ " ${COMPOSE_RANKD_CMD[*]} " == *" --backend=cuda "* ]]; then
    skip "compose rankd (${COMPOSE_RANKD_CMD[*]}): --backend=cuda needs a GPU"
    return
  fi
  RUN_ENTRYPOINT=("${COMPOSE_RANKD_ENTRYPOINT[@]}")
  RUN_ARGS=("${COMPOSE_RANKD_CMD[@]}")
  RUN_VOLUMES=("$WORK/compose-models:/models:ro")
  RUN_HARDENED="$COMPOSE_RANKD_READ_ONLY"
  serve_with compose-rankd "$COMPOSE_RANKD_GRPC_PORT" "$COMPOSE_RANKD_GRACE_S"
  pass "compose rankd command (${COMPOSE_RANKD_CMD[*]}), read-only root: healthy, drained within stop_grace_period ${COMPOSE_RANKD_GRACE_S} s"
}

# smoke_k8s: the rendered overlay's rankd container args (image ENTRYPOINT
# kept) with readOnlyRootFilesystem, drained within the grace period less
# the preStop sleep.
smoke_k8s() {
  if [[ "$K8S_BACKEND" == cuda ]]; then
    skip "k8s $K8S_OVERLAY overlay args (${K8S_ARGS[*]}): --backend=cuda needs a GPU"
    return
  fi
  RUN_ENTRYPOINT=("${K8S_COMMAND[@]}")
  RUN_ARGS=("${K8S_ARGS[@]}")
  RUN_VOLUMES=("$WORK/models:/models:ro")
  RUN_HARDENED="$K8S_READ_ONLY"
  serve_with k8s-rankd "$K8S_GRPC_PORT" $((K8S_GRACE_S - K8S_PRESTOP_S))
  pass "k8s $K8S_OVERLAY overlay args (${K8S_ARGS[*]}), read-only root: healthy, drained within $((K8S_GRACE_S - K8S_PRESTOP_S)) s"
}

# read_k8s: the overlays as kubectl renders them. The demo overlay (cpu +
# an init container that generates the model) gives the model's init args
# and the runAsUser; the overlay of the image's target (cpu: demo, gpu: gpu)
# gives the serving args.
read_k8s() {
  K8S_OVERLAY=demo
  render_overlay demo
  load_config k8s "$WORK/serve-help.txt" "$WORK/k8s-demo.yaml"
  INIT_ARGS=("${K8S_INIT_ARGS[@]}")
  if [[ "$TARGET" == gpu ]]; then
    K8S_OVERLAY=gpu
    render_overlay gpu
    load_config k8s "$WORK/serve-help.txt" "$WORK/k8s-gpu.yaml"
  fi
}

render_overlay() {
  command -v kubectl >/dev/null || fail "no kubectl to render deploy/k8s/overlays/$1 (scripts/setup.sh installs it)"
  HOME="$WORK" bounded 120 kubectl kustomize "$ROOT/deploy/k8s/overlays/$1" >"$WORK/k8s-$1.yaml" 2>"$WORK/k8s.err" ||
    fail "kubectl kustomize deploy/k8s/overlays/$1: $(tr '\n' ' ' <"$WORK/k8s.err")"
}

smoke_test() {
  local start=$SECONDS step
  read_image_config
  read_k8s
  check_image_config
  choose_runner
  make_volumes
  for step in smoke_models smoke_serve smoke_compose smoke_k8s; do
    check_time "$step"
    "$step"
  done
  SMOKE_S=$((SECONDS - start))
}

