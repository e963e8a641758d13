#!/usr/bin/env bash
# Build the test container image offline, from Debian's packages and the Python package index only (no
# registry pull): a minimal Debian 12 root file system (mmdebstrap, from the mirror apt already uses here),
# Python 3.11 with a venv at /opt/venv holding scripts/test-image-requirements.txt (torch CPU, transformers,
# hpclaunch's core dependencies; pinned by scripts/constraints.txt), and hpclaunch itself from this checkout.
# The result is one SquashFS file, the image Charliecloud runs (docs/containers.md).
#
#   scripts/build-test-image.sh            prints the image's path (built, or found in the cache) on stdout;
#                                          CACHE/hpclaunch-test.sqfs then points at it
#   HPCLAUNCH_IMAGE_CACHE=DIR ...          where images are kept (default /var/cache/hpclaunch/images)
#
# Cached by content hash, in two layers: the base (Debian + venv) is keyed by the code that builds it (this
# script's functions) and the requirement files; the image (base + hpclaunch's source, one mksquashfs) by the
# base and hpclaunch's files (git's tracked and untracked ones). With nothing changed it prints the path at once.
# Needs root (mmdebstrap's root mode, chroot) and the Debian packages mmdebstrap and squashfs-tools.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${HPCLAUNCH_IMAGE_CACHE:-/var/cache/hpclaunch/images}"
REQS="$ROOT/scripts/test-image-requirements.txt"
CONSTRAINTS="$ROOT/scripts/constraints.txt"
SUITE=bookworm
T0=$(date +%s)
log() { echo "[build-test-image $(( $(date +%s) - T0 ))s] $*" >&2; }
die() { echo "build-test-image: error: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root, chroot)"
for tool in mmdebstrap mksquashfs; do
  command -v "$tool" >/dev/null || die "$tool is missing: apt-get install mmdebstrap squashfs-tools"
done
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # one build at a time in this cache: a second one waits, then finds the image built

# The Debian 12 sources apt uses on this machine (main, updates, security), as one-line entries for mmdebstrap.
debian_sources() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' |
    awk -v s="$SUITE" '$3 == "main" && ($2 == s || $2 == s "-updates" || $2 == s "-security") {
      print "deb " $1 " " $2 " main" }' | sort -u
}

# chroot DIR CMD...: CMD inside DIR with /proc and this machine's pip configuration and local wheel folders
# (read-only), in a mount namespace of its own so that nothing stays mounted.
in_root() {
  local dir=$1; shift
  local binds="mount -t proc proc '$dir/proc'"
  for p in /etc/pip.conf /etc/xdg/pip /opt/wheels /opt/pypi /opt/pypi-more /etc/ssl/certs; do
    [ -e "$p" ] || continue
    if [ -d "$p" ]; then mkdir -p "$dir$p"; else mkdir -p "$(dirname "$dir$p")"; touch "$dir$p"; fi
    binds+="; mount --bind '$p' '$dir$p'; mount -o remount,bind,ro '$dir$p'"
  done
  unshare -m -- sh -ec "$binds; exec chroot '$dir' \"\$@\"" sh "$@"
}

build_base() {
  local base=$1 tmp="$1.tmp.$$"
  rm -rf "$tmp"
  local sources
  sources=$(debian_sources)
  [ -n "$sources" ] || die "apt knows no $SUITE main source here (apt-get update?)"
  log "Debian $SUITE root file system (mmdebstrap, minbase + python3-venv)"
  mmdebstrap --quiet --mode=root --variant=minbase --include=python3,python3-venv \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$tmp" <<<"$sources" >&2
  log "venv /opt/venv: $(grep -cv '^#' "$REQS") pinned requirements (pip)"
  cp "$REQS" "$tmp/tmp/requirements.txt"
  cp "$CONSTRAINTS" "$tmp/tmp/constraints.txt"
  in_root "$tmp" python3 -m venv /opt/venv
  in_root "$tmp" /opt/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check \
    -r /tmp/requirements.txt -c /tmp/constraints.txt >&2
  # hpclaunch from /opt/hpclaunch (filled per image below); Charliecloud's ch-run --set-env reads /ch/environment
  echo /opt/hpclaunch >"$tmp/opt/venv/lib/python3.11/site-packages/hpclaunch.pth"
  mkdir -p "$tmp/ch" "$tmp/opt/hpclaunch"
  : >"$tmp/etc/hosts"  # ch-run binds the node's /etc/hosts and resolv.conf over these files: they must be there
  : >"$tmp/etc/resolv.conf"
  printf '%s\n' "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "VIRTUAL_ENV=/opt/venv" >"$tmp/ch/environment"
  rm -rf "$tmp/tmp/"* "$tmp/var/cache/apt/"*.bin "$tmp/var/lib/apt/lists/"*
  find "$tmp/opt/venv" -name __pycache__ -prune -exec rm -rf {} +
  mv "$tmp" "$base"
}

hash16() { sha256sum | cut -c1-16; }
src_files() { (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard hpclaunch templates recipes \
  cluster_profiles); }
base_key=$( (declare -f debian_sources in_root build_base; echo "$SUITE"; cat "$REQS" "$CONSTRAINTS") | hash16)
src_key=$( (echo "$base_key"; cd "$ROOT" && src_files | xargs -0 sha256sum) | hash16)
image="$CACHE/hpclaunch-test-$src_key.sqfs"
# hpclaunch-test.sqfs, the name the dev-slurm-container profile gives, points at the newest image (replaced at once)
link() { ln -sfn "$(basename "$image")" "$CACHE/.link.$$" && mv -T "$CACHE/.link.$$" "$CACHE/hpclaunch-test.sqfs"; }
if [ -f "$image" ]; then
  link
  log "cached: $image"
  echo "$image"
  exit 0
fi

base="$CACHE/base-$base_key"
if [ -d "$base" ]; then
  log "base cached: $base"
else
  # one base at a time (each is ~1.2 GB), and nothing left by a build that was killed
  find "$CACHE" -mindepth 1 -maxdepth 1 \( -name 'base-*' -o -name 'top.tmp.*' -o -name '*.sqfs.tmp.*' \) \
    -exec rm -rf {} +
  build_base "$base"
fi

log "image: base + hpclaunch from $ROOT (mksquashfs)"
top="$CACHE/top.tmp.$$"
trap 'rm -rf "$top" "$image.tmp.$$"' EXIT
cp -al "$base" "$top"  # hard links: the base's files are never written through them
(cd "$ROOT" && src_files | xargs -0 cp --parents -t "$top/opt/hpclaunch")
mksquashfs "$top" "$image.tmp.$$" -quiet -noappend -no-progress -comp zstd -Xcompression-level 3 >&2
mv "$image.tmp.$$" "$image"
link
find "$CACHE" -maxdepth 1 -name 'hpclaunch-test-*.sqfs' ! -newer "$image" ! -path "$image" -mmin +60 -delete
log "built: $image ($(du -h "$image" | cut -f1))"
echo "$image"
