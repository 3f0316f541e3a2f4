"""Browser forms for setting up a connector: one per kind, on a shared base.

A form only parses and presents: it turns fields into the `config` and `credentials` dicts of
DESIGN §12, and the services (which run the source's own `validate_config`) decide what is
allowed. Choices come from the Principal: the scopes it can write, clearances up to its own —
a connector acts as the member who installs it, so it can never write where they cannot.
Secrets are never rendered back: on edit, an empty secret field keeps the stored one.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from django import forms

from cortex_site.errors import CortexError
from memories.access import Principal
from memories.forms import clearance_choices, set_choices
from memories.services.denials import denial_record

# Which form field a service error belongs to; anything else is shown above the form.
FIELD_FOR_ERROR = {
    "INVALID_NAME": "name",
    "UNKNOWN_SCOPE": "scope",
    "SCOPE_NOT_WRITABLE": "scope",
    "UNKNOWN_CLEARANCE": "clearance_min",
    "CLEARANCE_ABOVE_OWN": "clearance_min",
    "INVALID_REPOSITORY": "repositories",
    "REPOSITORIES_REQUIRED": "repositories",
    "NO_CHANNELS": "channels",
    "INVALID_CHANNEL": "channels",
    "PRIVATE_CHANNEL_NEEDS_GRANTED_SCOPE": "channels",
    "INVALID_API_URL": "api_url",
    "INVALID_MODE": "mode",
    "INVALID_CREDENTIALS": None,
    "MISSING_CREDENTIALS": None,
}

SECRET_KEEP_HELP = "Leave empty to keep the stored one."  # noqa: S105 - help text, not a secret


def attach_error(form: forms.Form, exc: CortexError) -> None:
    """Put a service error next to the field it is about (or on the form when none fits).

    A source names the config or credentials key it refuses in `details["field"]`; the form's
    field of that name (or the one the error code is about) shows the sentence.
    """
    denial_record(exc)  # a refusal shown next to a field is still a refusal
    named = exc.details.get("field") if isinstance(exc.details, dict) else None
    field = named if isinstance(named, str) and named in form.fields else FIELD_FOR_ERROR.get(exc.error_code)
    form.add_error(field if field in form.fields else None, exc.message)


def lines(raw: str) -> list[str]:
    """One entry per line (commas also separate); blanks dropped, order and first occurrence kept."""
    seen: dict[str, None] = {}
    for part in re.split(r"[\n,]", raw or ""):
        if part.strip():
            seen.setdefault(part.strip(), None)
    return list(seen)


class SecretInput(forms.PasswordInput):
    """A password box that never echoes a value back (render_value stays False) and is not autofilled."""

    def __init__(self) -> None:
        super().__init__(attrs={"autocomplete": "off", "spellcheck": "false", "class": "input-mono"})


class ConnectorForm(forms.Form):
    """What every connector has: a name, where its memories go, and its schedule."""

    kind: ClassVar[str] = ""
    # Which of the schedule fields (per-run cap, first-run window, interval) this kind offers.
    schedule_fields: ClassVar[tuple[str, ...]] = ("per_run_cap", "first_run_days", "interval_minutes")
    # Credential fields of this kind: (field name, key in the credentials dict).
    secret_fields: ClassVar[tuple[str, ...]] = ()
    # Secrets a new connector must be given (an edit may leave them empty to keep the stored ones).
    required_secrets: ClassVar[tuple[str, ...]] = ()
    # "google" / "notion": the kind can also be connected through the provider's OAuth consent
    # (connectors/services/oauth.py), whose button posts the form with oauth=1.
    oauth_provider: ClassVar[str | None] = None
    oauth_label: ClassVar[str] = ""
    # The form fields holding the OAuth client typed in (empty: the client configured for this Cortex).
    oauth_client_fields: ClassVar[tuple[str, str]] = ("client_id", "client_secret")

    name = forms.CharField(max_length=150, help_text="How the connector appears on cards and in the audit log.")
    scope = forms.ChoiceField(
        required=False,
        help_text="Where its memories go unless a channel or repository says otherwise. Only scopes you can write are listed.",
    )
    clearance_min = forms.ChoiceField(label="Minimum clearance", help_text="Who can read what it brings in: this rung and above.")
    per_run_cap = forms.IntegerField(label="Items per run", required=False, min_value=1, max_value=10_000)
    first_run_days = forms.IntegerField(label="First run reaches back (days)", required=False, min_value=1, max_value=3650)
    interval_minutes = forms.IntegerField(label="Run every (minutes)", required=False, min_value=1, max_value=7 * 24 * 60)

    def __init__(self, *args: Any, principal: Principal, editing: bool = False, connecting: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.editing = editing
        # Connecting through OAuth: the provider supplies the token, so no secret is required here.
        self.connecting = connecting
        default_scope = ("", "By the organization’s source rule (else public-docs)")
        set_choices(self, "scope", [default_scope, *[(s.slug, s.slug) for s in principal.writable_scopes()]])
        set_choices(self, "clearance_min", clearance_choices(principal))
        self._describe_schedule()
        for name in self.secret_fields:
            field = self.fields[name]
            field.widget = SecretInput()
            field.required = False
            if editing:
                field.help_text = f"{field.help_text} {SECRET_KEEP_HELP}".strip()

    def _describe_schedule(self) -> None:
        """Keep this kind's schedule fields, each saying the source's own default when left empty."""
        from connectors.registry import source_class

        for name in ("per_run_cap", "first_run_days", "interval_minutes"):
            if name not in self.schedule_fields:
                del self.fields[name]
        source = source_class(self.kind)
        defaults = {
            "per_run_cap": f"Empty: {source.default_cap} per run. Backfill raises it for one run."
            if source.default_cap
            else "Empty: no limit.",
            "first_run_days": f"Empty: the last {source.default_first_run_days} days."
            if source.default_first_run_days
            else "Empty: from now on.",
            "interval_minutes": f"Empty: every {source.default_interval_minutes} minutes.",
        }
        for name, text in defaults.items():
            if name in self.fields and not self.fields[name].help_text:
                self.fields[name].help_text = text

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.editing and not self.connecting:
            for name in self.required_secrets:
                if not cleaned.get(name):
                    self.add_error(name, "Required to connect.")
        return cleaned

    # -- how the template groups the fields -------------------------------------------------------------

    COMMON = ("name", "scope", "clearance_min", "per_run_cap", "first_run_days", "interval_minutes", "api_url")
    SECRETS_GROUP = ("credentials_json", "token_uri", "oauth_client_id", "oauth_client_secret")

    def source_group(self) -> list[forms.BoundField]:
        """What to sync: the kind's own non-secret fields."""
        skip = {*self.COMMON, *self.secret_fields, *self.SECRETS_GROUP}
        return [self[name] for name in self.fields if name not in skip]

    def credentials_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if name in self.secret_fields or name in self.SECRETS_GROUP]

    def advanced_group(self) -> list[forms.BoundField]:
        return [self[name] for name in ("per_run_cap", "first_run_days", "interval_minutes", "api_url") if name in self.fields]

    # -- what the services receive --------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The non-secret settings (DESIGN §12), without empty optional values."""
        return {}

    def credentials(self) -> dict[str, Any]:
        """The secrets typed in; on edit only the ones given (the rest are kept)."""
        return {name: self.cleaned_data[name] for name in self.secret_fields if self.cleaned_data.get(name)}

    def oauth_client(self) -> tuple[str, str]:
        """The OAuth client id and secret typed in for "Connect …" (empty: the configured one)."""
        id_field, secret_field = self.oauth_client_fields
        return str(self.cleaned_data.get(id_field) or ""), str(self.cleaned_data.get(secret_field) or "")

    def oauth_help(self) -> str:
        """What the Connect button does, and whose OAuth client it uses."""
        from connectors.services.oauth import PROVIDER_LABELS, client_from_environment

        if not self.oauth_provider:
            return ""
        label = PROVIDER_LABELS[self.oauth_provider]
        client = (
            "with the OAuth client configured for this Cortex, unless you type one above"
            if client_from_environment(self.oauth_provider)
            else "with the OAuth client id and secret typed above"
        )
        return f"Or sign in at {label} {client}: Cortex keeps the token it grants, encrypted."

    def settings(self) -> dict[str, Any]:
        """The connector's own fields (name, scope, clearance, schedule)."""
        data = self.cleaned_data
        values: dict[str, Any] = {
            "name": data["name"],
            "scope": data.get("scope") or None,
            "clearance_min": data["clearance_min"],
        }
        for name in ("per_run_cap", "first_run_days"):
            if name in self.fields:
                values[name] = data.get(name)  # empty: the kind's default
        if data.get("interval_minutes"):
            values["interval_minutes"] = data["interval_minutes"]
        return values

    def draft(self) -> dict[str, Any]:
        """A new connector's settings when it connects through OAuth: created once the provider answers."""
        return {"config": self.config(), **self.settings()}

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        """The form's starting values for an existing connector (never its secrets)."""
        config = connector.config or {}
        return {
            "name": connector.name,
            "scope": connector.scope.slug if connector.scope_id else "",
            "clearance_min": clearance,
            "per_run_cap": connector.per_run_cap,
            "first_run_days": connector.first_run_days,
            "interval_minutes": connector.interval_minutes,
            "api_url": config.get("api_url", ""),
            "mode": config.get("mode", ""),
        }


