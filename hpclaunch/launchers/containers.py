"""Containers: where each node's launch runs (the profile's `container:` section, docs/containers.md).

The one module that knows the container runtimes:

- ``apptainer``: each node's command becomes ``apptainer exec [--nv] --bind=... IMAGE COMMAND`` (the launcher's
  node script, under any scheduler); the container's own variables are exported as ``APPTAINERENV_NAME``.
- ``pyxis`` (a Slurm plugin on top of enroot): the scheduler's step gets ``--container-image=IMAGE
  --container-mounts=...`` and the whole node script runs inside the container; its variables are exported there.
- ``charliecloud`` (unprivileged, user namespaces): each node's command becomes ``bash RUN_DIR/container-run.sh
  IMAGE STAGE_DIR --bind=... -- COMMAND`` (templates/containers/charliecloud.sh.j2), which unpacks a SquashFS
  image once per node into node-local scratch, then runs ``ch-run --bind=... DIR -- COMMAND``; the host's
  variables pass through, the image's /ch/environment (PATH of its venv) over them.

All mount the run directory and the asset store at the same paths inside, then the profile's own mounts, then
the device and driver paths the accelerator's vendor documents for its containers (Ascend). Apptainer and enroot
both show the host's /dev inside by default, so the device nodes themselves (/dev/nvidia*, /dev/davinci*,
/dev/mtgpu.*) are there; what a container lacks is the driver's user-space files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.profile import asset_store
from hpclaunch.core.shell import ShellExpr, quote, shell_path
from hpclaunch.errors import ConfigError
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

Word = str | ShellExpr

# Device files and driver folders Ascend's docker instructions mount into a container (besides each
# /dev/davinciN, which the host /dev already shows): the device manager, shared virtual memory and host-device
# channel, the driver's libraries, the DCMI management library and npu-smi.
ASCEND_MOUNTS = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc", "/usr/local/Ascend/driver",
                 "/usr/local/dcmi", "/usr/local/bin/npu-smi")

# What each accelerator needs of the runtime: Apptainer's own flag (``--nv`` binds NVIDIA's driver libraries
# and tools) and the vendor's documented mounts. Moore Threads documents containers only for docker through its
# mt-container-toolkit (``--runtime mthreads``), with no Apptainer or enroot equivalent: a MUSA image must carry
# the MUSA user-space libraries, or the profile mounts them (docs/containers.md).
APPTAINER_FLAGS: dict[str, tuple[str, ...]] = {"cuda": ("--nv",), "musa": (), "npu": (), "cpu": ()}
DEVICE_MOUNTS: dict[str, tuple[str, ...]] = {"cuda": (), "musa": (), "npu": ASCEND_MOUNTS, "cpu": ()}
# The runtimes whose node command is a script in the run directory (runfiles.CONTAINER_RUN), rendered from:
RUN_SCRIPTS = {"charliecloud": "containers/charliecloud.sh.j2"}
# How a user makes the image file a profile names (the preflight's hint when it is missing).
MAKE_IMAGE = {"apptainer": "apptainer pull /path/x.sif docker://...", "pyxis": "enroot import -o /path/x.sqsh docker://...",
              "charliecloud": "ch-convert IMAGE /path/x.sqfs; for dev-slurm-container: scripts/build-test-image.sh"}
# Where a Charliecloud SquashFS image is unpacked on each node when the profile names no container.stage_dir.
STAGE_DIR = ShellExpr("${TMPDIR:-/tmp}/hpclaunch-images")


def _mount(text: str, key: str, *, whole: bool = False) -> tuple[Word, str, str]:
    """(source as the shell spells it, destination, options) of ``SRC[:DST[:ro|rw]]``; `whole`: `text` is one
    path mounted at the same place (a run directory, the asset store), so it may hold no colon either."""
    src, _, rest = (text, "", "") if whole else text.partition(":")
    dst, _, opts = rest.partition(":")
    source = shell_path(src)
    if "," in src or (whole and ":" in src):
        raise ConfigError(f"the path {src!r} holds a {'comma' if ',' in src else 'colon'}, which separates mounts "
                          "and their parts: it cannot be mounted into the container", key=key,
                          hint="use a path without commas or colons")
    return source, dst or str(source), opts


def mounts(spec: JobSpec, run_dir: Path) -> list[tuple[Word, str, str]]:
    """Every mount of the job's container, in order: run directory, asset store, the profile's, the devices'
    (each destination once: the first mount there wins)."""
    c = spec.profile.container
    found = [_mount(str(run_dir), "run_root", whole=True),
             _mount(asset_store(spec.profile), "assets.store", whole=True)]
    found += [_mount(m, "container.mounts") for m in c.mounts]
    found += [_mount(m, "container", whole=True) for m in DEVICE_MOUNTS[spec.profile.accelerator]]
    unique: dict[str, tuple[Word, str, str]] = {}
    for mount in found:
        unique.setdefault(mount[1], mount)
    return list(unique.values())


def _word(prefix: str, parts: list[tuple[Word, str]]) -> Word:
    """One option word; a ShellExpr when a part is (``${HOME}/...``), which must then pass its check."""
    text = prefix + ",".join(f"{src}{rest}" for src, rest in parts)
    if not any(isinstance(src, ShellExpr) for src, _ in parts):
        return text
    try:
        return ShellExpr(text)
    except ValueError:
        raise ConfigError(f"a mount holds a character the shell would expand or end a word with: {text!r}",
                          key="container.mounts", hint="use plain paths (letters, digits, / . _ - +)") from None


def node_env(spec: JobSpec) -> list[str]:
    """Shell lines of the node script that set the container's variables (before the wrapped command)."""
    c = spec.profile.container
    prefix = "APPTAINERENV_" if c.runtime == "apptainer" else ""
    if c.runtime == "none":
        return []
    return [f"export {prefix}{name}={quote(value)}" for name, value in sorted(c.env.items())]


