"""The toolkit's request validator, told which Cortex grant each authorization belongs to.

The consent view creates the OAuthGrant first and hands its id to the toolkit as an extra
credential (oauthlib sets it on the request). Two hooks tie the toolkit's rows to it:
the authorization code is recorded on the grant, and at the code exchange the refresh-token
family is set to the grant's id — rotations inherit the family, so every later token keeps
pointing at the same consent.
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

from memories.services.oauth import oauth_grant_attach_code, oauth_grant_for_code


class CortexOAuth2Validator(OAuth2Validator):
    def save_authorization_code(self, client_id: str, code: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> None:
        super().save_authorization_code(client_id, code, request, *args, **kwargs)
        oauth_grant_attach_code(grant_id=request.cortex_grant_id, application=request.client, code=code["code"])

    def _create_refresh_token(self, request: Any, refresh_token_code: str, access_token: Any, previous_refresh_token: Any) -> Any:
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        if previous_refresh_token is None and request.grant_type == "authorization_code":
            grant = oauth_grant_for_code(application=request.client, code=request.code)
            if grant is not None:
                refresh_token.token_family = grant.pk
                refresh_token.save(update_fields=["token_family"])
        return refresh_token
