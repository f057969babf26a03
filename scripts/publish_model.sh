#!/usr/bin/env bash
# Publishes a model version into a rankd model root with the publishing
# protocol: copy into a hidden directory (<root>/<name>/.<version>.tmp/, which
# the server ignores), then rename it to <root>/<name>/<version>/ in one step,
# so a polling server never sees a half-copied version.
#
# Usage: scripts/publish_model.sh SRC_DIR MODEL_ROOT NAME [VERSION]
#   SRC_DIR: a version directory (model.pbtxt, weights.safetensors)
#   VERSION: default = the newest version under MODEL_ROOT/NAME plus 1
# The copy and the rename must be on the same file system as MODEL_ROOT (the
# temporary directory is inside it, so they are).
set -euo pipefail

if [[ $# -lt 3 || $# -gt 4 ]]; then
  echo "usage: $0 SRC_DIR MODEL_ROOT NAME [VERSION]" >&2
  exit 2
fi
src="$1" root="$2" name="$3"
[[ -f "$src/model.pbtxt" && -f "$src/weights.safetensors" ]] ||
  { echo "$0: $src: not a model version (model.pbtxt and weights.safetensors)" >&2; exit 2; }
mkdir -p "$root/$name"
if [[ $# -eq 4 ]]; then
  version="$4"
else
  newest=$(find "$root/$name" -mindepth 1 -maxdepth 1 -type d -regex '.*/[1-9][0-9]*' \
    -printf '%f\n' | sort -n | tail -1)
  version=$(( ${newest:-0} + 1 ))
fi
[[ "$version" =~ ^[1-9][0-9]*$ ]] || { echo "$0: VERSION must be a positive integer" >&2; exit 2; }
[[ ! -e "$root/$name/$version" ]] || { echo "$0: $root/$name/$version exists" >&2; exit 1; }

tmp="$root/$name/.$version.tmp"
rm -rf "$tmp"
cp -r "$src" "$tmp"
sync -f "$tmp" 2>/dev/null || true  # the rename must not overtake the data
mv -T "$tmp" "$root/$name/$version"
echo "published $root/$name/$version"
