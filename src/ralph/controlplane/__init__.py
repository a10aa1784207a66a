"""`ac server:start` (and `ralph company serve`): the AgentCompany v1 control plane, JSON-RPC
2.0 over newline-delimited stdio (docs/protocols/agentcompany.md). A face over ralph.rpc:
each method translates its params into a call of the company service (ralph.company)."""
