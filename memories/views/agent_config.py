"""MCP client configuration shown on Settings → Connect an agent.

The same configurations as README "## Connect an agent (MCP)", with this server's address
and, right after "Create a token for this agent", the new token in place of the placeholder.
Clients that sign in with OAuth (Claude.ai, Claude Desktop, Claude Code, VS Code, Cursor) need
only the URL: Cortex's consent page does the rest.

The address is CORTEX_BASE_URL when it is set, else the host the page was requested on — so
the page names the port Cortex really serves, not a default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

MCP_PATH = "/mcp/"


@dataclass(frozen=True)
class Snippet:
    key: str
    label: str
    hint: str
    text: str


def public_base_url(request: HttpRequest | None = None) -> str:
    if settings.CORTEX_BASE_URL_EXPLICIT or request is None:
        return settings.CORTEX_BASE_URL
    return request.build_absolute_uri("/").rstrip("/")


def mcp_url(request: HttpRequest | None = None) -> str:
    return f"{public_base_url(request)}{MCP_PATH}"


def oauth_snippets(request: HttpRequest | None = None) -> list[Snippet]:
    """How each client connects with OAuth: no token to paste; the person consents in Cortex."""
    url = mcp_url(request)
    return [
        Snippet(
            "oauth-claude-ai",
            "Claude.ai and Claude Desktop",
            "Settings → Connectors → Add custom connector; paste the URL, then sign in to Cortex and choose what it may use.",
            url,
        ),
        Snippet(
            "oauth-claude-code",
            "Claude Code",
            "Add the server, then run /mcp in Claude Code and pick cortex → Authenticate.",
            f"claude mcp add --transport http cortex {url}",
        ),
        Snippet(
            "oauth-vscode",
            "VS Code",
            ".vscode/mcp.json — VS Code opens Cortex's consent page on first use.",
            json.dumps({"servers": {"cortex": {"type": "http", "url": url}}}, indent=2),
        ),
        Snippet(
            "oauth-cursor",
            "Cursor",
            "~/.cursor/mcp.json — Cursor shows “Needs login”; click it to open Cortex's consent page.",
            json.dumps({"mcpServers": {"cortex": {"url": url}}}, indent=2),
        ),
    ]


def mcp_snippets(secret: str | None = None, request: HttpRequest | None = None) -> list[Snippet]:
    url = mcp_url(request)
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


def hook_snippet(request: HttpRequest | None = None) -> Snippet:
    """Claude Code's settings.json hooks running `cortex hook prompt|stop` (cortex_site.agent_hooks)."""
    settings_json = {
        "env": {"CORTEX_URL": public_base_url(request), "CORTEX_TOKEN": "ctx_…"},
        "hooks": {
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "cortex hook prompt --max-tokens 1500"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "cortex hook stop"}]}],
        },
    }
    return Snippet(
        "claude-code-hooks",
        "Claude Code hooks",
        ".claude/settings.json — recalled memories join each prompt; decisions of a session are remembered at its end.",
        json.dumps(settings_json, indent=2, ensure_ascii=False),
    )
