"""A project's artifacts (`work/projects/<p>/artifacts/<art>.md`, evidence files such as
`<art>.patch` beside them): finding and parsing one, and `artifact.read`, which gives an
artifact to an actor the visibility policy lets read it (the producer's team decides
`team` visibility)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ralph.company.files import FileFormatError, read_text, read_yaml, split_front_matter
from ralph.company.layout import (
    AGENTS,
    PROJECTS,
    CompanyError,
    component,
    existing_project,
    require_workspace,
)
from ralph.company.policy import Actor, Resource, enforce
from ralph.company.schemas import AgentYaml, Loose, Str1, Visibility, schema_issues


class ArtifactReadFrontMatter(Loose):
    """What reading needs of any artifact's front matter."""

    id: Str1
    visibility: Visibility
    produced_by: Str1
    run_id: Str1 = None  # type: ignore[assignment]


def artifact_relpath(project_id: str, artifact_id: str, ext: str = ".md") -> str:
    return (f"{PROJECTS}/{component(project_id, 'project_id')}/artifacts/"
            f"{component(artifact_id, 'artifact_id')}{ext}")


def read_artifact_file(root: Path, project_id: str, artifact_id: str) -> tuple[str, str]:
    """(relative path, text) of an artifact of a project the workspace holds;
    CompanyError naming it if there is none."""
    require_workspace(root)
    existing_project(root, project_id)
    rel = artifact_relpath(project_id, artifact_id)
    try:
        return rel, read_text(root / rel)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise CompanyError(f"Unknown artifact: {artifact_id} (project {project_id})",
                           project_id=project_id, artifact_id=artifact_id) from None


def parse_artifact(rel: str, text: str, model: type[BaseModel],
                   what: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of an artifact whose front matter must be a `model`;
    CompanyError saying what is wrong with it otherwise."""
    try:
        data, body = split_front_matter(text, rel)
    except FileFormatError as exc:
        raise CompanyError(f"Invalid {what} {rel}: {exc.kind}", artifact_relpath=rel) from None
    problems = schema_issues(model, data)
    if problems:
        said = "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems)
        raise CompanyError(f"Invalid {what} {rel}: {said}", artifact_relpath=rel)
    return data, body


def producer_team(root: Path, produced_by: str) -> str | None:
    """The team of the agent that produced an artifact (None for a human, an unknown agent
    or an agent without a team)."""
    if not produced_by.startswith("agent_"):
        return None
    try:
        data = read_yaml(root / AGENTS / component(produced_by, "produced_by") / "agent.yaml")
    except (CompanyError, OSError, FileFormatError):
        return None
    if schema_issues(AgentYaml, data):
        return None
    team: str | None = data.get("team_id")
    return team


def evidence_exists(root: Path, project_id: str, artifact_id: str, exts: tuple[str, ...]) -> bool:
    """Whether an evidence file `<artifact_id><ext>` is beside the project's artifacts."""
    try:
        return any((root / artifact_relpath(project_id, artifact_id, ext)).exists()
                   for ext in exts)
    except CompanyError:  # an id that is a path names no evidence
        return False


def read_artifact(root: Path, project_id: str, artifact_id: str, actor_id: str,
                  actor_role: str, actor_team_id: str | None = None,
                  run_id: str | None = None) -> dict[str, Any]:
    """`artifact.read`: {artifact_id, artifact_relpath, frontmatter, markdown} when the
    policy lets the actor read it; a refusal (and a `policy.denied` event in the log of
    `run_id`, else of the artifact's run) when it does not."""
    if run_id is not None:
        component(run_id, "run_id")
    rel, markdown = read_artifact_file(root, project_id, artifact_id)
    data, _ = parse_artifact(rel, markdown, ArtifactReadFrontMatter, "artifact")
    meta = ArtifactReadFrontMatter.model_validate(data)
    enforce(root, project_id, run_id or meta.run_id,
            Actor(actor_id, actor_role, actor_team_id), "read",
            Resource(meta.id, meta.visibility, "artifact",
                     team_id=producer_team(root, meta.produced_by),
                     producing_actor_id=meta.produced_by))
    return {"artifact_id": meta.id, "artifact_relpath": rel, "frontmatter": data,
            "markdown": markdown}
