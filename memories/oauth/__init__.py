"""Cortex as the OAuth 2.1 authorization server of its MCP endpoint (see memories.models.oauth)."""
