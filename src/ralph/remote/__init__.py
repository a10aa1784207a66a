"""`ralph serve`: the remote API (docs/protocols/remote.md) over HTTP and WebSocket, for
phones and browsers: JSON-RPC 2.0 on `/ws`, OpenRPC discovery,
token authentication. A face: translation from the protocol to the services (ralph.rpc's
dispatcher, the agent sessions, the loop)."""
