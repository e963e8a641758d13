"""What to do, in the words of the failure itself: each class's title and hint made concrete from the lines that
show it (the path that is full and how much is free there now, the library or module that is missing, the CUDA
version a driver supports, the GPU's architecture, Slurm's reason, the exception's own type and message).
`refine` is asked by hpclaunch.logs.diagnose once the cause is chosen; a class it knows nothing more about keeps
its rule's title and hint (hpclaunch.logs.rules). Standard library only."""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.logs.rules import ECHO_PREFIX

# What launchers and log collectors put before a process's words (rules.ECHO_PREFIX)
_PREFIX = re.compile(ECHO_PREFIX.decode())
# A quoted or plain absolute path in a message: '/x/y', "/x/y", </torch_...>, or /x/y at the end
_PATH = re.compile(r"""['"‘`](/[^'"’`\n]+)['"’`]|(?:^|\s)(/[\w./+-]{2,}[\w/])""")
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s*(.*))?$")
_FOUND_VERSION = re.compile(r"found version (\d+)")
_SM = re.compile(r"\bsm_(\d+)a?\b")
_LIBRARY = re.compile(r"(lib[\w+-]+\.so(?:\.[\d.]+)?)")
_GLIBC = re.compile(r"((?:GLIBC|GLIBCXX|CXXABI)_[\d.]+)['’]? not found(?: \(required by ([^)]+)\))?")
_MODULE = re.compile(r"No module named ['\"]?([\w.]+)|packages that were not found in your environment: ([\w., -]+)")
_SLURM_REASON = re.compile(r"(?:submission failed|Unable to create step for job \d+|Unable to allocate resources"
                           r"|Unable to create job step): (.+)$")
# The program a "not found" line names: bash's "NAME: command not found", execve's and a script's "NAME: No such
# file or directory", sh's "1: NAME: not found", setsid's "failed to execute NAME"
_PROGRAM = re.compile(r"([^\s:]+): command not found|execve\(\): ([^:\n]+): No such file"
                      r"|line \d+: ([^\s:]+): No such file|^\S+: \d+: ([^\s:]+): not found|failed to execute ([^\s:]+)")
_ALLOCATE = re.compile(r"Tried to allocate ([\d.]+ [KMGT]i?B)")
_DEVICE_FREE = re.compile(r"total capacity of ([\d.]+ [KMGT]i?B) of which ([\d.]+ [KMGT]i?B) is free"
                          r"|([\d.]+ [KMGT]i?B) total capacity; [^;]*; [^;]*; ([\d.]+ [KMGT]i?B) free")
_MEM_LIMIT = re.compile(r"exceeded (?:job )?memory limit \((\d+) > (\d+)\)")
_SHM_SIZE = re.compile(r"\(size (\d+)\)")
_DUPLICATE = re.compile(r"rank (\d+) and rank (\d+) both on (\w+ device \w+)")
_STEP = re.compile(r"\b(?:step|iter(?:ation)?)\W{0,3}(\d+)", re.IGNORECASE)
_REPO = re.compile(r"(?:for|load|to) ['\"]([\w.-]+/[\w.-]+|[\w.-]+)['\"]|['\"]([\w.-]+/[\w.-]+)['\"] is not a local"
                   r"|it looks like ([\w./-]+) is not the path")
# CUDA's release that first has each architecture (torch's wheels for it need that CUDA or newer)
_ARCH_CUDA = {70: "9.0", 75: "10.0", 80: "11.0", 86: "11.1", 87: "11.4", 89: "11.8", 90: "11.8", 100: "12.8",
              101: "12.8", 120: "12.8"}
# pip packages whose import name differs
_PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml",
              "flash_attn": "flash-attn", "google.protobuf": "protobuf", "attr": "attrs", "Crypto": "pycryptodome",
              "sentencepiece": "sentencepiece", "bs4": "beautifulsoup4"}
