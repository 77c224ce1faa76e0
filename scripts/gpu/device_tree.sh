#!/usr/bin/env bash
# Run HERE, around a device call: the call's working tree (tracked files + carried paths) may be at most
# 64 MiB, and the tracked tree (models and golden data included) is within ~0.3 MiB of it. `stash` moves
# tracked files the GPU suite never reads (the tokenizer's golden token lists, the docs' screenshots, the e2e
# held-out set) into .device-stash/ (git-ignored, so they do not travel); `restore` puts them back and checks
# that nothing tracked is left missing. `status` says which state the tree is in. `stash --room` also leaves the
# BF16 embedded model here (30 MB), which makes room to carry a binary built here (prebuilt.sh); the suite then
# skips that model's rows.
#   here:   bash scripts/gpu/device_tree.sh stash [--room] && <device call> ; bash scripts/gpu/device_tree.sh restore
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH=.device-stash
FILES=(tests/golden/tokenizer/golden.json tests/e2e/data/heldout.jsonl docs/screenshots)
ROOM=(resources/models/glm5-next-tiny)
case "${1:-}" in
stash)
  mkdir -p "$STASH"
  [ "${2:-}" = --room ] && FILES+=("${ROOM[@]}")
  for f in "${FILES[@]}"; do
    if [ -e "$f" ]; then mkdir -p "$STASH/$(dirname "$f")" && mv "$f" "$STASH/$f"; fi
  done
  { git ls-files -z | xargs -0 stat -c %s 2>/dev/null || true; } |
    awk '{s += $1} END {printf "tracked files present: %.1f MiB (limit with carried paths: 64 MiB)\n", s / 1048576}'
  ;;
restore)
  for f in "${FILES[@]}" "${ROOM[@]}"; do
    if [ -e "$STASH/$f" ]; then
      [ -e "$f" ] && { echo "both $f and $STASH/$f exist: resolve by hand"; exit 1; }
      mkdir -p "$(dirname "$f")" && mv "$STASH/$f" "$f"
    fi
  done
  rm -rf "$STASH"
  missing=$(git ls-files --deleted)
  [ -z "$missing" ] || { echo "tracked files missing after restore:"; echo "$missing"; exit 1; }
  echo "restored"
  ;;
status)
  if [ -d "$STASH" ]; then echo "stashed: $(find "$STASH" -type f | wc -l) files in $STASH"; else echo "not stashed"; fi
  ;;
*)
  echo "usage: device_tree.sh stash|restore|status"; exit 2 ;;
esac
