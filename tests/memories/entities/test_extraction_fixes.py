"""Entity extraction on real-looking text: members are people (linked to their membership),
rates are not repositories, imperatives and headings do not open names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import signed_in

from memories.analysis.entities import heuristic_extract
from memories.models import Entity, Memory
from memories.services.memories import MemoryDraft, memory_create


def found(text: str, **kwargs: Any) -> set[tuple[str, str]]:
    return {(e.kind, e.name) for e in heuristic_extract(text, **kwargs).entities}


@pytest.mark.parametrize(
    "text",
    [
        "The free tier is limited to _100/min._ and bursts to 38/hour, 9k/month, 0.40/km, 502/413.",
        "Robots report at 60 robots/hour; telemetry/v3 is the schema path; the go/no-go call is Friday.",
        "Check the specific repo you deploy from; the config defines repository access.",
    ],
)
def test_rates_ratios_and_adjectives_are_not_repositories(text: str) -> None:
    assert not {name for kind, name in found(text) if kind == "repo"}


def test_real_repositories_are_still_found() -> None:
    names = found("Schemas live in the acme/protos repo; fix it in acme/billing-service and the `nav-stack` repository.")
    assert {("repo", "acme/protos"), ("repo", "acme/billing-service"), ("repo", "nav-stack")} <= names


@pytest.mark.parametrize(
    ("text", "not_entities", "entities"),
    [
        ("Get VPN access from IT before your first day.", {"Get VPN"}, set()),
        ("Install Cisco AnyConnect and sign in with Okta.", {"Install Cisco AnyConnect"}, {("other", "Cisco AnyConnect")}),
        ("## Verifying Dock API tokens", {"Verifying Dock API"}, {("other", "Dock API")}),
        ("- Use Teleport for production SSH.", {"Use Teleport"}, set()),
        ("Hi Beatriz, the Fleet Console UI shipped.", {"Hi Beatriz", "Fleet Console UI"}, {("other", "Fleet Console")}),
        ("Ask the Head of People or a Site Manager.", {"Head of People", "Site Manager"}, set()),
        ("Kestrel's QA signed off; Fleet Console's Redis was restarted.", {"Kestrel's QA", "Fleet Console's Redis"}, set()),
    ],
)
def test_imperatives_greetings_roles_and_possessives_do_not_make_entities(
    text: str, not_entities: set[str], entities: set[tuple[str, str]]
) -> None:
    names = found(text)
    assert not {name for _kind, name in names} & not_entities
    assert entities <= names


def test_tickets_are_whole_and_one_digit_models_are_not_tickets() -> None:
    names = found("Postmortem INC-2024-092 follows PLAT-1423; the DC-1 dock is fine.")
    assert ("ticket", "INC-2024-092") in names and ("ticket", "PLAT-1423") in names
    assert not {n for k, n in names if k == "ticket"} - {"INC-2024-092", "PLAT-1423"}


def test_known_people_are_people_wherever_they_stand() -> None:
    text = "Decision: Ada Okafor to approve the budget. Fleet Console is owned by platform. Priya Raman will follow up."
    without = found(text)
    assert ("person", "Ada Okafor") not in without  # "to approve" alone says nothing about a person
    with_people = found(text, people=["Ada Okafor", "Priya Nair"])
    assert ("person", "Ada Okafor") in with_people
    assert ("person", "Priya Raman") in with_people  # a known given name with a surname
    assert ("person", "Fleet Console") not in with_people
    # An organization's name is not a person, whatever verb follows.
    assert ("person", "Northwind Logistics") not in found("Northwind Logistics signed the renewal.")


@pytest.fixture
def write(principal_of: Callable[..., Any], django_capture_on_commit_callbacks: Any) -> Callable[..., Memory]:
    def write(membership: Any, content: str, **fields: Any) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            return memory_create(principal=principal_of(membership), draft=MemoryDraft(content=content, **fields)).memory

    return write


def test_a_members_name_becomes_a_person_linked_to_the_member(acme: dict[str, Any], write: Any, outsider: Any) -> None:
    manager = acme["manager"]
    manager.user.name = "Mo Lindqvist"
    manager.user.save(update_fields=["name"])
    write(acme["employee"], "Decision: Mo Lindqvist to sign off the Q3 hiring plan.", title="Hiring plan")

    entity = Entity.objects.get(key="mo lindqvist")
    assert entity.kind == "person"
    page = signed_in(acme["employee"]).get(f"/entities/{entity.pk}/").content.decode()
    assert 'data-testid="entity-member"' in page and "/memories/?author=Mo%20Lindqvist" in page
    # Someone of another organization sees neither the entity nor the member.
    assert signed_in(outsider).get(f"/entities/{entity.pk}/").status_code == 404


def test_a_person_who_is_not_a_member_has_no_member_card(acme: dict[str, Any], write: Any) -> None:
    write(acme["employee"], "Maria Chen owns the acme/checkout-api repository.")
    entity = Entity.objects.get(key="maria chen")
    assert entity.kind == "person"
    page = signed_in(acme["employee"]).get(f"/entities/{entity.pk}/").content.decode()
    assert 'data-testid="entity-member"' not in page
