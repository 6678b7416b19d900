"""ASGI entry point: HTTP through Django, websockets through Channels."""

import gc
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

from chat.origin import SameOriginValidator  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402
from chat.socket_limits import SocketLimits  # noqa: E402
from driftless.body_limit import BodyLimit  # noqa: E402

# Static files come from WhiteNoise's middleware (driftless/settings.py), in every mode.
application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_http),  # an oversized body is refused unread
        # The page must come from this site, scheme and port included (chat/origin.py).
        # Sockets per user and frames per socket are capped (chat/socket_limits.py).
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(SocketLimits(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# What the imports above built (Django, the apps, their libraries: about 240,000 objects)
# lives as long as the process: frozen out of the cyclic collector's reach, so a full
# collection walks only what came since. Each walked them all: about 135 ms of CPU, every
# few dozen turns (2-5 ms a turn in bench.chat_load). Collected first, so no garbage is
# frozen with them.
gc.collect()
gc.freeze()
