#!/usr/bin/env bash
# hpclaunch's second dev cluster: the newest Slurm that Debian packages (suite sid: Slurm 26.05 on 2026-11-28) in a
# root file system of its own (mmdebstrap, built once and kept), run by chroot beside the first dev cluster
# (scripts/dev-cluster.sh, Slurm 22.05). Four nodes sid1..sid4 on 127.0.0.1 of the host's network, each slurmd on its
# own port and in its own UTS namespace; its own munged, MariaDB, slurmdbd, slurmctld and slurmrestd (JWT), on ports
# the first one does not use. Host-side wrappers of Slurm's commands (that chroot and cd back) in one folder, for a
# PATH. See docs/dev-cluster.md ("The second dev cluster").
#
#   scripts/dev-cluster-sid.sh up          build the root when missing (~100 s), then start (idempotent; ~5-10 s)
#   scripts/dev-cluster-sid.sh build       only build the root when missing or its inputs changed
#   scripts/dev-cluster-sid.sh rebuild     stop, then build the root again from the mirror (the newest packages)
#   scripts/dev-cluster-sid.sh down [--purge]   stop daemons and jobs, unmount (--purge: also job state and DB)
#   scripts/dev-cluster-sid.sh status      daemons + sinfo (exit 0 only when all is up and the nodes are usable)
#   scripts/dev-cluster-sid.sh token [LIFESPAN_S]   a JWT for root for its slurmrestd (prints SLURM_JWT=...)
#   scripts/dev-cluster-sid.sh bin         prints the wrappers' folder (PATH="$(scripts/dev-cluster-sid.sh bin):$PATH")
#   scripts/dev-cluster-sid.sh exec CMD... CMD inside the root (e.g. `exec cat /var/log/slurm-sid/slurmctld.log`)
#
# HPCLAUNCH_DEV_SID (default /var/lib/hpclaunch-dev-cluster-sid) holds root/ (the chroot) and bin/ (the wrappers).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$HERE/dev-cluster-sid"
REPO="$(cd "$HERE/.." && pwd)"
BASE=${HPCLAUNCH_DEV_SID:-/var/lib/hpclaunch-dev-cluster-sid}
ROOT=$BASE/root
BIN=$BASE/bin
SUITE=sid
MIRROR=http://deb.debian.org/debian
# slurm-wlm-jwt-plugin: auth/jwt; passwd: useradd; the libraries a host python (pyenv, venv) loads that
# mariadb-server does not bring
PKGS=(munge slurmctld slurmd slurm-client slurmdbd slurmrestd slurm-wlm-jwt-plugin mariadb-server passwd procps
      libffi8 libsqlite3-0 libexpat1 libnsl2)
NODES=(sid1 sid2 sid3 sid4)
CTL_NAME=sidctl
REST_LISTEN=127.0.0.1:7820
DB_PORT=3317
COMMANDS=(sbatch squeue scontrol scancel sacct sinfo srun salloc sacctmgr sstat sprio)
# host folders seen at the same path inside the root: jobs' run directories, venvs, checkouts, assets
BINDS=(/root /home /tmp /work /opt)
# inside the root
RUN=/run/slurm-sid
LOG=/var/log/slurm-sid
SPOOL=/var/spool/slurm-sid
LIB=/var/lib/slurm-sid
DB_SOCK=$RUN/mysqld.sock
MARK=/etc/hpclaunch-dev-cluster-sid  # a file only the root has: the wrappers know they run inside it
PIDS=$ROOT$RUN  # the pidfiles, as the host sees them
MUNGE_PID=$ROOT/run/munge/munged.pid
REST_USER=slurmrest

DEV_NAME=dev-cluster-sid
# shellcheck source=scripts/dev-cluster/lib.sh
source "$HERE/dev-cluster/lib.sh"  # die, log, wait_for, pid_alive, stop_pidfiles, install_text (host paths)

[ "$(id -u)" = 0 ] || die "must run as root"

in_root() { chroot "$ROOT" "$@"; }

slurmd_pidfiles() { local n; for n in "${NODES[@]}"; do echo "$PIDS/slurmd-$n.pid"; done; }

# ---------------------------------------------------------------------------- the root
# What the root is built from: a change rebuilds it (`up`, `build`).
build_key() { printf '%s\n' "$SUITE" "$MIRROR" "${PKGS[@]}" | sha256sum | cut -c1-16; }

