"""MCP client configuration shown on Settings → Connect an agent.

The same configurations as README "## Connect an agent (MCP)", with this server's address
and, right after "Create a token for this agent", the new token in place of the placeholder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

MCP_PATH = "/mcp/"


@dataclass(frozen=True)
class Snippet:
    key: str
    label: str
    hint: str
    text: str


def mcp_url() -> str:
    return f"{settings.CORTEX_BASE_URL}{MCP_PATH}"


def mcp_snippets(secret: str | None = None) -> list[Snippet]:
    url = mcp_url()
    bearer = f"Bearer {secret}" if secret else "Bearer ${CORTEX_TOKEN}"
    shell_token = secret or "$CORTEX_TOKEN"
    project = {"mcpServers": {"cortex": {"type": "http", "url": url, "headers": {"Authorization": bearer}}}}
    desktop = {
        "mcpServers": {
            "cortex": {
                "command": "npx",
                "args": ["-y", "mcp-remote", url, "--header", "Authorization:${CORTEX_AUTH}"],
                "env": {"CORTEX_AUTH": f"Bearer {secret or 'ctx_…'}"},
            }
        }
    }
    return [
        Snippet(
            "claude-code",
            "Claude Code",
            "Run in a terminal.",
            f'claude mcp add --transport http cortex {url} --header "Authorization: Bearer {shell_token}"',
        ),
        Snippet(
            "mcp-json",
            ".mcp.json",
            "A project's MCP configuration (Claude Code, Cursor and other HTTP clients).",
            json.dumps(project, indent=2),
        ),
        Snippet(
            "claude-desktop",
            "Claude Desktop",
            "claude_desktop_config.json — Desktop starts local servers, so the mcp-remote bridge carries the header.",
            json.dumps(desktop, indent=2, ensure_ascii=False),
        ),
    ]
