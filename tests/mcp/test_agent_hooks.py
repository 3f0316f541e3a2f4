"""`cortex hook prompt|stop` against a live Cortex on loopback, fed Claude Code's hook payloads."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support import remember

from cortex_site.agent_hooks import main
from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)
FIXTURES = Path(__file__).parent / "fixtures" / "hooks"


@pytest.fixture
def hook_env(server_url: str, monkeypatch: pytest.MonkeyPatch, acme: dict[str, Any], make_token: Any) -> dict[str, Any]:
    monkeypatch.setenv("CORTEX_URL", server_url)
    monkeypatch.setenv("CORTEX_TOKEN", make_token(acme["employee"]))
    return acme


def run(*argv: str, stdin: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out)
    return code, out.getvalue()


def test_prompt_hook_prints_the_memories_worth_the_agents_context(hook_env: dict[str, Any]) -> None:
    remember(
        hook_env["employee"],
        "Retries on the payment queue use exponential backoff capped at ten minutes.",
        title="Payment queue backoff",
        scope="engineering",
    )
    remember(hook_env["exec"], "Payment queue vendor contract renews in May.", title="Queue vendor", scope="sales")
    code, out = run("prompt", "--max-tokens", "300", stdin=(FIXTURES / "user_prompt_submit.json").read_text())
    assert code == 0
    assert out.startswith("<cortex-memory>") and "Payment queue backoff" in out and "capped at ten minutes" in out
    assert "vendor contract" not in out  # the employee cannot read sales
    assert len(out) <= 300 * 4 + 200  # the packed part fits the budget; the wrapper adds two lines


def test_prompt_hook_stays_silent_on_noise_and_never_fails_the_agent(hook_env: dict[str, Any], monkeypatch: Any) -> None:
    payload = json.loads((FIXTURES / "user_prompt_submit.json").read_text())
    payload["prompt"] = "zebra quasar marmalade"
    assert run("prompt", stdin=json.dumps(payload)) == (0, "")
    monkeypatch.setenv("CORTEX_TOKEN", "ctx_bad_token")
    assert run("prompt", stdin=(FIXTURES / "user_prompt_submit.json").read_text()) == (0, "")
    assert run("prompt", stdin="not json") == (0, "")


def test_stop_hook_remembers_the_sessions_decisions_once(hook_env: dict[str, Any], tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text())
    payload = (FIXTURES / "stop.json").read_text().replace("TRANSCRIPT", str(transcript))
    code, out = run("stop", stdin=payload)
    assert code == 0 and "Cortex remembered 1 decision(s)" in out, out
    stored = Memory.objects.get(source="Claude Code")
    assert "cap the payment queue backoff at ten minutes" in stored.content
    assert stored.category == "decision" and stored.author_id == hook_env["employee"].user_id
    run("stop", stdin=payload)  # the same session again: nothing new
    assert Memory.objects.filter(source="Claude Code").count() == 1


def test_the_cortex_console_script_runs_the_hooks_without_a_database(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CORTEX_TOKEN": ""}  # no DATABASE_URL, nothing running
    script = Path(sys.executable).parent / "cortex"
    answer = subprocess.run(
        [str(script), "hook", "prompt"], input='{"prompt": "hello"}', capture_output=True, text=True, env=env, timeout=60
    )
    assert answer.returncode == 0 and answer.stdout == ""
    assert "set CORTEX_TOKEN" in answer.stderr  # the hook's own sentence, not the CLI's "start make run first"
