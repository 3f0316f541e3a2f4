"""cortex import / export: files and JSONL in through the write pipeline, JSONL out, round trips."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from document_files import make_docx, make_pdf

from audit.models import AuditEvent
from memories.access import CliPrincipal, Principal
from memories.models import Membership, Memory, Organization
from memories.services.memories import MemoryDraft, memory_create, memory_supersede

pytestmark = pytest.mark.django_db

ROUND_TRIP_FIELDS = (
    "title",
    "content",
    "scope",
    "category",
    "source",
    "source_url",
    "tags",
    "clearance_min",
    "valid_from",
    "valid_until",
)


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("cortex", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def run_failing(*args: str) -> tuple[str, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("cortex", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue(), str(caught.value)


def import_(paths: list[Path], org: Organization, member: Membership, *extra: str) -> tuple[str, str]:
    return run("import", *map(str, paths), "--org", org.slug, "--user", member.user.email, "--no-progress", *extra)


def export(org: Organization, *extra: str) -> list[dict[str, Any]]:
    out, _ = run("export", "--org", org.slug, *extra)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def org(make_org: Callable[..., Organization], make_scope: Callable[..., Any]) -> Organization:
    organization = make_org()
    make_scope(organization, "engineering")
    make_scope(organization, "leadership")
    return organization


@pytest.fixture
def writer(org: Organization, make_member: Callable[..., Membership]) -> Membership:
    return make_member(org, "Executive", grants={"engineering": True, "leadership": True})


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "handbook"
    (root / "policies" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "onboarding.md").write_text("# Onboarding checklist\n\nLaptop, badge, and the on-call shadow week.\n")
    (root / "policies" / "rate-limits.txt").write_text("All external APIs are rate limited at 20 requests per second.\n")
    (root / "policies" / "deep" / "pricing.docx").write_bytes(
        make_docx(["Starter is $49 per robot per month."], title="Pricing 2026")
    )
    (root / "policies" / "deep" / "incident.pdf").write_bytes(
        make_pdf([["INC-2025-031: expired TLS certificate on the Dock API."]])
    )
    (root / "logo.png").write_bytes(b"\x89PNG not text")
    (root / ".hidden.md").write_text("never imported")
    (root / ".git" / "HEAD.md").write_text("never imported either")
    return root


# -- import: documents ------------------------------------------------------------------------------
def test_import_walks_a_folder_and_stores_one_memory_per_document(org: Organization, writer: Membership, folder: Path) -> None:
    out, err = import_([folder], org, writer)

    assert "4 created, 0 deduplicated, 0 failed, 1 skipped" in out
    assert err == ""
    memories = {m.title: m for m in Memory.objects.filter(organization=org)}
    # A text file is titled by its first line; a PDF without a title property by its file name.
    assert set(memories) == {
        "Onboarding checklist",
        "All external APIs are rate limited at 20 requests per second.",
        "Pricing 2026",
        "incident",
    }
    pricing = memories["Pricing 2026"]
    assert pricing.content == "Starter is $49 per robot per month."
    assert pricing.source == "Import"
    assert pricing.scope.slug == "public-docs"
    assert pricing.author_id == writer.user.pk and pricing.created_by_id == writer.user.pk
    assert memories["incident"].chunks.count() == 1


def test_import_honours_scope_and_category_and_is_audited_as_the_cli_acting_for_the_user(
    org: Organization, writer: Membership, folder: Path
) -> None:
    import_([folder / "onboarding.md"], org, writer, "--scope", "engineering", "--category", "runbook")

    memory = Memory.objects.get(organization=org)
    assert (memory.scope.slug, memory.category) == ("engineering", "runbook")
    event = AuditEvent.objects.get(organization=org, action="memory.create")
    assert event.actor_kind == AuditEvent.ActorKind.CLI
    assert event.actor_user_id == writer.user.pk
    assert writer.user.email in event.actor_label


def test_running_the_same_import_again_creates_nothing_new(org: Organization, writer: Membership, folder: Path) -> None:
    import_([folder], org, writer)

    out, _ = import_([folder], org, writer)

    assert "0 created, 4 deduplicated, 0 failed" in out
    assert Memory.objects.filter(organization=org).count() == 4


def test_an_edited_file_is_imported_again_as_a_new_memory(org: Organization, writer: Membership, folder: Path) -> None:
    import_([folder], org, writer)
    (folder / "policies" / "rate-limits.txt").write_text("All external APIs are rate limited at 50 requests per second.\n")

    out, _ = import_([folder], org, writer)

    assert "1 created, 3 deduplicated" in out


def test_bad_files_fail_one_by_one_with_their_reason_and_the_rest_is_imported(
    org: Organization, writer: Membership, tmp_path: Path
) -> None:
    (tmp_path / "good.md").write_text("# Good\n\nKept.\n")
    (tmp_path / "latin1.txt").write_bytes("Ça coûte 5 €".encode("cp1252"))
    (tmp_path / "scan.pdf").write_bytes(make_pdf([[]]))
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "empty.txt").write_text("   \n")

    out, err, message = run_failing(
        "import", str(tmp_path), str(tmp_path / "missing.md"), "--org", org.slug, "--user", writer.user.email, "--no-progress"
    )

    assert "1 created, 0 deduplicated, 5 failed" in out
    assert "failed latin1.txt: NOT_UTF8:" in err
    assert "failed scan.pdf: NO_TEXT:" in err and "OCR is not supported" in err
    assert "failed broken.docx: CORRUPT_FILE:" in err
    assert "failed empty.txt: EMPTY_CONTENT:" in err
    assert "missing.md: NOT_FOUND:" in err
    assert "5 item(s) failed" in message
    assert list(Memory.objects.filter(organization=org).values_list("title", flat=True)) == ["Good"]


def test_a_file_named_explicitly_with_an_unsupported_type_fails_listing_the_supported_ones(
    org: Organization, writer: Membership, tmp_path: Path
) -> None:
    slides = tmp_path / "deck.pptx"
    slides.write_bytes(b"slides")

    _, err, _ = run_failing("import", str(slides), "--org", org.slug, "--user", writer.user.email, "--no-progress")

    assert "failed deck.pptx: UNSUPPORTED_FILE_TYPE:" in err
    assert ".txt, .md, .docx, .pdf" in err


def test_contractor_cannot_import_into_a_scope_they_cannot_write_and_the_file_says_why(
    org: Organization, make_member: Callable[..., Membership], folder: Path
) -> None:
    contractor = make_member(org, "Contractor", grants={"engineering": False})

    out, err, _ = run_failing(
        "import",
        str(folder / "onboarding.md"),
        "--org",
        org.slug,
        "--user",
        contractor.user.email,
        "--scope",
        "engineering",
        "--no-progress",
    )

    assert "0 created, 0 deduplicated, 1 failed" in out
    assert "failed onboarding.md: SCOPE_NOT_WRITABLE: You cannot write to scope 'engineering'" in err
    assert not Memory.objects.filter(organization=org).exists()


def test_a_scope_the_user_cannot_see_is_reported_as_unknown(
    org: Organization, make_member: Callable[..., Membership], folder: Path
) -> None:
    contractor = make_member(org, "Contractor")

    _, err, _ = run_failing(
        "import",
        str(folder / "onboarding.md"),
        "--org",
        org.slug,
        "--user",
        contractor.user.email,
        "--scope",
        "leadership",
        "--no-progress",
    )

    assert "UNKNOWN_SCOPE" in err


def test_unknown_organization_or_non_member_is_refused_before_anything_is_read(
    org: Organization, make_org: Callable[..., Organization], make_member: Callable[..., Membership], folder: Path
) -> None:
    outsider = make_member(make_org())

    _, _, message = run_failing("import", str(folder), "--org", "no-such-org", "--user", outsider.user.email)
    assert "Unknown organization 'no-such-org'" in message
    _, _, message = run_failing("import", str(folder), "--org", org.slug, "--user", outsider.user.email)
    assert f"is not a member of {org.slug}" in message
    assert not Memory.objects.exists()


def test_the_progress_bar_goes_to_stderr(
    org: Organization, writer: Membership, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    call_command("cortex", "import", str(folder), "--org", org.slug, "--user", writer.user.email, stdout=out)

    assert "100%" in capsys.readouterr().err
    assert "100%" not in out.getvalue()


# -- import: JSONL --------------------------------------------------------------------------------
def test_jsonl_lines_become_memories_with_their_own_fields(org: Organization, writer: Membership, tmp_path: Path) -> None:
    dump = write_jsonl(
        tmp_path / "dump.jsonl",
        [
            {
                "title": "API Rate Limiting Policy",
                "content": "All external API endpoints must implement rate limiting.",
                "scope": "engineering",
                "category": "policy",
                "source": "GitHub",
                "source_url": "https://github.com/acme/api/pull/123",
                "author": {"id": "5a1c0c3e-0000-4000-8000-000000000000", "name": "John Doe"},
                "tags": ["api", "security"],
                "clearance_min": "Manager",
                "valid_from": "2025-01-15T10:30:00Z",
                "valid_until": None,
                "id": "0d9a3f52-1111-4111-8111-111111111111",
                "status": "active",
                "created_at": "2025-01-15T10:31:00Z",
                "supersedes": None,
            },
            {"content": "Board meets monthly.", "author": "Laura Whitman"},
        ],
    )

    out, _ = import_([dump], org, writer, "--scope", "leadership")

    assert "2 created, 0 deduplicated, 0 failed" in out
    policy = Memory.objects.get(organization=org, title="API Rate Limiting Policy")
    assert (policy.scope.slug, policy.category, policy.source) == ("engineering", "policy", "GitHub")
    assert policy.source_url == "https://github.com/acme/api/pull/123"
    assert policy.author_name == "John Doe" and policy.author_id is None
    assert policy.tags == ["api", "security"]
    assert policy.clearance_rank == 2
    assert policy.valid_from == datetime(2025, 1, 15, 10, 30, tzinfo=UTC)
    board = Memory.objects.get(organization=org, content="Board meets monthly.")
    assert (board.scope.slug, board.source, board.author_name) == ("leadership", "Import", "Laura Whitman")


def test_bad_jsonl_lines_fail_alone_with_their_line_number(org: Organization, writer: Membership, tmp_path: Path) -> None:
    dump = write_jsonl(
        tmp_path / "dump.jsonl",
        [
            {"content": "Fine line one."},
            "{not json",
            {"content": "Has a stray field.", "priority": "high"},
            ["a", "list"],
            {"title": "no content"},
            {"content": "Too secret for this writer.", "clearance_min": "Board"},
            {"content": "Bad date.", "valid_from": "last tuesday"},
            "",
            {"content": "Fine line nine."},
        ],
    )

    out, err, _ = run_failing("import", str(dump), "--org", org.slug, "--user", writer.user.email, "--no-progress")

    assert "2 created, 0 deduplicated, 6 failed" in out
    assert "failed dump.jsonl:2: INVALID_JSON:" in err
    assert "failed dump.jsonl:3: UNKNOWN_FIELDS: Unknown field: priority." in err
    assert "failed dump.jsonl:4: INVALID_JSON:" in err
    assert "failed dump.jsonl:5: INVALID_FIELD: content is required" in err
    assert "failed dump.jsonl:6: UNKNOWN_CLEARANCE:" in err
    assert "failed dump.jsonl:7: INVALID_DATE:" in err
    assert set(Memory.objects.filter(organization=org).values_list("content", flat=True)) == {"Fine line one.", "Fine line nine."}


def test_contractor_jsonl_line_above_their_clearance_fails_and_the_others_are_stored(
    org: Organization, make_member: Callable[..., Membership], tmp_path: Path
) -> None:
    contractor = make_member(org, "Contractor")
    dump = write_jsonl(
        tmp_path / "dump.jsonl",
        [{"content": "Public runbook."}, {"content": "Exec compensation bands.", "clearance_min": "Executive"}],
    )

    out, err, _ = run_failing("import", str(dump), "--org", org.slug, "--user", contractor.user.email, "--no-progress")

    assert "1 created, 0 deduplicated, 1 failed" in out
    assert "failed dump.jsonl:2: CLEARANCE_ABOVE_OWN:" in err


def test_reimporting_jsonl_creates_nothing_new_even_when_lines_move(
    org: Organization, writer: Membership, tmp_path: Path
) -> None:
    lines = [{"id": "m-1", "content": "First."}, {"content": "Second, without an id."}]
    import_([write_jsonl(tmp_path / "a.jsonl", lines)], org, writer)

    out, _ = import_([write_jsonl(tmp_path / "a.jsonl", [{"content": "Inserted before."}, *reversed(lines)])], org, writer)

    assert "1 created, 2 deduplicated, 0 failed" in out
    assert Memory.objects.filter(organization=org).count() == 3


def test_redacted_lines_of_a_history_export_are_skipped_and_superseded_ones_stay_superseded(
    org: Organization, writer: Membership, tmp_path: Path
) -> None:
    dump = write_jsonl(
        tmp_path / "history.jsonl",
        [
            {"content": "Old version.", "status": "superseded"},
            {"content": "[redacted]", "status": "redacted"},
            {"content": "Now.", "status": "active"},
        ],
    )

    out, _ = import_([dump], org, writer)

    assert "2 created, 0 deduplicated, 0 failed, 1 skipped" in out
    assert sorted(Memory.objects.filter(organization=org).values_list("content", "status")) == [
        ("Now.", "active"),
        ("Old version.", "superseded"),
    ]


# -- export ----------------------------------------------------------------------------------------
def _store(membership: Membership, **fields: Any) -> Memory:
    # An earlier import (it may state an author_name and the source's own times).
    principal = CliPrincipal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))
    return memory_create(principal=principal, draft=MemoryDraft(**fields)).memory


def test_export_is_the_operators_view_of_one_organization_only(
    org: Organization, writer: Membership, make_org: Callable[..., Organization], make_member: Callable[..., Membership]
) -> None:
    _store(writer, content="Exec-only plan.", scope="leadership", clearance_min="Executive")
    _store(writer, content="Public note.")
    other = make_org()
    _store(make_member(other, "Executive"), content="Another organization's secret.")

    lines = export(org)

    assert sorted(line["content"] for line in lines) == ["Exec-only plan.", "Public note."]
    assert all("secret" not in json.dumps(line) for line in lines)
    assert {line["scope"] for line in lines} == {"leadership", "public-docs"}
    assert set(lines[0]) == {
        "id", "title", "content", "scope", "category", "source", "source_url", "author", "tags", "clearance_min",
        "status", "valid_from", "valid_until", "created_at", "updated_at", "supersedes", "superseded_by",
    }  # fmt: skip
    event = AuditEvent.objects.get(organization=org, action="memory.export")
    assert event.actor_kind == AuditEvent.ActorKind.CLI
    assert event.details == {"scope": None, "status": "active", "count": 2}
    assert not AuditEvent.objects.filter(organization=other, action="memory.export").exists()


def test_export_narrows_to_a_scope_and_history_needs_status_all(org: Organization, writer: Membership) -> None:
    old = _store(writer, content="Deploys on Tuesdays.", scope="engineering")
    principal = Principal(Membership.objects.select_related("organization", "user").get(pk=writer.pk))
    memory_supersede(principal=principal, memory_id=old.pk, changes={"content": "Deploys on Thursdays."})
    _store(writer, content="Public note.")

    assert [line["content"] for line in export(org, "--scope", "engineering")] == ["Deploys on Thursdays."]
    history = export(org, "--scope", "engineering", "--status", "all")
    assert [(line["content"], line["status"]) for line in history] == [
        ("Deploys on Tuesdays.", "superseded"),
        ("Deploys on Thursdays.", "active"),
    ]
    _, _, message = run_failing("export", "--org", org.slug, "--scope", "nope")
    assert "Unknown scope 'nope'" in message


def test_export_to_a_file_is_private_and_complete(org: Organization, writer: Membership, tmp_path: Path) -> None:
    _store(writer, content="Café décisions: ship on Fridays — never.")
    target = tmp_path / "out.jsonl"

    _, err = run("export", "--org", org.slug, "--output", str(target), "--no-progress")

    assert target.stat().st_mode & 0o777 == 0o600
    assert [json.loads(line)["content"] for line in target.read_text(encoding="utf-8").splitlines()] == [
        "Café décisions: ship on Fridays — never."
    ]
    assert f"Exported 1 active memories of {org.slug} to {target}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_export_then_import_into_a_fresh_organization_round_trips(
    org: Organization,
    writer: Membership,
    make_org: Callable[..., Organization],
    make_scope: Callable[..., Any],
    make_member: Callable[..., Membership],
    tmp_path: Path,
) -> None:
    _store(
        writer,
        title="API Rate Limiting Policy",
        content="All external API endpoints must implement rate limiting.\n\nBurst: 20 requests per second.",
        scope="engineering",
        category="policy",
        source="GitHub",
        source_url="https://github.com/acme/api/pull/123",
        author_name="John Doe",
        tags=["api", "security"],
        clearance_min="Manager",
        valid_from=datetime(2025, 1, 15, 10, 30, 12, 345000, tzinfo=UTC),
        valid_until=datetime(2030, 1, 1, tzinfo=UTC),
    )
    _store(writer, content="Exec offsite agenda " + "with a long body. " * 120, scope="leadership", clearance_min="Executive")
    _store(writer, content="Welcome! Read the handbook first.", tags=["onboarding"])
    dump = tmp_path / "acme.jsonl"
    run("export", "--org", org.slug, "--output", str(dump), "--no-progress")

    fresh = make_org()
    make_scope(fresh, "engineering")
    make_scope(fresh, "leadership")
    admin = make_member(fresh, "Executive", admin=True, grants={"engineering": True, "leadership": True})
    out, _ = import_([dump], fresh, admin)
    again, _ = import_([dump], fresh, admin)

    assert "3 created, 0 deduplicated, 0 failed" in out
    assert "0 created, 3 deduplicated, 0 failed" in again

    def shape(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            ({k: line[k] for k in ROUND_TRIP_FIELDS} | {"author": line["author"]["name"]} for line in lines),
            key=lambda x: x["title"],
        )

    first = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert shape(export(fresh)) == shape(first)
