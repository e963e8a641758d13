"""Render a JobSpec into the job script and the other files of its run directory.

Pure: the same JobSpec and run directory always give the same bytes. Templates are found in the
profile's own template folder first, then in user folders, then in the bundled templates/.

Because it is pure, its result is cached (hpclaunch/core/cache.py), keyed by everything it reads: the job
spec, the template files on the search path, and hpclaunch's own code. The run directory is the one input
that differs on every submit: the cached files hold a placeholder where its path goes, put back on the way
out (only for a path that needs no shell quoting, where that substitution is exact). A dry-run with a warm
cache then imports no Jinja2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.base import dump
from hpclaunch.config.profile import asset_store
from hpclaunch.core import cache
from hpclaunch.core.paths import search_dirs
from hpclaunch.core.shell import ShellExpr, join, oneline, quote, shell_path
from hpclaunch.core.version import __version__
from hpclaunch.errors import ConfigError, NotFoundError
from hpclaunch.launchers import containers, get_launcher
from hpclaunch.launchers.collectives import collective_env
from hpclaunch.schedulers import get_scheduler
from hpclaunch.state import runfiles

if TYPE_CHECKING:
    from collections.abc import Sequence

    import jinja2

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile, PythonEnv

HUNG_EXIT_CODE = 124  # hpclaunch.runtime.node.supervise.HUNG_EXIT_CODE (not imported: render stays light)
HEALTH_EXIT_CODE = 75  # hpclaunch.runtime.node.health.HEALTH_EXIT_CODE (not imported: render stays light)
STRAGGLER_WINDOW_ENV = "HPCLAUNCH_STRAGGLER_WINDOW"  # hpclaunch.runtime.node.progress.WINDOW_ENV
STRAGGLER_FACTOR_ENV = "HPCLAUNCH_STRAGGLER_FACTOR"  # hpclaunch.runtime.node.progress.FACTOR_ENV
STRAGGLER_WINDOWS_ENV = "HPCLAUNCH_STRAGGLER_WINDOWS"  # hpclaunch.runtime.node.progress.WINDOWS_ENV
INJECT_ENV = "HPCLAUNCH_INJECT"  # hpclaunch.runtime.node.inject.ENV (not imported: render stays light)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHELL_SAFE = re.compile(r"^[\w@%+=:,./-]+$", re.ASCII)  # shlex.quote leaves such a path as it is
_PLACEHOLDER = "/hpclaunch-run-dir-placeholder-5b1e9d"


@dataclass(frozen=True)
class Rendered:
    """What goes into a run directory: file name -> content (the job script included)."""

    script: str
    files: dict[str, str]


_BYTECODE_CACHE: list[jinja2.BytecodeCache | None] = []


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs (keyed by template file and source checksum), so a CLI
    call does not compile every template again; none when no private cache folder can be made."""
    import jinja2

    if not _BYTECODE_CACHE:
        compiled: jinja2.BytecodeCache | None
        try:
            compiled = jinja2.FileSystemBytecodeCache(pattern=f"hpclaunch-{__version__}-%s.cache")
        except (OSError, RuntimeError):
            compiled = None
        _BYTECODE_CACHE.append(compiled)
    return _BYTECODE_CACHE[0]


@dataclass(frozen=True)
class _ProfileOnly:
    """What the modules and Python-environment blocks read of a job spec, for a script that has no job."""

    profile: Profile
    python_env: PythonEnv


def render_profile_check(profile: Profile, python_env: PythonEnv, packages: Sequence[str]) -> str:
    """The script `profiles check --on-node` runs on a node: the job's modules and Python environment, then
    hpclaunch.runtime.node.envcheck (templates/profile-check.sh.j2)."""
    stand_in = _ProfileOnly(profile, python_env)
    with _template_errors():
        template = _environment(stand_in).get_template("profile-check.sh.j2")
        return template.render(version=__version__, spec=stand_in, packages=",".join(packages))


def _template_dirs(spec: JobSpec | _ProfileOnly) -> list[Path]:
    dirs: list[Path] = []
    if spec.profile.templates:
        dirs.append(Path(spec.profile.templates))
    return dirs + search_dirs("templates")


def _environment(spec: JobSpec | _ProfileOnly) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in _template_dirs(spec)]),
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
    import jinja2

    try:
        yield
    except jinja2.TemplateNotFound as exc:
        raise NotFoundError("template", str(exc.name or "?"), hint="check the profile's `templates` folder") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template error: {exc.message}", key="templates") from None


