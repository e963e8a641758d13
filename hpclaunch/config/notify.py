"""The `notify:` section, in profiles and recipes (and `submit --notify`): word when a job ends
(docs/profiles.md#word-when-a-job-ends).

    notify:
      webhook: https://hooks.example.org/hpclaunch   # POST the job's end as JSON
      command: notify-send hpclaunch                 # run with that JSON on stdin and HPCLAUNCH_NOTIFY_* set
      when: [failed]                                 # ended (default: every end), completed or failed
      mail: {type: [END, FAIL], user: me@site.org}   # the scheduler's own mail (Slurm: --mail-type/--mail-user)

The job itself sends the word as it ends (templates/blocks/notify.sh.j2, hpclaunch/runtime/node/notify.py). A
profile's section gives the site's defaults; a recipe's keys (and --set notify.KEY=...) win key by key, and
`submit --notify URL|COMMAND` over both. (`when`, not `on`: YAML 1.1 reads the key `on` as true.)
"""

from typing import Annotated, Literal

from hpclaunch.config import rules
from hpclaunch.config.base import Meta, StrictModel

#: which ends send word: every end, a COMPLETED one, or any other (FAILED, CANCELLED, TIMEOUT, ...)
NotifyWhen = Literal["ended", "completed", "failed"]
#: a list, or one text of comma-separated words (`END,FAIL`); not empty
Words = Meta(extra={"before": rules.word_list, "check": rules.some})


class MailSpec(StrictModel, frozen=True, kw_only=True):
    """The scheduler's own mail, where the scheduler and the site have it (Slurm: sbatch --mail-type/--mail-user)."""

    type: Annotated[tuple[str, ...], Words, Meta(description="the events mailed, e.g. [END, FAIL] "
                                                  "(Slurm's --mail-type: BEGIN, END, FAIL, REQUEUE, ALL, "
                                                  "TIME_LIMIT, ...)")] = ("END", "FAIL")
    user: Annotated[str | None, Meta(extra={"check": rules.one_line}, description="who gets the mail; default: the "
                                     "scheduler's (the submitting user)")] = None


class NotifySpec(StrictModel, frozen=True, kw_only=True):
    """Word when a job ends, from the job itself (webhook, command), and the scheduler's mail."""

    webhook: Annotated[str | None, Meta(extra={"check": rules.webhook_url}, description=(
        "an http(s) URL the job POSTs its end to as JSON (job_id, state, exit_code, cause, run_dir, recipe, "
        "profile, ended_at), 5 s at most; a receiver that is down costs the job one line on stderr"))] = None
    command: Annotated[str | None, Meta(extra={"check": rules.not_blank}, description=(
        "a shell command the job runs as it ends, with that JSON on stdin and HPCLAUNCH_NOTIFY_JOB_ID, _STATE, "
        "_EXIT_CODE, _CAUSE, _RUN_DIR, _RECIPE, _PROFILE, _ENDED_AT set; 5 s at most"))] = None
    when: Annotated[tuple[NotifyWhen, ...] | None, Words, Meta(description=(
        "which ends send word: ended (every end, the default), completed, failed (every end but COMPLETED)"))] = None
    mail: Annotated[MailSpec | None, Meta(description=(
        "the scheduler's mail (Slurm --mail-type/--mail-user); refused on a scheduler without mail"))] = None

    @property
    def fires(self) -> bool:
        """Whether the job itself sends word (a webhook or a command; mail is the scheduler's)."""
        return bool(self.webhook or self.command)
