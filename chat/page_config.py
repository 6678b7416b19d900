"""What a page's scripts are told by the server: every URL they call, and the few facts
they need (the CSRF token, limits), as one JSON document (``driftless-config``).

The scripts write no URL of their own: each is reversed here from its route name, with
``{name}`` placeholders the script fills in (``static/js/config.js``), so a route that
moves moves everywhere at once.
"""

from __future__ import annotations

from django.middleware.csrf import get_token
from django.urls import reverse

from memory.actions.sessions import model_choices, session_choice
from memory.lib.limits import MAX_MESSAGE_CHARS
from memory.llm import get_chat_model
from memory.llm.local import local_model_status
from memory.llm.profiles import configured_profile

# What a script calls each URL -> (the route's name, the placeholders of its URL).
_ROUTES = {
    "home": ("home", ()),
    "sessionNav": ("session-nav", ()),
    "sessions": ("api-sessions", ()),
    "chatPage": ("chat", ("session_id",)),
    "deletePage": ("delete-session", ("session_id",)),
    "session": ("api-session", ("session_id",)),
    "sessionTopics": ("api-topics", ("session_id",)),
    "sessionMemory": ("api-session-memory", ("session_id",)),
    "sessionFacts": ("api-session-facts", ("session_id",)),
    "sessionFact": ("api-session-fact", ("session_id", "key")),
    "topicResume": ("api-topic-resume", ("topic_id",)),
    "preferences": ("api-preferences", ()),
    "sessionContext": ("api-session-context", ("session_id",)),
    "sessionEvaluate": ("session-evaluate", ("session_id",)),
    "topic": ("api-topic", ("topic_id",)),
    "topicMessages": ("api-topic-messages", ("topic_id",)),
    "topicMemory": ("api-topic-memory", ("topic_id",)),
    "topicNotes": ("api-topic-notes", ("topic_id",)),
    "memoryImport": ("api-memory-import", ()),
    "memoryConsolidate": ("api-memory-consolidate", ()),
    "memoryConsolidations": ("api-memory-consolidations", ()),
    "memoryConsolidationUndo": ("api-memory-consolidation-undo", ("run_id",)),
    "dataExport": ("data-export", ()),
    "sessionModel": ("api-session-model", ("session_id",)),
}
# The websocket route (chat/routing.py) is not one Django's URL resolver knows.
SOCKET_PATH = "/ws/sessions/{session_id}/"
# Stand-ins reversed in place of each placeholder, then replaced by ``{name}``; numbers
# for the int converters, a word for the path converter of a fact's key.
_SENTINEL_BASE = 987_654_000


def url_template(route: str, params: tuple[str, ...]) -> str:
    sentinels = {
        name: "sentinel-key" if name == "key" else _SENTINEL_BASE + index
        for index, name in enumerate(params)
    }
    url = reverse(route, kwargs=sentinels)
    for name, sentinel in sentinels.items():
        url = url.replace(str(sentinel), "{" + name + "}")
    return url


def url_templates() -> dict[str, str]:
    urls = {key: url_template(route, params) for key, (route, params) in _ROUTES.items()}
    urls["socket"] = SOCKET_PATH
    return urls


def model_shown(session) -> dict:
    """The model a session answers with (the user's pick, the agent's own, or the
    settings'), whether it is the offline stand-in, its profile (memory/llm/profiles.py),
    the local model's progress while ``make run`` prepares it, and the models the user may
    pick: what the chat page's badge shows (templates/chat/_model_badge.html), on the
    page and from GET sessions/<id>/model, which the page asks again while the local model
    is being prepared."""
    model = get_chat_model("chat", session=session)
    profile = configured_profile(model.name)
    shown = {
        "name": model.name,
        "offline": bool(model.offline),
        "local": "",
        "state": "",
        "profile": profile.kind,
        "profile_help": PROFILE_HELP[profile.kind],
    }
    status = local_model_status() if model.offline else None
    if status and status.get("state") in {"preparing", "unavailable"}:
        # make run's local model (driftless/local_model.py): its progress, or why not.
        shown["local"] = str(status.get("message", ""))[:300]
        shown["state"] = status["state"]
    agents = get_chat_model("chat", agent=session.agent)
    choices = model_choices(agent_model="offline model" if agents.offline else agents.name)
    shown["choices"] = [{"id": c.id, "label": c.label} for c in choices]
    shown["choice"] = session_choice(session)
    return shown


# What the badge's profile means, in the words its tooltip shows (docs/memory.md).
PROFILE_HELP = {
    "small": (
        "Small-model profile: questions go out without tool schemas, memory is given in "
        "the prompt; tools are offered when you ask to remember, note or forget"
    ),
    "capable": "Capable-model profile: every tool is offered on every turn",
}


def page_config(request, **extra) -> dict:
    """The ``driftless-config`` document of a page; ``extra`` adds what that page needs."""
    return {
        "urls": url_templates(),
        "csrfToken": get_token(request),
        "limits": {"messageChars": MAX_MESSAGE_CHARS},
        **extra,
    }
