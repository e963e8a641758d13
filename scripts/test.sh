#!/usr/bin/env bash
# The project's test command (README, CI): everything a fresh machine needs to run every test, then all of them.
#
#   scripts/test.sh [PYTEST ARGS...]      e.g. scripts/test.sh -x tests/unit
#
# 1. the project's Python environment (scripts/install-deps.sh: the venv .venv/, or $HPCLAUNCH_VENV or the active
#    one; ~2 min cold, ~1 s when up to date), then everything below runs in it
# 2. the real 4-node Slurm dev cluster (scripts/dev-cluster.sh up: installs what is missing, ~1 min cold)
# 3. the MindSpore venv of the msrun recipe (scripts/install-mindspore.sh: ~3 min cold, < 2 s when present)
# 4. the import rules of docs/architecture.md (lint-imports, contracts in pyproject.toml)
# 5. pytest with HPCLAUNCH_STRICT_SKIPS=1: a test that skips makes the run fail (only tests marked `gpu`
#    may skip on a machine without a GPU); `-rs` prints why each test skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
# shellcheck disable=SC1091
source "${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$PWD/.venv}}/bin/activate"
scripts/dev-cluster.sh up
scripts/install-mindspore.sh
lint-imports
export HPCLAUNCH_STRICT_SKIPS="${HPCLAUNCH_STRICT_SKIPS:-1}"
exec python -m pytest -q -rs "${@:-tests}"