def render(spec: JobSpec, run_dir: Path) -> Rendered:
    """The job script and the other files of the run directory (from the cache when it holds them)."""
    where = str(run_dir)
    if not (cache.enabled() and _SHELL_SAFE.match(where)):
        return _render(spec, run_dir)
    name = _cache_key(spec, where)
    hit = cache.get("render", name)
    if isinstance(hit, dict) and all(isinstance(v, str) for v in hit.values()) and runfiles.SCRIPT in hit:
        files = {k: v.replace(_PLACEHOLDER, where) for k, v in hit.items()}
        return Rendered(script=files[runfiles.SCRIPT], files=files)
    done = _render(spec, run_dir)
    cache.put("render", name, {k: v.replace(where, _PLACEHOLDER) for k, v in done.files.items()})
    return done


def _cache_key(spec: JobSpec, run_dir: str) -> str:
    """Everything a render reads: the spec (its run-dir paths as the placeholder), every template file on
    the search path, and hpclaunch's code (a changed file, an upgrade: another key)."""
    dumped = json.dumps(dump(spec), sort_keys=True).replace(run_dir, _PLACEHOLDER)
    templates = []
    for folder in _template_dirs(spec):
        for f in sorted(folder.rglob("*.j2")) if folder.is_dir() else []:
            try:
                templates.append(f"{f.relative_to(folder)}\0".encode() + f.read_bytes())
            except OSError:
                continue
        templates.append(f"--{folder}".encode())
    return cache.key("render", __version__, cache.code_stamp("."), dumped, *templates)


def _render(spec: JobSpec, run_dir: Path) -> Rendered:
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
        "asset_store": shell_path(asset_store(spec.profile)),
        # the ranks' threads follow the CPUs this job asks per rank (resolve's resources), over a profile's fixed
        # OMP_NUM_THREADS; the recipe's own env.OMP_NUM_THREADS wins
        "env": {**collective_env(spec.profile.accelerator, spec.profile.collective_timeout, files.logs),
                **({INJECT_ENV: spec.inject} if spec.inject else {}), **spec.profile.env,
                "OMP_NUM_THREADS": str(spec.resources.cpus_per_rank),
                STRAGGLER_FACTOR_ENV: f"{spec.profile.stragglers.factor:g}",
                STRAGGLER_WINDOW_ENV: str(spec.profile.stragglers.window),
                STRAGGLER_WINDOWS_ENV: str(spec.profile.stragglers.windows), **spec.recipe.env},
        "launch": launcher.script_context(spec, run_dir),
        # this restart's watchdog verdict, as the shell spells it (hpclaunch/runtime/node/supervise.py writes it)
        "watchdog_verdict": ShellExpr(f"${{{runfiles.ENV_LOG_DIR}}}/" + runfiles.watchdog_verdict_name(
            f"${{{runfiles.ENV_RESTART}}}")),
        "hung_exit_code": HUNG_EXIT_CODE,
        # this restart's slow-node finding (hpclaunch/runtime/node/slowswap.py), as the shell spells it
        "slow_verdict": ShellExpr(f"${{{runfiles.ENV_LOG_DIR}}}/" + runfiles.slow_verdict_name(
            f"${{{runfiles.ENV_RESTART}}}")),
        "health_exit_code": HEALTH_EXIT_CODE,
        **_health_commands(spec, run_dir),
        **_notify(spec, run_dir),
        **_stage_commands(spec),
        "node_script": _node_env(spec) + launcher.node_script(spec, run_dir),
        "spec_launcher_template": launcher.template,
    }
    for key in context["env"]:
        if not _ENV_NAME.match(key):
            raise ConfigError(f"environment variable name {key!r} is not valid in a shell", key=f"env.{key}")
    with _template_errors():
        script = env.get_template("job.sbatch.j2").render(context)
        extra = {name: env.get_template(template).render(context) for name, template in launcher.templates.items()}
        run_template = containers.RUN_SCRIPTS.get(spec.profile.container.runtime)
        if run_template:  # the script a node's command runs in the container with (Charliecloud)
            extra[runfiles.CONTAINER_RUN] = env.get_template(run_template).render(context)
    files_out = {runfiles.SCRIPT: script, runfiles.RESOLVED: spec.to_yaml(), **extra, **launcher.files(spec),
                 runfiles.REQUIRES: json.dumps(spec.requires, sort_keys=True) + "\n"}
    return Rendered(script=script, files=files_out)


