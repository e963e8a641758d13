# Shell helpers of the dev clusters' scripts (scripts/dev-cluster.sh, scripts/dev-cluster-sid.sh), sourced after
# they set DEV_NAME (the name their messages start with). Bash; `set -euo pipefail` is the caller's.
# shellcheck shell=bash

T0=$(date +%s.%N)
die() { echo "$DEV_NAME: error: $*" >&2; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
log() { printf '[%s %5ss] %s\n' "$DEV_NAME" "$(elapsed)" "$*"; }

# wait_for TIMEOUT_S DESCRIPTION CMD... : poll CMD every 0.2 s until it succeeds.
wait_for() {
  local timeout=$1 what=$2; shift 2
  local end=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then
      echo "$DEV_NAME: timed out after ${timeout}s waiting for: $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

# pid_alive PIDFILE [COMM]: the pid in PIDFILE runs (and its /proc comm starts with COMM).
pid_alive() {
  local f=$1 comm=${2:-} pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  if [ -n "$comm" ]; then
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in "$comm"*) ;; *) return 1 ;; esac
  fi
}

# stop_pidfiles COMM TIMEOUT PIDFILE...: TERM those daemons together, KILL what still runs after
# TIMEOUT s (slurmctld and each slurmd take ~2 s to shut down).
stop_pidfiles() {
  local comm=$1 timeout=$2 f pid pids=() i alive
  shift 2
  for f in "$@"; do
    if pid_alive "$f" "$comm"; then
      pid=$(tr -dc '0-9' <"$f")
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  if [ ${#pids[@]} -gt 0 ]; then
    for ((i = 0; i < timeout * 10; i++)); do
      alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  rm -f "$@"
}
stop_pidfile() { stop_pidfiles "$2" "${3:-10}" "$1"; }

# install_text DST MODE < content: write only when different; returns 0 when it changed the file.
install_text() {
  local dst=$1 mode=$2 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [ -f "$dst" ] && cmp -s "$tmp" "$dst"; then
    rm -f "$tmp"; chmod "$mode" "$dst"; return 1
  fi
  install -m "$mode" "$tmp" "$dst"
  rm -f "$tmp"
  return 0
}

# The accounting database and slurmdbd's MariaDB user (slurm/slurmdev, the clusters' slurmdbd.conf), as SQL.
accounting_db_sql() {
  cat <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdev';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmdev';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}
