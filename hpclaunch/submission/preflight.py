"""Checks made before anything is queued. Each check raises an HpclaunchError naming what is wrong.

Checks are registered in CHECKS; other parts (the asset store) add theirs there. Checks listed in
SOFT only warn in a non-strict preflight (a dry run): the script is still rendered and printed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from hpclaunch.config.profile import asset_store
from hpclaunch.submission import envversions

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

Check = Callable[["JobSpec"], None]


def _script_exists(spec: JobSpec) -> None:
    from hpclaunch.errors import ConfigError

    try:
        found = spec.script_path.is_file()
    except OSError as exc:  # a name the file system refuses (too long: ENAMETOOLONG)
        raise ConfigError(f"the recipe's script {spec.recipe.script!r} cannot be a file in {spec.recipe_dir}: "
                          f"{exc.strerror}", key="script") from None
    if not found:
        raise ConfigError(f"the recipe's script {spec.recipe.script!r} does not exist in {spec.recipe_dir}",
                          key="script")


SKIP_ENV_CHECK = "HPCLAUNCH_NO_ENV_CHECK"


def _python_env_visible(spec: JobSpec) -> None:
    """The venv's activate script (or the conda init file) exists, where this machine can tell: the path is
    absolute and its folder exists here (a shared filesystem seen from the login node). A path under ~ or
    on a filesystem this machine does not mount is left to the job, which stops at once if it is wrong."""
    from pathlib import Path

    from hpclaunch.errors import ConfigError

    if os.environ.get(SKIP_ENV_CHECK) == "1":
        return
    py = spec.python_env
    where = f"python_envs.{spec.recipe.python_env}" if spec.recipe.python_env else "python"
    wanted = []
    if py.venv and not py.conda_env:
        wanted.append((Path(py.venv), Path(py.venv) / "bin" / "activate", f"{where}.venv"))
    if py.conda_env and py.conda_init:
        wanted.append((Path(py.conda_init), Path(py.conda_init), f"{where}.conda_init"))
    for given, needed, key in wanted:
        if given.is_absolute() and given.parent.is_dir() and not needed.is_file():
            raise ConfigError(f"{needed} does not exist, though its filesystem is visible here; the job would "
                              "stop when it activates the python environment", key=f"profile {spec.profile.name} "
                              f"{key}", hint=f"fix the path in the profile; if the profile targets another machine "
                                             f"where the path exists, set {SKIP_ENV_CHECK}=1 to skip this check")


def _job_path(spec: JobSpec) -> str | None:
    """The PATH the job's launch searches, where this machine can tell: a venv whose folder is visible here, then,
    where the scheduler runs the job here with this environment (capability "same_environment"), this PATH. None
    where modules, a conda environment, a PATH setting or a container make the job's PATH, which this machine
    cannot see."""
    from pathlib import Path

    from hpclaunch.core.backends import can

    py, profile = spec.python_env, spec.profile
    if py.conda_env or profile.modules.load or profile.container.runtime != "none" \
            or "PATH" in {**profile.env, **spec.recipe.env}:
        return None
    dirs = []
    if py.venv:
        if not (Path(py.venv).is_absolute() and Path(py.venv).is_dir()):
            return None
        dirs.append(str(Path(py.venv) / "bin"))
    if can(profile.scheduler, "same_environment"):
        dirs.append(os.environ.get("PATH", ""))
    return os.pathsep.join(dirs) if dirs else None


def _launcher_programs(spec: JobSpec) -> None:
    """The programs the launcher runs from the job's environment (msrun) are in it, where this machine can tell
    (`_job_path`): otherwise the job would stop with `command not found` (exit 127) after its time in the queue."""
    import shutil

    from hpclaunch.errors import ConfigError
    from hpclaunch.launchers import get_launcher

    programs = get_launcher(spec.recipe.launcher).programs
    path = _job_path(spec) if programs and os.environ.get(SKIP_ENV_CHECK) != "1" else None
    if path is None:
        return
    for program, source in programs.items():
        if shutil.which(program, path=path) is None:
            py = spec.python_env
            where = f"python_envs.{spec.recipe.python_env}" if spec.recipe.python_env else "python"
            searched = f"{py.venv}/bin" if py.venv else "the PATH the job inherits from here"
            raise ConfigError(
                f"launcher {spec.recipe.launcher} runs {program}, which the job's environment does not have (not "
                f"in {searched}): the job would stop with `{program}: command not found`",
                key=f"profile {spec.profile.name} {where}",
                hint=f"install {source} into that environment, or set the profile's {where} to one that has it; "
                     f"if the profile targets another machine, set {SKIP_ENV_CHECK}=1 to skip this check")


def _container_image(spec: JobSpec) -> None:
    """The profile's container image file exists, where this machine can tell: an absolute (or ~/) path whose
    folder exists here (a shared filesystem seen from the login node). A registry image (pyxis's
    nvcr.io#nvidia/pytorch:24.01-py3, Apptainer's docker://...) is not a file and is left to the runtime."""
    from hpclaunch.errors import ConfigError
    from hpclaunch.launchers.containers import MAKE_IMAGE, image_file

    path = image_file(spec)
    if path is None or os.environ.get(SKIP_ENV_CHECK) == "1":
        return
    if path.parent.is_dir() and not path.exists():  # a sandbox folder is an image too
        raise ConfigError(f"the container image {path} does not exist, though its folder is visible here; every "
                          "node's launch would fail to start it", key=f"profile {spec.profile.name} container.image",
                          hint=f"build or pull the image there ({MAKE_IMAGE[spec.profile.container.runtime]}), or fix "
                               f"the path; if the profile targets another machine, set {SKIP_ENV_CHECK}=1 to skip this "
                               "check")


# Config attributes every transformers model has, or maps to its own names (GPT-2's n_layer is
# num_hidden_layers): valid in an override even where the staged config.json does not spell them out.
GENERIC_CONFIG_KEYS = frozenset({
    "torch_dtype", "dtype", "use_cache", "tie_word_embeddings", "output_hidden_states", "output_attentions",
    "return_dict", "pad_token_id", "bos_token_id", "eos_token_id", "is_decoder", "is_encoder_decoder",
    "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
    "vocab_size", "initializer_range", "problem_type", "id2label", "label2id", "num_labels",
})


def _override_config(spec: JobSpec) -> None:
    """model.override_config exists inside the recipe folder, is a JSON object, and names only keys the
    model's config has (checked against the staged config.json of a hub model; a generated model's config
    exists only inside the job, which checks it there)."""
    import json
    from pathlib import Path, PurePosixPath

    from hpclaunch.errors import ConfigError

    model = spec.recipe.model
    if model is None or not model.override_config:
        return
    rel = PurePosixPath(model.override_config)
    if rel.is_absolute() or ".." in rel.parts:
        raise ConfigError(f"{model.override_config!r} is not a path inside the recipe folder {spec.recipe_dir}",
                          key="model.override_config", hint="put the file in the recipe folder (the job runs a copy "
                                                                  "of that folder) and name it relative to it")
    from hpclaunch.config.overrides import read_override

    path = Path(spec.recipe_dir) / rel
    overrides = read_override(path)
    if model.source != "hub" or model.repo is None:
        return
    from hpclaunch.assets.store import asset_path, store_root

    staged = asset_path(store_root(asset_store(spec.profile)), "model", model.repo, model.revision) / "config.json"
    try:
        known = set(json.loads(staged.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return  # not staged: the asset check says so
    unknown = sorted(set(overrides) - known - GENERIC_CONFIG_KEYS)
    if unknown:
        valid = sorted(k for k in known | GENERIC_CONFIG_KEYS if not k.startswith("_"))
        raise ConfigError(f"{', '.join(map(repr, unknown))}: not a key of the {model.repo} config ({staged}); "
                          f"valid keys: {', '.join(valid)}", file=str(path),
                          hint="use the model's own key names (GPT-2: n_layer, n_head, n_embd)")


def _checkpoints_fit(spec: JobSpec) -> None:
    from hpclaunch.submission.space import checkpoints_fit

    checkpoints_fit(spec)


def notes(spec: JobSpec) -> list[str]:
    """What a user should know before the job runs, though nothing stops it (a run root under $HOME, a staged
    dataset without the eval split)."""
    from hpclaunch.assets.needs import eval_split_notes
    from hpclaunch.submission.space import under_home

    return under_home(spec) + eval_split_notes(spec)


def _assets_staged(spec: JobSpec) -> None:
    from hpclaunch.assets.check import check_job_assets

    check_job_assets(spec)


def _assets_fit(spec: JobSpec) -> None:
    """The staged tokenizer has the special tokens the task needs; the staged dataset has the train split."""
    from hpclaunch.assets.needs import check_splits, check_tokenizer

    check_tokenizer(spec)
    check_splits(spec)


def fits_devices(spec: JobSpec) -> None:
    """The memory plan (hpclaunch/plan/, docs/plan.md) fits the partition's device memory. Skipped with
    `submit --skip-fit-check`; silent where the partition gives no gpu_memory_gb or no plan can be made."""
    from hpclaunch.plan import check_fit

    check_fit(spec)


CHECKS: list[Check] = [_script_exists, _override_config, _python_env_visible, envversions.check, _launcher_programs,
                       _container_image, _assets_staged, _assets_fit, fits_devices, _checkpoints_fit]
# what `submit --skip-fit-check` skips: the memory plan's checks (device memory, room for the checkpoints)
PLAN_CHECKS = (fits_devices, _checkpoints_fit)
# the store's check, which a submission over SSH makes on the login node instead (submission/overssh.py)
ASSET_CHECKS = (_assets_staged, _assets_fit)
# a dry run warns; a real submit refuses
SOFT: set[Check] = {_python_env_visible, envversions.check, _launcher_programs, _container_image, _assets_staged,
                    _assets_fit, fits_devices, _checkpoints_fit}


def preflight(spec: JobSpec, *, strict: bool = True, skip: Collection[Check] = ()) -> list[str]:
    """Run every check but those in `skip`. Strict: the first failure raises. Not strict: failures of SOFT
    checks are returned as warnings (one message each) and the others still raise."""
    from hpclaunch.errors import HpclaunchError

    warnings: list[str] = []
    for check in CHECKS:
        if check in skip:
            continue
        try:
            check(spec)
        except HpclaunchError as exc:
            if strict or check not in SOFT:
                raise
            warnings.append(str(exc))
    return warnings
