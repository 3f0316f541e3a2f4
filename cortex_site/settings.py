"""Cortex settings, read from the environment (12-factor).

`make run` sets DEBUG=1 and points DATABASE_URL / REDIS_URL at the embedded services;
production (docker-compose) sets them explicitly. Everything else has a safe default.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

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

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if (DEBUG or TESTING) else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Public base URL used in links we hand out (MCP config, webhook URLs, memory links).
CORTEX_BASE_URL = (env_str("CORTEX_BASE_URL") or "http://127.0.0.1:8000").rstrip("/")

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
    "cortex_site.middleware.MethodNotAllowedPageMiddleware",
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
        f"DATABASE_URL is not set and Cortex is not running from {CORTEX_HOME}: start `make run` first, "
        "or set DATABASE_URL to PostgreSQL with pgvector, e.g. postgresql://user:pw@host:5432/cortex"
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
}
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
# Debug pages and error e-mails mask passwords inside service URLs too, not only secret-named settings.
DEFAULT_EXCEPTION_REPORTER_FILTER = "cortex_site.reporting.CredentialMaskingFilter"
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
