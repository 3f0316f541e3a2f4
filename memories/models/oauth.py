"""OAuth grants: the access a person gave an MCP client (Claude.ai, Claude Desktop, ...) by consenting.

django-oauth-toolkit issues and rotates the client's access and refresh tokens; Cortex decides
what they may do. Each grant owns an ApiToken carrying the person's choices (organization,
scopes, read-only, expiry): the grant acts exactly as that token does, Settings → API tokens
lists it as "OAuth: <client>", and revoking it there ends the client's access at its next
request. The toolkit's refresh-token family is the grant's id, so every token the client
rotates to stays tied to the same consent.
"""

from __future__ import annotations

import uuid

from django.db import models

from memories.models.tenancy import ApiToken


class OAuthGrant(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The token's organization, repeated so the row is placed with its tenant (see docs/scaling.md).
    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="+")
    token = models.OneToOneField(ApiToken, on_delete=models.CASCADE, related_name="oauth_grant")
    application = models.ForeignKey("oauth2_provider.Application", on_delete=models.CASCADE, related_name="+")
    # The one audience the client's tokens are valid for (RFC 8707): this server's MCP endpoint.
    resource = models.CharField(max_length=2000)
    # The authorization code while it waits to be exchanged (single use, short-lived).
    authorization_code = models.CharField(max_length=255, blank=True, default="", db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"OAuth grant {self.pk}"
