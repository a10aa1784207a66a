"""The control plane's methods (docs/protocols/agentcompany.md): names and params as
AgentCompany protocol v1 writes them, results as its implementation answers. Unknown
params are ignored (as the original's schemas drop them); a bad one is -32602 with each
problem in `data`; anything the company service refuses is -32000 with its message and
`data`. Each group of methods lives in its own module with a `register(registry, plane)`.

Requests run concurrently (a long wait never holds up another request), but the requests
about one workspace are handled in the order they arrived (ralph.controlplane.plane.InOrder):
a client that sends `workspace.init` and then `workspace.validate` without waiting for the
first answer, as clients of the original (which handled one request at a time) may, gets
the validation of the workspace just made.
"""

from __future__ import annotations

from ralph import __version__
from ralph.controlplane import (
    admin_methods,
    event_methods,
    governance_methods,
    index_methods,
    run_methods,
    session_methods,
    workspace_methods,
)
from ralph.controlplane.plane import Plane
from ralph.rpc import Registry

GROUPS = (workspace_methods, admin_methods, run_methods, session_methods, governance_methods,
          index_methods, event_methods)


def build_registry(plane: Plane | None = None) -> Registry:
    plane = plane or Plane()
    registry = Registry(title="AgentCompany control plane (Ralph)", version=__version__,
                        description="AgentCompany protocol v1: JSON-RPC 2.0 over stdio")
    for group in GROUPS:
        group.register(registry, plane)
    return registry
