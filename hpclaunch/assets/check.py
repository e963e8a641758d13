"""Refuse a job whose hub assets are not staged, before it is queued (rule 7 of the design).

Cheap: presence, size and mtime against the manifest, no hashing (a model may be 100 GB); a file
modified since staging is refused and `hpclaunch assets verify` rehashes it once. Sources that the
runtime builds itself (model ``generate``, tokenizer ``train``, dataset ``builtin``) are not checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpclaunch.assets.requests import AssetRequest, requests_for_spec
from hpclaunch.assets.store import asset_path, check_files, read_manifest, store_root
from hpclaunch.config.profile import asset_store
from hpclaunch.errors import AssetError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


def asset_problems(spec: JobSpec) -> list[tuple[AssetRequest, str]]:
    """(request, what is wrong) for every hub asset of the job that is not usable from the store."""
    store = store_root(asset_store(spec.profile))
    out = []
    for req in requests_for_spec(spec):
        folder = asset_path(store, req.kind, req.repo_id, req.revision)
        manifest = read_manifest(folder)
        what = f"{req.kind} {req.repo_id!r} (revision {req.revision})"
        if manifest is None:
            state = "is not staged" if not folder.exists() else "is incomplete (no manifest)"
            out.append((req, f"{what} {state}: {folder}"))
            continue
        missing = sorted((req.parts - set(manifest.parts)) | (req.configs - set(manifest.configs)))
        if missing:
            only = " (only its config, which `hpclaunch plan` fetched)" if manifest.parts == ["config"] else ""
            without = ", ".join(m or "(default config)" for m in missing)
            out.append((req, f"{what} is staged without {without}{only}: {folder}"))
            continue
        problems = check_files(folder, manifest, hash_modified=False)  # cheap: no hashing
        if problems:
            listed = "; ".join(str(p) for p in problems[:5]) + (" ..." if len(problems) > 5 else "")
            out.append((req, f"{what} is incomplete or corrupt: {listed}"))
    return out


def stage_command(spec: JobSpec, requests: list[AssetRequest]) -> str:
    args = " ".join(q.cli_arg() for q in requests)
    return f"hpclaunch stage-assets {args} --profile {spec.profile_arg}"


def check_job_assets(spec: JobSpec) -> None:
    """Raise AssetError when a hub asset the job needs is missing, incomplete or corrupt."""
    found = asset_problems(spec)
    if not found:
        return
    lines = "\n  ".join(msg for _, msg in found)
    fix = f"run `{stage_command(spec, [q for q, _ in found])}`"
    if all("modified since" in msg for _, msg in found):
        fix = (
            f"run `hpclaunch assets verify --profile {spec.profile_arg}` (it rehashes the "
            f"files and accepts those whose sha256 still matches), or {fix}"
        )
    raise AssetError(
        f"the job's assets are not ready in the store {asset_store(spec.profile)}:\n  {lines}",
        hint=f"{fix} (staging needs network; add --pack FILE there and `hpclaunch assets unpack FILE` "
        "here to carry assets to a cluster without it)",
    )
