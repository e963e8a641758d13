"""Where a job's data goes, checked before it is queued: the checkpoints the memory plan predicts must fit the
free space (and the quota, where `lfs quota` answers) of the run root; a cluster job whose run directory lands
under $HOME (often small and quota'd) is said so, with the profile key to set. docs/profiles.md#where-data-goes."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.core import cmd
from hpclaunch.core.backends import can
from hpclaunch.errors import HpclaunchError
from hpclaunch.state.runfiles import CHECKPOINTS_KEPT

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec



class NoRoom(HpclaunchError):
    """The checkpoints a job will write cannot fit where its run directory goes."""


def _existing(path: Path) -> Path:
    """The nearest folder that exists: the run root may not have been made yet."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def lustre_room(path: Path) -> int | None:
    """Bytes left of the user's Lustre quota on `path`'s filesystem (`lfs quota -q -u USER PATH`: used and
    limit in KiB); None where there is no lfs, no limit or no answer."""
    if cmd.which("lfs") is None:
        return None
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or str(os.getuid())
    proc = cmd.run(["lfs", "quota", "-q", "-u", user, str(path)], timeout=30, check=False)
    numbers = re.findall(r"\s(\d+)\*?(?=\s)", " " + proc.stdout.replace("\n", " ") + " ")
    if proc.returncode != 0 or len(numbers) < 3:
        return None
    used_kib, _soft, hard_kib = (int(n) for n in numbers[:3])
    return (hard_kib - used_kib) * 1024 if hard_kib > 0 else None


def room(path: Path) -> tuple[int, str]:
    """(bytes that can still be written under `path`, what limits it): the smaller of free space and quota."""
    where = _existing(path)
    free = shutil.disk_usage(where).free
    quota = lustre_room(where)
    if quota is not None and quota < free:
        return quota, f"the quota left on {where} (lfs quota)"
    return free, f"the free space on {where}"


def planned_checkpoint_bytes(spec: JobSpec) -> float | None:
    """The memory plan's size of one checkpoint, None when no plan can be made here (the model's config is not
    staged, or the recipe names no model)."""
    from hpclaunch.errors import NoPlan
    from hpclaunch.plan import plan_job

    if spec.recipe.model is None:
        return None
    try:
        return plan_job(spec).checkpoint_bytes
    except NoPlan:
        return None


def with_checkpoint_size(spec: JobSpec) -> JobSpec:
    """The spec with the plan's checkpoint size, from which the job estimates its first save's time: an estimate
    only, so a plan that cannot be made (which preflight reports, unless --skip-fit-check) leaves it unset."""
    from hpclaunch.config.base import replace
    from hpclaunch.errors import HpclaunchError

    try:
        size = planned_checkpoint_bytes(spec)
    except HpclaunchError:
        size = None
    return replace(spec, checkpoint=replace(spec.checkpoint, plan_bytes=size))


def at_once(spec: JobSpec) -> tuple[int, str]:
    """The most checkpoints of a run on its disk at once, and why: the kept ones and the one being written, or
    fewer when the run saves fewer (its periodic saves, the final one, one at a time limit)."""
    t = spec.recipe.train
    periodic = t.max_steps // t.save_every if t.save_every else 0
    if periodic + 2 > CHECKPOINTS_KEPT:
        return CHECKPOINTS_KEPT + 1, f"{CHECKPOINTS_KEPT} kept + 1 being written"
    saves = f"{periodic} periodic, " if periodic else ""
    return periodic + 2, f"{periodic + 2} saves at most: {saves}the final one and one at a time limit"


def checkpoints_fit(spec: JobSpec) -> None:
    """NoRoom when (kept + 1) checkpoints of the plan's size exceed the room of the run root. Silent when no plan
    can be made here (the model's config is not staged)."""
    from hpclaunch.plan.job import size_text
    from hpclaunch.submission.rundir import run_root

    one = planned_checkpoint_bytes(spec)
    if one is None:
        return
    count, why = at_once(spec)
    need = one * count
    root = run_root(spec)
    left, what = room(root)
    if need > left:
        raise NoRoom(f"{spec.recipe.name}'s checkpoints need {size_text(need)} ({why}, "
                     f"{size_text(one)} each by the memory plan) but {what} is {size_text(left)} "
                     f"(run root {root})",
                     hint="set the profile's run_root to a scratch filesystem with room (run_root: "
                          "$SCRATCH/hpclaunch/runs), or free space there; queue it anyway with --skip-fit-check")


def _is_under_home(path: Path) -> bool:
    home, where = Path.home().resolve(), path.resolve()
    return where == home or home in where.parents


def under_home(spec: JobSpec) -> list[str]:
    """A note when a cluster job's run directory (its checkpoints) would go under $HOME, and when its asset store
    would, by default (no assets.store in the profile, no scratch variable on the login node)."""
    from hpclaunch.assets.store import store_root
    from hpclaunch.config.profile import asset_store
    from hpclaunch.submission.rundir import run_root

    if not can(spec.profile.scheduler, "site_scratch"):
        return []
    notes, root = [], run_root(spec)
    if _is_under_home(root):
        notes.append(f"run directories and checkpoints go to {root}, under $HOME (often small and quota'd on a "
                     f"cluster): set run_root in profile {spec.profile.name} to a scratch filesystem "
                     "(run_root: $SCRATCH/hpclaunch/runs)")
    store = store_root(asset_store(spec.profile))
    if not spec.profile.assets.store and _is_under_home(store):
        notes.append(f"the asset store (models, datasets) is {store}, under $HOME: set assets.store in profile "
                     f"{spec.profile.name} to a project or scratch filesystem (store: $SCRATCH/hpclaunch/assets)")
    return notes
