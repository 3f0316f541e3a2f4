"""The app shell: sign-in page, navigation, organization switcher, error pages, style guide,
and the CSP promise that no rendered page carries inline script."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from memories.templatetags.cortex_ui import clearance_badge, relative_time, scope_badge, source_icon

PASSWORD = "pw-for-tests-1"


class _Page(HTMLParser):
    """Just enough of an HTML parser to ask what a page contains."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def find(self, tag: str, **wanted: str) -> list[dict[str, str]]:
        return [
            attrs
            for t, attrs in self.tags
            if t == tag and all(attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in wanted.items())
        ]


def parse(response: Any) -> _Page:
    page = _Page()
    page.feed(response.content.decode())
    return page


def assert_no_inline_script(response: Any) -> None:
    scripts = parse(response).find("script")
    assert scripts, "the page loads its scripts"
    for attrs in scripts:
        assert attrs.get("src"), f"inline <script> found: {attrs}"
    html = response.content.decode()
    assert not re.search(r"\son[a-z]+\s*=", html, re.IGNORECASE), "inline event handler attribute found"


def signed_in(membership: Any) -> Client:
    client = Client()
    assert client.login(username=membership.user.email, password=PASSWORD)
    return client


# --- sign in ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_login_page_has_labelled_email_and_password_fields(client: Client) -> None:
    response = client.get("/login/?next=/memories/")
    assert response.status_code == 200
    page = parse(response)
    for field_id, name in (("id_username", "username"), ("id_password", "password")):
        assert page.find("input", id=field_id, name=name), name
        assert page.find("label", for_=field_id), f"{name} has a label"
    assert page.find("input", type="hidden", name="next", value="/memories/")
    assert b"Sign in" in response.content
    assert_no_inline_script(response)


@pytest.mark.django_db
def test_bad_login_shows_the_error_and_keeps_the_email(client: Client, make_org: Any, make_member: Any) -> None:
    member = make_member(make_org(), email="kept@example.test")
    response = client.post("/login/", {"username": "kept@example.test", "password": "wrong-password", "next": ""})
    assert response.status_code == 200
    page = parse(response)
    assert page.find("input", id="id_username", value="kept@example.test")
    assert page.find("div", role="alert")
    assert b"correct email and password" in response.content
    assert page.find("input", id="id_password", aria_invalid="true")
    assert not any(attrs.get("value") == "wrong-password" for attrs in page.find("input"))
    assert member.user.email.encode() in response.content


@pytest.mark.django_db
def test_good_login_lands_in_the_shell(client: Client, make_org: Any, make_member: Any) -> None:
    member = make_member(make_org(name="Acme"), email="lands@example.test")
    response = client.post("/login/", {"username": "lands@example.test", "password": PASSWORD, "next": ""}, follow=True)
    assert response.status_code == 200
    assert response.context["principal"].membership.pk == member.pk
    assert b'class="shell"' in response.content


# --- the shell -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_shell_shows_organization_switcher_name_and_clearance(make_org: Any, make_member: Any) -> None:
    acme = make_org(slug="acme", name="Acme Corp")
    globex = make_org(slug="globex", name="Globex")
    make_org(slug="initech", name="Initech")  # not a member: must not be offered
    member = make_member(acme, "Manager", email="ada@example.test")
    make_member(globex, "Contractor", email="ada@example.test", password=None)
    member.user.name = "Ada Lovelace"
    member.user.save(update_fields=["name"])

    response = signed_in(member).get("/")
    assert response.status_code == 200
    page = parse(response)
    assert page.find("form", action="/org/switch", method="post")
    options = [attrs["value"] for attrs in page.find("option")]
    assert options == ["acme", "globex"]
    assert page.find("option", value="acme", selected="")
    assert page.find("select", id="org-select", name="organization")
    assert page.find("label", for_="org-select")
    html = response.content.decode()
    assert "Initech" not in html
    assert "Ada Lovelace" in html
    assert "ada@example.test" in html
    assert 'class="badge badge-clearance clearance-manager"' in html
    assert page.find("form", role="search", action="/memories/", method="get")
    assert page.find("input", name="q", placeholder="Search memories  /")
    assert page.find("form", action="/logout/", method="post")
    assert page.find("a", href="#main")  # skip link
    assert page.find("meta", name="htmx-config")
    body = page.find("body")[0]
    assert '"X-CSRFToken"' in body["hx-headers"]
    assert_no_inline_script(response)


@pytest.mark.django_db
def test_switching_organization_changes_the_shell(make_org: Any, make_member: Any) -> None:
    acme = make_org(slug="acme", name="Acme Corp")
    globex = make_org(slug="globex", name="Globex")
    member = make_member(acme, "Manager", email="two@example.test")
    make_member(globex, "Contractor", email="two@example.test", password=None)
    client = signed_in(member)

    response = client.post("/org/switch", {"organization": "globex", "next": "/"}, follow=True)
    assert response.status_code == 200
    page = parse(response)
    assert page.find("option", value="globex", selected="")
    assert b"clearance-contractor" in response.content
    assert b'<h1 class="page-title">Globex</h1>' in response.content


@pytest.mark.django_db
def test_audit_link_only_for_admins(make_org: Any, make_member: Any) -> None:
    org = make_org()
    admin = make_member(org, "Executive", admin=True)
    member = make_member(org, "Executive")

    assert parse(signed_in(admin).get("/")).find("a", href="/audit/")
    assert not parse(signed_in(member).get("/")).find("a", href="/audit/")


