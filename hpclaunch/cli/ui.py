"""hpclaunch ui: a read-only web view of your jobs (hpclaunch/ui/), on 127.0.0.1 with a token."""

from __future__ import annotations

import click

from hpclaunch.cli.options import examples
from hpclaunch.errors import ConfigError


@click.command("ui", epilog=examples(
    "hpclaunch ui  # then open the printed http://127.0.0.1:8765/?token=... (Ctrl-C stops it)",
    "hpclaunch ui --port 9000",
    "hpclaunch ui --check  # start, ask it for the jobs page with and without the token, stop",
    "hpclaunch ui --profile dev-slurm-ssh  # the view of the login node's jobs, through an SSH tunnel"))
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="port on 127.0.0.1 [default: the first free one from 8765]")
@click.option("--profile", "-p", "profile", default=None, metavar="PROFILE",
              help="a profile with a login node (remote:): run the view there and reach it through an SSH tunnel")
@click.option("--interval", type=click.IntRange(1, 3600), default=10, show_default=True, metavar="SECONDS",
              help="seconds between the updates of a page while jobs run (one scheduler call each)")
@click.option("--tunnel-port", "tunnel_ports", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="also answer requests to 127.0.0.1:PORT: the laptop's end of an SSH tunnel to this view "
                   "(ssh -L PORT:127.0.0.1:<port>)")
@click.option("--remote-command", default="hpclaunch", show_default=True, metavar="COMMAND",
              help="with --profile: how hpclaunch is started on the login node")
@click.option("--check", is_flag=True, help="start, check that it answers as it should, print the checks, stop")
def ui_cmd(port: int | None, profile: str | None, interval: int, tunnel_ports: tuple[int, ...], remote_command: str,
           check: bool) -> None:
    """Serve a read-only web view of your jobs on 127.0.0.1 (Ctrl-C stops it).

    Pages: the jobs of every profile (state, pending reason and expected start, progress, last loss, goodput); one
    job (its timeline as a Gantt chart, loss and throughput curves that grow while it runs, the goodput ledger,
    recoveries, the diagnosis of a failure, node health, stragglers, checkpoints, each rank's log tail); a sweep
    (its elements side by side, their losses on one plot); the plan of a recipe on a profile; availability.

    It prints a URL with a token: open it (the token is kept in a cookie). Requests without it, from another
    site, or to another host name are refused; nothing is cancelled or submitted from it. On a login node, reach
    it from your laptop through SSH: `ssh -N -L PORT:127.0.0.1:PORT LOGIN-NODE` (docs/ui.md), or run
    `hpclaunch ui --profile REMOTE` on the laptop. Needs the `ui` extra (pip install 'hpclaunch[ui]').
    """
    from hpclaunch.core.extras import need

    need("uvicorn")
    need("starlette")
    if profile is not None:
        if check:
            raise ConfigError("--check checks a view on this machine; it does not go with --profile")
        from hpclaunch.ui.tunnel import remote_view

        for line in remote_view(profile, port=port, interval=interval, command=remote_command):
            click.echo(line)
        return
    from hpclaunch.ui import html, serve

    html.REFRESH_S = interval
    view = serve.make(port, tunnel_ports)
    if check:
        view.start()
        try:
            results = serve.check(view)
        finally:
            view.stop()
        for what, ok in results:
            click.echo(f"{'ok' if ok else 'FAILED'}: {what}")
        if not all(ok for _, ok in results):
            raise click.exceptions.Exit(1)
        return
    click.echo(f"hpclaunch ui: serving your jobs read-only on {serve.HOST}:{view.port}; open")
    click.echo(f"  {view.url()}")
    click.echo("(the token in it is asked for; Ctrl-C stops the view)", err=True)
    try:
        view.run()
    except KeyboardInterrupt:  # uvicorn closes the connections, then raises the signal again: a quiet end
        return


def register(group: click.Group) -> None:
    group.add_command(ui_cmd)
