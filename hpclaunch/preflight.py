"""Checks made before anything is queued. Each check raises an HpclaunchError naming what is wrong.

Checks are registered in CHECKS; other parts (the asset store) add theirs there.
"""

from __future__ import annotations

from collections.abc import Callable

from hpclaunch.jobspec import JobSpec

Check = Callable[[JobSpec], None]


def _script_exists(spec: JobSpec) -> None:
    from hpclaunch.errors import ConfigError

    if not spec.script_path.is_file():
        raise ConfigError(f"the recipe's script {spec.recipe.script!r} does not exist in {spec.recipe_dir}",
                          key="script")


def _assets_staged(spec: JobSpec) -> None:
    from hpclaunch.assets.check import check_job_assets

    check_job_assets(spec)


CHECKS: list[Check] = [_script_exists, _assets_staged]


def preflight(spec: JobSpec) -> None:
    for check in CHECKS:
        check(spec)
