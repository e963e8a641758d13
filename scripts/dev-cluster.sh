#!/usr/bin/env bash
# hpclaunch dev cluster: a real Slurm 22.05 cluster of 4 nodes (or N: up --nodes N) on this one machine (Debian 12,
# root, no systemd). Each node's slurmd runs in its own network namespace (10.77.0.K) and UTS namespace
# (hostname nodeK); the controller, slurmdbd and MariaDB run on the host (10.77.0.254 = hpcctl), and
# slurmrestd (the REST API, JWT auth) on 127.0.0.1:6820.
# See docs/dev-cluster.md.
#
#   scripts/dev-cluster.sh up [--no-accounting] [--nodes N]   start (idempotent; a no-op when already up);
#                                                  N nodes (1-253): partitions debug and long keep node[1-4], and
#                                                  beyond 4 a partition scale holds node[1-N]; without --nodes a
#                                                  running cluster keeps its size, a stopped one gets 4
#   scripts/dev-cluster.sh down [--purge]          stop daemons, jobs, namespaces (--purge: also state + DB)
#   scripts/dev-cluster.sh restart [--no-accounting] [--nodes N]
#   scripts/dev-cluster.sh status                  daemons + sinfo (exit 0 only when all is up)
#   scripts/dev-cluster.sh accounting on|off|status   switch slurmdbd accounting in slurmctld
#   scripts/dev-cluster.sh token [LIFESPAN_S]      a JWT for root for slurmrestd (prints SLURM_JWT=...)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TPL="$HERE/dev-cluster"

DEFAULT_NODES=4  # a stopped cluster starts with these; the tests' partitions debug and long hold node[1-4]
MAX_NODES=253    # one address each in 10.77.0.0/24 (.254 is the host)
NODES=()
CTL_NAME=hpcctl
BRIDGE=hpcbr0
SUBNET=10.77.0
HOST_IP=$SUBNET.254
NS_PREFIX=hpc-
APT_PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server lmod iproute2 tmux  # tmux: the watch/follow tests
          slurmrestd slurm-wlm-jwt-plugin curl
          charliecloud-runtime squashfs-tools mmdebstrap  # ch-run, the test image (scripts/build-test-image.sh)
          strace  # benchmarks/nodelocal_start.py (squashfs-tools: python.stage node-local too)
          openssh-server  # the SSH login of scripts/dev-sshd.sh (docs/remote.md)
          chromium)  # the web view's browser tests (tests/integration/test_ui_browser.py; ~17 s to install)

ETC=/etc/slurm
RUN=/run/slurm-dev
LOG=/var/log/slurm-dev
SPOOL=/var/spool/slurm-dev
LIB=/var/lib/slurm-dev
OPT=/opt/hpclaunch-dev
DB_DIR=$LIB/mysql
DB_SOCK=$RUN/mysqld.sock
DB_PID=$RUN/mysqld.pid
DB_PORT=3307
MODE_FILE=$LIB/accounting-mode
COUNT_FILE=$RUN/node-count  # the running cluster's size (under /run: gone with `down`, so the next `up` has 4)
JWT_KEY=$ETC/jwt_hs256.key
REST_USER=slurmrest
REST_LISTEN=127.0.0.1:6820
HOSTS_MARK="# hpclaunch-dev-cluster"

DEV_NAME=dev-cluster
# shellcheck source=scripts/dev-cluster/lib.sh
source "$TPL/lib.sh"  # die, log, wait_for, pid_alive, stop_pidfiles, stop_pidfile, install_text

# A usage error: one line, exit 2 (as hpclaunch's own).
usage_error() { echo "$DEV_NAME: error: $*" >&2; exit 2; }

# check_count WHERE VALUE: VALUE is a node count this machine's network takes (1-MAX_NODES), else exit 2.
check_count() {
  [[ "$2" =~ ^[0-9]+$ ]] && [ "${#2}" -le 4 ] && [ "$2" -ge 1 ] && [ "$2" -le "$MAX_NODES" ] \
    || usage_error "$1: '$2' is not a node count: give a whole number from 1 to $MAX_NODES (one address each in" \
                   "$SUBNET.0/24), e.g. --nodes 64"
}

