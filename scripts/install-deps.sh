#!/usr/bin/env bash
# Install hpclaunch's Python dependencies on a fresh machine (idempotent; ~1 s when nothing changed).
#
#   scripts/install-deps.sh          torch==2.13.0 first, then `pip install -e ".[recipes,dev]"`
#   PYTHON=/path/to/python scripts/install-deps.sh
#   HPCLAUNCH_DEPS_FORCE=1 scripts/install-deps.sh    reinstall the editable package even if up to date
#
# torch is installed first and pinned with a constraints file in every later pip call: asking pip
# for plain `torch` or a range (or letting it upgrade accelerate eagerly) pulls torch 2.15 and GBs
# of CUDA packages, while torch 2.13.0 resolves to a CPU wheel available locally.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=${PYTHON:-$(command -v python || command -v python3)}
TORCH_VERSION=2.13.0
EXTRAS="recipes,dev"
T0=$(date +%s)
log() { echo "[install-deps $(( $(date +%s) - T0 ))s] $*"; }

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
pip_install() { "$PY" -m pip install -q "$@"; }

# 1. torch, pinned.
dist_version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }
if [ "$(dist_version torch | cut -d+ -f1)" = "$TORCH_VERSION" ]; then
  log "torch $TORCH_VERSION already installed"
else
  log "installing torch==$TORCH_VERSION"
  pip_install "torch==$TORCH_VERSION"
fi

# 2. the package with its extras, torch held at the pinned version.
# The install is skipped when hpclaunch already imports from this checkout and pyproject.toml has
# not changed since the last successful run here (stamp in ~/.cache/hpclaunch).
stamp_dir="${XDG_CACHE_HOME:-$HOME/.cache}/hpclaunch"
stamp="$stamp_dir/install-deps-$(printf '%s' "$ROOT:$PY" | sha256sum | cut -c1-16)"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/constraints.txt" | sha256sum | cut -d' ' -f1) $TORCH_VERSION $EXTRAS"
if [ "${HPCLAUNCH_DEPS_FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  (cd / && "$PY" -c "
import importlib.metadata as m, os, sys, hpclaunch
for d in ('transformers', 'datasets', 'deepspeed', 'accelerate', 'submitit', 'tensorboard', 'wandb', 'pytest', 'hypothesis', 'mypy', 'types-PyYAML'):
    m.version(d)  # raises when a dependency went missing since the stamp was written
sys.exit(0 if os.path.realpath(hpclaunch.__file__).startswith(os.path.realpath('$ROOT') + os.sep) else 1)") 2>/dev/null; then
  log "hpclaunch[$EXTRAS] already installed from $ROOT"
else
  constraints="$ROOT/scripts/constraints.txt"   # torch==$TORCH_VERSION and the tested ML stack
  log "installing -e ${ROOT}[$EXTRAS] (constraints: scripts/constraints.txt)"
  (cd "$ROOT" && pip_install -c "$constraints" -e ".[$EXTRAS]")
  mkdir -p "$stamp_dir"
  echo "$want" >"$stamp"
fi

log "python $("$PY" -c 'import sys; print(sys.version.split()[0])') | torch $(dist_version torch) | hpclaunch $(dist_version hpclaunch)"
log "done"
