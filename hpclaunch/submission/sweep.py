"""Sweeps: ``submit --sweep KEY=V1,V2,... [--sweep KEY2=...] [--max-parallel K]`` (docs/sweeps.md).

The cartesian product of the values becomes one job array. Element i is resolved exactly as
``submit --set KEY=Vi`` would resolve it, into its own JobSpec and run directory
(``SWEEP_DIR/element-<i>/``, resubmittable alone from its resolved.yaml). The sweep folder holds the array's
script, which hands over to the job script of the element its array task names. Every element is resolved,
checked and rendered before anything is queued: one bad value refuses the whole sweep, naming the element.

Registry: one record per element (job id ``<array>_<i>``, e.g. ``12345_3``; its run directory;
``sweep={"id", "index", "values"}``) and one for the sweep (the array's id, the sweep folder,
``sweep={"id", "keys", "elements", "max_parallel"}``). Every command that takes a job id takes an
element's id as it is; ``jobs``, ``status``, ``report`` and ``compare`` show a sweep's id as its elements.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import SweepFiles
from hpclaunch.state.sweeps import label

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.submission.resolve import CliOverrides
    from hpclaunch.submission.rundir import RecipeCopy

MAX_ELEMENTS = 1000  # Slurm's default MaxArraySize is 1001 (tasks 0-1000)
_EXAMPLE = "e.g. --sweep train.lr=1e-4,3e-4"


@dataclass(frozen=True)
class Axis:
    """One ``--sweep KEY=V1,V2,...``: the values as typed (each read as ``--set KEY=V`` reads it)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Element:
    index: int
    values: dict[str, str]
    spec: JobSpec  # as the job sees it (the recipe copy in its run directory) once written
    run_dir: Path

    @property
    def label(self) -> str:
        return label(self.values)


@dataclass(frozen=True)
class SweepSubmission:
    sweep_dir: Path
    script: str
    elements: tuple[Element, ...]
    keys: tuple[str, ...]
    max_parallel: int | None
    job_id: str | None  # the array's id; None for a dry run
    warnings: tuple[str, ...] = ()

    @property
    def script_path(self) -> Path:
        return SweepFiles(self.sweep_dir).script

    def element_id(self, index: int) -> str:
        return f"{self.job_id}_{index}"


def _split(raw: str) -> list[str]:
    """Split on the commas outside brackets and quotes: ``[1,2],[3,4]`` is two values."""
    out, depth, quote, cur = [], 0, "", ""
    for ch in raw:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    return [*out, cur]


def parse_axes(items: Sequence[str], sets: Sequence[str] = ()) -> list[Axis]:
    """The ``--sweep`` options, checked: KEY=V1,V2,..., no empty or repeated value, no key twice, no key
    that ``--set`` fixes as well."""
    from hpclaunch.submission.resolve import parse_set

    axes: list[Axis] = []
    fixed = {s.split("=", 1)[0].strip() for s in sets}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--sweep {item!r}: expected KEY=V1,V2,..., {_EXAMPLE}")
        key, raw = item.split("=", 1)
        key = key.strip()
        parse_set(f"{key}=0")  # the key's own check and message, as for --set
        values = [v.strip() for v in _split(raw)]
        if "" in values:
            raise ConfigError(f"--sweep {item!r}: an empty value (two commas in a row, or one at an end); {_EXAMPLE}")
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ConfigError(f"--sweep {item!r}: {', '.join(repeated)} given twice: each value runs once")
        if key in fixed:
            raise ConfigError(f"--sweep {key}=... and --set {key}=... both set {key}",
                              hint="drop one of them: the sweep gives each element its own value")
        if any(a.key == key for a in axes):
            raise ConfigError(f"--sweep {key}=... given twice",
                              hint="list all its values in one --sweep, comma-separated")
        axes.append(Axis(key, tuple(values)))
    return axes


def product(axes: Sequence[Axis]) -> list[dict[str, str]]:
    """Every combination of the axes' values, the last axis changing fastest: element i is the i-th."""
    combos = [dict(zip([a.key for a in axes], combo, strict=True)) for combo in
              itertools.product(*(a.values for a in axes))]
    if len(combos) > MAX_ELEMENTS:
        sizes = " x ".join(str(len(a.values)) for a in axes)
        raise ConfigError(f"the sweep has {sizes} = {len(combos)} elements; one job array holds at most {MAX_ELEMENTS}",
                          hint="split it into several sweeps")
    return combos


def _element_error(exc: HpclaunchError, index: int, count: int, values: dict[str, str]) -> ConfigError:
    return ConfigError(f"sweep element {index} of {count} ({label(values)}): {exc.message}; nothing was submitted",
                       hint=exc.hint)