# set_nodes N: NODES=(node1 ... nodeN), NODE_RANGE (node[1-N]) and TEST_RANGE (the tests' node[1-4], or fewer).
set_nodes() {
  local k
  NODES=()
  for ((k = 1; k <= $1; k++)); do NODES+=("node$k"); done
  NODE_RANGE=$(range "$1") TEST_RANGE=$(range $(( $1 < DEFAULT_NODES ? $1 : DEFAULT_NODES )))
}
range() { if [ "$1" = 1 ]; then echo node1; else echo "node[1-$1]"; fi; }
running_count() { local c; c=$(cat "$COUNT_FILE" 2>/dev/null || true); [[ "$c" =~ ^[0-9]+$ ]] && echo "$c" || echo "$DEFAULT_NODES"; }

# Parse the command line before anything runs: a bad one changes nothing.
parse_up_args() {
  UP_MODE=on UP_COUNT=
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-accounting) UP_MODE=off ;;
      --accounting) UP_MODE=on ;;
      --nodes) [ $# -ge 2 ] || usage_error "up --nodes: give a node count, e.g. --nodes 64"
               check_count "up --nodes" "$2"; UP_COUNT=$2; shift ;;
      --nodes=*) check_count "up --nodes" "${1#--nodes=}"; UP_COUNT=${1#--nodes=} ;;
      *) usage_error "up: unknown option $1 (options: --no-accounting, --accounting, --nodes N)" ;;
    esac
    shift
  done
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

slurmd_pidfiles() { local n; for n in "${NODES[@]}"; do echo "$RUN/slurmd-$n.pid"; done; }
# every node namespace there is, the cluster's or one left from a bigger one (hpc-node1 ... hpc-nodeK)
present_nodes() { local f; for f in /run/netns/"${NS_PREFIX}"node*; do [ -e "$f" ] && echo "${f##*/"$NS_PREFIX"}"; done; }

# ---------------------------------------------------------------------------- packages
ensure_packages() {
  local missing=() p
  for p in "${APT_PKGS[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
  apt-get -o DPkg::Lock::Timeout=300 install -y -q "${APT_PKGS[@]}" >/dev/null
  log "apt packages installed"
}

# ---------------------------------------------------------------------------- files
host_python_bin() {
  local py venv
  # the project's environment (scripts/install-deps.sh): a task with --export=NONE still finds hpclaunch
  venv="${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$(cd "$TPL/../.." && pwd)/.venv}}"
  if [ -x "$venv/bin/python" ]; then
    echo "$venv/bin"
    return
  fi
  py=$(command -v python3 || command -v python || true)
  [ -n "$py" ] && "$py" -c 'import os, sys; print(os.path.dirname(sys.executable))' && return
  echo /usr/bin
}

CHANGED=0

# render_conf MODE: slurm.conf with accounting on (slurmdbd) or off (none; gres TRES need slurmdbd).
render_conf() {
  local type=accounting_storage/none tres="# AccountingStorageTRES needs slurmdbd"
  # @NODES@ is node[1-4], or node[1-N] (up --nodes N); the tests' partitions debug and long keep node[1-4], and
  # beyond 4 nodes a partition scale holds them all (benchmarks/scale.py). 4 nodes render today's file byte for byte.
  local scale=""
  if [ "$1" = on ]; then type=accounting_storage/slurmdbd tres=AccountingStorageTRES=gres/gpu; fi
  if [ "${#NODES[@]}" -gt "$DEFAULT_NODES" ]; then
    scale="\\n# beyond the tests' 4 nodes (dev-cluster.sh up --nodes N): every node, for benchmarks/scale.py\\n"
    scale+="PartitionName=scale Nodes=$NODE_RANGE Default=NO MaxTime=02:00:00 State=UP"
  fi
  sed -e "s|@ACCT_TYPE@|$type|" -e "s|@ACCT_TRES@|$tres|" -e "s|@NODES@|$NODE_RANGE|g" \
      -e "s|@ADDRS@|$SUBNET.${NODE_RANGE#node}|" -e "s|@TEST_NODES@|$TEST_RANGE|g" -e "s|@SCALE@|$scale|" \
      "$TPL/slurm.conf.in"
}

