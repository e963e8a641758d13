#!/bin/sh
# Slurm TaskProlog of the second dev cluster (installed in the root as /etc/slurm/task-prolog.sh): the host
# interpreter's bin directory (a host venv, seen through the bind mounts) at the END of PATH, so `python` is found
# with --export=NONE and in slurmrestd's jobs too; a venv earlier in PATH still wins.
PYBIN=@PYBIN@
case ":${PATH:-}:" in
  *":$PYBIN:"*) ;;
  *) echo "export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}:$PYBIN" ;;
esac
exit 0
