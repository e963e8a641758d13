"""hpclaunch profiles list|show|check|init"""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from hpclaunch.cli import complete
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option, say
from hpclaunch.cli.tables import print_table


@click.group("profiles", cls=WholeHelpGroup,
             epilog=examples("hpclaunch profiles list", "hpclaunch profiles show guangzhou-a800",
                             "hpclaunch profiles check my-cluster.yaml", "hpclaunch profiles init mycluster"))
def profiles() -> None:
    """Cluster profiles: list, show, check, init."""


@profiles.command("list", epilog=examples("hpclaunch profiles list", "hpclaunch profiles list --json"))
@json_option
def list_cmd(as_json: bool) -> None:
    """A table of the profiles found: name, scheduler, accelerator, partitions."""
    from hpclaunch import api

    found = api.profiles()
    say(found.notes)
    if as_json:
        echo_json(found)
        return
    rows = []
    for entry in found.items:
        p = entry.profile
        if p is None:
            rows.append((entry.name, "?", "?", f"INVALID: {entry.error}", str(entry.file)))
            continue
        parts = ", ".join(f"{n} ({s.max_nodes}x{s.gpus_per_node} {s.gpu_type or p.accelerator})"
                          for n, s in p.partitions.items())
        rows.append((entry.name, p.scheduler, f"{p.accelerator}/{p.backend}", parts, str(entry.file)))
    heading = "partitions (max nodes x devices)"
    print_table(["name", "scheduler", "accelerator", heading, "file"], rows, ids=("name",), shrink=(heading, "file"))


@profiles.command("show", epilog=examples("hpclaunch profiles show guangzhou-a800",
                                          "hpclaunch profiles show ./my-cluster.yaml --json"))
@click.argument("profile", shell_complete=complete.profile)
@json_option
def show_cmd(profile: str, as_json: bool) -> None:
    """The resolved profile as YAML (all defaults filled in)."""
    from hpclaunch import api

    shown = api.profile(profile)
    if as_json:
        echo_json(shown)
        return
    click.echo(f"# {shown.file}")
    click.echo(yaml.safe_dump(shown.data, sort_keys=False), nl=False)


@profiles.command("check", epilog=examples("hpclaunch profiles check dev-slurm",
                                           "hpclaunch profiles check ./my-cluster.yaml",
                                           "hpclaunch profiles check dev-slurm --on-node  # one task on a node too"))
@click.argument("profile", shell_complete=complete.profile)
@click.option("--on-node", is_flag=True,
              help="also run one task on a node of the default partition: the job's modules and Python environment, "
                   "then hpclaunch and the recipes' packages imported, and the devices the node shows")
@json_option
def check_cmd(profile: str, on_node: bool, as_json: bool) -> None:
    """Check a profile against the cluster, from here: the scheduler's commands and partitions (Slurm: sinfo's
    GRES, CPUs, memory, time limit), the module init file and every module, each Python environment.

    Prints a table of check, result and how to fix; exits 1 when any check failed.
    """
    from hpclaunch import api

    done = api.check_profile(profile, on_node=on_node)
    rows, failed = done.checks, done.failed
    if as_json:
        echo_json(done)
    else:
        _print_checks([(c.name, ("ok: " if c.ok else "FAILED: ") + c.result, c.fix) for c in rows])
        click.echo(f"{done.profile}: " + (f"{len(failed)} of {len(rows)} checks failed" if failed else
                                          f"all {len(rows)} checks passed"), err=True)
    if failed:
        raise SystemExit(1)


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
    from hpclaunch import api

    path = api.init_profile(name, partitions, out, force=force)
    click.echo(f"wrote {path}: edit accelerator, backend, python and modules, then "
               f"`hpclaunch profiles check {path}`")


def _print_checks(rows: list[tuple[str, str, str]]) -> None:
    """Piped: tab-separated. On a terminal: the check whole, the result and the fix wrapped in their columns
    (a fix is no use cut short), the failures in red."""
    from hpclaunch.cli.tables import terminal_console

    console = terminal_console()
    if console is None:
        print_table(["check", "result", "how to fix"], rows)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("check", no_wrap=True)
    table.add_column("result", ratio=1, overflow="fold")
    table.add_column("how to fix", ratio=1, overflow="fold")
    for name, result, fix in rows:
        style = "red" if result.startswith("FAILED") else "green"
        table.add_row(escape(name), f"[{style}]{escape(result)}[/]", escape(fix))
    console.print(table)


def register(group: click.Group) -> None:
    group.add_command(profiles)