# write_configs MODE: slurm.conf (accounting MODE), gres.conf, slurmdbd.conf, slurm-noacct.conf.
# Sets CHANGED=1 when slurm.conf or gres.conf changed, DBD_CHANGED=1 when slurmdbd.conf did.
write_configs() {
  local mode=$1
  mkdir -p "$ETC" "$RUN" "$LOG" "$SPOOL/ctld" "$LIB" "$OPT/bin" "$OPT/modulefiles"
  for n in "${NODES[@]}"; do mkdir -p "$SPOOL/d/$n"; done
  CHANGED=0 DBD_CHANGED=0
  jwt_key
  render_conf "$mode" | install_text "$ETC/slurm.conf" 644 && CHANGED=1
  sed "s|@NODES@|$NODE_RANGE|" "$TPL/gres.conf" | install_text "$ETC/gres.conf" 644 && CHANGED=1
  # Client-only copy with accounting off: SLURM_CONF=/etc/slurm/slurm-noacct.conf sacct ... fails
  # like on a cluster without accounting, without touching the running daemons.
  render_conf off | install_text "$ETC/slurm-noacct.conf" 644 || true
  install_text "$ETC/slurmdbd.conf" 600 <"$TPL/slurmdbd.conf" && DBD_CHANGED=1
  sed "s|@PYBIN@|$(host_python_bin)|" "$TPL/task-prolog.sh" | install_text "$OPT/task-prolog.sh" 755 || true
  echo "$mode" >"$MODE_FILE"
}

# The HS256 key slurmctld and slurmdbd check JWTs with (AuthAltTypes=auth/jwt): made once, 0600, SlurmUser's.
jwt_key() {
  [ -s "$JWT_KEY" ] && return 0
  mkdir -p "$ETC"
  (umask 077; dd if=/dev/urandom bs=32 count=1 of="$JWT_KEY.new" 2>/dev/null)
  chown root:root "$JWT_KEY.new"
  mv "$JWT_KEY.new" "$JWT_KEY"
}

install_modules() {
  if ! diff -rq "$TPL/modulefiles" "$OPT/modulefiles" >/dev/null 2>&1; then
    rm -rf "$OPT/modulefiles.new"
    cp -r "$TPL/modulefiles" "$OPT/modulefiles.new"
    rm -rf "$OPT/modulefiles"
    mv "$OPT/modulefiles.new" "$OPT/modulefiles"
  fi
  install -m 755 "$TPL/hpclaunch-dev-hello" "$OPT/bin/hpclaunch-dev-hello"
  install -m 644 "$TPL/zz-hpclaunch-dev.sh" /etc/profile.d/zz-hpclaunch-dev.sh
  if [ -f /etc/lmod/modulespath ] && ! grep -qx "$OPT/modulefiles" /etc/lmod/modulespath; then
    echo "$OPT/modulefiles" >>/etc/lmod/modulespath
  fi
}

fake_gpus() {
  local i
  for i in 0 1 2 3; do
    [ -c /dev/fakegpu$i ] || { rm -f /dev/fakegpu$i; mknod -m 666 /dev/fakegpu$i c 195 $i; }
  done
}