@pytest.mark.django_db
def test_nav_marks_the_current_page(make_org: Any, make_member: Any) -> None:
    client = signed_in(make_member(make_org()))
    page = parse(client.get("/"))
    current = [attrs["href"] for attrs in page.find("a", aria_current="page")]
    assert current == ["/"]
    for href in ("/memories/", "/memories/new/", "/conflicts/", "/connectors/", "/settings/"):
        assert page.find("a", href=href, **{"class": "nav-link"}), href


@pytest.mark.django_db
def test_nav_prefix_matching_prefers_the_deeper_item(rf: Any, make_org: Any, make_member: Any) -> None:
    from django.template import Context, Template

    template = Template(
        '{% load cortex_ui %}{% nav_link "/memories/" "Memories" exclude="/memories/new/" %}'
        '{% nav_link "/memories/new/" "Add" %}{% nav_link "/" "Home" %}'
    )

    def current(path: str) -> list[str]:
        html = template.render(Context({"request": rf.get(path)}))
        return re.findall(r'href="([^"]+)" aria-current="page"', html)

    assert current("/memories/") == ["/memories/"]
    assert current("/memories/3f1c/") == ["/memories/"]
    assert current("/memories/new/") == ["/memories/new/"]
    assert current("/") == ["/"]
    assert current("/settings/") == []


@pytest.mark.django_db
def test_home_lists_readable_scopes_and_the_empty_state(make_org: Any, make_member: Any, make_scope: Any) -> None:
    org = make_org(name="Acme Corp")
    make_scope(org, "engineering", name="Engineering")
    make_scope(org, "secret-plans", name="Secret plans")
    member = make_member(org, grants={"engineering": False})

    response = signed_in(member).get("/")
    html = response.content.decode()
    assert "Your scopes" in html
    assert "public-docs" in html
    assert "engineering" in html
    assert "secret-plans" not in html
    assert "No memories yet" in html
    assert parse(response).find("a", href="/memories/new/", **{"class": "btn btn-primary"})


@pytest.mark.django_db
def test_user_without_organization_sees_the_centred_page(make_org: Any) -> None:
    from memories.models import User

    User.objects.create_user("loner@example.test", PASSWORD)
    client = Client()
    assert client.login(username="loner@example.test", password=PASSWORD)
    response = client.get("/")
    assert response.status_code == 403
    assert b"centered-layout" in response.content
    assert b"not in an organization" in response.content
    assert parse(response).find("form", action="/logout/", method="post")
    assert_no_inline_script(response)


# --- error pages ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_logged_out_404_is_centred(client: Client) -> None:
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert 'class="centered-layout"' in html
    assert 'class="shell"' not in html
    assert "couldn’t find that page" in html
    assert parse(response).find("a", href="/login/")
    assert_no_inline_script(response)


@pytest.mark.django_db
def test_logged_in_404_stays_in_the_shell(make_org: Any, make_member: Any) -> None:
    response = signed_in(make_member(make_org())).get("/no-such-page/")
    assert response.status_code == 404
    assert b'class="shell"' in response.content
    assert b"couldn\xe2\x80\x99t find that page" in response.content
    assert_no_inline_script(response)


def test_500_page_is_standalone_and_shows_the_request_id() -> None:
    from django.template import loader

    html = loader.get_template("errors/500.html").render({"request_id": "req-1234abcd"})
    assert "req-1234abcd" in html
    assert "<script" not in html
    assert "/static/css/cortex.css" in html


# --- style guide, static files, filters ----------------------------------------------------------------------


@pytest.mark.django_db
def test_style_guide_is_for_staff_only(make_org: Any, make_member: Any) -> None:
    org = make_org()
    member = make_member(org)
    assert Client().get("/styleguide/").status_code == 404
    assert signed_in(member).get("/styleguide/").status_code == 404

    staff = make_member(org, admin=True)
    staff.user.is_staff = True
    staff.user.save(update_fields=["is_staff"])
    response = signed_in(staff).get("/styleguide/")
    assert response.status_code == 200
    html = response.content.decode()
    for component in (
        "btn-primary",
        "field-error",
        "badge-clearance",
        "item-list",
        "tabs",
        "empty-state",
        "alert-success",
        "dialog",
        "code-block",
        "skeleton",
        "load-more",
        "score-bar",
        "spark",
    ):
        assert component in html, component
    assert_no_inline_script(response)

    more = signed_in(staff).get("/styleguide/?page=2", headers={"HX-Request": "true"})
    assert more.status_code == 200
    assert b"<html" not in more.content
    assert b'class="item is-muted"' in more.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/static/css/cortex.css", "/static/vendor/htmx.min.js", "/static/js/cortex.js", "/static/img/favicon.svg"]
)
def test_static_files_are_served(client: Client, path: str) -> None:
    response: Any = client.get(path)
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert len(body) > 100


def test_badges_escape_what_they_are_given() -> None:
    assert "<b>" not in clearance_badge("<b>Boss</b>")
    assert "&lt;b&gt;" in clearance_badge("<b>Boss</b>")
    assert "clearance-other" in clearance_badge("Board")
    assert "clearance-executive" in clearance_badge("Executive")
    assert "&lt;script&gt;" in scope_badge("<script>")
    assert "source-drive" in source_icon("Google Drive")
    assert "source-github" in source_icon("github")
    assert "source-other" in source_icon("Fax")
    assert "Google Drive" in source_icon("gdrive", "label")


def test_relative_time_renders_a_time_element() -> None:
    from datetime import timedelta

    from django.utils import timezone

    html = relative_time(timezone.now() - timedelta(days=3))
    assert html.startswith("<time datetime=")
    assert "data-relative" in html
    assert "3\xa0days ago" in html or "3 days ago" in html
    assert "—" in relative_time(None)
