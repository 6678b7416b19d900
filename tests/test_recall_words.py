"""Recall's word matching, made cheap for a turn (issue 43), says what it said before:
a word starts with a term, how many words do, and the accents folded away."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.stores.recall.ranking import _fold_accents, _folded_words, _word_line

words = st.text(alphabet="abcéèüñß ÅØ-x'’\u0301", max_size=40)
terms = st.text(alphabet="abcéüñx", max_size=4)


def _folded_slowly(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


@settings(max_examples=300, deadline=None)
@given(text=words, term=terms)
def test_a_word_line_finds_and_counts_what_the_words_themselves_do(text, term):
    found = _folded_words(text)
    line = _word_line(found)
    term = _fold_accents(term)
    assert (f" {term}" in line) == any(word.startswith(term) for word in found)
    assert line.count(f" {term}") == sum(word.startswith(term) for word in found)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_folding_accents_is_what_it_was(text):
    assert _fold_accents(text) == _folded_slowly(text)