# Mount points under DIR (deepest first).
mounts_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r; }

build_root() {
  local key tmp
  key=$(build_key)
  [ -f "$ROOT/$MARK" ] && [ "$(cat "$ROOT/$MARK")" = "$key" ] && return 0
  if ! command -v mmdebstrap >/dev/null; then  # (scripts/dev-cluster.sh up installs it too, maybe at this moment)
    log "installing mmdebstrap (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q mmdebstrap >/dev/null \
      || { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null \
           && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q mmdebstrap >/dev/null; } \
      || die "could not install mmdebstrap (apt-get install mmdebstrap)"
  fi
  tmp="$BASE/root.new"
  [ -z "$(mounts_under "$tmp")" ] || die "$tmp has mounts; not removing it"
  rm -rf "$tmp"
  log "building the root: Debian $SUITE, ${PKGS[*]} (mmdebstrap from $MIRROR)"
  # The mirror here is a snapshot: its Release file has expired (Valid-Until), which apt refuses by default.
  mmdebstrap --quiet --mode=root --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$tmp" "$MIRROR" \
    || die "mmdebstrap failed: is $MIRROR reachable from here? (curl -sI $MIRROR/dists/$SUITE/Release)"
  chroot "$tmp" useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$REST_USER"
  rm -rf "$tmp/var/cache/apt/"*.bin "$tmp/var/lib/apt/lists/"*
  echo "$key" >"$tmp/$MARK"
  if [ -e "$ROOT" ]; then
    [ -z "$(mounts_under "$ROOT")" ] || die "$ROOT still has mounts (scripts/dev-cluster-sid.sh down first)"
    rm -rf "$ROOT"
  fi
  mv "$tmp" "$ROOT"
  log "root built: $(in_root dpkg-query -W -f='${Version}' slurmctld) ($(du -sh "$ROOT" | cut -f1))"
}

# The host folders jobs need, at the same path inside the root; /proc, /sys, /dev. rslave: an unmount in the root
# never propagates back to the host's own mounts.
mount_binds() {
  local d
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  for d in /sys /dev; do
    mountpoint -q "$ROOT$d" || { mount --rbind "$d" "$ROOT$d"; mount --make-rslave "$ROOT$d"; }
  done
  for d in "${BINDS[@]}" "$(repo_top)"; do
    [ -d "$d" ] || continue
    mkdir -p "$ROOT$d"
    # a bind of a folder since removed and made again (a CI clone's top, one per run) shows the old, deleted one
    if mountpoint -q "$ROOT$d" && [ "$(stat -c %d:%i "$d")" != "$(stat -c %d:%i "$ROOT$d")" ]; then
      log "$ROOT$d: a bind of an earlier $d, bound again"
      umount -l "$ROOT$d"
    fi
    mountpoint -q "$ROOT$d" || { mount --rbind "$d" "$ROOT$d"; mount --make-rslave "$ROOT$d"; }
  done
}