def _api_url_field(example: str) -> forms.URLField:
    return forms.URLField(
        label="API base URL",
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=f"Only for a self-hosted edition or a proxy; empty means {example}.",
    )


class GitHubForm(ConnectorForm):
    kind = "github"
    schedule_fields = ("interval_minutes",)
    secret_fields = ("token", "webhook_secret")

    repositories = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "acme/robot-firmware\nacme/docs", "class": "input-mono"}),
        help_text="One owner/name per line. Merged pull requests of these repositories become memories.",
    )
    mode = forms.ChoiceField(
        choices=[
            ("webhook", "Webhook — real time (GitHub must reach Cortex)"),
            ("poll", "Poll every few minutes (no public address)"),
        ],
        initial="webhook",
        widget=forms.RadioSelect,
    )
    token = forms.CharField(
        label="Access token",
        max_length=500,
        help_text="A fine-grained token with read access to pull requests and contents: lists changed files, and polls.",
    )
    webhook_secret = forms.CharField(
        label="Webhook secret", max_length=500, help_text="Empty: Cortex generates one and shows it once."
    )
    api_url = _api_url_field("https://api.github.com")
    interval_minutes = forms.IntegerField(
        label="Poll every (minutes)", required=False, min_value=1, max_value=24 * 60, help_text="Poll mode only; empty: every 5."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.editing:
            self.fields[
                "webhook_secret"
            ].help_text = "Leave empty to keep the stored one; “Generate a new webhook secret” makes a new one for you."

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("mode") == "poll" and not self.editing and not cleaned.get("token"):
            self.add_error("token", "Poll mode reads pull requests with this token.")
        return cleaned

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {"repositories": lines(data["repositories"]), "mode": data["mode"]}
        if data.get("api_url"):
            config["api_url"] = data["api_url"]
        return config

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        initial = super().initial_for(connector, clearance)
        initial["repositories"] = "\n".join((connector.config or {}).get("repositories", []))
        initial["mode"] = initial["mode"] or "webhook"
        return initial


class SlackForm(ConnectorForm):
    kind = "slack"
    schedule_fields = ("per_run_cap",)
    secret_fields = ("bot_token", "signing_secret", "app_token")
    required_secrets = ("bot_token",)

    channels = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "C0123ABCD\nC0456EFGH incidents", "class": "input-mono"}),
        help_text="One channel id per line, optionally followed by the scope its messages go to. A private channel "
        "may only go to a scope whose visibility is “granted”.",
    )
    mode = forms.ChoiceField(
        choices=[("webhook", "Events API — Slack posts events to Cortex"), ("socket", "Socket Mode — no public address needed")],
        initial="webhook",
        widget=forms.RadioSelect,
    )
    bot_token = forms.CharField(label="Bot token", max_length=500, help_text="xoxb-…, with channels:history and users:read.")
    signing_secret = forms.CharField(label="Signing secret", max_length=500, help_text="Events API: from Basic Information.")
    app_token = forms.CharField(label="App-level token", max_length=500, help_text="Socket Mode: xapp-… with connections:write.")
    api_url = _api_url_field("https://slack.com/api/")
    per_run_cap = forms.IntegerField(
        label="Backfill per channel",
        required=False,
        min_value=1,
        max_value=10_000,
        help_text="Empty: 50 recent messages per channel on the first run.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if not self.editing:
            needed = "signing_secret" if cleaned.get("mode") == "webhook" else "app_token"
            if cleaned.get("mode") and not cleaned.get(needed):
                self.add_error(needed, "Required in this mode.")
        for line in lines(cleaned.get("channels", "")):
            if not re.fullmatch(r"[CGD][A-Z0-9]{2,}(\s+[a-z0-9][a-z0-9-]*)?", line):
                self.add_error("channels", f"“{line}” is not a channel id (C…) optionally followed by a scope slug.")
                break
        return cleaned

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        channels: list[str] = []
        channel_scopes: dict[str, str] = {}
        for line in lines(data["channels"]):
            channel, _, scope = line.partition(" ")
            channels.append(channel)
            if scope.strip():
                channel_scopes[channel] = scope.strip()
        config: dict[str, Any] = {"channels": channels, "mode": data["mode"]}
        if channel_scopes:
            config["channel_scopes"] = channel_scopes
        if data.get("api_url"):
            config["api_url"] = data["api_url"]
        return config

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        initial = super().initial_for(connector, clearance)
        config = connector.config or {}
        scopes = config.get("channel_scopes", {})
        initial["channels"] = "\n".join(f"{c} {scopes[c]}" if c in scopes else c for c in config.get("channels", []))
        initial["mode"] = initial["mode"] or "webhook"
        return initial


class GoogleForm(ConnectorForm):
    """Gmail and Drive: OAuth user credentials (client id/secret and a refresh token), typed or pasted as JSON."""

    secret_fields = ("client_id", "client_secret", "refresh_token")
    oauth_provider = "google"
    oauth_label = "Connect Google account"

    credentials_json = forms.CharField(
        label="Credentials JSON",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "class": "input-mono", "autocomplete": "off", "spellcheck": "false"}),
        help_text="Or paste an authorized-user JSON ({client_id, client_secret, refresh_token, token_uri?}) "
        "instead of the three fields below.",
    )
    client_id = forms.CharField(label="OAuth client id", max_length=500, help_text="")
    client_secret = forms.CharField(label="OAuth client secret", max_length=500, help_text="")
    refresh_token = forms.CharField(
        label="Refresh token", max_length=2000, help_text="Not needed when you connect the Google account below."
    )
    token_uri = forms.URLField(
        label="Token endpoint",
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="Empty means https://oauth2.googleapis.com/token.",
    )

    def clean(self) -> dict[str, Any]:
        # Connecting through OAuth ignores pasted JSON: the consent supplies the refresh token.
        pasted = "" if self.connecting else (self.data.get(self.add_prefix("credentials_json")) or "").strip()
        cleaned = super().clean() if not pasted else forms.Form.clean(self) or {}
        if pasted:
            try:
                parsed = json.loads(pasted)
            except ValueError:
                self.add_error("credentials_json", "This is not JSON.")
                return cleaned
            missing = [
                k for k in ("client_id", "client_secret", "refresh_token") if not (isinstance(parsed, dict) and parsed.get(k))
            ]
            if missing:
                self.add_error("credentials_json", f"Missing {', '.join(missing)}.")
                return cleaned
            for key in ("client_id", "client_secret", "refresh_token"):
                cleaned[key] = str(parsed[key])
            if parsed.get("token_uri") and not cleaned.get("token_uri"):
                cleaned["token_uri"] = str(parsed["token_uri"])
        return cleaned

    def credentials(self) -> dict[str, Any]:
        values = super().credentials()
        if self.cleaned_data.get("token_uri"):
            values["token_uri"] = self.cleaned_data["token_uri"]
        return values


