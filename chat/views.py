"""Server-rendered pages: the session list, starting a session, and the chat page.

The chat page ships its first state (the user's sessions, the topics, the active topic's
latest messages) inside the HTML, so it paints complete without waiting for an API round
trip; after that the websocket and the REST API keep it current. Pages that show live state
are never cached (a Back button must not bring back an old copy).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.db.models import Count
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_POST

from chat.api.portability import export_throttled
from chat.api.scoping import owned_session_or_404
from chat.api.search import hit_url
from chat.api.serializers import MESSAGE_PAGE_SIZE, SessionSerializer
from chat.page_config import model_shown, page_config
from memory.actions.deletion import do_delete_session
from memory.actions.export_text import export_text
from memory.actions.preferences import preferences_of
from memory.actions.sessions import do_start_session
from memory.events import message_payloads, topic_payload
from memory.lib.errors import Refused
from memory.models import IN_MEMORY, Agent, Deletion, Session, Topic
from memory.stores.messages import shown_session_title, topic_page, with_list_fields
from memory.stores.search import SearchError, marked_segments, search_memory


def sessions_for_list(user):
    """The user's sessions, latest first, with what a list shows: the title people see
    and the messages the thread shows (the conversation: no tool calls or results).

    The title is the session's own (the user's rename), else its main topic's: the titled
    topic holding the most messages (memory.stores.messages.shown_session_title). A fork
    never renames the session after its newest topic (issue 24: the Japan chat became
    "Completely different thing: …"), only a topic that has outgrown it."""
    return with_list_fields(Session.objects.owned_by(user).select_related("agent"))


def shown_title(session) -> str:
    return shown_session_title(session)


def listed_sessions(user) -> list[Session]:
    """The sessions list as every page shows it (templates/chat/_session_items.html)."""
    sessions = list(sessions_for_list(user))
    for session in sessions:
        session.shown_title = shown_title(session)
        session.has_name = bool(session.title or session.main_topic_title)
    return sessions


@never_cache
@login_required
def home(request):
    return render(
        request,
        "chat/home.html",
        {
            "sessions": listed_sessions(request.user),
            "agents": Agent.objects.usable_by(request.user),
            "config": page_config(request),
        },
    )


@never_cache
@login_required
def session_nav(request):
    """The sessions list alone, as the pages render it: what their scripts read again."""
    current = request.GET.get("current", "")
    return render(
        request,
        "chat/_session_items.html",
        {
            "sessions": listed_sessions(request.user),
            "current_id": int(current) if current.isdecimal() else None,
        },
    )


@login_required
@require_POST
def start_session(request):
    """Start a session with one of the caller's agents; anyone else's agent is a 404."""
    agent_id = request.POST.get("agent", "")
    if not agent_id.isdigit():
        raise Http404("no such agent")
    agent = get_object_or_404(Agent.objects.usable_by(request.user), pk=int(agent_id))
    session = do_start_session(user=request.user, agent=agent)
    return redirect("chat", session_id=session.pk)


@never_cache
@login_required
def chat(request, session_id: int):
    session = owned_session_or_404(request.user, session_id)
    topics = list(session.topics.all())
    active = next(topic for topic in topics if topic.is_active)
    sessions = listed_sessions(request.user)
    initial = {
        # The same representations the REST API and the socket events use.
        "session": SessionSerializer(session).data,
        "topics": [topic_payload(topic) for topic in topics],
        "messages": message_payloads(topic_page(active, limit=MESSAGE_PAGE_SIZE)),
        "preferences": preferences_of(request.user),
    }
    config = page_config(request, session_id=session.pk, page_size=MESSAGE_PAGE_SIZE)
    context = {
        "session": session,
        "session_name": next((s.shown_title for s in sessions if s.pk == session.pk), ""),
        "sessions": sessions,
        "current_id": session.pk,
        "initial": initial,
        "config": config,
        "model": model_shown(session),
    }
    return render(request, "chat/session.html", context)


@never_cache
@login_required
def data_page(request):
    """Your data: export a memory as a JSON file, import one (a preview, then the result)."""
    agents = list(Agent.objects.usable_by(request.user))
    return render(
        request,
        "chat/data.html",
        {"agents": agents, "config": page_config(request), "query": ""},
    )


@never_cache
@login_required
def data_export(request):
    """The export as a file download, JSON whatever the browser asks for: the same
    document as ``GET /agents-api/memory/export`` (docs/memory-export.md)."""
    agent_id = request.GET.get("agent", "")
    if not agent_id.isdecimal():
        raise Http404("no such agent")
    agent = get_object_or_404(Agent.objects.usable_by(request.user), pk=int(agent_id))
    if export_throttled(request):
        return HttpResponse(
            "Too many exports; wait a minute.", status=429, content_type="text/plain"
        )
    whole = request.GET.get("sessions") == "true"
    # Streamed as it is read (memory/actions/export_text.py): a long history is never held.
    response = StreamingHttpResponse(
        export_text(user=request.user, agent=agent, include_sessions=whole),
        content_type="application/json",
    )
    kind = "everything" if whole else "memory"
    response["Content-Disposition"] = f'attachment; filename="driftless-{kind}-{agent.pk}.json"'
    return response


@login_required
def delete_session(request, session_id: int):
    """Ask, then delete: the page says plainly that it is permanent."""
    session = owned_session_or_404(request.user, session_id)
    named = next((s for s in listed_sessions(request.user) if s.pk == session.pk), None)
    name = named.shown_title if named else str(session)
    if request.method == "POST":
        try:
            do_delete_session(session=session, deleted_by=request.user, via=Deletion.Via.USER)
        except Refused as refused:  # a turn of the session is running, or a restart
            messages.error(request, f"Not deleted: {refused.message}")
            return redirect("delete-session", session_id=session.pk)
        messages.success(request, f"“{name}” was deleted permanently.")
        return redirect("home")
    counts = session.topics.aggregate(
        topics=Count("pk"),
        in_memory=Count("pk", filter=IN_MEMORY),
    )
    return render(
        request,
        "chat/delete_session.html",
        {
            "session": session,
            "session_name": name,
            "messages_total": session.messages.count(),
            **counts,
        },
    )


@login_required
def search(request):
    """The search page: the caller's own facts, topics and messages, linked to their topic."""
    query = request.GET.get("q", "")
    hits, error = [], ""
    if query.strip():
        try:
            hits = search_memory(user=request.user, query=query)
        except SearchError as err:
            error = err.message
    # Where each hit is, and when: two topics of the same title are told apart.
    names = {s.pk: s.shown_title for s in listed_sessions(request.user)} if hits else {}
    dates = dict(
        Topic.objects.filter(
            pk__in=[hit.topic_id for hit in hits if hit.topic_id], session_id__in=names
        ).values_list("pk", "created_at")
    )
    results = [
        {
            "hit": hit,
            "url": hit_url(hit),
            "segments": marked_segments(hit.snippet, query=query),
            "session_name": names.get(hit.session_id, ""),
            "date": dates.get(hit.topic_id),
        }
        for hit in hits
    ]
    return render(request, "chat/search.html", {"query": query, "results": results, "error": error})


@cache_control(max_age=86400, public=True)
def favicon(request):
    """``/favicon.ico``, which browsers and tools ask for whatever the page links: the
    site's icon (an SVG, which every current browser takes at that address)."""
    path = finders.find("img/favicon.svg")
    if path is None:
        raise Http404("no icon")
    return FileResponse(open(path, "rb"), content_type="image/svg+xml")
