"""The tools before a job exists: profiles and recipes (list, show), plan, avail, submit (a dry run unless
confirmed; a confirmed one held to the profile's agents budget)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from hpclaunch import api
from hpclaunch.mcp.answer import READ, respond

Recipe = Annotated[str, Field(description="a recipe name (gpt2), a recipe folder (recipes/mixtral), a resolved.yaml "
                                          "of an earlier run, or your own script.py (submit)")]
Profile = Annotated[str | None, Field(description="a cluster profile name (profiles_list) or YAML file; default: "
                                                  "default_profile of the user's config")]
Optional = Annotated[str | None, Field(description="as the CLI option of the same name")]
Sets = Annotated[list[str] | None, Field(description="recipe overrides KEY=VALUE, as --set: [\"train.lr=3e-4\"]")]
Nodes = Annotated[int | None, Field(description="number of nodes")]
Devices = Annotated[int | None, Field(description="devices (ranks) per node")]
Many = Annotated[list[str] | None, Field(description="as the CLI option of the same name, once per item")]

DRY_RUN = "dry run: nothing submitted (the script is in run_dir; call submit again with confirm: true to queue it)"


async def profiles_list() -> CallToolResult:
    """The cluster profiles found: name, file, scheduler, accelerator, backend, partitions (`hpclaunch profiles list
    --json`)."""
    return await respond(api.profiles)


async def profiles_show(profile: Annotated[str, Field(description="a profile name or YAML file")]) -> CallToolResult:
    """One profile with every default filled in (`hpclaunch profiles show PROFILE --json`)."""
    return await respond(api.profile, profile)


async def recipes_list() -> CallToolResult:
    """The recipes found: name, folder, launcher, task, presets, description (`hpclaunch recipes list --json`)."""
    return await respond(api.recipes)


async def recipes_show(recipe: Recipe, preset: Optional = None) -> CallToolResult:
    """One recipe with its defaults filled in and a preset applied (`hpclaunch recipes show RECIPE --json`)."""
    return await respond(api.recipe, recipe, preset)


async def plan(recipe: Recipe, profile: Profile = None, preset: Optional = None, layout: Optional = None,
               nodes: Nodes = None, gpus_per_node: Devices = None, partition: Optional = None,
               sets: Sets = None) -> CallToolResult:
    """Memory per device of a recipe on a profile's partition before anything is queued: parameters, gradients,
    optimizer states, activations, the total against the device's memory, whether it fits ("fits") and the nearest
    settings that do (`hpclaunch plan RECIPE --json`). Resolved exactly as submit resolves it."""
    return await respond(api.plan, recipe, profile, preset=preset, layout=layout, nodes=nodes,
                         gpus_per_node=gpus_per_node, partition=partition, sets=sets or ())


async def avail(profiles: Annotated[list[str] | None, Field(description="profiles to look at; default: the user's "
                                                                        "default profile, else every profile")] = None,
                layout: Annotated[str | None, Field(description="also: when a job of this layout (2n4g: nodes x "
                                                                "devices) would start; nothing is queued")] = None,
                partition: Optional = None, time: Optional = None) -> CallToolResult:
    """Free and total devices per partition of each profile now, nodes idle and down, the cost of a device-hour
    where the profile says it; with layout, when the scheduler would start such a job (`hpclaunch avail
    --json`). Ask before submitting a big job."""
    return await respond(api.avail, profiles or (), layout=layout, partition=partition, time=time)


async def submit(recipe: Recipe, profile: Profile = None, preset: Optional = None, layout: Optional = None,
                 nodes: Nodes = None, gpus_per_node: Devices = None, partition: Optional = None,
                 sets: Sets = None, time: Optional = None, name: Optional = None,
                 launcher: Annotated[str | None, Field(description="with a script.py: torchrun (default) or "
                                                                   "deepspeed")] = None,
                 script_args: Annotated[list[str] | None, Field(description="with a script.py: its own arguments")]
                 = None,
                 sweep: Annotated[list[str] | None, Field(description="KEY=V1,V2,...: one job per value, as a job "
                                                                      "array")] = None,
                 max_parallel: Annotated[int | None, Field(description="with sweep: at most this many at a time")]
                 = None,
                 retries: Annotated[int, Field(description="resubmissions after a node-level failure", ge=0)] = 0,
                 after: Many = None, exclude: Many = None,
                 confirm: Annotated[bool, Field(description="true to queue the job; otherwise a dry run that writes "
                                                           "the run directory and queues nothing")] = False
                 ) -> CallToolResult:
    """Resolve a recipe on a cluster profile, render its job script and, only with confirm: true, queue it
    (`hpclaunch submit RECIPE --json`, a dry run (--dry-run) unless confirm). Answers job_id (null for a dry run),
    run_dir, script, layout, profile, recipe; then call wait (or status). A confirmed submit beyond the profile's
    agents.max_pending / agents.max_running is refused."""
    cli = api.asked(preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, partition=partition,
                    time=time, name=name, sets=sets or (), retries=retries, launcher=launcher,
                    script_args=script_args or None, exclude=exclude or ())
    return await respond(api.submit_request, recipe, profile, cli, sweep or (), max_parallel, dry_run=not confirm,
                         after=after or (), agent=True, note=None if confirm else DRY_RUN)


def register(server: MCPServer) -> None:
    for tool in (profiles_list, profiles_show, recipes_list, recipes_show, avail):
        server.add_tool(tool, annotations=READ)
    server.add_tool(plan, annotations=ToolAnnotations(destructive_hint=False))  # may fetch a config.json
    server.add_tool(submit, annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
