"""The editor bridge: `ralph bridge`, the loop over JSON-RPC 2.0 on stdio."""