# /etc/hosts may be a bind mount: rewrite it in place, never replace the file.
hosts_remove() {
  local tmp
  grep -q "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
  tmp=$(mktemp)
  grep -v "$HOSTS_MARK" /etc/hosts >"$tmp" || true
  cat "$tmp" >/etc/hosts
  rm -f "$tmp"
}
hosts_add() {
  local want k
  want="$HOST_IP $CTL_NAME $HOSTS_MARK"
  for ((k = 1; k <= ${#NODES[@]}; k++)); do want+=$'\n'"$SUBNET.$k node$k $HOSTS_MARK"; done
  [ "$(grep "$HOSTS_MARK" /etc/hosts 2>/dev/null || true)" = "$want" ] && return 0
  hosts_remove
  echo "$want" >>/etc/hosts
}

# ---------------------------------------------------------------------------- network
net_up() {
  local k ns veth
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  # (no `cmd | grep -q` under pipefail: grep's early exit can fail the pipeline with SIGPIPE)
  [[ "$(ip -4 addr show dev "$BRIDGE")" == *"inet $HOST_IP/"* ]] || ip addr add "$HOST_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((k = 1; k <= ${#NODES[@]}; k++)); do
    ns=${NS_PREFIX}node$k veth=hpcv$k
    [ -e "/run/netns/$ns" ] || ip netns add "$ns"
    if ! ip netns exec "$ns" ip link show eth0 >/dev/null 2>&1; then
      ip link del "$veth" 2>/dev/null || true
      ip link add "$veth" type veth peer name "${veth}p"
      ip link set "${veth}p" netns "$ns"
      ip netns exec "$ns" ip link set "${veth}p" name eth0
    fi
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" sh -c "ip addr show dev eth0 | grep -q 'inet $SUBNET.$k/' || ip addr add $SUBNET.$k/24 dev eth0"
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" sh -c "ip route show default | grep -q . || ip route add default via $HOST_IP"
  done
}

net_down() {
  local n
  for n in $(present_nodes); do node_net_down "$n"; done
  ip link del "$BRIDGE" 2>/dev/null || true
}
node_net_down() {
  ip netns del "${NS_PREFIX}$1" 2>/dev/null || true
  ip link del "hpcv${1#node}" 2>/dev/null || true
}

# Nodes a smaller cluster no longer has (up --nodes N after a bigger N): their slurmd, jobs and namespace go.
drop_extra_nodes() {
  local n
  for n in $(present_nodes); do
    [ "${n#node}" -le "${#NODES[@]}" ] && continue
    stop_pidfile "$RUN/slurmd-$n.pid" slurmd 15
    kill_ns_procs "${NS_PREFIX}$n"
    node_net_down "$n"
    rm -rf "${SPOOL:?}/d/$n"
  done
}

# Kill every process living in a node's network namespace (slurmd, slurmstepd, job tasks).
kill_ns_procs() {
  local ns=$1 sig pids i
  [ -e "/run/netns/$ns" ] || return 0
  for sig in TERM KILL; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] && return 0
    # shellcheck disable=SC2086
    kill -"$sig" $pids 2>/dev/null || true
    for ((i = 0; i < 25; i++)); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null || true)" ] && return 0
      sleep 0.2
    done
  done
}

# ---------------------------------------------------------------------------- daemons
munge_up() {
  if pid_alive /run/munge/munged.pid munged; then return 0; fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key; else
      dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  rm -f /run/munge/munged.pid
  runuser -u munge -- munged --force </dev/null >>"$LOG/munged.out" 2>&1
  wait_for 10 "munged" sh -c 'munge -n </dev/null | unmunge >/dev/null'
}

db_sql() { mariadb --no-defaults -S "$DB_SOCK" -u root "$@"; }

mariadb_up() {
  if pid_alive "$DB_PID" mariadbd && db_sql -e 'select 1' >/dev/null 2>&1; then return 0; fi
  mkdir -p "$DB_DIR"
  if [ ! -d "$DB_DIR/mysql" ]; then
    log "initialising MariaDB datadir $DB_DIR"
    mariadb-install-db --no-defaults --user=root --datadir="$DB_DIR" --auth-root-authentication-method=socket \
      --skip-test-db >"$LOG/mariadb-install.log" 2>&1 || { cat "$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  rm -f "$DB_PID" "$DB_SOCK"
  setsid mariadbd --no-defaults --user=root --datadir="$DB_DIR" --socket="$DB_SOCK" --pid-file="$DB_PID" \
    --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --log-error="$LOG/mariadb.log" \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
    --max-connections=100 </dev/null >>"$LOG/mariadb.out" 2>&1 &
  wait_for 60 "MariaDB" db_sql -e 'select 1' || { tail -20 "$LOG/mariadb.log" >&2; die "MariaDB did not start"; }
  accounting_db_sql | db_sql
}

mariadb_down() {
  if pid_alive "$DB_PID" mariadbd; then
    mariadb-admin --no-defaults -S "$DB_SOCK" -u root shutdown >/dev/null 2>&1 || true
  fi
  stop_pidfile "$DB_PID" mariadbd 30
}

slurmdbd_up() {
  if ! pid_alive "$RUN/slurmdbd.pid" slurmdbd; then
    slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1
  fi
  # The first start creates the schema; sacctmgr answers once slurmdbd listens.
  wait_for 90 "slurmdbd" sacctmgr -n -P list cluster format=cluster \
    || { tail -20 "$LOG/slurmdbd.log" >&2; die "slurmdbd did not answer"; }
  if ! [[ $'\n'"$(sacctmgr -n -P list cluster format=cluster 2>/dev/null)"$'\n' == *$'\n'dev$'\n'* ]]; then
    sacctmgr -i add cluster dev >/dev/null
  fi
}

slurmctld_up() {
  pid_alive "$RUN/slurmctld.pid" slurmctld && return 0
  # slurmctld checks that its hostname is SlurmctldHost's name: give it its own UTS namespace.
  unshare --uts sh -c "hostname $CTL_NAME; exec slurmctld" </dev/null >>"$LOG/slurmctld.out" 2>&1
  wait_for 30 "slurmctld" scontrol ping || { tail -20 "$LOG/slurmctld.log" >&2; die "slurmctld did not answer"; }
}

slurmd_up() {
  local n=$1 ns=${NS_PREFIX}$1
  pid_alive "$RUN/slurmd-$n.pid" slurmd && return 0
  # nsenter, not `ip netns exec`: the latter mounts a fresh /sys that hides /sys/fs/cgroup,
  # and slurmd 22.05 refuses to start without it (even with proctrack/linuxproc).
  # Its own mount namespace only to see $ETC/resolv-node.conf as /etc/resolv.conf: the host's nameserver is
  # not reachable from a node's network namespace, and every lookup that missed /etc/hosts (an IPv6 query for
  # a node, a reverse lookup by torch's c10d) waited out its timeout; with no nameserver they fail at once.
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' | install_text "$ETC/resolv-node.conf" 644 || true
  nsenter --net="/run/netns/$ns" unshare --uts --mount sh -c \
    "mount --bind '$ETC/resolv-node.conf' /etc/resolv.conf; hostname $n; exec slurmd -N $n" \
    </dev/null >>"$LOG/slurmd-$n.out" 2>&1 || { tail -5 "$LOG/slurmd-$n.log" >&2; die "slurmd $n did not start"; }
}

# slurmrestd refuses to run as root or SlurmUser: a system user of its own, no login, no home.
rest_user() {
  id -u "$REST_USER" >/dev/null 2>&1 && return 0
  useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$REST_USER"
}

# it answers (401 without a token: every path needs one)
rest_answers() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$REST_LISTEN/openapi/v3")" != 000 ]; }

