"""Where slurmrestd answers and with which token: the settings, the JWT, and one HTTP request with its errors.

Settings (docs/profiles.md, "scheduler: slurm-rest"), each from the submitting environment first, then from
the profile's ``env:`` mapping, then the default:

- ``SLURMRESTD_URL``: slurmrestd's base URL (default http://127.0.0.1:6820);
- ``SLURM_JWT``: the token itself (what ``scontrol token`` prints), from the environment only: a profile or a
  recipe is written into the run directory, the token never is;
- ``SLURM_JWT_FILE``: a file holding the token (or ``scontrol token``'s ``SLURM_JWT=...`` line), read at each
  request, so a token refreshed in the file is used at once.

A job remembers the URL and the token file it was submitted with (never the token) in its run directory
(``RUN_DIR/slurm-rest/connection.json``): `status`, `cancel` and `report` ask the same slurmrestd later.

Standard library only (urllib.request + json). No message carries the token: the token is sent in a header
and nothing prints headers; an answer of slurmrestd is scrubbed of it too, in case one echoes it.
"""

from __future__ import annotations

import base64
import getpass
import ipaddress
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpclaunch.errors import CommandError, ConfigError

URL_VAR = "SLURMRESTD_URL"
TOKEN_VAR = "SLURM_JWT"
TOKEN_FILE_VAR = "SLURM_JWT_FILE"
DEFAULT_URL = "http://127.0.0.1:6820"
TIMEOUT = 30.0
MEMO = "connection.json"
_TOKEN_HINT = (f"set {TOKEN_VAR} (`export $(scontrol token lifespan=86400)` where Slurm's commands are), or "
               f"{TOKEN_FILE_VAR} to a file holding it (in the environment or the profile's env:)")


# Slurm's error numbers in slurmrestd's answers (slurm_errno.h)
UNKNOWN_JOB = frozenset({2017, 9003})  # ESLURM_INVALID_JOB_ID; ESLURM_REST_EMPTY_RESULT ("Nothing found")
# A token slurmctld or slurmdbd refuses reaches the client as one of these (22.05 and 26.05), never as HTTP 401:
# SLURM_PROTOCOL_AUTHENTICATION_ERROR (slurmdbd), SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT (slurmctld hung up)
REFUSED_TOKEN = frozenset({1007, 5005})
INFORMATIONAL = frozenset({2042})  # ESLURM_JOB_HELD: a held job's successful submission says so (22.05)


class RestError(CommandError):
    """slurmrestd answered with a refusal: its HTTP `status` and Slurm's error numbers (`codes`)."""

    def __init__(self, message: str, status: int, codes: frozenset[int], *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status, self.codes = status, codes

    @property
    def refused_token(self) -> bool:
        return self.status in (401, 403) or bool(self.codes & REFUSED_TOKEN)


@dataclass(frozen=True)
class Connection:
    """slurmrestd's base URL and where the token comes from (the environment, or `token_file`)."""

    url: str = DEFAULT_URL
    token_file: str | None = None

    @classmethod
    def find(cls, profile_env: Mapping[str, str] | None = None, memo: Mapping[str, Any] | None = None) -> Connection:
        """The URL: a job's memo, else the environment, else the profile's env:, else the default. The token
        file: the environment, else the memo, else the profile's env:."""
        env, prof, memo = os.environ, profile_env or {}, memo or {}
        url = memo.get("url") or env.get(URL_VAR) or prof.get(URL_VAR) or DEFAULT_URL
        token_file = env.get(TOKEN_FILE_VAR) or memo.get("token_file") or prof.get(TOKEN_FILE_VAR)
        return cls(str(url).rstrip("/"), str(token_file) if token_file else None)

    def memo(self) -> str:
        return json.dumps({"url": self.url, "token_file": self.token_file}, indent=2) + "\n"

    # --- the token --------------------------------------------------------------------------------------------

    def token(self) -> str:
        """The JWT: SLURM_JWT from the environment, else the token file's content. CommandError naming where
        it looked (never the token) when there is none, or when it has expired."""
        text, where = os.environ.get(TOKEN_VAR, "").strip(), TOKEN_VAR
        if not text and self.token_file:
            path = Path(os.path.expanduser(self.token_file))
            where = f"{TOKEN_FILE_VAR}={path}"
            try:
                text = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise CommandError(f"cannot read the Slurm token file {path}: {exc.strerror}",
                                   hint=_TOKEN_HINT) from None
            text = text.removeprefix(f"{TOKEN_VAR}=").strip()
        if not text:
            raise CommandError("no Slurm token for slurmrestd", hint=_TOKEN_HINT)
        expires = claims(text).get("exp")
        if isinstance(expires, (int, float)) and expires < time.time():
            raise CommandError(f"the Slurm token ({where}) expired at "
                               f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(expires))}",
                               hint=_TOKEN_HINT)
        return text

    # --- one request ------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                missing_ok: bool = False) -> dict[str, Any]:
        """``method`` on ``URL/path`` with the token, the answer's JSON. Raises CommandError with the method, the
        URL and slurmrestd's own messages (its ``errors`` array) for a refusal; with `missing_ok` an answer
        that only says the job is unknown is returned (its ``errors`` kept) instead."""
        token = self.token()
        url = f"{self.url}{path}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "X-SLURM-USER-NAME": user(token), "X-SLURM-USER-TOKEN": token,
            "Accept": "application/json", **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with _opener(self.url).open(req, timeout=TIMEOUT) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CommandError(_scrub(f"cannot reach slurmrestd: {method} {url}: {reason}", token),
                               hint=f"is slurmrestd running there? Set {URL_VAR} (the environment or the "
                                    f"profile's env:) to its address") from None
        answer = _json(raw)
        messages, codes = errors(answer), error_codes(answer)
        # a job id means the job is queued, whatever else the answer says (22.05: a held job's 2042; 26.05: a field
        # it could not read): the caller decides (scheduler._submit cancels it when a field was refused)
        if status >= 400 or (messages and not answer.get("job_id")):
            if missing_ok and codes and codes <= UNKNOWN_JOB:
                return answer
            what = "; ".join(messages) or _scrub(raw.decode("utf-8", "replace").strip()[:300], token) or "no message"
            raise RestError(_scrub(f"slurmrestd refused {method} {url}: HTTP {status}: {what}", token), status,
                            codes, hint=_hint(status, codes))
        return answer


