"""Render a JobSpec into the job script and the other files of its run directory.

Pure: the same JobSpec and run directory always give the same bytes. Templates are found in the
profile's own template folder first, then in user folders, then in the bundled templates/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from hpclaunch import __version__
from hpclaunch.config.slurmtime import parse_time
from hpclaunch.errors import ConfigError, NotFoundError
from hpclaunch.jobspec import JobSpec
from hpclaunch.launchers import get_launcher
from hpclaunch.paths import search_dirs
from hpclaunch.shell import oneline, quote, shell_path

SCRIPT_NAME = "job.sbatch"
REQUEUE_WARNING = 120  # seconds before the time limit that Slurm signals USR1
REQUEUE_MIN_TIME = 15 * 60  # jobs shorter than this get no USR1 warning
_SBATCH_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


@dataclass(frozen=True)
class Rendered:
    """What goes into a run directory: file name -> content (the job script included)."""

    script: str
    files: dict[str, str]


_BYTECODE_CACHE: list[jinja2.BytecodeCache | None] = []


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs (keyed by template file and source checksum), so a CLI
    call does not compile every template again; none when no private cache folder can be made."""
    if not _BYTECODE_CACHE:
        cache: jinja2.BytecodeCache | None
        try:
            cache = jinja2.FileSystemBytecodeCache(pattern=f"hpclaunch-{__version__}-%s.cache")
        except (OSError, RuntimeError):
            cache = None
        _BYTECODE_CACHE.append(cache)
    return _BYTECODE_CACHE[0]


def _environment(spec: JobSpec) -> jinja2.Environment:
    dirs: list[Path] = []
    if spec.profile.templates:
        dirs.append(Path(spec.profile.templates))
    dirs += search_dirs("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["q"] = quote
    env.filters["oneline"] = oneline
    env.filters["qpath"] = lambda path: quote(shell_path(str(path)))
    return env


def sbatch_options(spec: JobSpec, run_dir: Path) -> list[str]:
    part = spec.partition_spec
    opts: dict[str, str | None] = {
        "job-name": spec.name,
        "partition": spec.partition,
        "nodes": str(spec.nodes),
        "ntasks-per-node": "1",
        "cpus-per-task": str(part.cpus_per_node),
        "time": spec.time,
        "output": str(run_dir / "logs" / "job.%j.out"),
        "open-mode": "append",
        "requeue": None,
    }
    if parse_time(spec.time) >= REQUEUE_MIN_TIME:
        # USR1 two minutes before the time limit: checkpoint and requeue (see blocks/wait.sh.j2).
        # A shorter job would be warned as it starts and requeue itself forever.
        opts["signal"] = f"B:USR1@{REQUEUE_WARNING}"
    if part.gres:
        opts["gres"] = f"{part.gres}:{spec.gpus_per_node}"
    if spec.profile.account:
        opts["account"] = spec.profile.account
    if spec.profile.qos:
        opts["qos"] = spec.profile.qos
    for key, value in spec.profile.sbatch_extra.items():
        name = key.removeprefix("--")
        if not _SBATCH_KEY.match(name):
            raise ConfigError(f"{key!r} is not an sbatch option name", key=f"sbatch_extra.{key}")
        opts[name] = value
    for name, value in opts.items():
        if value is not None and ("\n" in value or "\r" in value):
            raise ConfigError(f"the value of #SBATCH --{name} holds a line break, which an #SBATCH line "
                              f"cannot carry: {value!r}", hint="rename the path or value without line breaks")
    return [f"--{k}" if v is None else f"--{k}={quote(v)}" for k, v in sorted(opts.items())]


def render(spec: JobSpec, run_dir: Path) -> Rendered:
    launcher = get_launcher(spec.recipe.launcher)
    env = _environment(spec)
    part = spec.partition_spec
    slurm = spec.profile.scheduler == "slurm"
    context: dict[str, Any] = {
        "version": __version__,
        "spec": spec,
        "run_dir": str(run_dir),
        "slurm": slurm,
        "sbatch_options": sbatch_options(spec, run_dir) if slurm else [],
        "asset_store": shell_path(spec.profile.assets.store),
        "env": {**spec.profile.env, **spec.recipe.env},
        "cpus_per_task": part.cpus_per_node,
        "gres": f"{part.gres}:{spec.gpus_per_node}" if (slurm and part.gres) else None,
        "node_script": launcher.node_script(spec, run_dir),
        "spec_launcher_template": launcher.template,
    }
    for key in context["env"]:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ConfigError(f"environment variable name {key!r} is not valid in a shell", key=f"env.{key}")
    try:
        script = env.get_template("job.sbatch.j2").render(context)
    except jinja2.TemplateNotFound as exc:
        raise NotFoundError("template", str(exc.name or "?"), hint="check the profile's `templates` folder") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template error: {exc.message}", key="templates") from None
    files = {SCRIPT_NAME: script, "resolved.yaml": spec.to_yaml(), **launcher.files(spec)}
    return Rendered(script=script, files=files)
