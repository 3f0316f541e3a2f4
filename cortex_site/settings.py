"""Cortex settings, read from the environment (12-factor).

`make run` sets DEBUG=1 and points DATABASE_URL / REDIS_URL at the embedded services;
production (docker-compose) sets them explicitly. Everything else has a safe default.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from cortex_site.env import (
    cortex_home,
    ensure_secret_key,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    read_secret_key,
)
from cortex_site.queues import TASK_QUEUES

BASE_DIR = Path(__file__).resolve().parent.parent
CORTEX_HOME = cortex_home()

DEBUG = env_bool("DEBUG", False)
TESTING = env_bool("CORTEX_TESTING", False)


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    # `make run` generates the key under CORTEX_HOME before it starts anything, so the web server,
    # the worker and the operator CLI all sign with the same one and sessions survive restarts.
    existing = read_secret_key(CORTEX_HOME)
    if existing:
        return existing
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured(
            f"SECRET_KEY is not set and {CORTEX_HOME / 'secret_key'} does not exist: "
            "set SECRET_KEY, or start Cortex with `make run`, which generates one there."
        )
    return ensure_secret_key(CORTEX_HOME)


SECRET_KEY = _secret_key()


def _connector_key() -> str:
    """Fernet key(s) for connector credentials at rest (comma-separated: the first encrypts, all decrypt).

    Empty when unset outside development: the `connectors.E001` system check then stops
    `migrate`/`runserver`/`check` with a sentence saying how to make one (build steps such as
    collectstatic need no key), and nothing can store or read credentials without it.
    """
    key = env_str("CORTEX_CONNECTOR_KEY")
    if key:
        return key
    # `python -m cortex_site.runner` (make run / make test) generates a development key there.
    key_file = CORTEX_HOME / "connector_key"
    if (DEBUG or TESTING) and key_file.exists():
        return key_file.read_text().strip()
    return ""


CORTEX_CONNECTOR_KEY = _connector_key()
# A running sync whose heartbeat is older than this is dead (worker killed); the next dispatch resumes it.
CORTEX_CONNECTOR_LEASE_SECONDS = env_int("CORTEX_CONNECTOR_LEASE_SECONDS", 300, minimum=30)
# Items asked of a source per page (one transaction each, checkpoint included).
CORTEX_CONNECTOR_PAGE_SIZE = env_int("CORTEX_CONNECTOR_PAGE_SIZE", 25, minimum=1)
# Timeout (seconds) of every outbound call a source makes.
CORTEX_CONNECTOR_HTTP_TIMEOUT = env_float("CORTEX_CONNECTOR_HTTP_TIMEOUT", 20.0, minimum=1.0)
# Notion allows an integration about three requests a second; every Notion connector sharing a token
# paces itself to this through the cache (0 turns pacing off, for tests against the loopback stub).
CORTEX_NOTION_REQUESTS_PER_SECOND = env_int("CORTEX_NOTION_REQUESTS_PER_SECOND", 3, minimum=0)
# "Connect Google account" / "Connect Notion workspace" (connectors/services/oauth.py): the OAuth
# client every organization may use (an admin can also type a client of their own into the form),
# and where the provider's endpoints are — overridable for a proxy, and for tests against a stub.
CORTEX_GOOGLE_OAUTH_CLIENT_ID = env_str("CORTEX_GOOGLE_OAUTH_CLIENT_ID", "")
CORTEX_GOOGLE_OAUTH_CLIENT_SECRET = env_str("CORTEX_GOOGLE_OAUTH_CLIENT_SECRET", "")
CORTEX_GOOGLE_OAUTH_AUTH_URI = env_str("CORTEX_GOOGLE_OAUTH_AUTH_URI", "https://accounts.google.com/o/oauth2/v2/auth")
CORTEX_GOOGLE_OAUTH_TOKEN_URI = env_str("CORTEX_GOOGLE_OAUTH_TOKEN_URI", "https://oauth2.googleapis.com/token")
CORTEX_NOTION_OAUTH_CLIENT_ID = env_str("CORTEX_NOTION_OAUTH_CLIENT_ID", "")
CORTEX_NOTION_OAUTH_CLIENT_SECRET = env_str("CORTEX_NOTION_OAUTH_CLIENT_SECRET", "")
# How long an admin has to finish the provider's consent screen before the sign-in must start again.
CORTEX_OAUTH_STATE_SECONDS = env_int("CORTEX_OAUTH_STATE_SECONDS", 600, minimum=60)


def _cron_secrets() -> dict[str, str]:
    """`CORTEX_CRON_SECRETS="acme=<secret>,globex=<secret>"`: per organization, the secret an external
    scheduler sends to POST /api/cron/connectors (for hosts where Celery beat cannot run)."""
    secrets_by_org: dict[str, str] = {}
    for entry in env_list("CORTEX_CRON_SECRETS", []):
        slug, sep, secret = entry.partition("=")
        if not sep or not slug.strip() or len(secret.strip()) < 24:
            raise ImproperlyConfigured(
                "CORTEX_CRON_SECRETS is a comma-separated list of <organization-slug>=<secret>, "
                "each secret at least 24 characters (e.g. from `openssl rand -hex 24`)."
            )
        secrets_by_org[slug.strip()] = secret.strip()
    return secrets_by_org


CORTEX_CRON_SECRETS = _cron_secrets()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if (DEBUG or TESTING) else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Public base URL used in links we hand out (MCP config, webhook URLs, memory links).
CORTEX_BASE_URL = (env_str("CORTEX_BASE_URL") or "http://127.0.0.1:8000").rstrip("/")
# Pages that show addresses use the request's host unless the operator named the public URL.
CORTEX_BASE_URL_EXPLICIT = bool(env_str("CORTEX_BASE_URL"))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "oauth2_provider",
    "audit",
    "memories",
    "connectors",
]

MIDDLEWARE = [
    "audit.middleware.RequestIdMiddleware",
    "cortex_site.db_router.ReplicaRoutingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "cortex_site.middleware.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "cortex_site.middleware.ApiErrorMiddleware",
    "cortex_site.middleware.ServiceUnavailableMiddleware",
    "cortex_site.middleware.MethodNotAllowedPageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After sessions and auth, so its 400 page knows who is signed in.
    "cortex_site.middleware.NulInQueryMiddleware",
    # Before any view or process_view reads the body (CSRF reads POST): an oversized one is refused
    # unread; after sessions and auth, so its 413 page knows who is signed in. Last, because it is
    # sync-only: were Django served by its ASGI handler, the async-capable ones above would each
    # cost a hop between threads and the event loop if they ran in async mode below it.
    "cortex_site.body_limits.BodyLimitMiddleware",
]

ROOT_URLCONF = "cortex_site.urls"
ASGI_APPLICATION = "cortex_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "memories.context_processors.shell",
            ],
        },
    },
]

# --- database -----------------------------------------------------------------
_database_url = env_str("DATABASE_URL")
if not _database_url:
    raise ImproperlyConfigured(
        f"DATABASE_URL is not set and Cortex is not running from {CORTEX_HOME}: start `make run` first, "
        "or set DATABASE_URL to PostgreSQL with pgvector, e.g. postgresql://user:pw@host:5432/cortex"
    )
_db = dj_database_url.parse(_database_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 0), conn_health_checks=True)
# A Unix-socket URL (postgresql://user@/db?host=/path) arrives as an option; Django wants it as HOST.
if not _db.get("HOST") and "host" in _db.get("OPTIONS", {}):
    _db["HOST"] = _db["OPTIONS"].pop("host")
if TESTING:
    # Test isolation flushes tables with TRUNCATE, which the audit log otherwise refuses (see audit 0003).
    _db.setdefault("OPTIONS", {})["options"] = "-c cortex.audit_allow_truncate=on"

# The web server runs Django's views on a pool of WEB_THREADS threads, and the MCP endpoint's on
# threads of asgiref's; without a pool each of those threads would open and password-authenticate
# (SCRAM) connections of its own, and PostgreSQL fork a backend for each. With DB_POOL the process
# keeps a psycopg pool instead, and a request borrows a connection from it and gives it back when
# it ends. cortex_site/asgi.py turns it on for the web server; workers, beat and the CLI run one
# long-lived thread each and keep their plain connections.
DB_POOL = env_bool("DB_POOL", False)
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 10, minimum=1)
# Kept full by default: a pool that grows when a burst arrives makes its first requests wait for
# new connections (a backend forked and a SCRAM exchange each, on the CPU the burst needs); see
# bench/github_webhooks.py's figures in docs/benchmarks.md.
DB_POOL_MIN_SIZE = env_int("DB_POOL_MIN_SIZE", DB_POOL_MAX_SIZE, minimum=0)
# Threads per web server process that run Django's views (cortex_site/asgi.py); as many as the
# process's pool lends connections by default, so a request never waits for one behind a busy thread.
WEB_THREADS = env_int("WEB_THREADS", DB_POOL_MAX_SIZE, minimum=1)
# How long a request waits for a free connection before it fails (503, like a database that is down).
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1)
# Recall's statement is prepared once per database session and planned once (memories/retrieval/sql.py):
# ~1–1.7 ms a recall at 100k memories. A transaction pooler (PgBouncer in transaction mode) hands each
# transaction whichever server session is free, where those statements are not: turn it off behind one.
DB_PREPARED_STATEMENTS = env_bool("DB_PREPARED_STATEMENTS", True)
if DB_POOL_MAX_SIZE < DB_POOL_MIN_SIZE:
    raise ImproperlyConfigured(f"DB_POOL_MAX_SIZE={DB_POOL_MAX_SIZE} must be at least DB_POOL_MIN_SIZE={DB_POOL_MIN_SIZE}")


def pooled(database: Mapping[str, object]) -> dict[str, Any]:
    """`database` drawing its connections from a pool when DB_POOL is on (Django's own psycopg pool;
    CONN_HEALTH_CHECKS makes the pool check a connection before lending it)."""
    if not DB_POOL:
        return dict(database)
    options = dict(cast("Mapping[str, object]", database.get("OPTIONS") or {}))
    options["pool"] = {"min_size": DB_POOL_MIN_SIZE, "max_size": DB_POOL_MAX_SIZE, "timeout": DB_POOL_TIMEOUT}
    # Django refuses a pool together with persistent connections: the pool is what persists.
    return {**database, "CONN_MAX_AGE": 0, "OPTIONS": options}


DATABASES = {"default": pooled(_db)}


def replica_database(url: str) -> dict[str, object]:
    """A streaming replica of the default database (see cortex_site/db_router.py for what reads it)."""
    replica = dj_database_url.parse(url, conn_max_age=env_int("DB_CONN_MAX_AGE", 0), conn_health_checks=True)
    if not replica.get("HOST") and "host" in replica.get("OPTIONS", {}):
        replica["HOST"] = replica["OPTIONS"].pop("host")
    # A replica that does not answer quickly is skipped, not waited for.
    replica.setdefault("OPTIONS", {}).setdefault("connect_timeout", env_int("DATABASE_REPLICA_CONNECT_TIMEOUT", 2, minimum=1))
    # Under test the replica is the test database's own replica, never a second test database.
    replica["TEST"] = {"MIRROR": "default"}
    return pooled(dict(replica))


_replica_url = env_str("DATABASE_REPLICA_URL")
if _replica_url:
    DATABASES["replica"] = replica_database(_replica_url)  # type: ignore[assignment]
DATABASE_ROUTERS = ["cortex_site.db_router.ReplicaRouter"]
# Past this lag (seconds) the replica is skipped and reads go to the primary.
DATABASE_REPLICA_MAX_LAG_SECONDS = env_float("DATABASE_REPLICA_MAX_LAG_SECONDS", 5.0, minimum=0.0)
# How often (seconds) each process asks the replica how far behind it is.
DATABASE_REPLICA_CHECK_SECONDS = env_float("DATABASE_REPLICA_CHECK_SECONDS", 1.0, minimum=0.0)
# After a write, the same session or token reads the primary this long (read-your-own-writes).
DATABASE_REPLICA_PIN_SECONDS = env_int("DATABASE_REPLICA_PIN_SECONDS", 10, minimum=1)
if DATABASE_REPLICA_PIN_SECONDS < DATABASE_REPLICA_MAX_LAG_SECONDS + DATABASE_REPLICA_CHECK_SECONDS:
    raise ImproperlyConfigured(
        "DATABASE_REPLICA_PIN_SECONDS must be at least DATABASE_REPLICA_MAX_LAG_SECONDS + DATABASE_REPLICA_CHECK_SECONDS: "
        "otherwise a writer could read the replica before it holds the write."
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: broker, result backend, cache -------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if not REDIS_URL:
    raise ImproperlyConfigured("REDIS_URL is not set. `make run` / `make test` start embedded Redis and set it.")


def _redis_db(url: str, db: int) -> str:
    """The same Redis server, another logical database: broker, results and cache stay apart,
    so clearing the cache never drops queued tasks."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


