"""Render a JobSpec into the job script and the other files of its run directory.

Pure: the same JobSpec and run directory always give the same bytes. Templates are found in the
profile's own template folder first, then in user folders, then in the bundled templates/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from hpclaunch import __version__, runfiles
from hpclaunch.collectives import collective_env
from hpclaunch.errors import ConfigError, NotFoundError
from hpclaunch.launchers import get_launcher
from hpclaunch.paths import search_dirs
from hpclaunch.schedulers import get_scheduler
from hpclaunch.shell import oneline, quote, shell_path

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hpclaunch.jobspec import JobSpec

INJECT_ENV = "HPCLAUNCH_INJECT"  # hpclaunch.runtime.inject.ENV (not imported: render stays light)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


@contextmanager
def _template_errors() -> Iterator[None]:
    """A missing template or an undefined value as the user's error (a profile's own templates)."""
    try:
        yield
    except jinja2.TemplateNotFound as exc:
        raise NotFoundError("template", str(exc.name or "?"), hint="check the profile's `templates` folder") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template error: {exc.message}", key="templates") from None


def render(spec: JobSpec, run_dir: Path) -> Rendered:
    """The job script and the other files of the run directory. The common template and the launcher
    see only the neutral job variables; the scheduler's own parts come from its template folder."""
    launcher = get_launcher(spec.recipe.launcher)
    scheduler = get_scheduler(spec.profile.scheduler)
    env = _environment(spec)
    files = runfiles.RunFiles(run_dir)
    context: dict[str, Any] = {
        "version": __version__,
        "spec": spec,
        "files": files,
        "scheduler": scheduler.name,
        "scheduler_templates": scheduler.template_dir,
        "sched": scheduler.script_context(spec, run_dir),
        "asset_store": shell_path(spec.profile.assets.store),
        "env": {**collective_env(spec.profile.accelerator, spec.profile.collective_timeout, files.logs),
                **({INJECT_ENV: spec.inject} if spec.inject else {}), **spec.profile.env, **spec.recipe.env},
        "launch": launcher.script_context(spec, run_dir),
        "node_script": launcher.node_script(spec, run_dir),
        "spec_launcher_template": launcher.template,
    }
    for key in context["env"]:
        if not _ENV_NAME.match(key):
            raise ConfigError(f"environment variable name {key!r} is not valid in a shell", key=f"env.{key}")
    with _template_errors():
        script = env.get_template("job.sbatch.j2").render(context)
        extra = {name: env.get_template(template).render(context) for name, template in launcher.templates.items()}
    files_out = {runfiles.SCRIPT: script, runfiles.RESOLVED: spec.to_yaml(), **extra, **launcher.files(spec)}
    return Rendered(script=script, files=files_out)


_MARK = "@JOB@"


def render_sweep(specs: Sequence[JobSpec], labels: Sequence[str], keys: Sequence[str], sweep_dir: Path,
                 max_parallel: int | None) -> str:
    """A sweep's array script (templates/sweep.sbatch.j2): the scheduler's array directives
    (``array.sh.j2``), then a hand-over to the job script of the element the array task names. Element i
    runs from ``runfiles.SweepFiles(sweep_dir).element(i)``, already rendered from ``specs[i]``."""
    spec = specs[0]
    scheduler = get_scheduler(spec.profile.scheduler)
    files = runfiles.SweepFiles(sweep_dir)
    prefix, suffix = f"{runfiles.LOGS}/{runfiles.job_output_name(_MARK)}".split(_MARK)
    context: dict[str, Any] = {
        "version": __version__,
        "spec": spec,
        "files": files,
        "keys": list(keys),
        "elements": [{"index": i, "run_dir": str(files.element(i)), "label": label} for i, label in enumerate(labels)],
        "output": (prefix, suffix),
        "script": runfiles.SCRIPT,
        "resolved": runfiles.RESOLVED,
        "scheduler": scheduler.name,
        "scheduler_templates": scheduler.template_dir,
        "sched": scheduler.array_context(specs, sweep_dir, max_parallel),
    }
    with _template_errors():
        return _environment(spec).get_template("sweep.sbatch.j2").render(context)