def claims(token: str) -> dict[str, Any]:
    """A JWT's claims (its middle part), {} when it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        found = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}


def user(token: str) -> str:
    """The user the token was made for (Slurm's ``sun`` claim), else this machine's user name."""
    name = claims(token).get("sun")
    return name if isinstance(name, str) and name else getpass.getuser()


def _errors(answer: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = answer.get("errors")
    return [e for e in found if isinstance(e, Mapping)] if isinstance(found, list) else []


def errors(answer: Mapping[str, Any], *, skip: frozenset[int] = frozenset()) -> list[str]:
    """slurmrestd's ``errors`` array in words: "Unable to find JobId=9 (Invalid job id specified, 2017)"; the field
    it names (v0.0.40 on: ``"source": "#/job/time_limit/"``) after "at". Errors numbered in `skip` are left out."""
    out = []
    for e in _errors(answer):
        text = str(e.get("description") or e.get("error") or "").strip()
        detail = str(e.get("error") or "").strip()
        code = e.get("error_number", e.get("error_code"))
        if code in skip:
            continue
        extra = ", ".join(str(x) for x in (detail if detail and detail != text else None, code) if x not in (None, ""))
        source = str(e.get("source") or "")
        where = f" at {source.removeprefix('#').strip('/')}" if source.startswith("#/") else ""
        out.append((f"{text} ({extra})" if extra else text) + where)
    return [m for m in out if m]


def error_codes(answer: Mapping[str, Any]) -> frozenset[int]:
    codes = (e.get("error_number", e.get("error_code")) for e in _errors(answer))
    return frozenset(c for c in codes if isinstance(c, int))


def _hint(status: int, codes: frozenset[int]) -> str:
    if status in (401, 403) or codes & REFUSED_TOKEN:
        return f"the token was refused: make a new one ({_TOKEN_HINT})"
    if -1 in codes:  # Slurm 22.05's slurmrestd words a refused token so too
        return f"slurmrestd's own words; when they make no sense, the token may be refused ({_TOKEN_HINT})"
    return "the message above is slurmrestd's own"


def _json(raw: bytes) -> dict[str, Any]:
    try:
        found = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "<token>") if token else text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer (an error), never followed: urllib would send the token's header on to it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(url: str) -> urllib.request.OpenerDirector:
    """No redirects; no proxy for a loopback address: the token goes straight to slurmrestd."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return urllib.request.build_opener(_NoRedirect, *([urllib.request.ProxyHandler({})] if loopback else []))


def check_env(env: Mapping[str, str], key: str) -> None:
    """A token written into a profile's or a recipe's env: would land in every job script: refused."""
    if TOKEN_VAR in env:
        raise ConfigError(f"{TOKEN_VAR} must not be set here: the env: mapping is written into the job script and "
                          "resolved.yaml", key=f"{key}.{TOKEN_VAR}",
                          hint=f"put the token in a file and name it with {TOKEN_FILE_VAR}, or export {TOKEN_VAR} "
                               "where you run hpclaunch")
