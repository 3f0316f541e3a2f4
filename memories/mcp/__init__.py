"""The MCP endpoint: `remember`, `recall`, `list_memories` and `get_memory` for AI agents.

`server` holds the tools (thin interfaces over the same services and selectors REST uses),
`auth` the bearer-token verifier the SDK calls, `endpoint` the ASGI app mounted at /mcp/.
"""