# Under pytest-xdist each test process gets its own three Redis databases (broker, cache, results):
# one process's cache flush or queued task must never reach another's test database.
_xdist_worker = (env_str("PYTEST_XDIST_WORKER") or "") if TESTING else ""
_REDIS_DB_BASE = 3 * (int(_xdist_worker[2:]) + 1) if _xdist_worker.startswith("gw") else 0

CACHES = {
    "default": {
        # Redis down degrades to "no cache" instead of failing every request (cortex_site/cache.py).
        "BACKEND": "cortex_site.cache.FailSoftRedisCache",
        "LOCATION": _redis_db(REDIS_URL, _REDIS_DB_BASE + env_int("CORTEX_CACHE_REDIS_DB", 1, minimum=0)),
        # A stopped or hung Redis costs a request at most a second, not a hang.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        "KEY_PREFIX": "cortex",
        "TIMEOUT": 300,
    }
}

CELERY_BROKER_URL = _redis_db(REDIS_URL, _REDIS_DB_BASE) if _REDIS_DB_BASE else REDIS_URL
CELERY_RESULT_BACKEND = _redis_db(REDIS_URL, _REDIS_DB_BASE + env_int("CORTEX_RESULTS_REDIS_DB", 2, minimum=0))
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# One result backend per process, not one per thread: under Django's ASGI handler (and still on the
# MCP endpoint) every request ran on a thread of its own, so a per-thread backend was built anew
# (client, URL parsing, connection pool) by every enqueue — a quarter of a webhook answer's time.
# Celery's Redis backend serializes its pub/sub.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
# Queues by kind of work (cortex_site/queues.py), so each can get workers of its own.
CELERY_TASK_QUEUES = tuple(Queue(name) for name in TASK_QUEUES)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "connectors.*": {"queue": "connectors"},
    "memories.after_memory_write": {"queue": "conflicts"},
    "memories.after_memory_writes": {"queue": "conflicts"},
}
# How far a worker lowers its CPU priority (a nice value, 0-19; 0 leaves it as started), so on cores
# shared with the web server a backlog of writes does not hold back the answers people and
# webhook senders wait for: the work still all gets done, in the time the answers leave
# (cortex_site/celery.py).
CORTEX_WORKER_NICE = env_int("CORTEX_WORKER_NICE", 10, minimum=0)
if CORTEX_WORKER_NICE > 19:
    raise ImproperlyConfigured("CORTEX_WORKER_NICE must be a nice value from 0 to 19.")