def _health_commands(spec: JobSpec, run_dir: Path) -> dict[str, str]:
    """Each node's health check before step 0 and the verdict over every node (hpclaunch/runtime/node/health.py),
    as shell commands, in the profile's Apptainer container where it has one (pyxis: the scheduler's step puts it
    there); the scheduler's part adds --expect-devices where it asks for devices."""
    h = spec.health
    module = [spec.python_env.executable, "-m", "hpclaunch.runtime.node.health"]
    args: list[containers.Word] = ["check", "--min-free-gib", f"{h.min_free_gib:g}",
                                   "--min-allreduce-gbps", f"{h.min_allreduce_gbps:g}", "--allreduce-mib",
                                   str(h.allreduce_mib), "--timeout", f"{h.timeout:g}",
                                   "--nodes", str(spec.nodes + spec.spare_nodes)]
    args += [] if h.allreduce else ["--no-allreduce"]
    args += ["--scratch", shell_path(h.scratch)] if h.scratch else []
    spares = ["--spares", str(spec.spare_nodes)] if spec.spare_nodes else []
    verdict = join(containers.wrap(spec, run_dir, [*module, "verdict", *spares]))
    if not spec.staging.python:  # python.stage shared, or a container (never staged): the shared python, as ever
        return {"health_command": join(containers.wrap(spec, run_dir, [*module, *args])), "health_verdict": verdict}
    # the link check on devices imports torch with the check's python (health.check_allreduce): not the OS's
    os_python = not h.allreduce or spec.profile.accelerator == "cpu"
    pick = node_python(spec.python_env.executable, copy=True, os_python=os_python)
    return {"health_command": pick + RUN + join(["hpclaunch.runtime.node.health", *args]),
            "health_verdict": verdict}


# A node's python for what runs there before the node surely holds its copy of the environment (the health check,
# unpacking a broadcast copy), so that it reads nothing from the shared filesystem where it can (issue 38: the
# shared interpreter's start, ~15 MB and ~1,400 metadata calls a node): the node's intact copy of this job's
# environment (the job script packs it, and knows its key, before the health check); else the OS's python, at
# least the oldest hpclaunch supports, importing hpclaunch's standard-library-only node modules from the folder
# that holds the job's hpclaunch (HPCLAUNCH_PKG_PATH, which the pack prints); else the shared python, as before.
OS_PYTHON = "/usr/bin/python3"
MIN_PYTHON = (3, 10)  # pyproject.toml's requires-python
RUN = '"${hpclaunch_run[@]}" '  # then the module and its arguments: node_python's python runs the module
_COPY_PYTHON = ('hpclaunch_host=$(hostname); hpclaunch_copy_py="$HPCLAUNCH_NODE_SCRATCH/${hpclaunch_host%%.*}/envs/'
                '${HPCLAUNCH_ENV_KEY:-}/bin/python"; ')
# the OS's python, isolated (-I: no PYTHON* variables, user site or working directory; -B: no bytecode written to the
# shared folder), with the folder of hpclaunch put last on sys.path: first (PYTHONPATH), every standard-library
# import would look there before the standard library (a stat on the shared filesystem per import)
_OS_RUN = ("import runpy, sys; sys.path.append(sys.argv.pop(1)); sys.argv.pop(0); "
           "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")


def node_python(shared: str, *, copy: bool, os_python: bool) -> str:
    """Shell lines that set the array ``hpclaunch_run`` on a node: the python that runs a module (``RUN`` MODULE
    ARGS; see above): the node's copy's where `copy` and it imports hpclaunch's node modules (the working
    directory, the shared submit folder, kept off sys.path), else the OS's where `os_python`, else `shared`."""
    text = f"hpclaunch_run=({quote(shared)} -m); " + (_COPY_PYTHON if copy else "")
    branches = []
    if copy:
        branches.append('[ -n "${HPCLAUNCH_ENV_KEY:-}" ] && PYTHONSAFEPATH=1 "$hpclaunch_copy_py" -c '
                        "'import hpclaunch.runtime.node.health' 2>/dev/null; then "
                        'hpclaunch_run=("$hpclaunch_copy_py" -m); export PYTHONSAFEPATH=1; ')
    if os_python:
        version = f"import sys; sys.exit(sys.version_info < {MIN_PYTHON})"
        branches.append(f'[ -n "${{HPCLAUNCH_PKG_PATH:-}}" ] && {OS_PYTHON} -I -c {quote(version)} 2>/dev/null; then '
                        f'hpclaunch_run=({OS_PYTHON} -I -B -c {quote(_OS_RUN)} "$HPCLAUNCH_PKG_PATH"); ')
    return text + ("if " + "elif ".join(branches) + "fi; " if branches else "")


