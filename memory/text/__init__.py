"""People's words, without the ORM or a model: what the layers above read and show of a text.

* ``stats.py``     text statistics: words, language, stop words, stems, similarity (drift,
  recall and consolidation read text through them).
* ``commands.py``  the user's memory commands (``/remember``, ``/forget``, ``/note``), parsed
  once for the turn and the offline model.
* ``markdown.py``  Markdown of replies and notes as sanitized HTML, what the chat page shows.
"""
