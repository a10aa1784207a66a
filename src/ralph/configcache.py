"""The `[files]` section of a ralph.toml already validated, for commands that need nothing else.

`ralph status` and `ralph tasks` need four file names from ralph.toml, and validating the
whole file means importing pydantic and building the configuration's models: most of their
start-up budget (docs/benchmarks.md). So each time `ralph.config.load_config` validates a
ralph.toml, it keeps the result's `[files]` section in `.ralph/cache/config.json` together
with a BLAKE2 digest of the exact bytes it validated (not the text: ralph.toml may hold
secrets in `[agents.*.env]`), Ralph's version and the signatures of the code that validates
(ralph/config.py, pydantic). A later reader whose ralph.toml has the same digest (and whose
code is the same) takes the names from there; any other ralph.toml (edited, invalid,
missing) goes through `load_config`, so every error is reported exactly as `load_config`
reports it.

This module must not import pydantic (nor ralph.config, but on a miss).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

try:  # hashlib's own source of BLAKE2, without hashlib's OpenSSL import (~4 ms at start-up)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

from ralph import __version__
from ralph.fsutil import atomic_write_bytes

if TYPE_CHECKING:
    from ralph.config import FilesConfig

log = logging.getLogger("ralph.config")

CACHE_FILE = Path(".ralph") / "cache" / "config.json"
_CONFIG_MODULE = Path(__file__).with_name("config.py")


class ProjectFiles(Protocol):
    """The file names the status report and the task list show (ralph.toml `[files]`)."""

    @property
    def prd(self) -> str: ...

    @property
    def progress(self) -> str: ...

    @property
    def agents(self) -> str: ...

    @property
    def prompt(self) -> str: ...


@dataclass(frozen=True)
class CheckedFiles:
    """`[files]` of a ralph.toml validated before (the names, defaults filled in)."""

    prd: str
    progress: str
    agents: str
    prompt: str


def project_files(root: Path) -> ProjectFiles:
    """The `[files]` names of the project at `root`: from the cache when its ralph.toml is the
    one validated last, else by validating it (raises ralph.config.ConfigError as
    load_config does)."""
    try:
        data = (root / "ralph.toml").read_bytes()
    except OSError:
        data = None  # load_config says what is wrong
    if data is not None:
        checked = _cached(root, data)
        if checked is not None:
            return checked
    from ralph.config import load_config  # noqa: PLC0415 - pydantic, only on a miss

    return load_config(root).files


def remember(root: Path, data: bytes, files: FilesConfig) -> None:
    """Keep `files`, validated from `data` (ralph.toml's bytes), for later readers: only in a
    project that has a .ralph directory, and only when what is kept differs. Never fails."""
    ralph_dir = root / ".ralph"
    if not ralph_dir.is_dir():
        return  # not a project Ralph runs in (yet): leave no trace
    record = {**_key(data), "files": files.model_dump(mode="json")}
    path = root / CACHE_FILE
    try:
        if _read(path) == record:
            return
        path.parent.mkdir(mode=0o700, exist_ok=True)
        ignore = path.parent / ".gitignore"
        if not ignore.exists():  # projects set up before .ralph/cache/ was in .gitignore
            ignore.write_text("# Ralph's cache (ralph.configcache): never committed\n*\n")
        if not path.exists():  # created private: it names the project's files
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        atomic_write_bytes(path, orjson.dumps(record), durable=False)
    except OSError as exc:  # a read-only checkout: the next reader validates again
        log.debug("cannot keep the validated configuration in %s: %s", path, exc)


def _cached(root: Path, data: bytes) -> CheckedFiles | None:
    record = _read(root / CACHE_FILE)
    if record is None or any(record.get(name) != value for name, value in _key(data).items()):
        return None
    files = record.get("files")
    if not isinstance(files, dict):
        return None
    names = [files.get(name) for name in ("prd", "progress", "agents", "prompt")]
    if not all(isinstance(value, str) and value for value in names):
        return None
    prd, progress, agents, prompt = (str(value) for value in names)
    return CheckedFiles(prd=prd, progress=progress, agents=agents, prompt=prompt)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _key(data: bytes) -> dict[str, Any]:
    """What a cached result depends on: the bytes validated, and the code that validated
    them (a changed ralph/config.py, in a checkout, can change defaults without a new
    version; a new pydantic, what it accepts)."""
    return {"ralph": __version__, "code": _signature(_CONFIG_MODULE),
            "pydantic": _signature(_pydantic_version_module()),
            "toml": blake2b(data, digest_size=32).hexdigest()}


def _signature(path: Path | None) -> list[int] | None:
    try:
        found = path.stat() if path is not None else None
    except OSError:
        return None
    return [found.st_size, found.st_mtime_ns] if found is not None else None


def _pydantic_version_module() -> Path | None:
    """pydantic's version.py, found without importing pydantic."""
    spec = importlib.util.find_spec("pydantic")
    locations = spec.submodule_search_locations if spec is not None else None
    return Path(next(iter(locations))) / "version.py" if locations else None
