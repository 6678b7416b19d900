"""Recall: the search of the scope's past chats, bounded by the scope.

``ranking`` ranks the hits (words by BM25, meaning by sentence vectors, fused), ``query``
is its one bounded statement on PostgreSQL (with a statement timeout), ``vectors`` the
nearest topics and messages by meaning.
"""