slurmrestd_up() {
  if pid_alive "$RUN/slurmrestd.pid" slurmrestd; then
    # it keeps the folder it was started from as its working directory: once that folder is removed (a checkout
    # deleted), every submit fails with "getcwd failed"; start it again then
    case "$(readlink "/proc/$(cat "$RUN/slurmrestd.pid")/cwd")" in
      *" (deleted)") log "slurmrestd's working directory was removed: restarting it"
                     stop_pidfile "$RUN/slurmrestd.pid" slurmrestd 5 ;;
      *) return 0 ;;
    esac
  fi
  rest_user
  # slurmrestd never forks and has no pidfile option: $! is its pid (setsid: out of this script's group).
  # SLURM_JWT=daemon: Slurm's own calls go out with the client's token (auth/jwt), not munge. env -C /: its
  # working directory is / (not this checkout, which may be removed while it runs).
  SLURM_JWT=daemon env -C / setsid slurmrestd -a rest_auth/jwt -s openapi/v0.0.38,openapi/dbv0.0.38 \
    -u "$REST_USER" -g "$REST_USER" "$REST_LISTEN" </dev/null >>"$LOG/slurmrestd.log" 2>&1 &
  echo $! >"$RUN/slurmrestd.pid"
  wait_for 20 "slurmrestd on $REST_LISTEN" rest_answers \
    || { tail -20 "$LOG/slurmrestd.log" >&2; die "slurmrestd did not start"; }
}

