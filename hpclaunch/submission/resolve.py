"""Resolve: the only place where configuration layers merge.

Precedence, highest first (rule 1 of the design):

    CLI flags (--nodes, --gpus-per-node, --layout, --partition, --time, --name)
    > --set key=value (dotted recipe keys)
    > the recipe preset (--preset, or the recipe's default_preset)
    > recipe.yaml
    > the profile's defaults
    > code defaults

Profile limits are checked here with the numbers in the message; they are never silently clipped.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from hpclaunch.config.layout import Layout, parse_layout
from hpclaunch.config.loader import RecipeSource, load_profile, load_recipe_source, read_profile
from hpclaunch.config.memsize import format_size, parse_size
from hpclaunch.config.parallel import data_parallel_degree
from hpclaunch.config.rules import DEVICES_PER_NODE
from hpclaunch.config.walltime import format_time, parse_time
from hpclaunch.core.backends import LAUNCHER_NAMES, can
from hpclaunch.errors import ConfigError, HpclaunchError, LimitError, NoPlan, NotFoundError
from hpclaunch.submission import autobatch, mindspore

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile
    from hpclaunch.config.recipe import Recipe

DEFAULT_LAYOUT = "1n1g"
DEFAULT_TIME = "01:00:00"
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
_JOB_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,128}$")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # --notify URL (a webhook) rather than a command


@dataclass(frozen=True)
class CliOverrides:
    """What the command line asked for directly (the highest layer)."""

    preset: str | None = None
    layout: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    partition: str | None = None
    time: str | None = None
    name: str | None = None
    sets: Sequence[str] = field(default_factory=tuple)
    retries: int = 0  # submit --retries
    inject: str | None = None  # HPCLAUNCH_INJECT of the submitting environment
    sbatch: Sequence[str] = field(default_factory=tuple)  # submit --sbatch KEY=VALUE
    launcher: str | None = None  # submit SCRIPT.py --launcher (an ad-hoc recipe: hpclaunch/config/adhoc.py)
    script_args: Sequence[str] | None = None  # submit ... -- ARGS: the script's own arguments (replace `args`)
    exclude: Sequence[str] = field(default_factory=tuple)  # submit --exclude NODE[,NODE]: nodes the job must not get
    spare_nodes: int | None = None  # submit --spare-nodes K: nodes beyond the layout's that replace a dropped one
    notify: str | None = None  # submit --notify URL|COMMAND: a webhook (http(s)://...) or a command, over notify:


def parse_set(item: str) -> tuple[list[str], Any]:
    """``train.lr=3e-4`` -> (["train", "lr"], 0.0003). Values are parsed as YAML scalars/lists."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.lr=3e-4")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not _KEY.match(key):
        raise ConfigError(f"--set {item!r}: {key!r} is not a dotted key such as train.lr")
    import yaml  # only when --set is given: a plain dry-run does not load PyYAML

    from hpclaunch.config import yamlfile

    try:
        value = yamlfile.load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _nested(path: list[str], value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out


def _has(data: Mapping[str, Any], loc: tuple[Any, ...]) -> bool:
    cur: Any = data
    for part in loc:
        if not isinstance(cur, Mapping) or part not in cur:
            return False
        cur = cur[part]
    return True


# Keys that say what the recipe's script does: facts of the recipe file, not settings (setting one would switch off
# the refusal of what the script does not do): what each says, and what to do instead
_SCRIPT_FACTS = {
    ("parallel", "implemented"): ("implements", "a script that implements more parallelism lists it in its own "
                                                "recipe.yaml (parallel.implemented), or in a preset there"),
    ("launchers",): ("runs under", "a script that runs under more launchers lists them in its own recipe.yaml "
                                   "(launchers); --set launcher=NAME picks one of them"),
}


def _not_settable(item: str, path: list[str], value: Any) -> None:
    for fact, (says, instead) in _SCRIPT_FACTS.items():
        given = tuple(path)
        if given[:len(fact)] == fact or (given == fact[:len(given)] and isinstance(value, Mapping)
                                          and _has(value, fact[len(given):])):
            key = ".".join(fact)
            raise ConfigError(f"--set {item}: {key} says what the recipe's script {says} and cannot be set on the "
                              "command line", key=key, hint=f"leave it out; {instead}")


def merge_recipe(src: RecipeSource, preset: str | None, sets: Sequence[str]) -> tuple[Recipe, str | None]:
    """Recipe + preset + --set -> a validated Recipe; errors name the layer a bad value came from."""
    return _merge_recipe(src, preset, sets)


def _merge_recipe(src: RecipeSource, preset: str | None, sets: Sequence[str],
                  script_args: Sequence[str] | None = None, notify: str | None = None) -> tuple[Recipe, str | None]:
    from hpclaunch.config.base import validate
    from hpclaunch.config.recipe import Recipe

    data = dict(src.data)
    presets = data.pop("presets", {}) or {}
    default_preset = data.pop("default_preset", None)
    if not isinstance(presets, dict):
        raise ConfigError("expected a mapping of preset name to overrides", file=str(src.file), key="presets")
    if default_preset is not None and not isinstance(default_preset, str):
        raise ConfigError(f"expected the name of a preset, got {type(default_preset).__name__}",
                          file=str(src.file), key="default_preset",
                          hint=f"one of: {', '.join(map(str, presets)) or '(no presets defined)'}")
    for name, over in presets.items():
        if not isinstance(name, str):
            raise ConfigError(f"preset name {name!r} is not text", file=str(src.file), key="presets")
        if over is not None and not isinstance(over, dict):
            raise ConfigError("expected a mapping of overrides", file=str(src.file), key=f"presets.{name}")
    chosen = preset if preset is not None else default_preset
    preset_data: dict[str, Any] = {}
    if chosen is not None:
        if chosen not in presets:
            raise NotFoundError("preset", chosen, presets,
                                hint=f"recipe {data.get('name')!r} defines its presets under `presets:` "
                                     f"in {src.file}")
        preset_data = presets[chosen] or {}
    set_data: dict[str, Any] = {}
    set_items: dict[tuple[str, ...], str] = {}
    for item in sets:
        path, value = parse_set(item)
        _not_settable(item, path, value)
        set_data = deep_merge(set_data, _nested(path, value))
        set_items[tuple(path)] = f"--set {item}"
    merged = deep_merge(deep_merge(data, preset_data), set_data)
    if script_args is not None:
        merged["args"] = list(script_args)  # the command line's `-- ARGS`, over every other layer
    if notify is not None:  # --notify, over every other layer (kept in the recipe: a resubmission keeps it)
        key = "webhook" if _URL_SCHEME.match(notify) else "command"
        merged = deep_merge(merged, {"notify": {key: notify}})
        set_items[("notify", key)] = f"--notify {notify}"

    def locate(loc: tuple[Any, ...]) -> str:
        for n in range(len(loc), 0, -1):
            if tuple(loc[:n]) in set_items:
                return set_items[tuple(loc[:n])]
        if chosen is not None and _has(preset_data, loc):
            return f"{src.file} (presets.{chosen})"
        return str(src.file)

    recipe = validate(Recipe, merged, file=str(src.file), locate=locate)
    for name, over in presets.items():
        if name != chosen and over:
            # every preset is checked at load, not only the one chosen: a broken `full` preset is found
            # by the `tiny` run that precedes it, not hours later
            def in_preset(loc: tuple[Any, ...], name: str = name, over: dict[str, Any] = over) -> str:
                return f"{src.file} (presets.{name})" if _has(over, loc) else str(src.file)

            validate(Recipe, deep_merge(data, over), file=str(src.file), locate=in_preset)
    return recipe, chosen


def _recipe_origin(cli: CliOverrides, recipe: Recipe, key: str) -> str:
    """Where a recipe-level value came from, for messages: the --set flag, else the recipe (or preset)."""
    for item in reversed(cli.sets):
        if item.split("=", 1)[0].strip() == key:
            return f"--set {item}"
    return f"recipe {recipe.name} {key}"


def _layers(src: RecipeSource, preset: str | None, sets: Sequence[str]) -> list[tuple[str, Mapping[str, Any]]]:
    """Where a recipe's values come from, lowest first, each as (where, its values): the recipe file, its preset,
    each --set."""
    presets = src.data.get("presets")
    chosen = presets.get(preset) if preset is not None and isinstance(presets, dict) else None
    return [(str(src.file), src.data),
            *([(f"{src.file} (presets.{preset})", chosen)] if isinstance(chosen, dict) else []),
            *((f"--set {item}", _nested(*parse_set(item))) for item in sets)]


def _layout(cli: CliOverrides, recipe: Recipe, profile: Profile) -> Layout:
    base_text, where = DEFAULT_LAYOUT, "code default"
    for text, origin in ((profile.defaults.layout, f"profile {profile.name} defaults.layout"),
                         (recipe.layout, _recipe_origin(cli, recipe, "layout")),
                         (cli.layout, "--layout")):
        if text is not None:
            base_text, where = text, origin
    base = parse_layout(base_text, where=where)
    nodes = cli.nodes if cli.nodes is not None else base.nodes
    gpus = cli.gpus_per_node if cli.gpus_per_node is not None else base.gpus_per_node
    if nodes < 1 or gpus < 1:
        raise ConfigError(f"--nodes and --gpus-per-node must be at least 1 (got {nodes} and {gpus})")
    return Layout(nodes, gpus)


def _implemented(recipe: Recipe) -> None:
    """Refuse a parallelism the recipe's script does not implement (it would train data parallel instead,
    or stop inside the job after the queue wait)."""
    par = recipe.parallel
    assert par is not None
    asked = {"model": par.model_parallel, "pipeline": par.pipeline_stage}
    missing = [f"{name}_{'parallel' if name == 'model' else 'stage'}({n})" for name, n in asked.items()
               if n > 1 and name not in par.implemented]
    if par.optimizer_shard and "optimizer_shard" not in par.implemented:
        raise ConfigError(
            f"recipe {recipe.name}: parallel.optimizer_shard asked, but its script does not shard the optimizer "
            f"(parallel.implemented: {', '.join(par.implemented)}): it would keep whole AdamW states on every rank",
            key="parallel.optimizer_shard",
            hint="set parallel.optimizer_shard=false; `hpclaunch plan` shows the memory per device without it "
                 "(MindSpore's parallel optimizer needs graph mode with semi-auto parallel, as in MindFormers)")
    if missing:
        why = ("; MindSpore's semi-auto parallel (shard strategies, pipeline stages) needs graph mode on GPU or "
               "Ascend, and its CPU backend has none" if recipe.launcher == "msrun" else "")
        raise ConfigError(
            f"recipe {recipe.name}: {' and '.join(missing)} asked, but its script implements "
            f"{', '.join(par.implemented)} parallelism only (parallel.implemented){why}", key="parallel",
            hint="set parallel.model_parallel=1 and parallel.pipeline_stage=1 (data parallel over every device), "
                 "or use a script that implements them and list them in parallel.implemented")


def _batch(recipe: Recipe, world_size: int) -> tuple[int, int, int]:
    """(data_parallel, grad_accum, global_batch) with global = micro x accum x data-parallel, checked."""
    dp = world_size
    if recipe.parallel is not None:
        model_config = recipe.model.config if recipe.model else None
        dp = data_parallel_degree(recipe.parallel, world_size, model_config)
        _implemented(recipe)
    t = recipe.train
    mb = t.micro_batch_size
    if t.global_batch_size is None:
        accum = t.grad_accum or 1
        return dp, accum, mb * accum * dp
    if t.grad_accum is None:
        if t.global_batch_size % (mb * dp):
            raise ConfigError(
                f"global_batch_size({t.global_batch_size}) is not a multiple of micro_batch_size({mb}) x "
                f"data_parallel({dp}) = {mb * dp}", key="train.global_batch_size",
                hint="change train.global_batch_size or train.micro_batch_size, or the layout")
        return dp, t.global_batch_size // (mb * dp), t.global_batch_size
    if mb * t.grad_accum * dp != t.global_batch_size:
        raise ConfigError(
            f"global_batch_size({t.global_batch_size}) != micro_batch_size({mb}) x grad_accum({t.grad_accum}) x "
            f"data_parallel({dp}) = {mb * t.grad_accum * dp}", key="train.global_batch_size",
            hint="drop one of train.grad_accum / train.global_batch_size and it is derived from the other")
    return dp, t.grad_accum, t.global_batch_size


def _time(cli: CliOverrides, recipe: Recipe, profile: Profile, partition: str) -> str:
    limit_text = profile.partitions[partition].max_time
    candidates = ((cli.time, "--time"), (recipe.time, _recipe_origin(cli, recipe, "time")),
                  (profile.defaults.time, f"profile {profile.name} defaults.time"))
    text, where = next(((t, w) for t, w in candidates if t is not None), (None, None))
    if text is None:
        text, where = (DEFAULT_TIME if parse_time(DEFAULT_TIME) <= parse_time(limit_text) else limit_text,
                       "default")
    try:
        seconds = parse_time(text)
    except ValueError as exc:
        raise ConfigError(str(exc), key=where) from None
    if seconds <= 0:
        # Slurm reads a zero time limit as "no limit": that would slip past the partition's limit
        raise ConfigError(f"time {text!r} is zero; ask for at least one minute", key=where)
    if seconds > parse_time(limit_text):
        raise LimitError(
            f"time {text} ({where}) exceeds the limit of partition {partition!r} in profile "
            f"{profile.name!r}: {limit_text}", hint=f"ask for --time {limit_text} or less")
    return format_time(seconds)


def _watchdog(recipe: Recipe, profile: Profile) -> dict[str, Any]:
    """The recipe's watchdog settings (--set watchdog.timeout=...) over the profile's. A timeout the
    recipe fixes is kept as is; the profile's default tightens to the observed step time."""
    mine, site = recipe.watchdog, profile.watchdog
    return {
        "enabled": site.enabled if mine.enabled is None else mine.enabled,
        "timeout": site.timeout if mine.timeout is None else mine.timeout,
        "init_timeout": site.init_timeout if mine.init_timeout is None else mine.init_timeout,
        "min_timeout": site.min_timeout,
        "adaptive": mine.timeout is None,
    }


def _checkpointing(recipe: Recipe, profile: Profile, time: str) -> dict[str, Any]:
    """The recipe's checkpoint keys (--set checkpoint.lead_time=...) over the profile's. A lead time the job
    gives itself must leave it time to train (the profile's default is left out for a job too short for it)."""
    mine, site = recipe.checkpoint, profile.checkpoint
    lead = site.lead_time if mine.lead_time is None else mine.lead_time
    if mine.lead_time is not None and mine.lead_time >= parse_time(time):
        raise ConfigError(f"{mine.lead_time} s is not shorter than the time limit {time}: the "
                          "job would be told to stop before it starts", key="checkpoint.lead_time",
                          hint="give a lead time of a few minutes (the time one checkpoint takes to write), or ask "
                               "for a longer --time")
    return {"lead_time": lead, "requeue": site.requeue if mine.requeue is None else mine.requeue,
            "write_gbps": profile.storage.write_gbps}


def _health(recipe: Recipe, profile: Profile) -> dict[str, Any]:
    """The recipe's health settings (--set health.enabled=false) over the profile's; the profile's `enabled: null`
    is on where the scheduler's jobs can span nodes (capability "multi_node"; local's one machine: nothing across
    nodes to check)."""
    mine, site = recipe.health, profile.health
    enabled = mine.enabled if mine.enabled is not None else site.enabled
    return {
        "enabled": can(profile.scheduler, "multi_node") if enabled is None else enabled,
        "min_free_gib": site.min_free_gib if mine.min_free_gib is None else mine.min_free_gib,
        "min_allreduce_gbps": site.min_allreduce_gbps if mine.min_allreduce_gbps is None else mine.min_allreduce_gbps,
        "allreduce": site.allreduce, "allreduce_mib": site.allreduce_mib, "scratch": site.scratch,
        "timeout": site.timeout,
    }


def _staging(recipe: Recipe, profile: Profile, nodes: int) -> dict[str, bool]:
    """Node-local copies: the recipe's python.stage (--set python.stage=node-local) over the environment's, and
    what a node that cannot stage it does (python.stage_fallback, the same way). auto (the default): node-local
    for a job of several nodes (`nodes`, spares included) outside a container, where a failure to pack or copy
    falls back to the shared paths (auto never ends a job that shared would run); else shared
    (docs/fast-start.md#the-default-auto)."""
    env = profile.python_env_for(recipe.python_env)
    where = recipe.python.stage or env.stage
    fallback = recipe.python.stage_fallback or env.stage_fallback
    contained = profile.container.runtime != "none"
    if where == "node-local" and contained:
        raise ConfigError(f"node-local copies the host's python environment to each node, but profile "
                          f"{profile.name!r} runs the launch in an {profile.container.runtime} container (its "
                          f"python is the image's)", key="python.stage",
                          hint="leave python.stage shared with a container")
    # a container sees neither the host's environment nor the node's scratch: auto stays shared there
    spread = nodes > 1 and can(profile.scheduler, "multi_node") and not contained
    python = where == "node-local" or (where == "auto" and spread)
    assets = profile.assets.stage == "node-local" or (profile.assets.stage == "auto" and spread)
    return {"python": python, "assets": assets,
            "python_fallback": python and (fallback == "shared" or where == "auto"),
            "assets_fallback": assets and profile.assets.stage == "auto"}


_WANDB_KEYS = ("project", "entity", "group", "tags", "mode")


def _resources(cli: CliOverrides, recipe: Recipe, profile: Profile, partition: str, layout: Layout) -> dict[str, Any]:
    """CPUs and memory per node: the recipe's resources (--set resources.*) over the devices' share of the node
    (floor, at least 1); a whole node asks for all of its memory (0), and --exclusive where the partition says so.
    More than a node has is refused, never clipped."""
    part, mine, devices = profile.partitions[partition], recipe.resources, layout.gpus_per_node
    where = f"partition {partition!r} of profile {profile.name!r}"

    def share(total: int) -> int:
        return max(1, total * devices // part.gpus_per_node)

    cpus = share(part.cpus_per_node) if mine.cpus_per_task is None else mine.cpus_per_task
    if cpus > part.cpus_per_node:
        raise ConfigError(f"{cpus} CPUs ({_recipe_origin(cli, recipe, 'resources.cpus_per_task')}) is more than the "
                          f"{part.cpus_per_node} a node of {where} has",
                          key="resources.cpus_per_task",
                          hint=f"ask for at most {part.cpus_per_node}, or leave it out: {devices} of "
                               f"{part.gpus_per_node} devices ask {share(part.cpus_per_node)}")
    node_mib = int(part.memory_gb * 1024) if part.memory_gb else None
    whole = devices == part.gpus_per_node
    mem: int | None = None if node_mib is None else 0 if whole else share(node_mib)
    if mine.mem_per_device is not None:
        mem = asked = parse_size(mine.mem_per_device) * devices
        if node_mib is not None and asked > node_mib:
            raise ConfigError(
                f"{mine.mem_per_device} x {devices} devices = {format_size(asked)} per node "
                f"({_recipe_origin(cli, recipe, 'resources.mem_per_device')}) is more than the {format_size(node_mib)} "
                f"a node of {where} has (memory_gb: {part.memory_gb:g})", key="resources.mem_per_device",
                hint=f"ask for at most {format_size(node_mib // devices)} per device, or leave it out: the job "
                     f"asks {'all of the node' if whole else format_size(share(node_mib))}")
    return {"cpus_per_task": cpus, "cpus_per_rank": max(1, cpus // devices), "mem_mb": mem,
            "exclusive": whole and part.exclusive}


def _wandb(recipe: Recipe, profile: Profile) -> dict[str, Any] | None:
    """The recipe's W&B keys over the profile's, key by key (a key is given when it is not null, tags when not
    empty); None when W&B is off (no project, or mode disabled).
    A section that asks for a mode but names no project is an error: W&B would file the runs under
    "uncategorized"."""
    merged: dict[str, Any] = {}
    for section in (profile.tracking.wandb, recipe.tracking.wandb):
        if section is not None:
            merged.update({k: v for k in _WANDB_KEYS if (v := getattr(section, k))})
    mode = merged.get("mode") or "offline"
    if mode == "disabled":
        return None
    if not merged.get("project"):
        if merged.get("mode"):
            raise ConfigError(f"tracking.wandb.mode is {mode} but no project is set: add tracking.wandb.project "
                             "(or --set tracking.wandb.project=NAME)", key="tracking.wandb")
        return None
    return {"project": merged["project"], "entity": merged.get("entity"), "group": merged.get("group"),
            "tags": tuple(merged.get("tags") or ()), "mode": mode}


def _sbatch(cli: CliOverrides, profile: Profile) -> dict[str, str | None]:
    if not cli.sbatch and not cli.exclude:
        return {}
    from hpclaunch.schedulers import get_scheduler

    # --exclude NODE[,NODE] is the scheduler's own option, as --sbatch exclude=NODE[,NODE] would give it
    options = get_scheduler(profile.scheduler).parse_options([*cli.sbatch, *(f"exclude={e}" for e in cli.exclude)])
    if options is None and cli.exclude:
        raise ConfigError(f"--exclude {','.join(cli.exclude)}: profile {profile.name!r} uses the {profile.scheduler} "
                          "scheduler, which runs the job on this machine: there are no nodes to exclude",
                          hint="leave out --exclude, or use a profile whose scheduler is slurm")
    if options is None:
        raise ConfigError(f"profile {profile.name!r} uses the {profile.scheduler} scheduler, which has no "
                          "sbatch options", key="--sbatch", hint="use a profile whose scheduler is slurm")
    return options


def _inject(cli: CliOverrides, ranks: int, nodes: int) -> str | None:
    """HPCLAUNCH_INJECT checked: its grammar, and that each fault's rank is one the job has (`ranks`), or for a
    fault before step 0 (sick), a node of its allocation (`nodes`, spares included)."""
    if not cli.inject:
        return None
    from hpclaunch.config.faults import BEFORE_START, ENV, parse_list

    try:
        faults = parse_list(cli.inject)
    except ValueError as exc:
        raise ConfigError(f"{exc} (in {ENV}={cli.inject[:80]!r})", key=ENV,
                          hint="give KIND:RANK:STEP[,KIND:RANK:STEP...] with KIND hang, crash, kill, nodefail or slow; "
                               "e.g. HPCLAUNCH_INJECT=kill:1:20,nodefail:0:40 (docs/troubleshooting.md), or unset it"
                          ) from None
    for f in faults:
        node = f.kind in BEFORE_START
        have = nodes if node else ranks
        if f.rank >= have:
            what = "node" if node else "rank"
            raise ConfigError(f"{ENV}={cli.inject[:80]!r}: {f} names {what} {f.rank}, but the job has {have} "
                              f"{what}s (0 to {have - 1})", key=ENV,
                              hint=f"name a {what} the job has, or unset {ENV}")
    return cli.inject


def _restarts(recipe: Recipe, profile: Profile) -> dict[str, int]:
    """restarts.max: the recipe's (--set restarts.max=N) over the profile's over the scheduler's default."""
    from hpclaunch.schedulers import get_scheduler

    for value in (recipe.restarts.max, profile.restarts.max):
        if value is not None:
            return {"max": value}
    return {"max": get_scheduler(profile.scheduler).restarts_default}


def _notify(recipe: Recipe, profile: Profile) -> dict[str, Any]:
    """notify: the recipe's keys (--set notify.KEY=..., --notify) over the profile's, key by key; `when` defaults to
    every end. (Whether the scheduler has mail is its own check: its script_context refuses what it cannot do.)"""
    from hpclaunch.config.base import dump

    merged = {k: v for section in (profile.notify, recipe.notify) for k, v in dump(section).items() if v is not None}
    return {**merged, "when": merged.get("when") or ["ended"]}


def _spare_nodes(cli: CliOverrides, profile: Profile, partition: str, nodes: int) -> int:
    spares = cli.spare_nodes or 0
    if spares < 0:
        raise ConfigError(f"--spare-nodes {spares}: give 0 or more spare nodes", key="--spare-nodes")
    part = profile.partitions[partition]
    if spares and nodes + spares > part.max_nodes:
        raise LimitError(f"--spare-nodes {spares}: {nodes} node(s) + {spares} spare(s) = {nodes + spares}, but "
                         f"partition {partition!r} of profile {profile.name!r} allows at most {part.max_nodes}",
                         hint=f"ask for at most {max(part.max_nodes - nodes, 0)} spare node(s)")
    return spares


def _check_script(cli: CliOverrides, recipe: Recipe, folder: Path) -> None:
    """The script must lie inside the recipe folder: the job runs the copy of that folder kept in its run
    directory, where a path out of it (``../x.py``) points somewhere else or nowhere. (A symbolic link
    inside the folder is fine: the copy holds the file it points to.)"""
    script = PurePosixPath(recipe.script)
    if not recipe.script.strip() or script.is_absolute() or ".." in script.parts or script == PurePosixPath("."):
        raise ConfigError(f"script {recipe.script!r} is not a file inside the recipe folder {folder} "
                          f"({_recipe_origin(cli, recipe, 'script')})", key="script",
                          hint="move the script into the recipe folder (the job runs a copy of that folder) and "
                               "name it relative to it")


# launcher x accelerator pairs that cannot run, and why (the launcher's own list of devices has no such one)
_NO_ACCELERATOR = {
    ("deepspeed", "musa"): "DeepSpeed has no MUSA accelerator (its accelerator list: cuda, cpu, npu, xpu, hpu, mps, "
                           "mlu), so its engine cannot start on Moore Threads devices",
    ("msrun", "musa"): "MindSpore has no MUSA backend (its device targets: Ascend, GPU, CPU), so its workers would "
                       "train on the host's CPU",
}


def _presets_under(data: Mapping[str, Any], launchers: Sequence[str]) -> list[str]:
    """The presets of a recipe file's `data` that switch it to one of `launchers`."""
    presets = data.get("presets")
    return [str(name) for name, over in presets.items()
            if isinstance(over, dict) and over.get("launcher") in launchers] if isinstance(presets, dict) else []


def _declared(data: Mapping[str, Any]) -> list[str]:
    found = data.get("launchers")
    return [str(name) for name in found] if isinstance(found, list) else []


def _recipes_under(launchers: Sequence[str]) -> list[str]:
    """The recipes on the search path that run under one of `launchers`: themselves, with a preset, or with --set
    launcher=NAME (best effort)."""
    from hpclaunch.config.loader import recipe_dirs
    from hpclaunch.config.yamlfile import read_yaml

    found = []
    for name, folder in sorted(recipe_dirs().items()):
        try:
            data = read_yaml(folder / "recipe.yaml")
        except (HpclaunchError, OSError):  # `hpclaunch recipes list` reports an unreadable recipe
            continue
        presets = _presets_under(data, launchers)
        also = [launcher for launcher in _declared(data) if launcher in launchers]
        if data.get("launcher") in launchers:
            found.append(name)
        elif presets:
            found.append(f"{name} (--preset {' / '.join(presets)})")
        elif also:
            found.append(f"{name} ({_switch(also[0], data.get)})")
    return found


def _switch(launcher: str, has: Callable[[str], object]) -> str:
    """The --set flags that run a recipe under `launcher`: the launcher, and the other launchers' sections the
    recipe `has` dropped."""
    drop = [section for section in ("deepspeed", "msrun") if section != launcher and has(section)]
    return " ".join([f"--set launcher={launcher}", *(f"--set {section}=null" for section in drop)])


def _check_launcher(cli: CliOverrides, recipe: Recipe, profile: Profile, src: RecipeSource) -> None:
    """Refuse a launcher that cannot run on the profile's accelerator, before anything is queued."""
    why = _NO_ACCELERATOR.get((recipe.launcher, profile.accelerator))
    if why is None:
        return
    origin = _recipe_origin(cli, recipe, "launcher")
    what = (f"script {recipe.script} runs under launcher {recipe.launcher}" if recipe.adhoc else
            f"recipe {recipe.name} runs under launcher {recipe.launcher}"
            f"{f' ({origin})' if origin.startswith('--set') else ''}")
    message = f"{what}, and profile {profile.name!r} has accelerator {profile.accelerator}: {why}"
    if recipe.adhoc:
        raise ConfigError(message, key="launcher", hint="submit it with --launcher torchrun (DDP, or your own "
                                                        "parallelism in the script)")
    runs = [name for name in LAUNCHER_NAMES if (name, profile.accelerator) not in _NO_ACCELERATOR]
    has = partial(getattr, recipe)
    presets = _presets_under(src.data, runs)
    also = [name for name in recipe.launchers if name in runs]
    if src.data.get("launcher") in runs:
        hint = f"recipe {recipe.name}'s own launcher is {src.data['launcher']}: leave out the setting that changes it"
    elif presets:
        to = src.data["presets"][presets[-1]]["launcher"]
        hint = (f"run it under {to}, as its preset{'s' if len(presets) > 1 else ''} {', '.join(presets)} "
                f"do{'' if len(presets) > 1 else 'es'}: `--preset {presets[-1]}`, or `{_switch(to, has)}` "
                "with the preset you chose")
    elif also:
        hint = f"its script runs under {also[0]} too: `{_switch(also[0], has)}`"
    else:
        others = [r for r in _recipes_under(runs) if r.split()[0] != recipe.name]
        hint = (f"recipe {recipe.name}'s script runs under {' or '.join(recipe.launchers or [recipe.launcher])} "
                f"only, so it cannot run on {profile.accelerator}; recipes that can"
                f"{': ' + ', '.join(others) if others else ' run under ' + ' or '.join(runs)}")
    raise ConfigError(message, key="launcher", hint=hint)


def _check_model_config(recipe: Recipe) -> None:
    """recipes/gpt_mindspore's model.config, read by its script with no checks of its own: a value of the wrong
    type would stop the job after the queue wait, so the plan's reading of it (which checks each value) runs here."""
    from hpclaunch.plan import mindspore

    m = recipe.model
    if recipe.launcher != "msrun" or m is None or m.model_type != mindspore.MODEL_TYPE:
        return
    try:
        mindspore.gpt_facts(dict(m.config), recipe.train.seq_len, source=f"recipe {recipe.name}")
    except NoPlan as exc:
        raise ConfigError(exc.message, hint=exc.hint) from None


def _check_limits(profile: Profile, partition: str, layout: Layout) -> None:
    allowed = DEVICES_PER_NODE.get(profile.accelerator)
    if allowed and layout.gpus_per_node not in allowed:
        raise LimitError(f"layout {layout} asks for {layout.gpus_per_node} devices per node; {profile.accelerator} "
                         f"devices (profile {profile.name!r}) run {', '.join(map(str, allowed))} per node",
                         hint="choose one of those device counts per node")
    part = profile.partitions[partition]
    if layout.nodes > part.max_nodes:
        raise LimitError(f"layout {layout} asks for {layout.nodes} nodes, but partition {partition!r} of "
                         f"profile {profile.name!r} allows at most {part.max_nodes}")
    if layout.gpus_per_node > part.gpus_per_node:
        raise LimitError(f"layout {layout} asks for {layout.gpus_per_node} GPUs per node, but partition "
                         f"{partition!r} of profile {profile.name!r} has {part.gpus_per_node} per node")


def resolve_parts(profile: Profile, src: RecipeSource, cli: CliOverrides,
                  profile_ref: str | None = None) -> JobSpec:
    """`profile_ref`: the --profile as given (a name or a file), for the commands the errors and hints suggest.
    `--set train.micro_batch_size=auto` is planned (submission/autobatch.py) and merged here as --set items."""
    index = autobatch.auto_item(cli.sets)
    if index is None:
        return _resolve_parts(profile, src, cli, profile_ref)
    return autobatch.resolve_auto(lambda sets: _resolve_parts(profile, src, replace(cli, sets=sets), profile_ref),
                                  cli.sets, index)


def _resolve_parts(profile: Profile, src: RecipeSource, cli: CliOverrides, profile_ref: str | None) -> JobSpec:
    from hpclaunch.config.base import validate
    from hpclaunch.config.jobspec import JobSpec

    recipe, preset = _merge_recipe(src, cli.preset, cli.sets, cli.script_args, cli.notify)
    partition = cli.partition or recipe.partition or profile.default_partition
    if partition not in profile.partitions:
        shown = shlex.quote(profile_ref or profile.name)
        raise NotFoundError("partition", partition, profile.partitions,
                            hint=f"the partitions of profile {profile.name!r} are listed by "
                                 f"`hpclaunch profiles show {shown}`")
    _check_script(cli, recipe, src.dir)
    _check_launcher(cli, recipe, profile, src)
    layout = _layout(cli, recipe, profile)
    _check_limits(profile, partition, layout)
    time = _time(cli, recipe, profile, partition)
    dp, accum, global_batch = _batch(recipe, layout.world_size)
    _check_model_config(recipe)
    mindspore.check(recipe, profile.accelerator, lambda key: _recipe_origin(cli, recipe, key),
                    script=src.dir / recipe.script, layers=_layers(src, preset, cli.sets))
    try:
        profile.python_env_for(recipe.python_env)
    except ValueError as exc:
        raise ConfigError(str(exc), key="python_env") from None
    name = cli.name or recipe.name
    if not _JOB_NAME.match(name):
        raise ConfigError(f"job name {name!r} may hold only letters, digits and _ . + -", key="name")
    spares = _spare_nodes(cli, profile, partition, layout.nodes)
    values = dict(name=name, recipe=recipe, recipe_dir=str(src.dir), preset=preset, profile=profile,
                  profile_ref=profile_ref, partition=partition, nodes=layout.nodes,
                  gpus_per_node=layout.gpus_per_node, time=time,
                  grad_accum=accum, global_batch_size=global_batch, data_parallel=dp,
                  sets=tuple(cli.sets), watchdog=_watchdog(recipe, profile),
                  health=_health(recipe, profile), retries=cli.retries,
                  staging=_staging(recipe, profile, layout.nodes + spares),
                  resources=_resources(cli, recipe, profile, partition, layout),
                  checkpoint=_checkpointing(recipe, profile, time),
                  resumable=(not recipe.adhoc) if recipe.checkpoint.resumable is None else recipe.checkpoint.resumable,
                  tracking={"wandb": _wandb(recipe, profile)}, sbatch=_sbatch(cli, profile),
                  restarts=_restarts(recipe, profile), notify=_notify(recipe, profile), spare_nodes=spares,
                  inject=_inject(cli, layout.world_size, layout.nodes + spares))
    return validate(JobSpec, values, file="(resolved job spec)")


def resolve(recipe_ref: str, profile_ref: str, cli: CliOverrides | None = None) -> JobSpec:
    """Load the profile and the recipe and merge them with the CLI layer into a JobSpec."""
    cli = cli or CliOverrides()
    return resolve_parts(load_profile(profile_ref), recipe_source(recipe_ref, cli), cli, profile_ref)


def recipe_source(recipe_ref: str, cli: CliOverrides) -> RecipeSource:
    """A recipe folder's recipe.yaml, or the ad-hoc recipe of a Python script (with --launcher)."""
    from hpclaunch.config import adhoc

    if adhoc.is_script(recipe_ref) or cli.launcher is not None:
        return adhoc.script_source(recipe_ref, cli.launcher)
    return load_recipe_source(recipe_ref)


def _profile_name(ref: str) -> str | None:
    """The name of the profile `ref` finds (a profile file's own name), None where it finds none."""
    try:
        return str(read_profile(ref)[1]["name"])
    except (ConfigError, NotFoundError, OSError, KeyError):
        return None


def resolve_again(path: str, cli: CliOverrides, profile_ref: str | None = None) -> JobSpec:
    """A resolved.yaml (a JobSpec saved in a run directory, maybe edited by hand) through resolve's checks
    again, as a fresh resolve: profile limits, the job name, the script's place, batch arithmetic. Its
    profile and recipe are the layers; flags on the command line apply over them (a --set over the
    recorded ones, --layout/--nodes/... over the recorded layout). A preset cannot apply: it was merged
    into the recipe when the file was written."""
    from hpclaunch.config.base import dump, validate
    from hpclaunch.config.base import replace as with_fields
    from hpclaunch.config.jobspec import load_jobspec
    from hpclaunch.config.profile import Profile
    from hpclaunch.config.recipe import TrainSpec
    from hpclaunch.schedulers import get_scheduler

    saved = load_jobspec(path)
    if cli.launcher is not None:
        raise ConfigError(f"--launcher makes a recipe of a script; this resolved.yaml runs {saved.recipe.launcher}",
                          file=path, hint="leave out --launcher, or submit the script itself")
    if profile_ref and profile_ref not in (saved.profile.name, saved.profile_ref) \
            and _profile_name(profile_ref) != saved.profile.name:
        raise ConfigError(f"it was resolved for profile {saved.profile.name!r}, not {profile_ref!r}", file=path,
                          hint="resolve the recipe again to use another profile")
    if cli.preset is not None:
        raise ConfigError("--preset cannot apply to a resolved.yaml: its preset was merged into it", file=path,
                          hint="resolve the recipe again with --preset")
    profile = validate(Profile, dump(saved.profile), file=path)
    recipe = dump(saved.recipe)
    # train's defaults left out, as the recipe they were resolved from left them (given keys are checked)
    defaults = dump(TrainSpec())
    recipe["train"] = {key: value for key, value in recipe["train"].items() if defaults.get(key, key) != value}
    src = RecipeSource(dir=Path(saved.recipe_dir), file=Path(path), data=recipe)
    layout = cli.layout if cli.layout is not None else saved.layout
    again = replace(cli, layout=layout, partition=cli.partition or saved.partition, time=cli.time or saved.time,
                    name=cli.name or saved.name, retries=cli.retries or saved.retries,
                    inject=cli.inject or saved.inject,
                    spare_nodes=saved.spare_nodes if cli.spare_nodes is None else cli.spare_nodes)
    # the recorded --set values are in the recipe already (and a hand edit after them stands): only the new
    # ones apply; all are recorded
    spec = resolve_parts(profile, src, again, profile_ref or saved.profile_ref)
    sbatch = get_scheduler(profile.scheduler).merge_options(saved.sbatch, spec.sbatch)
    return with_fields(spec, sets=(*saved.sets, *cli.sets), sbatch=sbatch)
