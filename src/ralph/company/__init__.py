"""The AgentCompany domain (docs/protocols/agentcompany.md): a workspace of YAML and
Markdown files (company, policy, teams, agents, projects, tasks, runs, artifacts, reviews,
help requests) as the AgentCompany v1 control plane writes them, so that a workspace either
implementation wrote opens with the other. A service: the `ac` server is a face over it."""
