# scripts/build_image.sh, part: binaries, context, base image and podman build (steps 1-4). Sourced by build_image.sh (never run
# alone); uses its options and globals (build_image.sh documents them).
# ------------------------------------------------------------ 1. binaries
# find_binary NAME SUBDIR: DIR/NAME or DIR/SUBDIR/NAME (a bazel-bin tree).
find_binary() {
  local f
  for f in "$BIN_DIR/$1" "$BIN_DIR/$2/$1"; do
    [[ -x "$f" && -f "$f" ]] && { echo "$f"; return 0; }
  done
  return 1
}

# build_binaries: the normal Bazel build; sets BIN_DIR to its output.
build_binaries() {
  local config=cpu
  [[ "$TARGET" == gpu ]] && config=portable  # CUDA build, every GPU generation
  command -v bazel >/dev/null || fail "no bazel to build the binaries (scripts/setup.sh installs it; or pass --bin_dir)"
  log "building: bazel build --config=$config //server:rankd //client:rankctl //loadtest:rankload"
  (cd "$ROOT" && bounded 3600 bazel build --config="$config" //server:rankd //client:rankctl //loadtest:rankload) >&2 ||
    fail "bazel build --config=$config failed (above)"
  BIN_DIR="$(cd "$ROOT" && bounded 300 bazel info --config="$config" bazel-bin 2>/dev/null)" ||
    fail "bazel info --config=$config bazel-bin failed"
}

# make_context: the build context of Dockerfile.prebuilt in $WORK/context.
make_context() {
  local ctx="$WORK/context" rankd rankctl
  rankd="$(find_binary rankd server)" ||
    fail "--bin_dir $BIN_DIR has no executable rankd (looked for $BIN_DIR/rankd and $BIN_DIR/server/rankd)"
  rankctl="$(find_binary rankctl client)" ||
    fail "--bin_dir $BIN_DIR has no executable rankctl (looked for $BIN_DIR/rankctl and $BIN_DIR/client/rankctl)"
  mkdir -p "$ctx/bin"
  cp "$rankd" "$rankctl" "$ctx/bin/"
  chmod 0755 "$ctx/bin/rankd" "$ctx/bin/rankctl"
  if ! bash "$ROOT/deploy/docker/runtime_packages.sh" "$ctx/bin/rankd" "$ctx/bin/rankctl" \
    >"$ctx/runtime-packages.txt" 2>"$WORK/runtime-packages.err"; then
    fail "runtime_packages.sh: $(tr '\n' ' ' <"$WORK/runtime-packages.err")"
  fi
  log "runtime packages (ldd of $rankd, $rankctl): $(tr '\n' ' ' <"$ctx/runtime-packages.txt")"
  if [[ "$TARGET" == gpu ]]; then
    [[ -f "$CUBLASLT" ]] || fail "--target gpu needs libcublasLt.so.13: $CUBLASLT does not exist (--cublaslt FILE)"
    mkdir -p "$ctx/lib"
    cp -L "$CUBLASLT" "$ctx/lib/libcublasLt.so.13"
  fi
  RANKD_HOST="$ctx/bin/rankd"  # the same binary, run outside for the reference
}

# ------------------------------------------------------------ 3. base image
# The Debian images' own apt and dpkg settings (docker-clean etc.), so that
# a locally made base behaves like debian:12-slim: no package caches or
# indexes left in layers, no documentation, man pages or translations.
write_slim_config() {
  local r="$1"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in Debian's slim images: no documentation, man pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat >"$r/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' >"$r/etc/apt/apt.conf.d/docker-gzip-indexes"
  printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$r/etc/apt/apt.conf.d/docker-autoremove-suggests"
  # bookworm with its updates and security suites, as the official image.
  rm -f "$r/etc/apt/sources.list"
  cat >"$r/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: ${DEBIAN_MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${DEBIAN_MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# slim_rootfs DIR: what debootstrap leaves that an image should not carry.
slim_rootfs() {
  local r="$1"
  write_slim_config "$r"
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r"/usr/share/{man,groff,info,lintian,linda}/*
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*
  find "$r/var/log" -type f -exec truncate -s 0 {} +
  # The container runtime provides these; debootstrap copied this machine's.
  rm -f "$r/etc/hostname" "$r/etc/resolv.conf"
  : >"$r/etc/machine-id"
  rm -rf "${r:?}"/dev/*
}

# make_base_tarball TAR: a Debian 12 minbase root filesystem, slimmed.
make_base_tarball() {
  local tar="$1" rootfs="$WORK/rootfs" start=$SECONDS
  command -v debootstrap >/dev/null ||
    fail "this machine cannot build containers: base image $BASE_IMAGE is not in podman's storage and debootstrap is not installed to make it (scripts/setup.sh installs it)"
  log "base image: debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR (about a minute)"
  if ! bounded 900 debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log" >&2
    fail "debootstrap --variant=minbase bookworm $DEBIAN_MIRROR failed (log above)"
  fi
  slim_rootfs "$rootfs"
  mkdir -p "$(dirname "$tar")"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$tar.tmp" . || fail "cannot write $tar.tmp"
  mv "$tar.tmp" "$tar"
  rm -rf "$rootfs"
  log "base image: root filesystem made in $((SECONDS - start)) s ($(du -m "$tar" | cut -f1) MB), cached as $tar"
}

# ensure_base_image: BASE_IMAGE in podman's storage, made here when absent.
ensure_base_image() {
  local tar="$CACHE_DIR/debian-bookworm-minbase-slim.tar"
  if podman image exists "$BASE_IMAGE"; then
    log "base image: $BASE_IMAGE (in podman's storage)"
    BASE_ORIGIN="in podman's storage"
    return
  fi
  case "$BASE_IMAGE" in
    debian:12-slim | debian:bookworm-slim | docker.io/library/debian:12-slim | docker.io/library/debian:bookworm-slim) ;;
    *) fail "base image $BASE_IMAGE is not in podman's storage; only debian:12-slim can be made here (or \`podman pull $BASE_IMAGE\` first)" ;;
  esac
  if [[ -s "$tar" ]]; then
    BASE_ORIGIN="imported from the cached $tar"
  else
    make_base_tarball "$tar"
    BASE_ORIGIN="made by debootstrap"
  fi
  bounded 300 podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change 'LABEL org.opencontainers.image.description="Debian 12 minbase (debootstrap), slimmed by scripts/build_image.sh"' \
    "$tar" "$BASE_IMAGE" >/dev/null 2>"$WORK/import.err" ||
    fail "podman import $tar as $BASE_IMAGE: $(tr '\n' ' ' <"$WORK/import.err")"
  log "base image: $BASE_IMAGE $BASE_ORIGIN"
}

# ------------------------------------------------------------ 4. build
# podman build keeps every layer (the package layer is reused while the
# package list stays the same); the image a rebuild replaces loses its tag and
# would stay in the storage: remove_replaced_image OLD_ID deletes it (and the
# intermediate layers only it used), never an image still named or in use.
remove_replaced_image() {
  local old="$1" new
  new="$(podman image inspect --format '{{.Id}}' "$TAG")"
  [[ -n "$old" && "$old" != "$new" ]] || return 0
  if [[ -z "$(podman image inspect --format '{{join .RepoTags " "}}' "$old" 2>/dev/null)" ]] &&
    podman rmi "$old" >/dev/null 2>&1; then
    log "removed the image $TAG replaced (${old:0:12})"
  fi
}

# relabel_image: the labels that change from build to build, set again on
# top of the built image. buildah 1.28 reuses a cached LABEL step whose
# ${ARG} values changed (its cache key is the unexpanded text), so with the
# layers cached the image would keep an earlier build's created / revision.
# A LABEL with the values written out misses the cache when they change.
relabel_image() {
  local id
  id="$(podman image inspect --format '{{.Id}}' "$TAG")"
  mkdir -p "$WORK/relabel"
  {
    echo "FROM $id"
    echo "LABEL org.opencontainers.image.created=\"$BUILD_DATE\" org.opencontainers.image.revision=\"${VCS_REF:-unknown}\""
  } >"$WORK/relabel/Dockerfile"
  bounded 300 podman build --isolation chroot --format docker --pull=never -t "$TAG" "$WORK/relabel" \
    >>"$WORK/build.log" 2>&1 || fail "podman build of the labels of $TAG failed: $(tail -3 "$WORK/build.log" | tr '\n' ' ')"
}

build_image() {
  local start=$SECONDS args=() old_id
  BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  args=(--isolation chroot --format docker --pull=never -f "$DOCKERFILE" --target "$TARGET" -t "$TAG"
    --build-arg "DEBIAN_SLIM_IMAGE=$BASE_IMAGE" --build-arg "BUILD_DATE=$BUILD_DATE")
  [[ -n "$VCS_REF" ]] && args+=(--build-arg "VCS_REF=$VCS_REF")
  [[ "$NO_CACHE" -eq 1 ]] && args+=(--no-cache)
  old_id="$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
  log "podman build ${args[*]} $WORK/context"
  if ! bounded 1200 podman build "${args[@]}" "$WORK/context" >"$WORK/build.log" 2>&1; then
    tail -n 30 "$WORK/build.log" >&2
    fail "podman build of $TAG failed (last lines above; context $WORK/context, Dockerfile $DOCKERFILE)"
  fi
  relabel_image
  BUILD_S=$((SECONDS - start))
  remove_replaced_image "$old_id"
}

