"""People's words, without the ORM or a model: what every layer above reads of a text.

* ``stats.py``  text statistics: words, language, stop words, stems, similarity (drift,
  recall and consolidation read text through them).
"""
