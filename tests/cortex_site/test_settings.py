"""Settings come from strict environment helpers: typos fail at start-up, secrets are never defaulted."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from cortex_site.env import env_bool, env_choice, env_float, env_int, env_list, env_str

ROOT = Path(__file__).resolve().parents[2]
PRINT_SECRET_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def _start_django(env: dict[str, str], code: str = PRINT_SECRET_KEY) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter importing the real settings with exactly this environment."""
    base = {
        "PATH": os.environ.get("PATH", ""),
        "DJANGO_SETTINGS_MODULE": "cortex_site.settings",
        # Settings only parse the URLs; nothing connects to them here.
        "DATABASE_URL": "postgresql://nobody@/nothing",
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        (" YES ", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("off", False),
        ("", False),
    ],
)
def test_env_bool_accepts_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("CORTEX_SOME_FLAG", raw)
    assert env_bool("CORTEX_SOME_FLAG", not expected) is expected


def test_env_bool_typo_is_an_error_not_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_SOME_FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match=r"CORTEX_SOME_FLAG='ture' is not a boolean"):
        env_bool("CORTEX_SOME_FLAG", False)


def test_env_bool_unset_uses_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_SOME_FLAG", raising=False)
    assert env_bool("CORTEX_SOME_FLAG", True) is True
    assert env_bool("CORTEX_SOME_FLAG", False) is False


def test_env_int_and_float_reject_garbage_and_values_below_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_N", "12x")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("CORTEX_N", 1)
    with pytest.raises(ImproperlyConfigured, match="not a number"):
        env_float("CORTEX_N", 1.0)
    monkeypatch.setenv("CORTEX_N", "-3")
    with pytest.raises(ImproperlyConfigured, match="must be at least 0"):
        env_int("CORTEX_N", 1, minimum=0)
    with pytest.raises(ImproperlyConfigured, match=r"must be at least 0\.5"):
        env_float("CORTEX_N", 1.0, minimum=0.5)
    monkeypatch.setenv("CORTEX_N", "42")
    assert env_int("CORTEX_N", 1, minimum=0) == 42
    assert env_float("CORTEX_N", 1.0) == 42.0


def test_env_choice_names_the_allowed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_PICK", "Gemni")
    with pytest.raises(ImproperlyConfigured, match="must be one of: a, gemini"):
        env_choice("CORTEX_PICK", "a", {"a", "gemini"})
    monkeypatch.setenv("CORTEX_PICK", " GEMINI ")
    assert env_choice("CORTEX_PICK", "a", {"a", "gemini"}) == "gemini"


def test_env_list_and_str(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_HOSTS", " a.example , ,b.example,")
    assert env_list("CORTEX_HOSTS", ["x"]) == ["a.example", "b.example"]
    monkeypatch.delenv("CORTEX_HOSTS")
    assert env_list("CORTEX_HOSTS", ["x"]) == ["x"]
    assert env_str("CORTEX_HOSTS") is None
    assert env_str("CORTEX_HOSTS", "d") == "d"


def test_a_typo_in_a_boolean_setting_stops_start_up(tmp_path: Path) -> None:
    result = _start_django({"DEBUG": "1", "SECRET_KEY": "k", "CORTEX_HOME": str(tmp_path), "CORTEX_DEMO": "yess"})
    assert result.returncode != 0
    assert "CORTEX_DEMO='yess' is not a boolean" in result.stderr


def test_secret_key_is_required_when_debug_is_off(tmp_path: Path) -> None:
    result = _start_django({"DEBUG": "0", "CORTEX_HOME": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr
    # Nothing was generated as a fallback.
    assert not (tmp_path / "secret_key").exists()


def test_with_debug_off_the_key_make_run_generated_under_cortex_home_is_used(tmp_path: Path) -> None:
    # `make run` writes the key before it starts anything; the CLI and the web server read it.
    (tmp_path / "secret_key").write_text("generated-by-the-runner")
    result = _start_django({"DEBUG": "0", "CORTEX_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "generated-by-the-runner"


def test_secret_key_from_the_environment_wins(tmp_path: Path) -> None:
    result = _start_django({"DEBUG": "0", "SECRET_KEY": "from-the-environment", "CORTEX_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from-the-environment"
    assert not (tmp_path / "secret_key").exists()


def test_debug_generates_a_secret_key_once_and_keeps_it_under_cortex_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _start_django({"DEBUG": "1", "CORTEX_HOME": str(home)})
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50
    key_file = home / "secret_key"
    assert key_file.read_text().strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600  # readable by its owner only
    second = _start_django({"DEBUG": "1", "CORTEX_HOME": str(home)})
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == key
    other = _start_django({"DEBUG": "1", "CORTEX_HOME": str(tmp_path / "elsewhere")})
    assert other.stdout.strip() != key


def test_an_empty_secret_key_file_is_replaced_not_used(tmp_path: Path) -> None:
    # A start killed mid-write must not leave Django running with an empty key.
    (tmp_path / "secret_key").write_text("")
    result = _start_django({"DEBUG": "1", "CORTEX_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) >= 50
    assert (tmp_path / "secret_key").read_text() == result.stdout.strip()