def resolve_elements(recipe: str, profile: str, cli: CliOverrides, axes: Sequence[Axis]) -> list[tuple[dict, JobSpec]]:
    """Each element's values and JobSpec, resolved as ``--set KEY=VALUE`` for its values would resolve it."""
    from hpclaunch.submission.resolve import resolve

    combos = product(axes)
    out = []
    for index, values in enumerate(combos):
        sets = (*cli.sets, *(f"{k}={v}" for k, v in values.items()))
        try:
            spec = resolve(recipe, profile, replace(cli, sets=sets))
        except HpclaunchError as exc:
            raise _element_error(exc, index, len(combos), values) from None
        out.append((values, spec))
    return out


def dry_run(elements: Sequence[tuple[dict, JobSpec]], max_parallel: int | None, *, check_scheduler: bool = False,
            strict: bool = False, skip_fit_check: bool = False) -> SweepSubmission:
    """Check and render every element, then write the sweep folder (complete or not at all)."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.submission.placement import once, scheduler_reader, with_placement
    from hpclaunch.submission.preflight import PLAN_CHECKS, preflight
    from hpclaunch.submission.render import render, render_sweep
    from hpclaunch.submission.rundir import new_sweep_dir, recipe_copy, with_recipe_copy, write_sweep_dir

    first = elements[0][1]
    if first.profile.remote is not None:
        from hpclaunch.errors import ConfigError

        raise ConfigError(f"profile {first.profile.name} submits over SSH (remote:): a sweep is not submitted over "
                          "SSH yet", hint="submit each value with --set, or run hpclaunch on the login node")
    if check_scheduler:
        get_scheduler(first.profile.scheduler).check_available()
    sweep_dir = new_sweep_dir(first)
    folder = SweepFiles(sweep_dir)
    keys = tuple(elements[0][0])
    warnings: dict[str, None] = {}
    done: list[Element] = []
    written: list[tuple[Path, dict[str, str], RecipeCopy]] = []
    read = once(scheduler_reader(first))  # the topology, asked at most once for all elements
    for index, (values, spec) in enumerate(elements):
        run_dir = folder.element(index)
        try:
            skip = PLAN_CHECKS if skip_fit_check else ()
            warnings.update(dict.fromkeys(preflight(spec, strict=strict, skip=skip)))
            job_spec = with_recipe_copy(with_placement(spec, read), run_dir)
            rendered = render(job_spec, run_dir)
        except HpclaunchError as exc:
            raise _element_error(exc, index, len(elements), values) from None
        done.append(Element(index, values, job_spec, run_dir))
        written.append((run_dir, rendered.files, recipe_copy(spec)))
    script = render_sweep([e.spec for e in done], [e.label for e in done], keys, sweep_dir, max_parallel)
    info = {"keys": list(keys), "max_parallel": max_parallel,
            "elements": [{"index": e.index, "values": e.values, "run_dir": str(e.run_dir)} for e in done]}
    write_sweep_dir(sweep_dir, {folder.script.name: script, folder.info.name: json.dumps(info, indent=2) + "\n"},
                    written)
    return SweepSubmission(sweep_dir, script, tuple(done), keys, max_parallel, None, tuple(warnings))


def submit(elements: Sequence[tuple[dict, JobSpec]], max_parallel: int | None,
           after: Sequence[str] = (), *, skip_fit_check: bool = False) -> SweepSubmission:
    """dry_run + one job array (waiting for the jobs of `after`); records the sweep and each element. A refused
    array leaves nothing behind."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state import registry
    from hpclaunch.submission.provenance import record_submit
    from hpclaunch.submission.rundir import remove_run_dir
    from hpclaunch.submission.submit import job_record

    scheduler = get_scheduler(elements[0][1].profile.scheduler)
    scheduler.dependency_options(after)
    prepared = dry_run(elements, max_parallel, check_scheduler=True, strict=True, skip_fit_check=skip_fit_check)
    first = prepared.elements[0].spec
    try:
        for (_, spec), e in zip(elements, prepared.elements, strict=True):
            record_submit(spec, e.run_dir)
        asked = time.time()
        job_id = scheduler.submit_array(prepared.script_path, prepared.sweep_dir, len(prepared.elements), max_parallel,
                                        after)
    except BaseException:
        remove_run_dir(prepared.sweep_dir)
        raise
    done = replace(prepared, job_id=job_id)
    for e in done.elements:
        timeline.submitted(e.run_dir, done.element_id(e.index), asked)
        registry.add(job_record(e.spec, done.element_id(e.index), scheduler.name, e.run_dir,
                                {"id": job_id, "index": e.index, "values": e.values}))
    registry.add(job_record(first, job_id, scheduler.name, done.sweep_dir,
                            {"id": job_id, "keys": list(done.keys), "max_parallel": max_parallel,
                             "elements": [done.element_id(e.index) for e in done.elements]}))
    return done
