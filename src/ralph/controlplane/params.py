"""Param types the control plane's methods share, as the original's zod schemas write them
(`z.string().min(1)`, the role and visibility enums), plus `workspace_dir`, which must be
absolute here (the original took a relative one relative to its own working directory,
which a client does not know)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr


def _absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError(f"must be an absolute path, not {value!r}")
    if "\x00" in value:
        raise ValueError("must not hold a NUL character")
    # One spelling a workspace: `/a/../ws/` and `/ws` are one workspace to every method.
    return os.path.normpath(value)


Str1 = Annotated[StrictStr, Field(min_length=1)]
WorkspaceDir = Annotated[StrictStr, Field(min_length=1), AfterValidator(_absolute)]
Role = Literal["human", "ceo", "director", "manager", "worker"]
Visibility = Literal["private_agent", "team", "managers", "org"]
RunStatus = Literal["running", "ended", "failed", "stopped"]


class Params(BaseModel):
    """Unknown keys are ignored, as the original's schemas drop them."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class WorkspaceParams(Params):
    workspace_dir: WorkspaceDir