slurm_down() {
  local n
  stop_pidfile "$RUN/slurmrestd.pid" slurmrestd 5
  # shellcheck disable=SC2046
  stop_pidfiles slurm 15 "$RUN/slurmctld.pid" "$RUN"/slurmd-node*.pid
  for n in $(present_nodes); do kill_ns_procs "${NS_PREFIX}$n"; done
}

# Every node in a usable state (idle, or running jobs), the cluster's N of them, and debug's 4 (fewer when N < 4).
nodes_ok() {
  local all bad
  all=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
  bad=$(awk '$2 !~ /^(idle|allocated|mixed|completing)$/' <<<"$all")
  [ "$(wc -l <<<"$all")" -eq "${#NODES[@]}" ] || return 1
  [ "$(sinfo -h -N -p debug -o '%N' 2>/dev/null | wc -l)" -eq "$(test_count)" ] || return 1
  [ -z "$bad" ]
}
test_count() { echo $(( ${#NODES[@]} < DEFAULT_NODES ? ${#NODES[@]} : DEFAULT_NODES )); }

nodes_idle() {
  [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" -eq "${#NODES[@]}" ]
}

all_running() {
  local mode=$1 n
  pid_alive /run/munge/munged.pid munged || return 1
  pid_alive "$RUN/slurmctld.pid" slurmctld || return 1
  pid_alive "$RUN/slurmrestd.pid" slurmrestd || return 1
  for n in "${NODES[@]}"; do pid_alive "$RUN/slurmd-$n.pid" slurmd || return 1; done
  if [ "$mode" = on ]; then
    pid_alive "$RUN/slurmdbd.pid" slurmdbd || return 1
    pid_alive "$DB_PID" mariadbd || return 1
  fi
}

wait_nodes() {
  local n what="${#NODES[@]} nodes up"
  if ! wait_for 45 "$what" nodes_ok; then
    # ReturnToService=2 returns DOWN nodes by itself; drained ones (e.g. after a crash) need a resume.
    for n in $(sinfo -h -N -t drain,down,fail -o '%N' 2>/dev/null | sort -u); do
      scontrol update nodename="$n" state=resume 2>/dev/null || true
    done
    wait_for 30 "$what" nodes_ok || { sinfo -N -l >&2; die "nodes did not come up (logs: $LOG)"; }
  fi
}

# ---------------------------------------------------------------------------- commands
cmd_up() {
  local mode n count
  parse_up_args "$@"
  mode=$UP_MODE count=${UP_COUNT:-$(running_count)}
  ensure_packages
  local was_running=0
  set_nodes "$(running_count)"
  all_running "$mode" && was_running=1
  set_nodes "$count"
  write_configs "$mode"
  install_modules
  fake_gpus
  hosts_add
  if [ "$was_running" = 1 ] && [ "$CHANGED" = 0 ] && [ "$DBD_CHANGED" = 0 ] && ip link show "$BRIDGE" >/dev/null 2>&1 \
    && nodes_ok; then
    nodes_idle || log "nodes are up (some are running jobs)"
    log "cluster already up (accounting $mode)"
    "$HERE/dev-sshd.sh" up || log "warning: the SSH login (scripts/dev-sshd.sh) did not start"
    sinfo
    return 0
  fi
  net_up
  munge_up
  log "network namespaces and munged ready"
  if [ "$mode" = on ]; then
    mariadb_up
    log "MariaDB ready"
    if [ "$DBD_CHANGED" = 1 ] && pid_alive "$RUN/slurmdbd.pid" slurmdbd; then
      log "slurmdbd.conf changed: restarting slurmdbd"
      stop_pidfile "$RUN/slurmdbd.pid" slurmdbd 15
    fi
    slurmdbd_up
    log "slurmdbd ready, cluster dev registered"
  fi
  if [ "$CHANGED" = 1 ] && pid_alive "$RUN/slurmctld.pid" slurmctld; then
    # slurmctld keeps its state (StateSaveLocation) and each job's slurmstepd outlives its slurmd: jobs running
    # on the nodes that stay keep running; a job on a node that goes (a smaller N) ends with the node
    log "configuration changed: restarting slurmctld, slurmd and slurmrestd"
    stop_pidfile "$RUN/slurmrestd.pid" slurmrestd 5
    stop_pidfiles slurm 15 "$RUN/slurmctld.pid" "$RUN"/slurmd-node*.pid
    log "stopped"
  fi
  drop_extra_nodes
  echo "${#NODES[@]}" >"$COUNT_FILE"
  slurmctld_up
  log "slurmctld answers"
  for n in "${NODES[@]}"; do slurmd_up "$n"; done
  log "slurmd started on ${NODES[*]}"
  wait_nodes
  slurmrestd_up
  log "slurmrestd answers on $REST_LISTEN (a token: scripts/dev-cluster.sh token)"
  "$HERE/dev-sshd.sh" up || log "warning: the SSH login (scripts/dev-sshd.sh) did not start"
  log "cluster up: ${#NODES[@]} nodes, accounting $mode ($(elapsed)s)"
  sinfo
}

cmd_down() {
  local purge=0 arg
  for arg in "$@"; do
    case "$arg" in
      --purge) purge=1 ;;
      *) die "down: unknown option $arg" ;;
    esac
  done
  slurm_down
  rm -f "$COUNT_FILE"
  stop_pidfile "$RUN/slurmdbd.pid" slurmdbd 15
  mariadb_down
  stop_pidfile /run/munge/munged.pid munged 5
  net_down
  hosts_remove
  if [ "$purge" = 1 ]; then
    find "$SPOOL" "$LIB" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || true
    log "purged $SPOOL and $LIB (job state, accounting database)"
  fi
  log "cluster down"
}

cmd_status() {
  local rc=0 n mode
  set_nodes "$(running_count)"
  mode=$(cat "$MODE_FILE" 2>/dev/null || echo on)
  st() { if "$@"; then echo up; else echo DOWN; rc=3; fi; }
  echo "munged:    $(st pid_alive /run/munge/munged.pid munged)"
  if [ "$mode" = on ]; then
    echo "mariadb:   $(st pid_alive "$DB_PID" mariadbd)"
    echo "slurmdbd:  $(st pid_alive "$RUN/slurmdbd.pid" slurmdbd)"
  fi
  echo "slurmctld: $(st pid_alive "$RUN/slurmctld.pid" slurmctld)"
  echo "slurmrestd ($REST_LISTEN, JWT): $(st pid_alive "$RUN/slurmrestd.pid" slurmrestd)"
  for n in "${NODES[@]}"; do
    echo "slurmd $n ($SUBNET.${n#node}, netns ${NS_PREFIX}$n): $(st pid_alive "$RUN/slurmd-$n.pid" slurmd)"
  done
  echo "accounting: $mode ($(scontrol show config 2>/dev/null | awk -F' = ' '/^AccountingStorageType/{print $2}'))"
  echo "nodes: ${#NODES[@]} (debug, long: $TEST_RANGE$([ "${#NODES[@]}" -gt "$DEFAULT_NODES" ] && echo ", scale: $NODE_RANGE"))"
  all_running "$mode" || rc=3
  sinfo 2>/dev/null || rc=3
  [ "$rc" = 0 ] && { nodes_ok || rc=3; }
  return "$rc"
}

cmd_accounting() {
  local want=${1:-status} cur
  cur=$(cat "$MODE_FILE" 2>/dev/null || echo on)
  case "$want" in
    status) echo "$cur"; return 0 ;;
    on) cmd_up --nodes "$(running_count)" ;;
    off) cmd_up --no-accounting --nodes "$(running_count)" ;;
    *) die "accounting: expected on|off|status" ;;
  esac
}

cmd_token() {
  scontrol token username=root lifespan="${1:-3600}"
}

usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in  # the command line is checked first: a bad one exits 2 and changes nothing, as any user
  up) parse_up_args "$@"; need_root; cmd_up "$@" ;;
  down) need_root; cmd_down "$@" ;;
  restart) parse_up_args "$@"; need_root; cmd_down; T0=$(date +%s.%N); cmd_up "$@" ;;
  status) need_root; cmd_status ;;
  accounting) need_root; cmd_accounting "$@" ;;
  token) need_root; cmd_token "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
