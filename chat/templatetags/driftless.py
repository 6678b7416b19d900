"""Template words for people."""

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute, else "5 minutes ago" (never "0 minutes ago")."""
    if moment is None:
        return ""
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    # timesince joins the number and its unit with a no-break space; one plain space reads
    # (and matches) the same everywhere, and a narrow list wraps before the unit anyway.
    return f"{timesince(moment, depth=1).replace(chr(0xA0), ' ')} ago"
