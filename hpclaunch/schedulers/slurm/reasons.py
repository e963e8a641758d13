"""Slurm's pending and failure reason codes in plain words, with what a user can do about each.

Codes are those squeue ``%r``, ``scontrol show job`` (``Reason=``) and sacct print. Unknown codes are
returned as they are, so a new Slurm version never hides a reason.
"""

from __future__ import annotations

import re

# code -> (what it means, what to do)
REASONS: dict[str, tuple[str, str]] = {
    "None": ("no reason given", ""),
    "Resources": ("waiting for nodes/GPUs to become free", "it starts when running jobs end"),
    "Priority": ("other jobs with higher priority are ahead in the queue", "wait, or ask for fewer nodes "
                 "or less time to fit a backfill slot"),
    "Dependency": ("waiting for the job(s) it depends on to finish", "`squeue -j JOB -o %E` shows which"),
    "DependencyNeverSatisfied": ("a job it depends on failed, so it can never start",
                                 "cancel it (`hpclaunch cancel JOB`) and resubmit without the dependency"),
    "BeginTime": ("its start time (--begin) has not come yet", "`scontrol update jobid=JOB StartTime=now`"),
    "JobHeldUser": ("held by its owner", "`scontrol release JOB`"),
    "JobHeldAdmin": ("held by an administrator", "ask the administrators to release it"),
    "ReqNodeNotAvail": ("a node it needs is down, drained or reserved", "`sinfo -R` shows why; resubmit "
                        "without --nodelist or on another partition"),
    "PartitionNodeLimit": ("it asks for more nodes than the partition allows", "ask for fewer nodes or "
                           "another partition"),
    "PartitionTimeLimit": ("it asks for more time than the partition allows", "lower --time or change "
                           "partition"),
    "PartitionDown": ("the partition is down", "wait, or submit to another partition"),
    "PartitionInactive": ("the partition is inactive", "submit to another partition"),
    "PartitionConfig": ("the request does not fit the partition (GPUs, CPUs or memory per node)",
                        "compare the layout with `hpclaunch profiles show PROFILE`"),
    "BadConstraints": ("no node can ever satisfy the requested resources (more GPUs/CPUs/memory "
                       "than a node has)", "cancel it and resubmit with fewer GPUs per node"),
    "Reservation": ("waiting for its advanced reservation", "check `scontrol show reservation`"),
    "NodeDown": ("a node it needs is down", "`sinfo -R`"),
    "Licenses": ("waiting for licenses", ""),
    "Cleaning": ("being requeued and still cleaning up its previous run", "it becomes eligible shortly"),
    "launch failed requeued held": ("the launch failed and Slurm held it", "`scontrol release JOB`"),
    "InvalidAccount": ("the account is invalid", "pass a valid account in the profile"),
    "InvalidQOS": ("the QOS is invalid", "pass a valid QOS in the profile"),
    "AssocGrpGRES": ("your account's group GPU limit is reached", "wait for your other jobs to end"),
    "AssocGrpCpuLimit": ("your account's group CPU limit is reached", "wait for your other jobs to end"),
    "AssocGrpNodeLimit": ("your account's group node limit is reached", "wait for your other jobs to end"),
    "AssocMaxJobsLimit": ("your account's maximum number of running jobs is reached",
                          "wait for your other jobs to end"),
    "NonZeroExitCode": ("the job exited with a non-zero code", "hpclaunch logs JOB --diagnose"),
    "TimeLimit": ("the job reached its time limit", "ask for more --time or resume from the checkpoint"),
    "OutOfMemory": ("the job ran out of host memory", "ask for more memory per node"),
    "NodeFail": ("a node of the job failed", "resubmit; the job can resume from its checkpoint"),
    "SystemFailure": ("a Slurm system failure", "resubmit"),
    "Prolog": ("its prolog is running", ""),
    "BurstBufferResources": ("waiting for burst-buffer resources", ""),
    # met in the recorded outputs (tests/fixtures/slurm) and on real clusters
    "job requeued in held state": ("requeued and held, by `scontrol requeuehold` or after a failed launch",
                                   "`scontrol release JOB`"),
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions": (
        "a node it needs is down, drained or reserved", "`sinfo -R` shows why; resubmit without --nodelist "
        "or on another partition"),
    "JobArrayTaskLimit": ("the array's limit of tasks running at once (--array=...%N) is reached",
                          "the next task starts when one ends"),
    "JobLaunchFailure": ("Slurm could not launch the job", "`hpclaunch logs JOB --diagnose`; resubmit"),
    "WaitingForScheduling": ("the scheduler has not looked at it yet", "it is evaluated shortly"),
}

# QOS limits: QOSMaxGRESPerUser, QOSGrpNodeLimit, ... share one explanation; so do the account
# (association) limits: AssocGrpMemLimit, AssocMaxWallDurationPerJobLimit, ...
_QOS = re.compile(r"^QOS\w*(Limit|PerUser|PerJob|PerAccount|Minutes)\w*$|^QOS\w+$")
_ASSOC = re.compile(r"^Assoc\w+$")


def _lookup(code: str) -> tuple[str, str] | None:
    if code in REASONS:
        return REASONS[code]
    if _QOS.match(code):
        return (f"a QOS limit is reached ({code})", "wait for your other jobs, or use another QOS")
    if _ASSOC.match(code):
        return (f"a limit of your account is reached ({code})", "wait for your other jobs to end")
    if "held" in code.lower():
        return ("held", "`scontrol release JOB`")
    return None


def _meaning(code: str) -> tuple[str, str] | None:
    """The meaning of a code, also with Slurm's detail after a comma:
    "ReqNodeNotAvail, UnavailableNodes:n[1-2]" -> the ReqNodeNotAvail meaning + ": UnavailableNodes:n[1-2]"."""
    found = _lookup(code)
    if found is None and ", " in code:
        base, detail = code.split(", ", 1)
        found = _lookup(base)
        if found is not None:
            return (f"{found[0]}: {detail}", found[1])
    return found


def explain(code: str | None) -> str | None:
    """`Resources` -> "waiting for nodes/GPUs to become free (it starts when running jobs end)"."""
    if not code or code == "None":
        return None
    found = _meaning(code)
    if found is None:
        return code
    text, todo = found
    return f"{text} ({todo})" if todo else text


def words(code: str | None) -> str | None:
    """Only the meaning, without the advice."""
    if not code or code == "None":
        return None
    found = _meaning(code)
    return found[0] if found else code


def in_words(code: str | None, job_id: str) -> str | None:
    """`explain` with the job id in the advice (``scontrol show job 42``)."""
    text = explain(code)
    return text.replace("JOB", job_id) if text else None