# The hour (0-23, TIME_ZONE) beat sends the daily digest e-mails.
CORTEX_DIGEST_HOUR = env_int("CORTEX_DIGEST_HOUR", 7, minimum=0)
if CORTEX_DIGEST_HOUR > 23:
    raise ImproperlyConfigured("CORTEX_DIGEST_HOUR must be an hour from 0 to 23.")
# Periodic work run by `celery beat` (make run starts it; so does the compose file).
CELERY_BEAT_SCHEDULE = {
    "purge-finished-jobs": {"task": "memories.purge_finished_jobs", "schedule": 3600.0},
    # Enqueues every connector whose interval has passed (and takes over runs whose lease expired).
    "connectors-dispatch-due": {"task": "connectors.dispatch_due", "schedule": 60.0},
    "audit-checkpoint": {"task": "audit.checkpoint_all", "schedule": 600.0},
    "audit-retention": {"task": "audit.enforce_retention", "schedule": 3600.0},
    "finalise-redaction-holds": {"task": "memories.finalise_redaction_holds", "schedule": 3600.0},
    # Recall's term counts: each write appends rows; this folds them (memories/services/term_counts.py).
    "compact-term-counts": {"task": "memories.compact_term_counts", "schedule": 60.0},
    # A vector and a full-text index per large scope, for readers of one scope (memories/services/scope_indexes.py).
    "sync-scope-indexes": {"task": "memories.sync_scope_indexes", "schedule": 600.0},
    # The opt-in daily digest e-mail, once a day at CORTEX_DIGEST_HOUR (TIME_ZONE, UTC).
    "daily-digest": {
        "task": "memories.send_daily_digests",
        "schedule": crontab(minute=0, hour=CORTEX_DIGEST_HOUR),
    },
    # Memories whose post-write work (conflicts, entities) was never enqueued or never finished.
    "sweep-post-write": {
        "task": "memories.sweep_post_write",
        "schedule": float(env_int("CORTEX_POST_WRITE_SWEEP_SECONDS", 120, minimum=5)),
    },
    # Webhook deliveries stored while the broker was unreachable (answered, never enqueued).
    "sweep-deliveries": {
        "task": "connectors.sweep_deliveries",
        "schedule": float(env_int("CORTEX_DELIVERY_SWEEP_SECONDS", 120, minimum=5)),
    },
}
# The delivery sweep takes deliveries never attempted this long after they arrived, this many per run.
CORTEX_DELIVERY_GRACE_SECONDS = env_int("CORTEX_DELIVERY_GRACE_SECONDS", 300, minimum=0)
CORTEX_DELIVERY_SWEEP_BATCH = env_int("CORTEX_DELIVERY_SWEEP_BATCH", 500, minimum=1)
# The sweep takes memories still pending this long after their last change, this many per run.
CORTEX_POST_WRITE_GRACE_SECONDS = env_int("CORTEX_POST_WRITE_GRACE_SECONDS", 300, minimum=0)
CORTEX_POST_WRITE_SWEEP_BATCH = env_int("CORTEX_POST_WRITE_SWEEP_BATCH", 500, minimum=1)
# Members handled per task of the daily digest (a full batch enqueues the next).
CORTEX_DIGEST_BATCH = env_int("CORTEX_DIGEST_BATCH", 200, minimum=1)
# A scope with at least this many active chunks (and at most half of them all) gets a vector and a full-text index of its own.
CORTEX_SCOPE_INDEX_MIN_CHUNKS = env_int("CORTEX_SCOPE_INDEX_MIN_CHUNKS", 2000, minimum=1)
# A (non-urgent) redaction keeps the removed words this many days so an admin can restore it.
CORTEX_REDACTION_HOLD_DAYS = env_int("CORTEX_REDACTION_HOLD_DAYS", 7, minimum=0)
# Finished jobs (with the transcripts people sent for decision extraction) are kept this long.
CORTEX_JOB_RETENTION_HOURS = env_int("CORTEX_JOB_RETENTION_HOURS", 24, minimum=1)

