#!/usr/bin/env bash
# The project's test command (README, CI): everything a fresh machine needs to run every test, then all of them.
#
#   scripts/test.sh [PYTEST ARGS...]      e.g. scripts/test.sh -x tests/unit ; scripts/test.sh -n 0 (one process)
#   scripts/test.sh --quick [PYTEST ARGS...]
#                                         the inner loop: the unit tests (tests/unit: none needs the cluster),
#                                         without starting the cluster or the MindSpore venv; under 5 min on 2 cores
#                                         (docs/testing.md#the-inner-loop)
#
# 1. the project's Python environment (scripts/install-deps.sh: the venv .venv/, or $HPCLAUNCH_VENV or the active
#    one; ~2 min cold, ~1 s when up to date), then everything below runs in it
# 2. the real 4-node Slurm dev cluster (scripts/dev-cluster.sh up: installs what is missing, ~1 min cold), and the
#    second one with the newest Slurm (scripts/dev-cluster-sid.sh up: builds its root once, ~2 min; ~1 s when up)
# 3. the MindSpore venv of the msrun recipe (scripts/install-mindspore.sh: ~1 min cold, < 2 s when present)
# 4. the import rules of docs/architecture.md (lint-imports, contracts in pyproject.toml)
# 5. pytest on $HPCLAUNCH_TEST_WORKERS xdist workers (default 4; --quick: 2), each test file whole on one worker
#    (--dist loadfile: a module's fixtures, such as a shared cluster job, are made once), the longest files first
#    (tests/durations.json); with HPCLAUNCH_STRICT_SKIPS=1: a test that skips makes the run fail (only tests marked
#    `gpu` may skip on a machine without a GPU); `-rs` prints why each test skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
bash scripts/install-deps.sh
# shellcheck disable=SC1091
source "${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$PWD/.venv}}/bin/activate"
export HPCLAUNCH_STRICT_SKIPS="${HPCLAUNCH_STRICT_SKIPS:-1}"
if [ "$quick" = 1 ]; then
  lint-imports
  exec python -m pytest -q -rs -n "${HPCLAUNCH_TEST_WORKERS:-2}" --dist loadfile "${@:-tests/unit}"
fi
scripts/dev-cluster.sh up
scripts/dev-cluster-sid.sh up
scripts/install-mindspore.sh
lint-imports
# Four workers on two cores: most of an integration test is waiting (for the scheduler, a job's ranks, a time
# limit), and the unit tests fill those waits; docs/testing.md has the measurements.
exec python -m pytest -q -rs -n "${HPCLAUNCH_TEST_WORKERS:-4}" --dist loadfile "${@:-tests}"
