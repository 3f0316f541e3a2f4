"""`cortex hook prompt` and `cortex hook stop`: Cortex inside a coding agent's loop (capture →
store → search → inject), talking to Cortex's REST API with the person's own token.

Coding agents run hook commands with a JSON payload on standard input (Claude Code's shapes;
other agents can send the same fields):

- prompt-submit (`UserPromptSubmit`: `{"session_id", "transcript_path", "cwd", "prompt", ...}`):
  `cortex hook prompt` recalls the prompt with a token budget and prints the packed memories —
  full content for the best, snippets for the next, ids for the rest — which the agent adds to
  its context. Nothing is printed when nothing is a confident match.
- session end (`Stop`: `{"session_id", "transcript_path", ...}`): `cortex hook stop` reads the
  session's transcript (JSONL), asks Cortex for the decisions stated in it (the same grounded
  extractor as meeting briefs: only sentences found verbatim), and stores each as a memory with an
  idempotency key per session and decision — running it again stores nothing twice — where the
  token's default scope says (else the organization's rule, else public-docs).

A hook never blocks the agent: a failure (Cortex down, a bad token) prints one line on stderr and
exits 0. Configuration from the environment: CORTEX_URL (default http://127.0.0.1:8000) and
CORTEX_TOKEN (a token created in Settings; never printed).

This module runs on a developer's machine next to the agent: it needs no database and imports
nothing of the server.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT = httpx.Timeout(10.0, connect=3.0)
MAX_TRANSCRIPT_CHARS = 60_000  # the most recent part of a long session
SOURCE = "Claude Code"


class HookError(Exception):
    """Something the person should know, in one line; the agent goes on regardless."""


def _client() -> httpx.Client:
    token = os.environ.get("CORTEX_TOKEN", "").strip()
    if not token:
        raise HookError("set CORTEX_TOKEN to a Cortex token (Settings → API tokens) to use the hook")
    base = (os.environ.get("CORTEX_URL") or DEFAULT_URL).rstrip("/")
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)


def _json(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
            reason = f"{body.get('error_code')}: {body.get('message')}"
        except ValueError:
            reason = f"HTTP {response.status_code}"
        raise HookError(f"Cortex refused the request ({reason})")
    return response.json()


def _payload(stdin: IO[str]) -> dict[str, Any]:
    try:
        payload = json.loads(stdin.read() or "{}")
    except ValueError as exc:
        raise HookError(f"the hook payload on stdin is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookError("the hook payload on stdin must be a JSON object")
    return payload


def prompt(stdin: IO[str], stdout: IO[str], *, max_tokens: int, limit: int) -> None:
    text = str(_payload(stdin).get("prompt") or "").strip()
    if not text:
        return
    with _client() as client:
        body = _json(client.post("/api/recall", json={"query": text[:2000], "limit": limit, "max_tokens": max_tokens}))
    if not body.get("confident") or not body.get("results"):
        return  # noise is not worth the agent's context
    stdout.write("<cortex-memory>\nYour team's memory (Cortex) on this prompt; cite what you use.\n")
    stdout.write(body["packed"])
    stdout.write("\n</cortex-memory>\n")


def transcript_text(path: Path) -> str:
    """The user's and the assistant's words of a Claude Code transcript (JSONL), oldest first."""
    parts: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "\n\n".join(p.strip() for p in parts if p and p.strip())[-MAX_TRANSCRIPT_CHARS:]


def stop(stdin: IO[str], stdout: IO[str]) -> None:
    payload = _payload(stdin)
    session = str(payload.get("session_id") or "")
    path = Path(str(payload.get("transcript_path") or ""))
    if not session or not path.is_file():
        raise HookError("the Stop payload names no session_id or readable transcript_path")
    text = transcript_text(path)
    if not text:
        return
    with _client() as client:
        found = _json(client.post("/api/memories/extract-decisions", json={"transcript": text, "wait": 20}))
        decisions = found.get("decisions") or []
        stored = []
        for decision in decisions:
            key = hashlib.sha256(f"{session}\n{decision['text']}".encode()).hexdigest()
            memory = _json(
                client.post(
                    "/api/memories",
                    json={
                        "title": decision["text"][:120],
                        "content": f"{decision['text']}\n\n> {decision['quote']}\n\n(From a coding-agent session, {session}.)",
                        "category": "decision",
                        "source": SOURCE,
                        "tags": ["coding-agent"],
                        "idempotency_key": f"hook-{key}",
                    },
                )
            )
            stored.append(memory)
    if stored:
        stdout.write(f"Cortex remembered {len(stored)} decision(s) from this session:\n")
        for memory in stored:
            stdout.write(f"  - {memory['title']} (scope {memory['scope']})\n")


def main(argv: Sequence[str] | None = None, stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="cortex hook", description="Cortex hooks for coding agents")
    sub = parser.add_subparsers(dest="event", required=True)
    on_prompt = sub.add_parser("prompt", help="on prompt submit: print the memories worth adding to the agent's context")
    on_prompt.add_argument("--max-tokens", type=int, default=1500, help="budget of the printed context (default 1500)")
    on_prompt.add_argument("--limit", type=int, default=8, help="memories to consider (default 8)")
    sub.add_parser("stop", help="at session end: remember the decisions stated in the session")
    args = parser.parse_args(argv)
    try:
        if args.event == "prompt":
            prompt(stdin, stdout, max_tokens=max(100, args.max_tokens), limit=max(1, min(50, args.limit)))
        else:
            stop(stdin, stdout)
    except HookError as exc:
        print(f"cortex hook: {exc}", file=sys.stderr)
    except httpx.HTTPError as exc:
        print(f"cortex hook: could not reach Cortex ({exc.__class__.__name__}); the agent goes on without it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
