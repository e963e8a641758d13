#!/usr/bin/env bash
# The dev cluster's SSH login (docs/remote.md): an sshd of its own on 127.0.0.1:2222, key-only, with its own host
# key and one authorized client key, both generated here. Profiles dev-slurm-ssh uses it.
#
#   scripts/dev-sshd.sh up       start (idempotent)
#   scripts/dev-sshd.sh down     stop it
#   scripts/dev-sshd.sh status   exit 0 when it answers
#
# Files (in $HPCLAUNCH_DEV_SSHD, default /var/lib/hpclaunch-dev-sshd, 0700): host_ed25519_key(.pub) (the host key),
# client_ed25519(.pub) (the client key) and authorized_keys, known_hosts (the host key as a client must know it),
# sshd_config, sshd.pid, sshd.log. The sessions get the PATH of the shell that ran `up` (the login node's
# environment: Slurm's commands); /opt/hpclaunch-dev/python-env links the jobs' venv (dev-slurm-ssh's python.venv).
# Local port forwarding to the login node's own 127.0.0.1 only (`ssh -L`, as `hpclaunch ui --profile` tunnels; no
# remote forwarding, nothing elsewhere). HPCLAUNCH_DEV_SSHD_PORT: another port (a second instance, with another DIR).
set -euo pipefail

DIR=${HPCLAUNCH_DEV_SSHD:-/var/lib/hpclaunch-dev-sshd}
ADDR=127.0.0.1
PORT=${HPCLAUNCH_DEV_SSHD_PORT:-2222}
die() { echo "dev-sshd: error: $*" >&2; exit 1; }
log() { echo "[dev-sshd] $*"; }

alive() { [ -s "$DIR/sshd.pid" ] && kill -0 "$(cat "$DIR/sshd.pid")" 2>/dev/null; }

answers() {
  ssh -T -p "$PORT" -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$DIR/known_hosts" \
    -o IdentitiesOnly=yes -i "$DIR/client_ed25519" -o ConnectTimeout=5 -o ControlMaster=no \
    "$(id -un)@$ADDR" true </dev/null >/dev/null 2>&1
}

keys() {
  install -d -m 700 "$DIR"
  [ -s "$DIR/host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C hpclaunch-dev-sshd-host -f "$DIR/host_ed25519_key"
  [ -s "$DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C hpclaunch-dev-client -f "$DIR/client_ed25519"
  install -m 600 "$DIR/client_ed25519.pub" "$DIR/authorized_keys"
  printf '[%s]:%s %s\n' "$ADDR" "$PORT" "$(cut -d' ' -f1,2 "$DIR/host_ed25519_key.pub")" >"$DIR/known_hosts"
  chmod 644 "$DIR/known_hosts"
}

config() {
  cat >"$DIR/sshd_config" <<CONF
# written by scripts/dev-sshd.sh
ListenAddress $ADDR
Port $PORT
HostKey $DIR/host_ed25519_key
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
AllowTcpForwarding local
PermitOpen 127.0.0.1:*
X11Forwarding no
PermitTTY yes
StrictModes yes
SetEnv PATH=$PATH
CONF
}

# The jobs' python environment on the login side, for profile dev-slurm-ssh (python.venv): the project's venv, as
# scripts/dev-cluster.sh's task prolog finds it (a login shell's own PATH may put another python first).
python_env() {
  local venv="${HPCLAUNCH_VENV:-${VIRTUAL_ENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}}"
  if [ ! -f "$venv/bin/activate" ]; then
    log "warning: no python environment at $venv (set HPCLAUNCH_VENV): dev-slurm-ssh's jobs will not find python"
    return 0
  fi
  install -d -m 755 /opt/hpclaunch-dev
  ln -sfn "$venv" /opt/hpclaunch-dev/python-env
}

cmd_up() {
  command -v /usr/sbin/sshd >/dev/null || {
    apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends openssh-server >/dev/null
  }
  install -d -m 755 /run/sshd  # privilege separation folder sshd needs
  keys
  config
  python_env
  if alive && answers; then log "already up on $ADDR:$PORT"; return 0; fi
  alive && kill "$(cat "$DIR/sshd.pid")" && sleep 0.5
  /usr/sbin/sshd -t -f "$DIR/sshd_config" || die "bad sshd_config ($DIR/sshd_config)"
  /usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"
  for _ in $(seq 50); do answers && { log "up on $ADDR:$PORT (files: $DIR)"; return 0; }; sleep 0.2; done
  die "sshd does not answer on $ADDR:$PORT (log: $DIR/sshd.log)"
}

cmd_down() {
  if alive; then kill "$(cat "$DIR/sshd.pid")"; log "stopped"; else log "not running"; fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) alive && answers && log "up on $ADDR:$PORT" ;;
  *) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
