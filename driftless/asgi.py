"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "driftless.settings")

# Django must be set up before the consumers (and the models they import) load.
django_http = get_asgi_application()

# The Redis client is imported lazily by the cache and the channel layer, each from its
# own thread; two first requests doing it at once can deadlock in its circular imports.
# Import it here, once, before any request arrives.
import redis  # noqa: E402, F401
import redis.asyncio  # noqa: E402, F401
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402

# Static files come from WhiteNoise's middleware (driftless/settings.py), in every mode.
application = ProtocolTypeRouter(
    {
        "http": django_http,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