# --- auth -----------------------------------------------------------------------------
AUTH_USER_MODEL = "memories.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
        "OPTIONS": {"user_attributes": ["email", "name"]},
    },
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "memories.oidc.InvitedMemberBackend"]
# Single sign-on (OpenID Connect): on when a client id and the provider's endpoints are set.
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT") or None
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10.0, minimum=1.0)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
# Invitation and password-reset links: single-use, and expiring after this long.
CORTEX_INVITE_TTL_HOURS = env_int("CORTEX_INVITE_TTL_HOURS", 72, minimum=1)
PASSWORD_RESET_TIMEOUT = env_int("CORTEX_PASSWORD_RESET_MINUTES", 60, minimum=5) * 60
# Failed sign-ins allowed per account and per client address in each window before 429.
CORTEX_LOGIN_FAILURES_PER_ACCOUNT = env_int("CORTEX_LOGIN_FAILURES_PER_ACCOUNT", 5, minimum=1)
CORTEX_LOGIN_FAILURES_PER_ADDRESS = env_int("CORTEX_LOGIN_FAILURES_PER_ADDRESS", 20, minimum=1)
CORTEX_LOGIN_WINDOW_SECONDS = env_int("CORTEX_LOGIN_WINDOW_SECONDS", 900, minimum=10)

