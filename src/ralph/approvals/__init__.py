"""Tool-permission requests of agent sessions: rules (ralph.approvals.rules), requests and
answers through the store (ralph.approvals.desk), the policy a session runs under
(ralph.approvals.policy), and the agents' mechanisms that ask (Claude Code's PreToolUse hook:
ralph.approvals.claude_hook; opencode's server: ralph.approvals.opencode).

Kept light on imports: Claude Code starts the hook once per tool call."""
