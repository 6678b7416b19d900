"""Server-rendered pages."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from memory.models import Agent, Session


@login_required
def home(request):
    return render(
        request,
        "chat/home.html",
        {
            "sessions": Session.objects.owned_by(request.user).select_related("agent"),
            "agents": Agent.objects.usable_by(request.user),
        },
    )
