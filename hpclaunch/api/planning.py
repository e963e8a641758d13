"""`plan`: a recipe's memory per device on a profile's partition, before anything is queued (hpclaunch/plan/ does
the arithmetic); resolved exactly as `submit` resolves it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpclaunch.plan.job import Plan


@dataclass(frozen=True)
class Planned:
    """The plan (its JSON: `plan --json`) and what was said making it (a config.json fetched)."""

    plan: Plan
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.plan.to_json()

    def lines(self) -> list[str]:
        return self.plan.lines()


def plan(recipe: str, profile: str | None = None, *, preset: str | None = None, layout: str | None = None,
         nodes: int | None = None, gpus_per_node: int | None = None, partition: str | None = None,
         sets: Sequence[str] = (), endpoints: Sequence[str] = (), fetch: bool = True) -> Planned:
    """Memory per device of `recipe` on `profile` (`sets`: ``--set`` words, "KEY=VALUE"). A hub model's
    config.json that the store lacks is fetched alone from `endpoints` (default: the profile's mirror, then its
    endpoints) into the store; not with `fetch=False` (the web view's plan reads only what is here)."""
    from hpclaunch.api.submitting import asked, resolve_spec
    from hpclaunch.plan import fetch_config, plan_job

    cli = asked(preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, partition=partition,
                sets=sets)
    spec = resolve_spec(recipe, profile, cli)
    fetched = fetch_config(spec, tuple(endpoints)) if fetch else None
    return Planned(plan_job(spec), (f"hpclaunch: {fetched}",) if fetched else ())
