"""hpclaunch resume JOB [--from-scratch] [--exclude NODE[,NODE]] [--follow] (hpclaunch/jobs/resume.py does the work)"""

from __future__ import annotations

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, exclude_option, json_option


@click.command("resume", epilog=examples(
    "hpclaunch resume 12345",
    "hpclaunch resume 12345 --exclude node7  # without the node it failed on (Slurm)",
    "hpclaunch resume local-3 --follow",
    "hpclaunch resume 12345 --from-scratch  # no checkpoint: start its resolved.yaml over",
    "NEXT=$(hpclaunch resume 12345 --parsable)"))
@click.argument("job", shell_complete=complete.job)
@click.option("--from-scratch", is_flag=True,
              help="start it over from its resolved.yaml in a new run directory, instead of from its checkpoint")
@exclude_option
@click.option("--follow", "-f", is_flag=True, help="wait for the new job and stream its output")
@click.option("--parsable", is_flag=True, help="print only the new job's id")
@json_option
def resume_cmd(job: str, from_scratch: bool, exclude: tuple[str, ...], follow: bool, parsable: bool,
               as_json: bool) -> None:
    """Go on from the newest checkpoint of JOB (cancelled, failed, timed out, preempted) as a new job.

    The same job script is queued again in the same run directory, with the same resolved.yaml: the job resumes
    from RUN_DIR/checkpoints/step-* by itself, its logs numbered as a later restart. The new job is recorded as
    JOB's continuation (`hpclaunch status` and `hpclaunch jobs` show the chain). A job that was retried or resumed
    before goes on from the newest job of its chain. Refused (exit 2): a job still queued or running, one that
    completed, and one with no checkpoint or whose script does not resume, unless --from-scratch.
    """
    from hpclaunch import api

    if parsable and as_json:
        raise click.UsageError("--parsable prints the new job's id: not with --json")
    done = api.resume(job, from_scratch=from_scratch, exclude=exclude)
    if parsable:
        click.echo(done.job_id)
    elif as_json:
        echo_json(done)
    else:
        click.echo(done.message)
        click.echo(f"run directory: {done.run_dir}")
    if follow:
        from hpclaunch.cli.follow import follow_to_end

        follow_to_end(done.job_id, done.run_dir)


def register(group: click.Group) -> None:
    group.add_command(resume_cmd)
