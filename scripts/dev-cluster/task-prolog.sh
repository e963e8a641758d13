#!/bin/sh
# Slurm TaskProlog of the hpclaunch dev cluster (installed to /opt/hpclaunch-dev/task-prolog.sh).
# Runs before every task (batch script and srun tasks) with the task's environment; each
# "export NAME=VALUE" line it prints is set in the task. It only ADDS things:
#  - the host interpreter's bin directory at the END of PATH (so `python` works even with
#    --export=NONE; a venv or module that comes first still wins);
#  - the dev modulefile tree to an already-set MODULEPATH.
PYBIN=@PYBIN@
MODDIR=/opt/hpclaunch-dev/modulefiles
case ":${PATH:-}:" in
  *":$PYBIN:"*) ;;
  *) echo "export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}:$PYBIN" ;;
esac
if [ -n "${MODULEPATH:-}" ]; then
  case ":$MODULEPATH:" in
    *":$MODDIR:"*) ;;
    *) echo "export MODULEPATH=$MODULEPATH:$MODDIR" ;;
  esac
fi
exit 0
