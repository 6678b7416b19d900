"""Server-rendered pages: the session list, starting a session, and the chat page.

The chat page ships its first state (topics, the active topic's messages) inside the
HTML, so it paints complete without waiting for an API round trip; after that the
websocket and the REST API keep it current.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, OuterRef, Q, Subquery
from django.http import Http404
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from chat.api.scoping import owned_session_or_404
from chat.turn import TurnBusy, do_delete_session_between_turns
from memory.events import message_payload, topic_payload
from memory.models import Agent, Deletion, Session, Topic
from memory.search import SearchError, marked_segments, search_memory

# The chat page opens on the end of the active topic; older messages of a very long
# topic stay reachable through the messages API.
INITIAL_MESSAGES = 200


@login_required
def home(request):
    active_title = Topic.objects.filter(session=OuterRef("pk"), is_active=True).values("title")
    sessions = (
        Session.objects.owned_by(request.user)
        .select_related("agent")
        .annotate(active_topic_title=Subquery(active_title[:1]))
    )
    return render(
        request,
        "chat/home.html",
        {"sessions": sessions, "agents": Agent.objects.usable_by(request.user)},
    )


@login_required
@require_POST
def start_session(request):
    """Start a session with one of the caller's agents; anyone else's agent is a 404."""
    agent_id = request.POST.get("agent", "")
    if not agent_id.isdigit():
        raise Http404("no such agent")
    agent = get_object_or_404(Agent.objects.usable_by(request.user), pk=int(agent_id))
    session = Session.objects.start(user=request.user, agent=agent)
    return redirect("chat", session_id=session.pk)


@login_required
def chat(request, session_id: int):
    session = owned_session_or_404(request.user, session_id)
    topics = list(session.topics.all())
    active = next(topic for topic in topics if topic.is_active)
    recent = active.messages.order_by("-seq")[:INITIAL_MESSAGES]
    initial = {
        "session": {
            "id": session.pk,
            "title": str(session),
            "agent": {"id": session.agent_id, "name": session.agent.name},
        },
        "topics": [topic_payload(topic) for topic in topics],
        "messages": [message_payload(message) for message in reversed(recent)],
        "csrf_token": get_token(request),
    }
    return render(request, "chat/session.html", {"session": session, "initial": initial})


@login_required
def delete_session(request, session_id: int):
    """Ask, then delete: the page says plainly that it is permanent."""
    session = owned_session_or_404(request.user, session_id)
    if request.method == "POST":
        try:
            do_delete_session_between_turns(
                session=session, deleted_by=request.user, via=Deletion.Via.USER
            )
        except TurnBusy as busy:
            messages.error(request, f"Not deleted: {busy}")
            return redirect("delete-session", session_id=session.pk)
        messages.success(request, f"“{session}” was deleted permanently.")
        return redirect("home")
    counts = session.topics.aggregate(
        topics=Count("pk"),
        in_memory=Count("pk", filter=Q(keep_in_memory=True) | Q(deprecated=True)),
    )
    return render(
        request,
        "chat/delete_session.html",
        {"session": session, "messages_total": session.messages.count(), **counts},
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
            error = str(err).removeprefix("q: ")
    results = [{"hit": hit, "segments": marked_segments(hit.snippet, query=query)} for hit in hits]
    return render(request, "chat/search.html", {"query": query, "results": results, "error": error})