# This checkout's top folder when it is under none of BINDS (a CI clone elsewhere), else nothing.
repo_top() {
  local d top
  for d in "${BINDS[@]}"; do case "$REPO/" in "$d"/*) return 0 ;; esac; done
  top="/$(echo "$REPO" | cut -d/ -f2)"
  case "$top" in /|/usr|/etc|/var|/bin|/sbin|/lib|/lib64|/proc|/sys|/dev|/run) echo "$REPO" ;; *) echo "$top" ;; esac
}

unmount_all() {
  local m
  for m in $(mounts_under "$ROOT"); do umount -l "$m" 2>/dev/null || true; done
}

# ---------------------------------------------------------------------------- files inside the root
host_python_bin() {
  local venv="${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$REPO/.venv}}" py
  if [ -x "$venv/bin/python" ]; then echo "$venv/bin"; return; fi
  py=$(command -v python3 || true)
  [ -n "$py" ] && "$py" -c 'import os, sys; print(os.path.dirname(sys.executable))' && return
  echo /usr/bin
}

CHANGED=0
write_files() {
  local n cmd
  mkdir -p "$ROOT/etc/slurm" "$ROOT$RUN" "$ROOT$LOG" "$ROOT$SPOOL/ctld" "$ROOT$LIB" "$BIN"
  for n in "${NODES[@]}"; do mkdir -p "$ROOT$SPOOL/d/$n"; done
  CHANGED=0
  install_text "$ROOT/etc/slurm/slurm.conf" 644 <"$TPL/slurm.conf" && CHANGED=1
  install_text "$ROOT/etc/slurm/gres.conf" 644 <"$TPL/gres.conf" && CHANGED=1
  install_text "$ROOT/etc/slurm/topology.yaml" 644 <"$TPL/topology.yaml" && CHANGED=1
  install_text "$ROOT/etc/slurm/slurmdbd.conf" 600 <"$TPL/slurmdbd.conf" || true
  sed "s|@PYBIN@|$(host_python_bin)|" "$TPL/task-prolog.sh" | install_text "$ROOT/etc/slurm/task-prolog.sh" 755 || true
  if [ ! -s "$ROOT/etc/slurm/jwt_hs256.key" ]; then
    (umask 077; dd if=/dev/urandom bs=32 count=1 of="$ROOT/etc/slurm/jwt_hs256.key" 2>/dev/null)
  fi
  # every name of the cluster is this machine; a lookup of anything else fails at once (no nameserver)
  printf '127.0.0.1 localhost %s %s\n::1 localhost\n' "$CTL_NAME" "${NODES[*]}" | install_text "$ROOT/etc/hosts" 644 || true
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' | install_text "$ROOT/etc/resolv.conf" 644 || true
  for cmd in "${COMMANDS[@]}"; do
    sed -e "s|@CMD@|$cmd|g" -e "s|@ROOT@|$ROOT|g" -e "s|@BINDS@|${BINDS[*]} $(repo_top)|g" "$TPL/wrapper.sh" \
      | install_text "$BIN/$cmd" 755 || true
  done
  for n in 0 1 2 3; do  # the first dev cluster's fake GPUs (the root sees the host's /dev; it may make them now too)
    [ -c /dev/fakegpu$n ] || mknod -m 666 /dev/fakegpu$n c 195 $n 2>/dev/null || [ -c /dev/fakegpu$n ] \
      || die "cannot make /dev/fakegpu$n"
  done
}

# ---------------------------------------------------------------------------- daemons
munge_up() {
  pid_alive "$MUNGE_PID" munged && return 0
  mkdir -p "$ROOT/run/munge"
  in_root chown munge:munge /run/munge /var/log/munge /var/lib/munge
  rm -f "$ROOT/run/munge/munged.pid"
  in_root runuser -u munge -- munged --force </dev/null >>"$ROOT$LOG/munged.out" 2>&1 9>&-
  wait_for 10 "munged" in_root sh -c 'munge -n </dev/null | unmunge >/dev/null'
}

db_sql() { in_root mariadb --no-defaults -S "$DB_SOCK" -u root "$@"; }

mariadb_up() {
  if pid_alive "$PIDS/mysqld.pid" mariadbd && db_sql -e 'select 1' >/dev/null 2>&1; then return 0; fi
  if [ ! -d "$ROOT$LIB/mysql/mysql" ]; then
    log "initialising MariaDB's datadir"
    in_root mariadb-install-db --no-defaults --user=root --datadir="$LIB/mysql" --auth-root-authentication-method=socket \
      --skip-test-db >"$ROOT$LOG/mariadb-install.log" 2>&1 || { cat "$ROOT$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  rm -f "$ROOT$RUN/mysqld.pid" "$ROOT$DB_SOCK"
  # MariaDB 11.8: without --innodb-snapshot-isolation=OFF slurmdbd warns it would crash on a write conflict
  setsid chroot "$ROOT" mariadbd --no-defaults --user=root --datadir="$LIB/mysql" --socket="$DB_SOCK" \
    --pid-file="$RUN/mysqld.pid" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --log-error="$LOG/mariadb.log" --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 --innodb-snapshot-isolation=OFF --max-connections=100 \
    </dev/null >>"$ROOT$LOG/mariadb.out" 2>&1 9>&- &
  wait_for 60 "MariaDB" db_sql -e 'select 1' || { tail -20 "$ROOT$LOG/mariadb.log" >&2; die "MariaDB did not start"; }
  accounting_db_sql | db_sql
}

clusters() { in_root sacctmgr -n -P list cluster format=cluster; }

slurmdbd_up() {
  pid_alive "$PIDS/slurmdbd.pid" slurmdbd || in_root slurmdbd </dev/null >>"$ROOT$LOG/slurmdbd.out" 2>&1 9>&-
  wait_for 90 "slurmdbd" clusters || { tail -20 "$ROOT$LOG/slurmdbd.log" >&2; die "slurmdbd did not answer"; }
  [[ $'\n'"$(clusters 2>/dev/null)"$'\n' == *$'\n'devsid$'\n'* ]] || in_root sacctmgr -i add cluster devsid >/dev/null
}

slurmctld_up() {
  pid_alive "$PIDS/slurmctld.pid" slurmctld && return 0
  # slurmctld checks that its hostname is SlurmctldHost's name: its own UTS namespace
  unshare --uts chroot "$ROOT" sh -c "hostname $CTL_NAME; exec slurmctld" </dev/null >>"$ROOT$LOG/slurmctld.out" 2>&1 9>&-
  wait_for 30 "slurmctld" in_root scontrol ping || { tail -20 "$ROOT$LOG/slurmctld.log" >&2; die "slurmctld did not answer"; }
}

slurmd_up() {
  local n=$1
  pid_alive "$PIDS/slurmd-$n.pid" slurmd && return 0
  unshare --uts chroot "$ROOT" sh -c "hostname $n; exec slurmd -N $n" </dev/null >>"$ROOT$LOG/slurmd-$n.out" 2>&1 9>&- \
    || { tail -5 "$ROOT$LOG/slurmd-$n.log" >&2; die "slurmd $n did not start"; }
}

# it listens (bash's /dev/tcp: no curl needed; every path answers 401 without a token anyway)
rest_answers() { (exec 3<>"/dev/tcp/${REST_LISTEN%:*}/${REST_LISTEN#*:}") 2>/dev/null; }

slurmrestd_up() {
  pid_alive "$PIDS/slurmrestd.pid" slurmrestd && return 0
  # every OpenAPI plugin of the release (no -s): it serves all the versions it has
  setsid chroot "$ROOT" env SLURM_JWT=daemon slurmrestd -a rest_auth/jwt -u "$REST_USER" -g "$REST_USER" \
    "$REST_LISTEN" </dev/null >>"$ROOT$LOG/slurmrestd.log" 2>&1 9>&- &
  echo $! >"$ROOT$RUN/slurmrestd.pid"
  wait_for 20 "slurmrestd on $REST_LISTEN" rest_answers || { tail -20 "$ROOT$LOG/slurmrestd.log" >&2; die "slurmrestd did not start"; }
}

sinfo_() { in_root sinfo "$@"; }

nodes_ok() {
  local bad
  bad=$(sinfo_ -h -N -p debug -o '%N %T' 2>/dev/null | awk '$2 !~ /^(idle|allocated|mixed|completing)$/') || return 1
  [ "$(sinfo_ -h -N -p debug -o '%N' 2>/dev/null | wc -l)" -eq ${#NODES[@]} ] || return 1
  [ -z "$bad" ]
}

wait_nodes() {
  local n
  if ! wait_for 45 "${#NODES[@]} nodes up" nodes_ok; then
    for n in $(sinfo_ -h -N -p debug -t drain,down,fail -o '%N' 2>/dev/null); do
      in_root scontrol update nodename="$n" state=resume 2>/dev/null || true
    done
    wait_for 30 "${#NODES[@]} nodes up" nodes_ok || { sinfo_ -N -l >&2; die "nodes did not come up (logs: $ROOT$LOG)"; }
  fi
}

all_running() {
  local n
  pid_alive "$MUNGE_PID" munged && pid_alive "$PIDS/mysqld.pid" mariadbd && pid_alive "$PIDS/slurmdbd.pid" slurmdbd \
    && pid_alive "$PIDS/slurmctld.pid" slurmctld && pid_alive "$PIDS/slurmrestd.pid" slurmrestd || return 1
  for n in "${NODES[@]}"; do pid_alive "$PIDS/slurmd-$n.pid" slurmd || return 1; done
}

slurm_down() {
  local n pid
  stop_pidfiles slurmrestd 5 "$PIDS/slurmrestd.pid"
  # shellcheck disable=SC2046
  stop_pidfiles slurm 15 "$PIDS/slurmctld.pid" $(slurmd_pidfiles)
  # what jobs left: every process whose root is this one, but the daemons that stay
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOT" ] || continue
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in munged|mariadbd|slurmdbd) ;; *) kill -KILL "$pid" 2>/dev/null || true ;; esac
  done
}

# ---------------------------------------------------------------------------- commands
# One `up`/`build`/`down` at a time (CI starts it in the background while a test run may call it); the daemons are
# started without the lock's descriptor (9>&-), or they would hold it for ever.
locked() {
  mkdir -p "$BASE"
  exec 9>"$BASE/.lock"
  flock 9
}

cmd_build() { locked; build_root; }

cmd_up() {
  locked
  build_root
  local was=0 n
  all_running && was=1
  mount_binds
  write_files
  if [ "$was" = 1 ] && [ "$CHANGED" = 0 ] && nodes_ok; then
    log "cluster already up ($(in_root dpkg-query -W -f='Slurm ${Version}' slurmctld))"
    sinfo_
    return 0
  fi
  munge_up
  mariadb_up
  slurmdbd_up
  log "munged, MariaDB, slurmdbd ready"
  if [ "$CHANGED" = 1 ] && pid_alive "$PIDS/slurmctld.pid" slurmctld; then
    log "configuration changed: restarting slurmctld, slurmd and slurmrestd"
    stop_pidfiles slurmrestd 5 "$PIDS/slurmrestd.pid"
    # shellcheck disable=SC2046
    stop_pidfiles slurm 15 "$PIDS/slurmctld.pid" $(slurmd_pidfiles)
  fi
  slurmctld_up
  for n in "${NODES[@]}"; do slurmd_up "$n"; done
  wait_nodes
  slurmrestd_up
  log "cluster up: $(in_root dpkg-query -W -f='Slurm ${Version}' slurmctld), ${#NODES[@]} nodes, slurmrestd on" \
      "$REST_LISTEN; commands: PATH=$BIN:\$PATH ($(elapsed)s)"
  sinfo_
}

cmd_down() {
  local purge=0
  [ "${1:-}" = --purge ] && purge=1
  locked
  if [ -d "$ROOT" ]; then
    slurm_down
    stop_pidfiles slurmdbd 15 "$PIDS/slurmdbd.pid"
    if pid_alive "$PIDS/mysqld.pid" mariadbd; then
      in_root mariadb-admin --no-defaults -S "$DB_SOCK" -u root shutdown >/dev/null 2>&1 || true
    fi
    stop_pidfiles mariadbd 30 "$PIDS/mysqld.pid"
    stop_pidfiles munged 5 "$MUNGE_PID"
    unmount_all
    if [ "$purge" = 1 ]; then
      rm -rf "${ROOT:?}$SPOOL" "${ROOT:?}$LIB"
      log "purged job state and the accounting database"
    fi
  fi
  log "cluster down"
}

cmd_rebuild() {
  cmd_down
  rm -f "$ROOT/$MARK"
  build_root
}

cmd_status() {
  local rc=0 n
  st() { if "$@"; then echo up; else echo DOWN; rc=3; fi; }
  [ -f "$ROOT/$MARK" ] || { echo "no root at $ROOT (scripts/dev-cluster-sid.sh up builds it)"; return 3; }
  echo "root:       $ROOT ($(in_root dpkg-query -W -f='Slurm ${Version}' slurmctld))"
  echo "munged:     $(st pid_alive "$MUNGE_PID" munged)"
  echo "mariadb:    $(st pid_alive "$PIDS/mysqld.pid" mariadbd) (127.0.0.1:$DB_PORT)"
  echo "slurmdbd:   $(st pid_alive "$PIDS/slurmdbd.pid" slurmdbd) (7819)"
  echo "slurmctld:  $(st pid_alive "$PIDS/slurmctld.pid" slurmctld) (7817)"
  echo "slurmrestd: $(st pid_alive "$PIDS/slurmrestd.pid" slurmrestd) ($REST_LISTEN, JWT)"
  for n in "${NODES[@]}"; do echo "slurmd $n: $(st pid_alive "$PIDS/slurmd-$n.pid" slurmd)"; done
  echo "commands:   PATH=$BIN:\$PATH"
  all_running || rc=3  # (st's rc=3 is set in the $(...) subshells)
  if [ "$rc" = 0 ]; then sinfo_ || rc=3; nodes_ok || rc=3; fi
  return "$rc"
}

usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  up) cmd_up "$@" ;;
  build) cmd_build ;;
  rebuild) cmd_rebuild ;;
  down) cmd_down "$@" ;;
  status) cmd_status ;;
  token) in_root scontrol token username=root lifespan="${1:-3600}" ;;
  bin) echo "$BIN" ;;
  exec) in_root "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
