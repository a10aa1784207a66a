"""The `[files]` section of a ralph.toml already validated, for commands that need nothing else.

`ralph status` and `ralph tasks` need four file names from ralph.toml, and validating the
whole file means importing pydantic and building the configuration's models: most of their
start-up budget (docs/benchmarks.md). So each time `ralph.config.load_config` validates a
ralph.toml, it keeps the result's `[files]` section in `.ralph/cache/config.json` together
with the exact text it validated, Ralph's version and the signature of the module that
validates. A later reader whose ralph.toml has the same bytes (and whose Ralph is the same)
takes the names from there; any other ralph.toml (edited, invalid, missing) goes through
`load_config`, so every error is reported exactly as `load_config` reports it.

This module must not import pydantic (nor ralph.config, but on a miss).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

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
        path.parent.mkdir(exist_ok=True)
        ignore = path.parent / ".gitignore"
        if not ignore.exists():  # projects set up before .ralph/cache/ was in .gitignore
            ignore.write_text("# Ralph's cache (ralph.configcache): never committed\n*\n")
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
    """What a cached result depends on: the text validated, and the code that validated it
    (a changed ralph/config.py, in a checkout, can change defaults without a new version)."""
    try:
        code = _CONFIG_MODULE.stat()
        signature: list[int] | None = [code.st_size, code.st_mtime_ns]
    except OSError:
        signature = None
    return {"ralph": __version__, "code": signature,
            "toml": data.decode("utf-8", errors="surrogateescape")}