class GmailForm(GoogleForm):
    kind = "gmail"
    required_secrets = ("client_id", "client_secret", "refresh_token")

    query = forms.CharField(
        label="Search filter",
        required=False,
        max_length=500,
        help_text="A Gmail search, e.g. “from:(@acme.test) -category:promotions”.",
    )
    label = forms.CharField(label="Label", required=False, max_length=200, help_text="Only threads with this label.")
    per_message = forms.BooleanField(
        label="One memory per message",
        required=False,
        help_text="Off: a thread is one memory, updated as replies arrive. On: every message is its own memory.",
    )
    api_url = _api_url_field("https://gmail.googleapis.com/")

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {key: data[key] for key in ("query", "label", "api_url") if data.get(key)}
        if data.get("per_message"):
            config["per_message"] = True
        return config

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        initial = super().initial_for(connector, clearance)
        initial.update({key: (connector.config or {}).get(key, "") for key in ("query", "label")})
        initial["per_message"] = bool((connector.config or {}).get("per_message"))
        return initial


class DriveForm(GoogleForm):
    kind = "drive"
    required_secrets = ("client_id", "client_secret", "refresh_token")

    folder_id = forms.CharField(
        label="Folder id", required=False, max_length=200, help_text="Only files in this folder (the id in its address)."
    )
    api_url = _api_url_field("https://www.googleapis.com/")

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {key: data[key] for key in ("folder_id", "api_url") if data.get(key)}

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        initial = super().initial_for(connector, clearance)
        initial["folder_id"] = (connector.config or {}).get("folder_id", "")
        return initial


