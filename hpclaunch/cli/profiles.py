"""hpclaunch profiles list|show|check|init"""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from hpclaunch.cli import complete
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option
from hpclaunch.cli.tables import print_table
from hpclaunch.config.loader import find_profile, load_profile, profile_files
from hpclaunch.config.profile import Profile
from hpclaunch.config.yamlfile import UnreadableFile
from hpclaunch.core import cmd
from hpclaunch.errors import HpclaunchError


@click.group("profiles", cls=WholeHelpGroup,
             epilog=examples("hpclaunch profiles list", "hpclaunch profiles show guangzhou-a800",
                             "hpclaunch profiles check my-cluster.yaml", "hpclaunch profiles init mycluster"))
def profiles() -> None:
    """Cluster profiles: list, show, check, init."""


@profiles.command("list", epilog=examples("hpclaunch profiles list", "hpclaunch profiles list --json"))
@json_option
def list_cmd(as_json: bool) -> None:
    """A table of the profiles found: name, scheduler, accelerator, partitions."""
    found: list[tuple[str, Path, Profile | None, str | None]] = []  # name, file, profile or why it is invalid
    for name, path in sorted(profile_files().items()):
        try:
            found.append((name, path, load_profile(str(path)), None))
        except UnreadableFile as exc:
            click.echo(f"hpclaunch: warning: skipped {exc.message}", err=True)
        except HpclaunchError as exc:
            found.append((name, path, None, exc.message.splitlines()[0]))
    if as_json:
        echo_json([{"name": name, "file": str(path), "error": error} if p is None else
                   {"name": name, "file": str(path), "scheduler": p.scheduler, "accelerator": p.accelerator,
                    "backend": p.backend, "partitions": {n: s.model_dump(mode="json") for n, s in p.partitions.items()}}
                   for name, path, p, error in found])
        return
    rows = []
    for name, path, p, error in found:
        if p is None:
            rows.append((name, "?", "?", f"INVALID: {error}", str(path)))
            continue
        parts = ", ".join(f"{n} ({s.max_nodes}x{s.gpus_per_node} {s.gpu_type or p.accelerator})"
                          for n, s in p.partitions.items())
        rows.append((name, p.scheduler, f"{p.accelerator}/{p.backend}", parts, str(path)))
    heading = "partitions (max nodes x devices)"
    print_table(["name", "scheduler", "accelerator", heading, "file"], rows, ids=("name",), shrink=(heading, "file"))


@profiles.command("show", epilog=examples("hpclaunch profiles show guangzhou-a800",
                                          "hpclaunch profiles show ./my-cluster.yaml --json"))
@click.argument("profile", shell_complete=complete.profile)
@json_option
def show_cmd(profile: str, as_json: bool) -> None:
    """The resolved profile as YAML (all defaults filled in)."""
    p = load_profile(profile)
    if as_json:
        echo_json(p.model_dump(mode="json"))
        return
    click.echo(f"# {find_profile(profile)}")
    click.echo(yaml.safe_dump(p.model_dump(mode="json"), sort_keys=False), nl=False)


@profiles.command("check", epilog=examples("hpclaunch profiles check dev-slurm",
                                           "hpclaunch profiles check ./my-cluster.yaml"))
@click.argument("profile", shell_complete=complete.profile)
def check_cmd(profile: str) -> None:
    """Validate a profile and check what can be checked from here (scheduler commands on PATH)."""
    p = load_profile(profile)
    click.echo(f"{p.name}: valid ({find_profile(profile)})")
    if p.scheduler == "slurm":
        missing = [c for c in ("sbatch", "squeue", "scontrol", "scancel", "sacct") if cmd.which(c) is None]
        click.echo("slurm commands: " + ("all found" if not missing else f"missing {', '.join(missing)}"))


@profiles.command("init", epilog=examples(
    "hpclaunch profiles init mycluster  # -> ~/.config/hpclaunch/cluster_profiles/mycluster.yaml",
    "hpclaunch profiles init mycluster --partition gpu --partition debug -o mycluster.yaml"))
@click.argument("name")
@click.option("--partition", "partitions", multiple=True, help="only this partition (repeatable; default: all)")
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the file to write (default: ~/.config/hpclaunch/cluster_profiles/NAME.yaml)")
@click.option("--force", is_flag=True, help="overwrite an existing file")
def init_cmd(name: str, partitions: tuple[str, ...], out: Path | None, force: bool) -> None:
    """Write a profile for this Slurm cluster from scontrol (partitions, GPUs, CPUs, memory, limits)."""
    from hpclaunch.schedulers import get_scheduler

    path = get_scheduler("slurm").write_profile(name, partitions, out, force=force)
    click.echo(f"wrote {path}: edit accelerator, backend, python and modules, then "
               f"`hpclaunch profiles check {path}`")


def register(group: click.Group) -> None:
    group.add_command(profiles)
