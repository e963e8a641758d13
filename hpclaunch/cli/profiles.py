"""hpclaunch profiles list|show|check"""

from __future__ import annotations

import click
import yaml

from hpclaunch import cmd
from hpclaunch.cli.tables import print_table
from hpclaunch.config.loader import find_profile, load_profile, profile_files
from hpclaunch.errors import HpclaunchError


@click.group("profiles")
def profiles() -> None:
    """Cluster profiles: list, show, check."""


@profiles.command("list")
def list_cmd() -> None:
    """A table of the profiles found: name, scheduler, accelerator, partitions."""
    rows = []
    for name, path in sorted(profile_files().items()):
        try:
            p = load_profile(str(path))
        except HpclaunchError as exc:
            rows.append((name, "?", "?", f"INVALID: {exc.message.splitlines()[0]}", str(path)))
            continue
        parts = ", ".join(f"{n} ({s.max_nodes}x{s.gpus_per_node} {s.gpu_type or p.accelerator})"
                          for n, s in p.partitions.items())
        rows.append((name, p.scheduler, f"{p.accelerator}/{p.backend}", parts, str(path)))
    print_table(["name", "scheduler", "accelerator", "partitions (max nodes x devices)", "file"], rows)


@profiles.command("show")
@click.argument("profile")
def show_cmd(profile: str) -> None:
    """The resolved profile as YAML (all defaults filled in)."""
    p = load_profile(profile)
    click.echo(f"# {find_profile(profile)}")
    click.echo(yaml.safe_dump(p.model_dump(mode="json"), sort_keys=False), nl=False)


@profiles.command("check")
@click.argument("profile")
def check_cmd(profile: str) -> None:
    """Validate a profile and check what can be checked from here (scheduler commands on PATH)."""
    p = load_profile(profile)
    click.echo(f"{p.name}: valid ({find_profile(profile)})")
    if p.scheduler == "slurm":
        missing = [c for c in ("sbatch", "squeue", "scontrol", "scancel", "sacct") if cmd.which(c) is None]
        click.echo("slurm commands: " + ("all found" if not missing else f"missing {', '.join(missing)}"))


def register(group: click.Group) -> None:
    group.add_command(profiles)
