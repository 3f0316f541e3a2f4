"""The ASGI entry point: Django (UI, REST). The MCP endpoint mounts beside it here."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
application = get_asgi_application()
