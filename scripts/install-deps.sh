#!/usr/bin/env bash
# Install hpclaunch and its Python dependencies into a virtual environment (idempotent; ~1 s when nothing changed).
#
#   bash scripts/install-deps.sh     the project's own venv .venv/ (made with python3): torch==2.13.0 first,
#                                    then `pip install -e ".[recipes,dev,mcp,ui]"`; afterwards `source .venv/bin/activate`
#   HPCLAUNCH_VENV=DIR bash scripts/install-deps.sh    a venv you name (made when missing); an activated venv
#                                    ($VIRTUAL_ENV) is used as it is
#   PYTHON=/path/to/python3 ...      the interpreter the venv is made from (default: python3 on PATH)
#   HPCLAUNCH_DEPS_FORCE=1 ...       reinstall the editable package even if up to date
#
# Never into the system Python: Debian's python3 refuses it (PEP 668, "externally-managed-environment").
# A Debian python3 without the venv module gets the python3-venv package when run as root, or says how.
#
# torch is installed first and pinned with a constraints file in every later pip call: asking pip
# for plain `torch` or a range (or letting it upgrade accelerate eagerly) pulls torch 2.15 and GBs
# of CUDA packages, while torch 2.13.0 resolves to a CPU wheel available locally.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$ROOT/.venv}}"
BASE_PY="${PYTHON:-$(command -v python3 || command -v python)}"
TORCH_VERSION=2.13.0
EXTRAS="recipes,dev,mcp,ui"
T0=$(date +%s)
log() { echo "[install-deps $(( $(date +%s) - T0 ))s] $*"; }

# 0. the virtual environment.
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$BASE_PY" -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      ver="$("$BASE_PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
      log "installing python${ver}-venv (this python3 has no venv module)"
      # the lock timeout: .ci/run starts the dev cluster (its own apt-get) beside this
      apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq "python${ver}-venv" >/dev/null
    else
      echo "install-deps: $BASE_PY cannot make a virtual environment (no venv/ensurepip module)." >&2
      echo "  On Debian/Ubuntu: sudo apt-get install python3-venv, then run this again." >&2
      exit 2
    fi
  fi
  log "creating the virtual environment $VENV (from $BASE_PY)"
  "$BASE_PY" -m venv "$VENV"
fi
PY="$VENV/bin/python"

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
for d in ('transformers', 'datasets', 'deepspeed', 'accelerate', 'submitit', 'tensorboard', 'wandb', 'pytest', 'hypothesis', 'mypy', 'import-linter', 'types-PyYAML', 'mcp', 'starlette', 'uvicorn'):
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
log "done: the environment is $VENV (use it with: source $VENV/bin/activate)"
