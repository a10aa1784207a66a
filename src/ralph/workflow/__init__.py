"""The role workflow (`ralph workflow`): planner, questioner, executor and reviewer agents
working in a session directory (`.ralph-sessions/<SESSION_ID>/`) under typed contracts, with
the orchestrator checking every claim a role makes against the files.

The contracts and the conversation with a role:
- `contracts`: each role's input and output as pydantic models, the registry, the JSON Schemas.
- `prompts`: the prompt a role is given (its instructions, its input as `KEY: value` lines,
  its output schema) and the retry prompt quoting the problems of an invalid answer.
- `answers`: the output read from the agent's final answer (its last JSON object) and
  validated, or the problems found, one line each.

The session's files and the checks on them: `session_dir` (ids and paths), `tasks_file`
(tasks.md), `progress` (progress.md and its markers), `reports` (PART 1 / PART 2 and the
verdict), `integrity` (a session directory that is consistent), `snapshot` and `checks` (the
side effects a role claims, held against the files).

`errors.WorkflowError` is the root of the workflow's errors.
"""