# --- email (invitations, password resets) ------------------------------------------------------
# The console backend under make run prints mails to the terminal; production sets SMTP.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "cortex@localhost")
if TESTING:
    # Hashing cost buys nothing in tests and slows every login.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# --- OAuth 2.1 for MCP clients (django-oauth-toolkit) -----------------------------------------
# Cortex is the authorization server of its own MCP endpoint: authorization code with PKCE S256
# only, RFC 8707 resource indicators (the MCP URL is the only audience), rotating refresh tokens,
# RFC 7591 dynamic registration and client ID metadata documents for clients such as Claude.ai.
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Use Cortex's MCP tools as you, within the scopes you choose"},
    "DEFAULT_SCOPES": ["mcp"],
    "OAUTH2_VALIDATOR_CLASS": "memories.oauth.validator.CortexOAuth2Validator",
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only: "plain" is refused
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,  # access and refresh tokens stored as checksums
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,  # bearer tokens in the Authorization header only
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("CORTEX_OAUTH_ACCESS_TOKEN_SECONDS", 3600, minimum=60),
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 120,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],  # http only for loopback (checked at registration)
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    # URLs in the metadata and the issuer are built from where Cortex is reached, as the MCP
    # endpoint's protected-resource metadata names it.
    "OIDC_ISS_ENDPOINT": CORTEX_BASE_URL,
}
# The toolkit's models, named so migrations can refer to them (Cortex does not swap them).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"  # noqa: S105 - a model name
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"  # noqa: S105 - a model name
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"  # noqa: S105 - a model name
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"

