"""An AgentCompany workspace: its layout, `init` (the directories and the company, policy
and machine files) and `validate` (every file checked against its schema, in the order
and with the issue codes and messages AgentCompany gives, paths relative to the workspace).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ralph.company.files import FileFormatError, read_text, read_yaml, split_front_matter
from ralph.company.files import write_yaml as _write_yaml
from ralph.company.ids import new_id
from ralph.company.schemas import (
    ARTIFACT_HEADINGS,
    AgentYaml,
    ArtifactFrontMatter,
    CompanyYaml,
    ContextPackManifestYaml,
    HelpRequestFrontMatter,
    MachineYaml,
    MemoryDeltaFrontMatter,
    MilestoneReportFrontMatter,
    PolicySnapshotYaml,
    PolicyYaml,
    ProjectYaml,
    ReviewYaml,
    RunYaml,
    SharePackManifestYaml,
    TaskFrontMatter,
    TeamYaml,
    schema_issues,
)
from ralph.errors import RalphError
from ralph.store.frame import format_ts

REQUIRED_DIRS = ("company", "company/migrations", "org", "org/teams", "org/agents", "work",
                 "work/projects", "inbox", "inbox/reviews", "inbox/help_requests", ".local")
COMPANY_FILE = "company/company.yaml"
POLICY_FILE = "company/policy.yaml"
MACHINE_FILE = ".local/machine.yaml"
REQUIRED_FILES = (COMPANY_FILE, POLICY_FILE, MACHINE_FILE)
DEFAULT_COMPANY_NAME = "AgentCompany"
TASK_HEADINGS = ("Contract", "Milestones")
HELP_HEADINGS = ("Question", "Response")


class WorkspaceError(RalphError):
    """A workspace that cannot be made or read as asked."""


@dataclass(frozen=True)
class Issue:
    code: str
    message: str
    path: str | None = None  # relative to the workspace; None where the original gives none

    def to_dict(self) -> dict[str, str]:
        found = {"code": self.code, "message": self.message}
        if self.path is not None:
            found["path"] = self.path
        return found


def now_iso() -> str:
    """UTC, milliseconds, `Z`: `2026-02-10T20:58:31.123Z` (JavaScript's toISOString)."""
    return format_ts(time.time_ns() // 1_000_000)


def init_workspace(root: Path, company_name: str = DEFAULT_COMPANY_NAME, *,
                   force: bool = False, shown_as: str | None = None) -> None:
    """The directories and the company, policy and machine files of a new workspace in
    `root` (made if missing). A directory that holds anything is refused unless `force`,
    which writes the three files again (a new company id) and removes nothing."""
    try:
        holds = any(root.iterdir())
    except FileNotFoundError:
        holds = False
    except NotADirectoryError:
        raise WorkspaceError(f"{shown_as or root} is not a directory") from None
    if holds and not force:
        raise WorkspaceError(f"Refusing to initialize in a non-empty directory "
                             f"({shown_as or root}). Use --force to override.")
    for directory in REQUIRED_DIRS:
        (root / directory).mkdir(parents=True, exist_ok=True)
    _write_yaml(root / COMPANY_FILE, {"schema_version": 1, "type": "company",
                                      "id": new_id("cmp"), "name": company_name,
                                      "created_at": now_iso()})
    _write_yaml(root / POLICY_FILE, {
        "schema_version": 1, "type": "policy", "id": new_id("art"),
        "visibility_defaults": {"worker_journal": "private_agent",
                                "worker_milestone_artifact": "team",
                                "manager_proposal": "managers", "director_workplan": "org"}})
    _write_yaml(root / MACHINE_FILE, {"schema_version": 1, "type": "machine",
                                      "repo_roots": {}, "provider_bins": {}})


def validate_workspace(root: Path) -> list[Issue]:
    """Every problem of the workspace at `root`, in AgentCompany's order (none: valid)."""
    return list(_Validator(root).issues())


class _Validator:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.parsed: dict[str, Any] = {}  # each file's data, once read (for later checks)

    def issues(self) -> Iterator[Issue]:
        for directory in REQUIRED_DIRS:
            if not self.exists(directory):
                yield Issue("missing_dir", f"Missing directory: {directory}", directory)
        for name in REQUIRED_FILES:
            if (gone := self.missing(name)) is not None:
                yield gone
        if self.exists(COMPANY_FILE):
            yield from self.yaml_file(COMPANY_FILE, CompanyYaml, parse_path=False)
        if self.exists(POLICY_FILE):
            yield from self.yaml_file(POLICY_FILE, PolicyYaml, parse_path=False)
        for name in self.files("inbox/reviews", ".yaml"):
            yield from self.yaml_file(f"inbox/reviews/{name}", ReviewYaml)
        for name in self.files("inbox/help_requests", ".md"):
            yield from self.markdown(f"inbox/help_requests/{name}", self.help_request)
        if self.exists(MACHINE_FILE):
            yield from self.yaml_file(MACHINE_FILE, MachineYaml, parse_path=False)
        for name in self.dirs("org/teams"):
            yield from self.required_yaml(f"org/teams/{name}/team.yaml", TeamYaml)
        for name in self.dirs("org/agents"):
            yield from self.required_yaml(f"org/agents/{name}/agent.yaml", AgentYaml)
        for name in self.dirs("work/projects"):
            yield from self.project(f"work/projects/{name}")

    # -- paths as Node joins them, listings as Node makes them --------------------------------

    def path(self, rel: str) -> Path:
        """`rel` joined to the root as path.join does (an absolute `rel` stays inside it,
        `..` is undone by name, not by the file system)."""
        return Path(os.path.normpath(f"{self.root}/{rel}"))

    def missing(self, rel: str) -> Issue | None:
        """The `missing_file` issue of `rel`, or None when it is there."""
        return None if self.exists(rel) else Issue("missing_file", f"Missing file: {rel}", rel)

    def exists(self, rel: str) -> bool:
        """Whether anything is at `rel` (a failure to look, of any kind, is "no")."""
        try:
            self.path(rel).stat()
        except (OSError, ValueError):
            return False
        return True

    def _entries(self, rel: str) -> list[tuple[str, os.DirEntry[str]]]:
        """(name as Node reads it, entry), in the order of the names' bytes; links are
        neither files nor directories (Node's Dirent does not follow them)."""
        try:
            with os.scandir(self.path(rel)) as entries:
                found = sorted(entries, key=lambda entry: os.fsencode(entry.name))
        except (OSError, ValueError):
            return []
        return [(os.fsencode(e.name).decode("utf-8", "replace"), e) for e in found]

    def files(self, rel: str, suffix: str) -> list[str]:
        return [name for name, e in self._entries(rel)
                if name.endswith(suffix) and _is_file(e)]

    def dirs(self, rel: str) -> list[str]:
        return [name for name, e in self._entries(rel) if _is_dir(e)]

    # -- one file ------------------------------------------------------------------------------

    def yaml_file(self, rel: str, model: type[BaseModel], *,
                  parse_path: bool = True) -> Iterator[Issue]:
        try:
            data = read_yaml(self.path(rel))
        except (OSError, ValueError, FileFormatError) as exc:
            yield Issue("parse_error", f"{rel}: {_said(exc, self.path(rel))}",
                        rel if parse_path else None)
            return
        self.parsed[rel] = data
        for problem in schema_issues(model, data):
            yield Issue("schema_invalid", f"{rel}: {problem.path}: {problem.message}", rel)

    def required_yaml(self, rel: str, model: type[BaseModel]) -> Iterator[Issue]:
        if (gone := self.missing(rel)) is not None:
            yield gone
            return
        yield from self.yaml_file(rel, model)

    def markdown(self, rel: str,
                 check: Callable[[str], Iterator[tuple[str, str]]]) -> Iterator[Issue]:
        try:
            text = read_text(self.path(rel))
        except (OSError, ValueError) as exc:
            yield Issue("read_error", f"{rel}: {_said(exc, self.path(rel))}", rel)
            return
        self.parsed[rel] = text
        for code, message in check(text):
            yield Issue(code, f"{rel}: {message}", rel)

    def project(self, rel: str) -> Iterator[Issue]:
        if (gone := self.missing(f"{rel}/project.yaml")) is not None:
            yield gone
            return
        yield from self.yaml_file(f"{rel}/project.yaml", ProjectYaml)
        for run in self.dirs(f"{rel}/runs"):
            run_yaml = f"{rel}/runs/{run}/run.yaml"
            if (gone := self.missing(run_yaml)) is not None:
                yield gone
                continue
            yield from self.yaml_file(run_yaml, RunYaml)
            if (gone := self.missing(f"{rel}/runs/{run}/events.jsonl")) is not None:
                yield gone
        for name in self.files(f"{rel}/tasks", ".md"):
            yield from self.markdown(f"{rel}/tasks/{name}", self.task)
        for name in self.files(f"{rel}/artifacts", ".md"):
            yield from self.artifact(f"{rel}/artifacts/{name}")
        for pack in self.dirs(f"{rel}/context_packs"):
            manifest = f"{rel}/context_packs/{pack}/manifest.yaml"
            if (gone := self.missing(manifest)) is not None:
                yield gone
                continue
            yield from self.yaml_file(manifest, ContextPackManifestYaml)
            yield from self.required_yaml(f"{rel}/context_packs/{pack}/policy_snapshot.yaml",
                                          PolicySnapshotYaml)
        for pack in self.dirs(f"{rel}/share_packs"):
            yield from self.share_pack(f"{rel}/share_packs/{pack}/manifest.yaml")

    def share_pack(self, manifest: str) -> Iterator[Issue]:
        if (gone := self.missing(manifest)) is not None:
            yield gone
            return
        problems = list(self.yaml_file(manifest, SharePackManifestYaml))
        yield from problems
        if problems:
            return
        data = self.parsed[manifest]
        for item in data.get("included_artifacts", []):
            if not self.exists(item["bundle_relpath"]):
                yield Issue("missing_file", "Missing bundled artifact file: "
                            f"{item['bundle_relpath']}", item["bundle_relpath"])
        for item in data.get("included_files") or []:
            if not self.exists(item["bundle_relpath"]):
                yield Issue("missing_file", f"Missing bundled file: {item['bundle_relpath']}",
                            item["bundle_relpath"])

    def artifact(self, rel: str) -> Iterator[Issue]:
        problems = list(self.markdown(rel, lambda text: _markdown_issues(
            text, ArtifactFrontMatter, lambda data: ARTIFACT_HEADINGS[data["type"]])))
        yield from problems
        if problems:
            return
        data, _ = split_front_matter(self.parsed[rel], rel)
        strict: dict[str, tuple[type[BaseModel], str]] = {
            "memory_delta": (MemoryDeltaFrontMatter, "memory_delta_invalid"),
            "milestone_report": (MilestoneReportFrontMatter, "milestone_report_invalid")}
        if data["type"] not in strict:
            return
        model, code = strict[data["type"]]
        found = schema_issues(model, data)
        if found:
            yield Issue(code, f"{rel}: " + "; ".join(
                f"{p.path}: {p.message}" for p in found), rel)
            return
        if data["type"] == "memory_delta" and not self.exists(data["patch_file"]):
            yield Issue("missing_file", "Missing patch_file for memory delta: "
                        f"{data['patch_file']}", data["patch_file"])

    @staticmethod
    def task(text: str) -> Iterator[tuple[str, str]]:
        found = list(_markdown_issues(text, TaskFrontMatter, lambda data: TASK_HEADINGS))
        yield from found
        if any(code in ("frontmatter", "frontmatter_schema") for code, _ in found):
            return
        data, _ = split_front_matter(text, "task")
        if data["status"] != "draft":
            for key in ("deliverables", "acceptance_criteria", "milestones"):
                if not data.get(key):
                    yield ("contract_incomplete",
                           f"{key} must be non-empty when status is not draft")

    @staticmethod
    def help_request(text: str) -> Iterator[tuple[str, str]]:
        yield from _markdown_issues(text, HelpRequestFrontMatter, lambda data: HELP_HEADINGS)


def _markdown_issues(text: str, model: type[BaseModel],
                     headings: Callable[[Any], tuple[str, ...]]) -> Iterator[tuple[str, str]]:
    """A Markdown file's front matter and headings: (code, message) of each problem."""
    try:
        data, body = split_front_matter(text, "")
    except FileFormatError as exc:
        yield "frontmatter", (f"{exc.kind}: {exc.reason}"
                              if exc.kind == "frontmatter_yaml_parse_error" else exc.kind)
        return
    problems = schema_issues(model, data)
    for problem in problems:
        yield "frontmatter_schema", f"{problem.path}: {problem.message}"
    if problems:
        return
    for heading in headings(data):
        pattern = re.compile(rf"^\s*{re.escape('## ' + heading)}\s*$", re.IGNORECASE | re.M)
        if not pattern.search(body):
            yield "missing_heading", f"Missing heading: ## {heading}"


def _said(exc: BaseException, path: Path) -> str:
    if isinstance(exc, FileFormatError):
        return str(exc).removeprefix(f"{path}: ")
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
