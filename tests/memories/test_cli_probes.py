"""Operator CLI probed with hostile or sloppy input: one sentence and a non-zero exit, never a traceback."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memories.models import Membership, Memory, Organization

pytestmark = pytest.mark.django_db


def run_failing(*args: str) -> tuple[str, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("cortex", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue(), str(caught.value)


@pytest.fixture
def org(make_org: Callable[..., Organization], make_scope: Callable[..., Any]) -> Organization:
    organization = make_org()
    make_scope(organization, "engineering")
    return organization


@pytest.fixture
def writer(org: Organization, make_member: Callable[..., Membership]) -> Membership:
    return make_member(org, "Executive", grants={"engineering": True})


def test_a_jsonl_line_with_a_lone_surrogate_fails_alone_and_the_rest_is_imported(
    org: Organization, writer: Membership, tmp_path: Path
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        '{"content": "Fine line one."}\n'
        '{"content": "Half an emoji \\ud83d here."}\n'
        '{"content": "Fine line three.", "tags": ["cut\\udc00tag"]}\n'
        '{"content": "Fine line four."}\n',
        encoding="utf-8",
    )

    out, err, message = run_failing("import", str(dump), "--org", org.slug, "--user", writer.user.email, "--no-progress")

    assert "2 created, 0 deduplicated, 2 failed" in out
    assert "failed dump.jsonl:2: NOT_UTF8:" in err
    assert "failed dump.jsonl:3: NOT_UTF8:" in err
    assert "2 item(s) failed" in message
    assert set(Memory.objects.filter(organization=org).values_list("content", flat=True)) == {
        "Fine line one.",
        "Fine line four.",
    }


@pytest.mark.parametrize("where", ["missing/dir/out.jsonl", "."])
def test_export_to_a_path_that_cannot_be_written_is_one_sentence_and_leaves_nothing(
    org: Organization, writer: Membership, tmp_path: Path, where: str
) -> None:
    target = tmp_path / where

    _, _, message = run_failing("export", "--org", org.slug, "--output", str(target), "--no-progress")

    assert message.startswith(f"Cannot write the export to {target}:")
    assert message.endswith(".")
    assert "\n" not in message
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]


@pytest.mark.parametrize(
    "line",
    [
        '{"content": "A NUL in a tag.", "tags": ["on\\u0000call"]}',
        '{"content": "A NUL in the author.", "author": "Jane\\u0000 Doe"}',
        '{"content": "A NUL in the id.", "id": "a\\u0000b"}',
    ],
)
def test_a_jsonl_line_with_a_nul_fails_alone_and_the_rest_of_its_batch_is_imported(
    org: Organization, writer: Membership, tmp_path: Path, line: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(f'{{"content": "Fine line one."}}\n{line}\n{{"content": "Fine line three."}}\n', encoding="utf-8")

    out, err, _ = run_failing("import", str(dump), "--org", org.slug, "--user", writer.user.email, "--no-progress")

    assert "2 created, 0 deduplicated, 1 failed" in out
    assert "failed dump.jsonl:2: INVALID_TEXT:" in err
    assert set(Memory.objects.filter(organization=org).values_list("content", flat=True)) == {
        "Fine line one.",
        "Fine line three.",
    }


@pytest.mark.parametrize(
    "args",
    [
        ("org", "create", "longname", "--name", "N" * 151),
        ("scope", "create", "wide", "--org", "ORG", "--name", "S" * 151),
        ("user", "add", "long@name.test", "--org", "ORG", "--clearance", "Employee", "--name", "P" * 151),
    ],
    ids=["organization", "scope", "person"],
)
def test_a_name_longer_than_its_column_is_one_sentence_and_nothing_is_created(org: Organization, args: tuple[str, ...]) -> None:
    counts = (Organization.objects.count(), Membership.objects.count())

    _, _, message = run_failing(*(org.slug if a == "ORG" else a for a in args))

    assert message.endswith("characters; at most 150.") and "\n" not in message
    assert (Organization.objects.count(), Membership.objects.count()) == counts
