# shellcheck shell=sh
# hpclaunch dev cluster (installed by scripts/dev-cluster.sh): make the test modulefiles
# visible when Lmod was already initialised before /etc/lmod/modulespath listed them.
_hpclaunch_dev_mods=/opt/hpclaunch-dev/modulefiles
if [ -n "${MODULEPATH:-}" ]; then
  case ":$MODULEPATH:" in
    *":$_hpclaunch_dev_mods:"*) ;;
    *) export MODULEPATH="$MODULEPATH:$_hpclaunch_dev_mods" ;;
  esac
fi
unset _hpclaunch_dev_mods
