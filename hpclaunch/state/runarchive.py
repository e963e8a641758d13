"""A run as a small archive to carry to another cluster (`hpclaunch export-run JOB`), and the runs `compare`
takes: a job id, a run directory, or such an archive (seed 000's cross-cluster comparison).

The archive holds what a comparison reads, never checkpoints or weights: the metrics of every rank, the
resolved config, provenance.json and the start-up timeline. It unpacks into
$HPCLAUNCH_HOME/imported/<sha256 of the archive>/ once, and is used from there.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.tarsafe import extract_all
from hpclaunch.errors import HpclaunchError, NotFoundError
from hpclaunch.state import registry
from hpclaunch.state.runfiles import PROVENANCE, RESOLVED, TIMELINE, RunFiles

SUFFIX = ".hpclaunch-run.tar.gz"
MEMBERS = (RESOLVED, PROVENANCE, TIMELINE)  # plus metrics/


@dataclass(frozen=True)
class Run:
    label: str  # what the user typed, for titles and legends: a job id, a folder or an archive's name
    run_dir: Path
    record: registry.JobRecord | None  # None for a folder or an archive


def export_run(run_dir: Path, out: Path) -> Path:
    """Write the archive of `run_dir` to `out` (a file, or a folder to put NAME.hpclaunch-run.tar.gz in)."""
    files = RunFiles(run_dir)
    metrics = sorted(files.metrics.glob("rank-*.jsonl")) if files.metrics.is_dir() else []
    if not metrics:
        raise NotFoundError("metrics", str(files.metrics),
                            hint="the run has written no metrics yet: nothing to compare")
    if out.is_dir():
        out = out / f"{run_dir.name}{SUFFIX}"
    tmp = out.with_name(f".{out.name}.part")
    with tarfile.open(tmp, "w:gz") as tar:
        for name in MEMBERS:
            if (run_dir / name).is_file():
                tar.add(run_dir / name, arcname=f"{run_dir.name}/{name}")
        for path in metrics:
            tar.add(path, arcname=f"{run_dir.name}/metrics/{path.name}")
    os.replace(tmp, out)
    return out


def _unpack(archive: Path) -> Path:
    data = archive.read_bytes()
    target = hpclaunch_home() / "imported" / hashlib.sha256(data).hexdigest()[:16]
    if target.is_dir():
        return next(p for p in target.iterdir() if p.is_dir())
    tmp = target.with_name(target.name + ".part")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            tops = {Path(m.name).parts[0] for m in members}
            allowed = set(MEMBERS) | {"metrics"}
            bad = [m.name for m in members if not (m.isfile() or m.isdir()) or len(tops) != 1
                   or ".." in Path(m.name).parts or Path(m.name).is_absolute()
                   or (len(Path(m.name).parts) > 1 and Path(m.name).parts[1] not in allowed)]
            if bad or not members:
                raise HpclaunchError(f"{archive}: not an archive of `hpclaunch export-run` (unexpected {bad[:3]})",
                                     hint="make one with `hpclaunch export-run JOB` on the cluster that ran it")
            extract_all(tar, tmp)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise HpclaunchError(f"{archive}: cannot read it as a .tar.gz ({exc})",
                             hint="make one with `hpclaunch export-run JOB` on the cluster that ran it") from None
    os.replace(tmp, target)
    return next(p for p in target.iterdir() if p.is_dir())


def open_run(ref: str) -> Run:
    """A job id (the registry), a run directory (one with resolved.yaml or metrics/) or an export-run archive."""
    path = Path(ref).expanduser()
    if path.is_file() and path.name.endswith((".tar.gz", ".tgz")):
        return Run(path.name.removesuffix(SUFFIX), _unpack(path), None)
    if path.is_dir() and ((path / RESOLVED).is_file() or (path / "metrics").is_dir()):
        return Run(path.name, path.resolve(), None)
    record = registry.get(ref)
    return Run(ref, Path(record.run_dir), record)