# --- transport security (cookies, HSTS, redirects) and security headers ------------------------
# Decided from the environment, so that `make run` works over plain HTTP on loopback and the same
# code is strict behind TLS. The choices (README "Security"):
# - Secure cookies and HSTS by default whenever DEBUG is off; the runner turns them off only when
#   the public address (CORTEX_BASE_URL) is plain http — a Secure cookie would never come back
#   over http://127.0.0.1 and nobody could sign in.
# - SECURE_SSL_REDIRECT by default only when Cortex knows it sits behind a TLS proxy that says so
#   (BEHIND_TLS_PROXY=1 trusts X-Forwarded-Proto); without that header a redirect would loop.
# - HSTS preload is the domain owner's (irreversible) choice: SECURE_HSTS_PRELOAD=1.
_PUBLIC_URL = urlsplit(CORTEX_BASE_URL)
_LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG and not TESTING)
# No script of ours reads the CSRF cookie: forms carry the token and htmx sends it from the page.
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG and not TESTING)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if (DEBUG or TESTING) else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _PUBLIC_URL.scheme == "https" and BEHIND_TLS_PROXY)
# Load balancers probe the health check over plain http on the inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
# Debug pages and error e-mails mask passwords inside service URLs too, not only secret-named settings.
DEFAULT_EXCEPTION_REPORTER_FILTER = "cortex_site.reporting.CredentialMaskingFilter"
# Scripts only from our own origin (no inline script, no eval: cortex.js and htmx with allowEval off).
# Styles keep 'unsafe-inline' for the style="" attributes of a few templates (widths of bars).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'"
)


def _silenced_checks() -> list[str]:
    """Deploy checks that do not apply to how this instance is served, each for a stated reason.

    Only when Cortex answers on loopback alone over plain http (what `make run` does by default:
    the public address is http://127.0.0.1:PORT and every allowed host is a loopback name) are the
    HTTPS-only checks moot: no request crosses a network. Served on any other name over http,
    they stay — that deployment needs TLS.
    """
    silenced = [
        # Preload is an opt-in for the owner of the whole domain (SECURE_HSTS_PRELOAD=1).
        "security.W021",
        # http redirect URIs are accepted only to loopback addresses, checked at client
        # registration (memories/oauth/views.py, RFC 8252 native apps); all others must be https.
        "oauth2_provider.W008",
    ]
    loopback_only = bool(ALLOWED_HOSTS) and all(host in _LOOPBACK_NAMES for host in ALLOWED_HOSTS)
    if _PUBLIC_URL.scheme == "http" and _PUBLIC_URL.hostname in _LOOPBACK_NAMES and loopback_only:
        silenced += ["security.W004", "security.W008", "security.W012", "security.W016"]
    return silenced


SILENCED_SYSTEM_CHECKS = _silenced_checks()

