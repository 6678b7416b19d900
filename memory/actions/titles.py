"""Titles that settle: a topic's title changes only when its subject does.

The rule (every model, the offline one included): the first summary names the topic
(a title that is still the first message's words, a fork's label or a failed summary's
fallback are replaced); from then on,
once the topic holds :data:`TITLE_SETTLES_AT` conversation messages, a summary's new
title replaces the old one only when the old one no longer says what the topic is
about: its sentence vector's cosine with the new title and summary is below
:data:`SAME_SUBJECT` (memory/text/embeddings.py). A topic's subject does not change
without a fork (a fork opens a new topic, with its own title), so a settled title
stays while the summary under it grows. The user's own edit is kept as before
(``Topic.edit_stands``).
"""

from __future__ import annotations

from memory.models import Message, Topic
from memory.text.embeddings import embed, encoder_name

TITLE_SETTLES_AT = 6
#: Below this cosine the old title is about something else. The stand-in encoder's
#: cosines are of shared word pieces.
SAME_SUBJECT = {"use": 0.25, "hashed": 0.1}


def settled_title(*, topic: Topic, title: str, summary: str) -> str:
    """The title a summary leaves the topic with: ``title``, or the settled one."""
    old = topic.title.strip()
    if not old or old == title or topic.summarized_at is None or topic.summary_is_fallback:
        return title
    conversation = Message.objects.filter(topic_id=topic.pk).conversation()
    if conversation.count() < TITLE_SETTLES_AT:
        return title
    first = conversation.filter(role=Message.Role.USER).order_by("seq").first()
    if first is not None and " ".join(first.content.split()).startswith(old.rstrip("…").strip()):
        return title  # still the first message's words: never named by a summary
    before, after = embed([old, f"{title}\n{summary}"])
    if float(before @ after) >= SAME_SUBJECT.get(encoder_name(), 0.25):
        return topic.title
    return title