class NotionForm(ConnectorForm):
    kind = "notion"
    secret_fields = ("token",)
    required_secrets = ("token",)
    oauth_provider = "notion"
    oauth_label = "Connect Notion workspace"
    oauth_client_fields = ("oauth_client_id", "oauth_client_secret")

    token = forms.CharField(label="Integration token", max_length=500, help_text="ntn_… or secret_… of an internal integration.")
    oauth_client_id = forms.CharField(
        label="Public integration: OAuth client id",
        required=False,
        max_length=500,
        help_text="Only to connect through a public integration's OAuth instead of the token above.",
    )
    oauth_client_secret = forms.CharField(
        label="Public integration: OAuth client secret", required=False, max_length=500, widget=SecretInput(), help_text=""
    )
    databases = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "class": "input-mono"}),
        help_text="Database ids to query on every run, one per line, so rows inside them are never missed.",
    )
    api_url = _api_url_field("https://api.notion.com")

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {}
        if lines(data.get("databases", "")):
            config["databases"] = lines(data["databases"])
        if data.get("api_url"):
            config["api_url"] = data["api_url"]
        return config

    @classmethod
    def initial_for(cls, connector: Any, clearance: str) -> dict[str, Any]:
        initial = super().initial_for(connector, clearance)
        initial["databases"] = "\n".join((connector.config or {}).get("databases", []))
        return initial


FORMS: dict[str, type[ConnectorForm]] = {
    "github": GitHubForm,
    "slack": SlackForm,
    "gmail": GmailForm,
    "drive": DriveForm,
    "notion": NotionForm,
}