# pip wheels that ship a CUDA library (and the CUDA major of its .so version where the soname says it)
_CUDA_WHEELS = {"libcudart": "nvidia-cuda-runtime-cu{v}", "libcudnn": "nvidia-cudnn-cu12", "libcublas":
                "nvidia-cublas-cu{v}", "libnccl": "nvidia-nccl-cu{v}", "libcufft": "nvidia-cufft-cu{v}",
                "libcusparse": "nvidia-cusparse-cu{v}", "libcurand": "nvidia-curand-cu{v}", "libnvrtc":
                "nvidia-cuda-nvrtc-cu{v}", "libcusolver": "nvidia-cusolver-cu{v}"}


@dataclass(frozen=True)
class Facts:
    """What the diagnosis knows besides the lines: the job, the node and rank it blames, the run directory, and
    whether it runs where the job's filesystems are (not on a copy of a remote run's logs)."""

    job_id: str
    node: str | None
    rank: int | None
    run_dir: Path
    local: bool


def words(line: str) -> str:
    """The line without its rank echo prefix."""
    return _PREFIX.sub("", line).strip()


def exception_of(line: str) -> tuple[str, str] | None:
    """(type, message) of a Python exception line, or None."""
    m = _EXCEPTION.match(words(line))
    return (m.group(1), (m.group(2) or "").strip()) if m else None