def _notify(spec: JobSpec, run_dir: Path) -> dict[str, str | None]:
    """What the job's word at its end needs (blocks/notify.sh.j2 passes it to hpclaunch/runtime/node/notify.py in
    HPCLAUNCH_NOTIFY, out of `ps`: a webhook's URL may hold a token), as JSON; None when the job sends none."""
    n = spec.notify
    if not n.fires:
        return {"notify": None, "notify_about": None}
    when = list(n.when or ("ended",))
    settings = {"webhook": n.webhook, "command": n.command, "when": when, "recipe": spec.recipe.name,
                "profile": spec.profile.name, "run_dir": str(run_dir)}
    what = " and ".join(k for k in ("webhook", "command") if settings[k])
    return {"notify": json.dumps(settings, sort_keys=True), "notify_about": f"{what}; when: {', '.join(when)}"}


# node-local scratch where the profile names none; each node adds its host name (docs/fast-start.md)
NODE_SCRATCH_DEFAULT = "${TMPDIR:-/tmp}/hpclaunch-${USER:-user}"
# the ranks' python: the node's copy of the environment (hpclaunch/runtime/node/envstage.py), this node's host name
_NODE_ENV = ('hpclaunch_host=$(hostname); hpclaunch_env="$HPCLAUNCH_NODE_SCRATCH/${hpclaunch_host%%.*}/envs/'
             '$HPCLAUNCH_ENV_KEY"; export VIRTUAL_ENV="$hpclaunch_env" PATH="$hpclaunch_env/bin:$PATH"; ')
# python.stage_fallback shared: the job script unsets HPCLAUNCH_ENV_KEY when staging failed; each node says so
_NODE_ENV_OR_SHARED = ('if [ -n "${HPCLAUNCH_ENV_KEY:-}" ]; then ' + _NODE_ENV + 'else echo "hpclaunch: warning: '
                       'node $(hostname): the ranks run from the shared python environment (python.stage_fallback '
                       'shared: $HPCLAUNCH_ENV_FALLBACK)" >&2; fi; ')
_NODE_ASSETS = "export HPCLAUNCH_NODE_ASSETS=1; "
_NODE_ASSETS_OR_SHARED = "export HPCLAUNCH_NODE_ASSETS=fallback; "  # assets.stage auto: the store where a copy fails


def _node_env(spec: JobSpec) -> str:
    """What the node script runs before the launcher: the node-local python environment and assets switched on."""
    python = _NODE_ENV_OR_SHARED if spec.staging.python_fallback else _NODE_ENV
    assets = _NODE_ASSETS_OR_SHARED if spec.staging.assets_fallback else _NODE_ASSETS
    return (python if spec.staging.python else "") + (assets if spec.staging.assets else "")


def _stage_commands(spec: JobSpec) -> dict[str, Any]:
    """Packing the python environment once (the job script) and unpacking it on each node (one task per node)."""
    scratch = spec.profile.node_scratch
    cache = shell_path(f"{asset_store(spec.profile)}/envs")
    module = [spec.python_env.executable, "-m", "hpclaunch.runtime.node.envstage"]
    fallback = ["--fallback"] if spec.staging.python_fallback else []  # a failure is a warning, not an error
    key, node_scratch = ShellExpr("${HPCLAUNCH_ENV_KEY}"), ShellExpr("${HPCLAUNCH_NODE_SCRATCH}")
    return {"node_scratch": shell_path(scratch) if scratch else ShellExpr(NODE_SCRATCH_DEFAULT),
            "node_scratch_keep_days": f"{spec.profile.node_scratch_keep_days:g}",
            # the key, then the folder that holds the job's hpclaunch (node_python)
            "stage_pack": join([*module, "pack", "--cache", cache, "--print-path", *fallback]),
            "stage_node": join([*module, "node", "--cache", cache, "--key", key, "--scratch", node_scratch,
                                *fallback]),
            # a broadcast (templates/schedulers/slurm/stage.sh.j2, which checks each node's copy itself): the
            # store's folder of images; unpacking the node's own copy of the image; the nodes still without it
            "stage_envs": cache,
            # unpacking the node's copy of the image (hpclaunch_copy, exported by the job script): without the
            # shared python where the OS's will do (node_python)
            "stage_received": node_python(spec.python_env.executable, copy=False, os_python=True) + RUN + join(
                ["hpclaunch.runtime.node.envstage", "node", "--scratch", node_scratch, "--image",
                 ShellExpr("${hpclaunch_copy}"), "--node-id-env", "SLURMD_NODENAME"]),
            "stage_pending": join([*module, "pending"])}


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
