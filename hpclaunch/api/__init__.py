"""The one face of hpclaunch: one function per command, each returning a typed result and printing nothing.

The CLI (hpclaunch/cli/) prints these results: tables and words for people, JSON through the one encoder
(api/encode.py) for scripts. The MCP server (hpclaunch/mcp/) answers with the same results, and Python users get
the same objects (docs/python-api.md). Every failure is an `HpclaunchError` (hpclaunch/errors.py).

    before a job     profiles, profile, recipes, recipe (catalog.py); plan (planning.py); avail (avail.py)
    submitting       submit, submit_request, resolve_spec (submitting.py) -> Job (job.py)
    jobs             records, status, jobs, cancel (tracking.py); wait (waiting.py); job(ID) -> Job
    what they wrote  logs, diagnose (reading.py); report, compare (reporting.py); curves (series.py)

May import: jobs, report, logs, submission, plan, assets, schedulers, config, state, core, errors (every
stage below it), each inside the function that needs it where it can, so that `import hpclaunch.api` stays light
(no torch, no Jinja, no YAML at import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpclaunch.api import encode
from hpclaunch.api.avail import Availability, avail
from hpclaunch.api.catalog import (
    ProfileCheck,
    ProfileEntry,
    RecipeEntry,
    check_profile,
    init_profile,
    profile,
    profiles,
    recipe,
    recipes,
)
from hpclaunch.api.housekeeping import (
    CheckpointExport,
    RunExport,
    Suspect,
    clean_find,
    clean_remove,
    clear_suspects,
    export,
    export_run,
    resume,
    schema,
    suspects,
    sync_find,
    sync_upload,
)
from hpclaunch.api.job import Job, JobTimeout, job
from hpclaunch.api.planning import Planned, plan
from hpclaunch.api.reading import Logs, diagnose, line_json, logs, pattern, record_of
from hpclaunch.api.reporting import (
    ENERGY_HEADERS,
    Comparison,
    Report,
    SweepComparison,
    SweepReport,
    compare,
    fmt,
    report,
)
from hpclaunch.api.results import Listed, Shown
from hpclaunch.api.series import Curves, curves
from hpclaunch.api.submitting import asked, resolve_spec, submit, submit_request
from hpclaunch.api.tracking import RECENT, Cancellation, Status, cancel, jobs, records, states, status
from hpclaunch.api.waiting import Waited, wait

if TYPE_CHECKING:
    from hpclaunch.jobs.sync import JobRuns
    from hpclaunch.logs.follow import JobLost
    from hpclaunch.schedulers.base import JobStatus

__all__ = ["Availability", "Cancellation", "CheckpointExport", "Comparison", "Curves", "ENERGY_HEADERS", "Job",
           "JobLost", "JobRuns", "JobStatus", "JobTimeout", "Listed", "Logs", "Planned", "ProfileCheck",
           "ProfileEntry", "RECENT", "RecipeEntry", "Report", "RunExport", "Shown", "Status", "Suspect",
           "SweepComparison", "SweepReport", "Waited", "asked", "avail", "cancel", "check_profile", "clean_find",
           "clean_remove", "clear_suspects", "compare", "curves", "diagnose", "encode", "export", "export_run", "fmt",
           "init_profile", "job", "jobs", "line_json", "logs", "pattern", "plan", "profile", "profiles", "recipe",
           "recipes", "record_of", "records", "report", "resolve_spec", "resume", "schema", "states", "status",
           "submit", "submit_request", "suspects", "sync_find", "sync_upload", "wait"]


_LAZY = {"JobStatus": "hpclaunch.schedulers.base", "JobLost": "hpclaunch.logs.follow", "JobRuns": "hpclaunch.jobs.sync"}


def __getattr__(name: str) -> Any:
    """The types the results carry (a job's state as the scheduler says it, ...) on first use: their modules stay
    unimported until a result needs them."""
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpclaunch.api' has no attribute {name!r}")
