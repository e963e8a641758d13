"""Which OpenAPI version to speak with a slurmrestd: the paths it serves (``GET /openapi/v3``) against the versions
hpclaunch speaks, the newest both do. Asked once per slurmrestd (its URL) and process: one request more per command.

What each Slurm release serves (its source tree: src/plugins/openapi/ to 23.02, src/slurmrestd/plugins/openapi/ and
src/plugins/data_parser/ since; 22.05, 24.11 and 26.05 also measured here, tests/fixtures/slurmrestd/openapi/):

=======  ====================  ==================
Slurm    slurmrestd serves     hpclaunch speaks
=======  ====================  ==================
22.05    v0.0.36 - v0.0.38     v0.0.38
23.02    v0.0.37 - v0.0.39     v0.0.38
23.11    v0.0.38 - v0.0.40     v0.0.40
24.05    v0.0.39 - v0.0.41     v0.0.41
24.11    v0.0.40 - v0.0.42     v0.0.42
25.05    v0.0.40 - v0.0.43     v0.0.43
25.11    v0.0.41 - v0.0.44     v0.0.44
26.05    v0.0.42 - v0.0.45     v0.0.45
=======  ====================  ==================

(a site may load fewer: ``slurmrestd -s openapi/v0.0.38,...``; the dev cluster's 22.05 serves v0.0.38 alone). v0.0.38 is
the plugin generation of 20.11-23.11 (strings that sbatch's own option code parses); v0.0.40 on are the data_parser's
(typed fields: numbers, lists, {set, infinite, number}), which jobdesc.py writes and answers.py reads."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hpclaunch.errors import CommandError
from hpclaunch.schedulers.slurm_rest.connection import Connection

SPEC = "/openapi/v3"
OURS = ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38")  # newest first
LEGACY = "v0.0.38"  # the one of the old plugins; every other is the data_parser's
_PATH = re.compile(r"^/(slurm|slurmdb)/(v\d+\.\d+\.\d+)/")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.lstrip("v").split("."))


def span(versions: Iterable[str]) -> str:
    """``v0.0.36, v0.0.37, v0.0.38`` -> ``v0.0.36-v0.0.38``; gaps split the runs: ``v0.0.38, v0.0.40-v0.0.45``."""
    runs: list[list[str]] = []
    for v in sorted(set(versions), key=_key):
        if runs and _key(v)[:-1] == _key(runs[-1][-1])[:-1] and _key(v)[-1] == _key(runs[-1][-1])[-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) or "none"


@dataclass(frozen=True)
class Api:
    """The versions chosen for one slurmrestd: `slurm` (slurmctld's paths) and `slurmdb` (slurmdbd's; None when it
    serves none hpclaunch speaks: no accounting through it), and what it serves."""

    slurm: str
    slurmdb: str | None
    served: tuple[str, ...] = ()
    release: str | None = None  # "26.05.5" where the answer says (24.11 on)

    @property
    def typed(self) -> bool:
        """The data_parser's job description and answers (v0.0.40 on), not v0.0.38's strings."""
        return self.slurm != LEGACY

    def ctld(self, rest: str) -> str:
        return f"/slurm/{self.slurm}/{rest}"

    def db(self, rest: str) -> str | None:
        return f"/slurmdb/{self.slurmdb}/{rest}" if self.slurmdb else None

    def words(self) -> str:
        return f"OpenAPI {self.slurm}" + (f", Slurm {self.release}" if self.release else "")


def served(spec: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The versions of slurmctld's (``/slurm/vX/``) and slurmdbd's (``/slurmdb/vX/``) paths in an OpenAPI document."""
    ctld: set[str] = set()
    db: set[str] = set()
    paths = spec.get("paths")
    for path in paths if isinstance(paths, Mapping) else ():
        m = _PATH.match(str(path))
        if m:
            (ctld if m.group(1) == "slurm" else db).add(m.group(2))
    return ctld, db


def _release(spec: Mapping[str, Any]) -> str | None:
    """26.05: info.x-slurm.release; 24.11: info.version "Slurm-24.11.5&openapi/..."; 22.05 says only "0.0.38"."""
    info = spec.get("info")
    info = info if isinstance(info, Mapping) else {}
    extra = info.get("x-slurm")
    found = extra.get("release") if isinstance(extra, Mapping) else None
    m = re.match(r"Slurm-(\d+\.\d+\.\d+)", str(info.get("version") or ""))
    return str(found) if found else m.group(1) if m else None


def choose(spec: Mapping[str, Any], url: str = "slurmrestd") -> Api:
    """The newest version both speak; CommandError in words when there is none."""
    ctld, db = served(spec)
    shared = [v for v in OURS if v in ctld]
    if not shared:
        where = f"the slurmrestd at {url}"
        said = f"speaks {span(ctld)}" if ctld else "lists no /slurm/ paths in its OpenAPI document"
        raise CommandError(f"{where} {said}; hpclaunch speaks {span(OURS)}",
                           hint="ask the site for a slurmrestd with one of these (Slurm 22.05-23.02 serve v0.0.38, "
                                "23.11 to 26.05 v0.0.40-v0.0.45: slurmrestd's -s option names the plugins it loads), "
                                "or submit with scheduler: slurm (sbatch) where Slurm's commands are")
    version = shared[0]
    dbs = [v for v in OURS if v in db]
    slurmdb = version if version in db else dbs[0] if dbs else None
    return Api(version, slurmdb, tuple(sorted(ctld, key=_key)), _release(spec))


_CHOSEN: dict[str, Api] = {}


def negotiate(connection: Connection) -> Api:
    """The version to speak with `connection`'s slurmrestd: asked once per URL in this process."""
    found = _CHOSEN.get(connection.url)
    if found is None:
        found = _CHOSEN[connection.url] = choose(connection.request("GET", SPEC), connection.url)
    return found


def forget() -> None:
    """Ask again next time (a test's servers come and go on the same port)."""
    _CHOSEN.clear()
