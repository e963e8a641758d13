"""Checks made before anything is queued. Each check raises an HpclaunchError naming what is wrong.

Checks are registered in CHECKS; other parts (the asset store) add theirs there. Checks listed in
SOFT only warn in a non-strict preflight (a dry run): the script is still rendered and printed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpclaunch.jobspec import JobSpec

Check = Callable[["JobSpec"], None]


def _script_exists(spec: JobSpec) -> None:
    from hpclaunch.errors import ConfigError

    if not spec.script_path.is_file():
        raise ConfigError(f"the recipe's script {spec.recipe.script!r} does not exist in {spec.recipe_dir}",
                          key="script")


def _assets_staged(spec: JobSpec) -> None:
    from hpclaunch.assets.check import check_job_assets

    check_job_assets(spec)


CHECKS: list[Check] = [_script_exists, _assets_staged]
SOFT: set[Check] = {_assets_staged}  # a dry run warns; a real submit refuses


def preflight(spec: JobSpec, *, strict: bool = True) -> list[str]:
    """Run every check. Strict: the first failure raises. Not strict: failures of SOFT checks are
    returned as warnings (one message each) and the others still raise."""
    from hpclaunch.errors import HpclaunchError

    warnings: list[str] = []
    for check in CHECKS:
        try:
            check(spec)
        except HpclaunchError as exc:
            if strict or check not in SOFT:
                raise
            warnings.append(str(exc))
    return warnings
