"""Every action the audit log records. `record()` refuses anything else, so a typo or a new,
undocumented action fails at once instead of leaving events nobody looks for.

Read events follow one rule in every interface (UI, REST, MCP): a list records `memory.list`
with its filters, a single memory `memory.read` with its id, a recall `memory.recall` with its
query — one event per request that returned memory content, saying which interface (`via`).
"""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    # sign-in and tokens at the door
    AUTH_LOGIN = "auth.login"
    AUTH_LOGIN_FAILED = "auth.login_failed"
    AUTH_LOGOUT = "auth.logout"
    AUTH_SWITCH_ORGANIZATION = "auth.switch_organization"
    AUTH_TOKEN_REJECTED = "auth.token_rejected"  # noqa: S105 - an action name, not a secret
    AUTH_LOGIN_THROTTLED = "auth.login_throttled"
    AUTH_TOKEN_THROTTLED = "auth.token_throttled"  # noqa: S105 - an action name, not a secret
    AUTH_PASSWORD_CHANGE = "auth.password_change"  # noqa: S105 - an action name, not a secret
    AUTH_PASSWORD_RESET_REQUEST = "auth.password_reset_request"  # noqa: S105 - an action name, not a secret
    AUTH_PASSWORD_RESET = "auth.password_reset"  # noqa: S105 - an action name, not a secret
    AUTH_SIGN_OUT_EVERYWHERE = "auth.sign_out_everywhere"
    # a change refused with 403, and the rule that refused it (memories.services.denials)
    ACCESS_DENIED = "access.denied"
    # tenancy
    ORGANIZATION_CREATE = "organization.create"
    ORGANIZATION_CONFLICT_POLICY = "organization.conflict_policy"
    MEMBER_ADD = "member.add"
    MEMBER_UPDATE = "member.update"
    MEMBER_REMOVE = "member.remove"
    MEMBER_DEACTIVATE = "member.deactivate"
    MEMBER_REACTIVATE = "member.reactivate"
    INVITE_CREATE = "invite.create"
    INVITE_ACCEPT = "invite.accept"
    INVITE_REVOKE = "invite.revoke"
    SCOPE_CREATE = "scope.create"
    SCOPE_UPDATE = "scope.update"
    SCOPE_RETIRE = "scope.retire"
    SCOPE_UNRETIRE = "scope.unretire"
    GRANT_SET = "grant.set"
    GRANT_REVOKE = "grant.revoke"
    TOKEN_CREATE = "token.create"  # noqa: S105 - an action name, not a secret
    TOKEN_REVOKE = "token.revoke"  # noqa: S105 - an action name, not a secret
    # memories: writes
    MEMORY_CREATE = "memory.create"
    MEMORY_SUPERSEDE = "memory.supersede"
    MEMORY_REINSTATE = "memory.reinstate"
    MEMORY_ACCEPT_REVISION = "memory.accept_revision"
    MEMORY_PATCH = "memory.patch"
    MEMORY_REDACT = "memory.redact"
    MEMORY_RESTORE = "memory.restore"
    MEMORY_REDACTION_FINAL = "memory.redaction_final"
    MEMORY_DELETE = "memory.delete"
    MEMORY_EXPORT = "memory.export"
    # the daily digest: a member's opt-in or out, and each digest sent (counts, never content)
    DIGEST_PREFERENCE = "digest.preference"
    DIGEST_SENT = "digest.sent"
    # memories: reads
    MEMORY_LIST = "memory.list"
    MEMORY_READ = "memory.read"
    MEMORY_RECALL = "memory.recall"
    MEMORY_ASK = "memory.ask"
    # conflicts
    CONFLICT_DETECT = "conflict.detect"
    CONFLICT_RESOLVE = "conflict.resolve"
    CONFLICT_REOPEN = "conflict.reopen"
    MEMORY_PROPOSE = "memory.propose"  # a proposed revision waits in the conflict queue
    # redaction requests
    REDACTION_REQUEST_CREATE = "redaction_request.create"
    REDACTION_REQUEST_DECIDE = "redaction_request.decide"
    # operations
    EMBEDDING_REEMBED_START = "embedding.reembed.start"
    EMBEDDING_REEMBED_FINISH = "embedding.reembed.finish"
    MCP_CALL = "mcp.call"
    # connectors: configuration, runs and deliveries
    CONNECTOR_CREATE = "connector.create"
    CONNECTOR_UPDATE = "connector.update"
    CONNECTOR_PAUSE = "connector.pause"
    CONNECTOR_RESUME = "connector.resume"
    CONNECTOR_DELETE = "connector.delete"
    CONNECTOR_CREDENTIALS_ROTATE = "connector.credentials_rotate"
    # "Connect Google account" / "Connect Notion workspace": the provider granted access, or the sign-in failed
    CONNECTOR_OAUTH_CONNECTED = "connector.oauth_connected"
    CONNECTOR_OAUTH_FAILED = "connector.oauth_failed"
    CONNECTOR_ERROR = "connector.error"
    CONNECTOR_SYNC_START = "connector.sync_start"
    CONNECTOR_SYNC_FINISH = "connector.sync_finish"
    CONNECTOR_SYNC_SKIP = "connector.sync_skip"
    CONNECTOR_CRON_DISPATCH = "connector.cron_dispatch"
    CONNECTOR_CRON_REJECT = "connector.cron_reject"
    WEBHOOK_ACCEPT = "webhook.accept"
    WEBHOOK_REJECT = "webhook.reject"
    WEBHOOK_IGNORE = "webhook.ignore"
    WEBHOOK_DUPLICATE = "webhook.duplicate"
    # reading the audit log itself
    AUDIT_READ = "audit.read"
    AUDIT_VERIFY = "audit.verify"
    AUDIT_EXPORT = "audit.export"
    AUDIT_RETENTION = "audit.retention"
    # agents signing in with OAuth
    OAUTH_GRANT = "oauth.grant"
