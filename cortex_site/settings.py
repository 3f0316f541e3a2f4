"""Cortex settings, read from the environment (12-factor).

`make run` sets DEBUG=1 and points DATABASE_URL / REDIS_URL at the embedded services;
production (docker-compose) sets them explicitly. Everything else has a safe default.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from cortex_site.env import (
    cortex_home,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
CORTEX_HOME = cortex_home()

DEBUG = env_bool("DEBUG", False)
TESTING = env_bool("CORTEX_TESTING", False)


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (make run sets DEBUG=1 for you).")
    # Development: generate once, keep it under CORTEX_HOME so sessions survive restarts.
    key_file = CORTEX_HOME / "secret_key"
    if key_file.exists() and key_file.read_text().strip():
        return key_file.read_text().strip()
    CORTEX_HOME.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # Written under a temporary name created 0600 and renamed: the key is never readable by
    # others, and a start interrupted mid-write never leaves an empty key behind.
    partial = key_file.with_name(f".secret_key.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    os.replace(partial, key_file)
    return key


SECRET_KEY = _secret_key()

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
    "django.middleware.security.SecurityMiddleware",
    "cortex_site.middleware.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "cortex_site.middleware.ApiErrorMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
        "DATABASE_URL is not set. `make run` / `make test` start embedded PostgreSQL and set it; "
        "otherwise point it at PostgreSQL with pgvector, e.g. postgresql://user:pw@host:5432/cortex"
    )
_db = dj_database_url.parse(_database_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 0), conn_health_checks=True)
# A Unix-socket URL (postgresql://user@/db?host=/path) arrives as an option; Django wants it as HOST.
if not _db.get("HOST") and "host" in _db.get("OPTIONS", {}):
    _db["HOST"] = _db["OPTIONS"].pop("host")
DATABASES = {"default": _db}
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


CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": _redis_db(REDIS_URL, env_int("CORTEX_CACHE_REDIS_DB", 1, minimum=0)),
        "KEY_PREFIX": "cortex",
        "TIMEOUT": 300,
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = _redis_db(REDIS_URL, env_int("CORTEX_RESULTS_REDIS_DB", 2, minimum=0))
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Periodic work run by `celery beat` (make run starts it; so does the compose file).
CELERY_BEAT_SCHEDULE = {
    "purge-finished-jobs": {"task": "memories.purge_finished_jobs", "schedule": 3600.0},
    "finalise-redaction-holds": {"task": "memories.finalise_redaction_holds", "schedule": 3600.0},
}
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
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
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

# --- security headers -------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG and not TESTING)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG and not TESTING)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if (DEBUG or TESTING) else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'"
)

# Request bodies: Django raises RequestDataTooBig past this, which the API answers with 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("CORTEX_MAX_BODY_BYTES", 2 * 1024 * 1024, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
CORTEX_MAX_UPLOAD_BYTES = env_int("CORTEX_MAX_UPLOAD_BYTES", 10 * 1024 * 1024, minimum=1024)

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
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["cortex_site.api.PrincipalRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"principal": env_str("CORTEX_API_RATE", "1200/min")},
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
}

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
        "httpx": {"level": "WARNING"},
        # The MCP SDK logs every stateless session's end at INFO.
        "mcp": {"level": "WARNING"},
    },
}