def _binds(spec: JobSpec, run_dir: Path) -> list[Word]:
    """``--bind=SRC[:DST[:OPTS]]`` of every mount, as Apptainer and Charliecloud's ch-run take them (ch-run: no
    options)."""
    found = mounts(spec, run_dir)
    if spec.profile.container.runtime == "charliecloud" and any(opts for _, _, opts in found):
        raise ConfigError("Charliecloud's ch-run mounts read-write only: it takes no :ro or :rw",
                          key="container.mounts", hint="give the mount as SRC[:DST]")
    return [_word("--bind=", [(src, (f":{dst}" if dst != str(src) or opts else "") + (f":{opts}" if opts else ""))])
            for src, dst, opts in found]


def wrap(spec: JobSpec, run_dir: Path, command: list[Word], *, launch: bool = False) -> list[Word]:
    """The node command as it runs: inside ``apptainer exec`` for Apptainer, through the run directory's
    container-run.sh for Charliecloud (`launch`: the launch itself, whose container start is stamped in the
    timeline), else as it is (pyxis puts the whole step into the container: `step_options`)."""
    c = spec.profile.container
    if c.runtime == "apptainer":
        return ["apptainer", "exec", *APPTAINER_FLAGS[spec.profile.accelerator], *_binds(spec, run_dir), str(c.image),
                *command]
    if c.runtime == "charliecloud":
        stage = shell_path(c.stage_dir) if c.stage_dir else STAGE_DIR
        return ["bash", str(RunFiles(run_dir).container_run), shell_path(str(c.image)), stage,
                *(["--stamp"] if launch else []), *_binds(spec, run_dir), "--", *command]
    return command


def step_options(spec: JobSpec, run_dir: Path) -> list[Word]:
    """Options of the scheduler's step that put each node's task into the container (pyxis)."""
    c = spec.profile.container
    if c.runtime != "pyxis":
        return []
    parts = [(src, f":{dst}" + (f":{opts}" if opts else "")) for src, dst, opts in mounts(spec, run_dir)]
    return [f"--container-image={c.image}", _word("--container-mounts=", parts)]


def image_file(spec: JobSpec) -> Path | None:
    """The image as a file this machine may check (an absolute or ~/ path), None for a registry reference or URI."""
    from hpclaunch.config.rules import APPTAINER_URI

    c = spec.profile.container
    if c.runtime == "none" or not c.image or APPTAINER_URI.match(c.image):
        return None
    if c.image.startswith("/") or c.image.startswith("~/"):
        return Path(c.image).expanduser()
    return None