# Request bodies: Django raises RequestDataTooBig past this, which the API answers with 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("CORTEX_MAX_BODY_BYTES", 2 * 1024 * 1024, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
CORTEX_MAX_UPLOAD_BYTES = env_int("CORTEX_MAX_UPLOAD_BYTES", 10 * 1024 * 1024, minimum=1024)
# A request to an upload address carries one file (the page's script sends one per request) and its
# form fields; anything longer is refused from its Content-Length, before a byte is read.
CORTEX_UPLOAD_PATHS = ("/memories/upload/", "/briefs/new/", "/briefs/extract/", "/api/memories/extract-decisions")
# Parsing a .docx/.pdf runs in a child process with this much address space and CPU time.
CORTEX_EXTRACT_MEMORY_MB = env_int("CORTEX_EXTRACT_MEMORY_MB", 768, minimum=128)
CORTEX_EXTRACT_SECONDS = env_int("CORTEX_EXTRACT_SECONDS", 20, minimum=1)
CORTEX_MAX_PDF_PAGES = env_int("CORTEX_MAX_PDF_PAGES", 500, minimum=1)

# --- i18n / static --------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = CORTEX_HOME / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if (DEBUG or TESTING)
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG or TESTING
WHITENOISE_AUTOREFRESH = DEBUG or TESTING

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memories.api.authentication.BearerTokenAuthentication",
        "memories.api.authentication.CsrfSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "cortex_site.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "cortex_site.api_schema.CortexAutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["cortex_site.api.PrincipalRateThrottle", "cortex_site.api.AddressRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "principal": env_str("CORTEX_API_RATE", "1200/min"),
        "address": env_str("CORTEX_API_RATE_PER_ADDRESS", "6000/min"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Cortex API",
    "DESCRIPTION": "Team memory: remember, recall, supersede and redact — permission-filtered everywhere.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation documents the error envelope for the statuses it can answer (cortex_site/api_schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "cortex_site.api_schema.postprocess_error_responses",
    ],
}

# --- audit ----------------------------------------------------------------------------------
# Signs audit checkpoints (HMAC-SHA256). Set it apart from SECRET_KEY in production so rotating
# one does not invalidate the other; by default it is derived from SECRET_KEY.
CORTEX_AUDIT_KEY = env_str("CORTEX_AUDIT_KEY") or hashlib.sha256(f"cortex-audit:{SECRET_KEY}".encode()).hexdigest()
# Addresses (or CIDR networks) of reverse proxies whose X-Forwarded-For is believed; nobody else's is.
CORTEX_TRUSTED_PROXIES = env_list("CORTEX_TRUSTED_PROXIES", [])
CORTEX_AUDIT_RETENTION_BATCH = env_int("CORTEX_AUDIT_RETENTION_BATCH", 1000, minimum=1)

# --- Cortex -------------------------------------------------------------------------------
CORTEX_DEMO = env_bool("CORTEX_DEMO", True)
CORTEX_EMBEDDER = env_choice("CORTEX_EMBEDDER", "local", {"local", "openai", "gemini", "hash"})
CORTEX_EMBED_MODEL = env_str("CORTEX_EMBED_MODEL")
CORTEX_EMBED_DIM = env_int("CORTEX_EMBED_DIM", 0, minimum=0) or None
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
GEMINI_API_KEY = env_str("GEMINI_API_KEY")
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
CORTEX_LLM = env_choice("CORTEX_LLM", "none", {"none", "openai", "anthropic", "gemini"})
CORTEX_LLM_MODEL = env_str("CORTEX_LLM_MODEL")
CORTEX_LLM_TIMEOUT = env_float("CORTEX_LLM_TIMEOUT", 30.0, minimum=1.0)
# Internal switch for the retrieval-quality harness' ablations; production always runs "full".
CORTEX_RANKING_MODE = env_choice("CORTEX_RANKING_MODE", "full", {"full", "fused", "dense", "lexical"})
CORTEX_RECENCY_HALF_LIFE_DAYS = env_float("CORTEX_RECENCY_HALF_LIFE_DAYS", 30.0, minimum=0.1)
CORTEX_MAX_TITLE_CHARS = env_int("CORTEX_MAX_TITLE_CHARS", 300, minimum=10)
CORTEX_MAX_CONTENT_CHARS = env_int("CORTEX_MAX_CONTENT_CHARS", 200_000, minimum=100)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "audit.logging.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["request_id"]},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # At DEBUG this logger prints a missing template variable with the whole template context —
        # a freshly created token's secret, the CSRF token — so it never logs below INFO.
        "django.template": {"level": "INFO"},
        "httpx": {"level": "WARNING"},
        # The MCP SDK logs every stateless session's end at INFO.
        "mcp": {"level": "WARNING"},
    },
}
