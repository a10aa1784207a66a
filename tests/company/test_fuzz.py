"""Every method of the control plane with arbitrary params: the answer is always a result
or a -32602 / -32000 error (never an internal error, never a crash), and the workspace
still validates afterwards (nothing half-written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralph.company.workspace import validate_workspace
from ralph.controlplane.methods import build_registry
from tests.company.conftest import Client
from tests.company.fixtures import populated

REGISTRY = build_registry()
METHODS = tuple(name for name in REGISTRY.methods if not name.startswith("rpc."))
# Never drawn: params that would start a program (a fuzzer must not run whatever command it
# happens to spell).
UNSAFE = ("argv", "agent", "prompt_text")
ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=2),
                        max_leaves=5)


def strings(root: Path, ids: dict[str, str]) -> st.SearchStrategy[str]:
    return st.sampled_from([
        str(root), str(root.parent / "elsewhere"), "relative/ws", "..", "../../etc/passwd",
        "/", "/etc/passwd", *ids.values(), "human", "manager", "worker", "## Summary",
        "## Decisions", "work/projects/x/memory.md", "company/company.yaml", "running",
        "run.started", "local_x", "a\x00b",
    ]) | st.text(min_size=1, max_size=10)


def value_for(annotation: Any, root: Path, ids: dict[str, str]) -> st.SearchStrategy[Any]:
    """A value of the param's type most of the time (so that requests reach the service),
    sometimes anything at all."""
    shown = repr(annotation)
    text = strings(root, ids)
    if get_origin(annotation) is Literal:
        typed: st.SearchStrategy[Any] = st.sampled_from([*get_args(annotation), "nope"])
    elif "list[" in shown:
        typed = st.lists(text, max_size=3)
    elif "dict[" in shown:
        typed = st.dictionaries(text, text, max_size=2)
    elif "bool" in shown:
        typed = st.booleans()
    elif "int" in shown:
        typed = st.integers(-2, 6000)
    elif "Literal[" in shown:  # an optional literal (`Literal[...] | None`)
        choices = [arg for part in get_args(annotation) if get_origin(part) is Literal
                   for arg in get_args(part)]
        typed = st.sampled_from([*choices, "nope"])
    else:
        typed = text
    return st.one_of(typed, typed, typed, typed, ANY_JSON)


def params_for(method: str, root: Path, ids: dict[str, str]) -> st.SearchStrategy[Any]:
    model = REGISTRY.methods[method].params
    if model is None:
        return st.none()
    fields = {name: field for name, field in model.model_fields.items() if name not in UNSAFE}
    return st.fixed_dictionaries(
        {name: value_for(f.annotation, root, ids) for name, f in fields.items()
         if f.is_required()},
        optional={name: value_for(f.annotation, root, ids) for name, f in fields.items()
                  if not f.is_required()})


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_params_get_a_result_or_a_clear_error(tmp_path: Path, data: st.DataObject) -> None:
    root = tmp_path / "fuzz-ws"
    if not root.exists():
        populated(root)
    ids = populated_ids(root)
    client = Client()
    try:
        for _ in range(6):
            method = data.draw(st.sampled_from(METHODS))
            params = data.draw(params_for(method, root, ids) | st.none()
                               | st.dictionaries(st.text(max_size=5), ANY_JSON, max_size=3))
            answer = client.answer(method, params)
            if "error" in answer:
                assert answer["error"]["code"] in (-32602, -32000), (method, params, answer)
                assert answer["error"]["message"]
    finally:
        client.close()
    assert validate_workspace(root) == [], "a request left the workspace invalid"


def populated_ids(root: Path) -> dict[str, str]:
    """The ids of the fixture workspace's files (read back, so every example shares one)."""
    found: dict[str, str] = {}
    for kind, sub in (("proj", "work/projects"), ("agent", "org/agents"), ("team", "org/teams")):
        for entry in sorted((root / sub).iterdir()):
            found[kind] = entry.name
    project = root / "work/projects" / found["proj"]
    for kind, sub in (("run", "runs"), ("ctx", "context_packs")):
        for entry in sorted((project / sub).iterdir()):
            found[kind] = entry.name
    for path in sorted((project / "artifacts").glob("*.md")):
        found[f"art{len(found)}"] = path.stem
    for path in sorted((project / "tasks").glob("*.md")):
        found["task"] = path.stem
    return found