def _cut(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _path(lines: list[str]) -> str | None:
    for line in lines:
        m = _PATH.search(line)
        if m:
            return (m.group(1) or m.group(2)).rstrip(".,:;")
    return None


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _free_now(path: str | None, facts: Facts) -> str:
    """', N GiB free there now (of M)' for the nearest existing folder of `path` (else the run directory), when the
    diagnosis runs where the job's filesystems are."""
    if not facts.local:
        return ""
    where = Path(path) if path else facts.run_dir
    for candidate in (where, *where.parents):
        try:
            if candidate.exists():
                usage = shutil.disk_usage(candidate)
                return f"; {_gib(usage.free)} free of {_gib(usage.total)} at {candidate} now"
        except OSError:
            return ""
    return ""


def _python_error(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    exc = exception_of(line)
    if not exc:
        return None, None
    kind, message = exc
    said = f"{kind}: {message}" if message else kind
    shown = facts.rank if facts.rank is not None else 0
    return (f"the script raised {_cut(said)}",
            f"the traceback above it says where (`hpclaunch logs {facts.job_id} --rank {shown} --tail 50`): "
            f"{kind} is the script's own error, not the cluster's")


def _disk(kind: str) -> Callable[[str, list[str], Facts], tuple[str | None, str | None]]:
    def refine(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
        path = _path([line])
        where = f" ({path})" if path else ""
        free = _free_now(path, facts) if kind in ("no_space", "disk_quota") else ""
        titles = {"no_space": f"the filesystem is full: no space left on device{where}",
                  "disk_quota": f"the disk quota is exceeded{where}",
                  "read_only_fs": f"the job wrote to a read-only filesystem{where}",
                  "stale_file_handle": f"a stale file handle{where}: a shared file changed under the job",
                  "lustre_error": f"the shared filesystem failed{where}",
                  "permission_denied": f"permission denied{where}"}
        lead = (f"the path is {path}" if path else "") + free
        return titles[kind], (lead.lstrip("; ") + "; ") if lead else None
    return refine


def _shm(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    size = _SHM_SIZE.search(" ".join(context))
    asked = f"NCCL asked for a {int(size.group(1)) / (1 << 20):.1f} MiB segment; " if size else ""
    here = ""
    if facts.local and (facts.node is None or facts.node == socket.gethostname()) and os.path.isdir("/dev/shm"):
        try:
            usage = shutil.disk_usage("/dev/shm")
            here = f"/dev/shm here: {_gib(usage.total)}, {_gib(usage.free)} free now; "
        except OSError:
            pass
    return None, (asked + here) or None


def _host_oom(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _MEM_LIMIT.search(" ".join(context))
    if m:
        used, limit = (int(g) * 1024 for g in m.groups())
        return None, f"it used {_gib(used)} of its {_gib(limit)} limit; "
    return None, None


def _device_oom(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    text = " ".join(context)
    asked, free = _ALLOCATE.search(text), _DEVICE_FREE.search(text)
    parts = []
    if asked:
        parts.append(f"it tried to allocate {asked.group(1)}")
    if free:
        total, left = (free.group(1), free.group(2)) if free.group(1) else (free.group(3), free.group(4))
        parts.append(f"with {left} free of {total}")
    return None, (" ".join(parts) + "; ") if parts else None


def _driver(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _FOUND_VERSION.search(" ".join(context))
    if not m:
        return None, ("the CUDA runtime the job loads (torch's own, or the cuda module) is newer than the node's "
                      "driver; ")
    v = int(m.group(1))
    cuda = f"{v // 1000}.{v % 1000 // 10}"
    return (f"the node's GPU driver supports CUDA {cuda} only (found version {v})",
            f"load a CUDA {cuda} (or older) toolkit module (`module load cuda/{cuda}`) and a torch built for it "
            f"(pip install torch --index-url https://download.pytorch.org/whl/cu{cuda.replace('.', '')}); ")


def _arch(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _SM.search(" ".join(context))
    if not m:
        return None, None
    sm = int(m.group(1))
    need = _ARCH_CUDA.get(sm)
    title = f"the GPU's architecture (sm_{sm}) is not in the installed build"
    return title, (f"sm_{sm} needs a build with CUDA >= {need} (pip install torch --index-url "
                   f"https://download.pytorch.org/whl/cu{need.replace('.', '')} or newer); " if need else None)


def _library(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _LIBRARY.search(line)
    if not m:
        return None, None
    lib = m.group(1)
    base, _, version = lib.partition(".so")
    major = version.strip(".").split(".")[0] if version.strip(".") else ""
    wheel = _CUDA_WHEELS.get(base)
    how = (f"pip install {wheel.format(v=major if major in ('11', '12', '13') else '12')} into the python env, "
           f"or `module load` the CUDA/cuDNN module that has it" if wheel else
           f"`module spider {base.removeprefix('lib')}` names the module that provides it")
    return f"a shared library was not found: {lib}", f"{lib} is on no library path of the node: {how}; "


def _glibc(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _GLIBC.search(line)
    if not m:
        return None, None
    by = f" (needed by {m.group(2)})" if m.group(2) else ""
    return f"the node's C library is too old: {m.group(1)} not found{by}", None


def _module(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    found = next((m for m in map(_MODULE.search, context) if m), None)
    if not found:
        return None, None
    name = (found.group(1) or found.group(2) or "").strip(" .")
    top = name.split(".")[0]
    pip = _PIP_NAMES.get(name) or _PIP_NAMES.get(top) or top.replace("_", "-")
    return (f"a Python module is missing: {name}",
            f"`pip install {pip}` into the job's python env (the profile's python env / modules); ")


def _package(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    exc = exception_of(line)
    said = exc[1] if exc and exc[1] else words(line)
    return f"an installed package has the wrong version: {_cut(said, 140)}", None


def _slurm_reason(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _SLURM_REASON.search(words(line))
    return (None, f"Slurm said: {m.group(1).strip()}; ") if m else (None, None)


def _duplicate(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _DUPLICATE.search(" ".join(context))
    return (f"two ranks use the same GPU: rank {m.group(1)} and rank {m.group(2)} on {m.group(3)}", None) if m \
        else (None, None)


def _program(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    """command_not_found: the program the first "not found" line of the context names."""
    for text in context:
        m = _PROGRAM.search(text)
        if m:
            return f"the job could not find {next(g for g in m.groups() if g is not None)}", None
    return None, None


def _asset(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _REPO.search(" ".join(context))
    name = next((g for g in m.groups() if g), None) if m else None
    if not name or name.startswith(("http", "/")):
        return None, None
    return f"{name} is not in the offline store (the compute node tried to download it)", None


def _nan(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    m = _STEP.search(line)
    return (f"the loss became NaN/Inf at step {m.group(1)} (training diverged)", None) if m else (None, None)


def _tokenizer(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    text = " ".join(context)
    for phrase, hint in (
        ("padding token", "the tokenizer has no padding token: set one in the script (tokenizer.pad_token = "
                          "tokenizer.eos_token) or add one and resize the model's embeddings; "),
        ("Can't load tokenizer", "the tokenizer's files are not where the job looks: stage them "
                                 "(`hpclaunch stage-assets RECIPE --profile P`) or give the folder that holds "
                                 "tokenizer.json / tokenizer_config.json; "),
        ("untagged enum", "tokenizer.json was written by a newer `tokenizers`: upgrade tokenizers and "
                          "transformers in the python env; "),
        ("does not exist or is not currently imported", "the installed transformers is older than the tokenizer "
                                                        "class: upgrade transformers in the python env; "),
        ("srcIndex", "token ids go beyond the model's embeddings: the tokenizer is not the model's (or tokens were "
                     "added without model.resize_token_embeddings); "),
    ):
        if phrase in text:
            return None, hint
    return None, None


def _container(line: str, context: list[str], facts: Facts) -> tuple[str | None, str | None]:
    text = " ".join(context)
    for phrase, hint in (
        ("doesn't exist in container", "a bind mount's destination does not exist in the image: create it in "
                                       "the image, bind to a folder that exists, or allow overlays "
                                       "(Apptainer --writable-tmpfs, `enable overlay` in apptainer.conf); "),
        ("loop device", "the node has no free loop device for the image: ask the administrators, or use a "
                        "sandbox folder / squashfuse instead of a .sif; "),
        ("Permission denied", "the runtime's folder is not writable by you on the node: set ENROOT_RUNTIME_PATH / "
                              "ENROOT_CACHE_PATH / ENROOT_DATA_PATH (or APPTAINER_TMPDIR) to a folder you own; "),
        ("ch-run", "Charliecloud needs unprivileged user namespaces: on an old kernel or with them disabled "
                   "(sysctl user.max_user_namespaces) ask the administrators, or use another runtime; "),
        ("entrypoint", "the image's entrypoint or shell is missing: --no-container-entrypoint, or an image with "
                       "/bin/bash; "),
    ):
        if phrase in text:
            return None, hint
    return None, None


_REFINE: dict[str, Callable[[str, list[str], Facts], tuple[str | None, str | None]]] = {
    "python_error": _python_error, "no_space": _disk("no_space"), "disk_quota": _disk("disk_quota"),
    "read_only_fs": _disk("read_only_fs"), "stale_file_handle": _disk("stale_file_handle"),
    "lustre_error": _disk("lustre_error"), "permission_denied": _disk("permission_denied"),
    "shm_exhausted": _shm, "host_oom": _host_oom, "device_oom": _device_oom, "driver_too_old": _driver,
    "cuda_arch_mismatch": _arch, "shared_library_missing": _library, "glibc_version": _glibc,
    "module_missing": _module, "package_version": _package, "step_creation_failed": _slurm_reason,
    "node_config_unavailable": _slurm_reason, "slurm_refused": _slurm_reason, "duplicate_gpu": _duplicate,
    "command_not_found": _program, "asset_missing": _asset, "nan_loss": _nan, "tokenizer_error": _tokenizer,
    "container_failed": _container,
}


def refine(name: str, line: str | None, context: list[str], facts: Facts) -> tuple[str | None, str]:
    """(a more concrete title or None, words to put before the rule's hint: '' when nothing more is known)."""
    fn = _REFINE.get(name)
    if fn is None or line is None:
        return None, ""
    title, before = fn(line, context, facts)
    return title, before or ""
