"""Text statistics, in the languages people chat in: the words of the lexical drift
detectors (memory/drift/), of recall's ranking (memory/stores/recall/ranking.py) and of
consolidation's subjects (memory/actions/consolidation/).

Drift detection runs after the message-send path, on every evaluation, so everything
here is cheap and offline:

* **Words** are Unicode word tokens (``\\w``), so "café", "Übergröße" and "поездка" are
  words. Scripts written without spaces are cut by script: a run of Han characters gives
  its character bigrams (a common, dictionary-free unit for Chinese and Japanese
  retrieval), a run of katakana is one word (loan words: "パスポート"), and hiragana runs
  (mostly particles and inflections) carry no subject.
* **Language** of a text is guessed from its script and, for Latin script, from which
  language's stop words it uses (each hit weighed by how many languages share that
  word). It chooses the stop-word list and the stemmer.
* **Stop words** come from the stopwords-iso collection (``stopwordsiso``), except for
  English, where a shorter list tuned for chat (it also drops "lol", "yeah", "thanks")
  keeps content words the big English list removes ("able", "home", "great").
* **Stemming** is Snowball (``snowballstemmer``) for the text's language, so "cooking"
  and "cooked", "поездку" and "поездки", "reservar" and "reserva" count as one term.
  Latin-script words lose their accents first, so "école" and "ecole" are one term.
* **Elision**: an apostrophe joins a word to an elided article or pronoun ("l'eau",
  "d’habitation", "qu'il", "dell'acqua") or to a possessive ("people's"); each part that
  is not a stop word is a word of its own.

The conversational cues (how a turn announces a new subject, a return, a follow-up)
live in :mod:`memory.drift.dialogue_cues`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import cache, lru_cache

import snowballstemmer
import stopwordsiso

_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*")

#: Runs of one script inside a token of a language written without spaces.
_HIRAGANA = re.compile(r"[\u3041-\u309f]+")
_KATAKANA = re.compile(r"[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SPACELESS = re.compile(
    r"([\u3041-\u309f]+|[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+|"
    r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)"
)

#: English stop words for chat: function words, contractions and filler.
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be
    because been before being below between both but by can can't cannot could
    couldn't did didn't do does doesn't doing don't down during each else even ever
    every few for from further get gets getting got had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i
    i'd i'll i'm i've if in into is isn't it it's its itself just let's like me might
    more most much must mustn't my myself need no nor not now of off on once one only
    or other ought our ours ourselves out over own really same shall shan't she she'd
    she'll she's should shouldn't so some still such than that that's the their theirs
    them themselves then there there's these they they'd they'll they're they've thing
    things this those though through to too under until up upon us very want was wasn't
    way we we'd we'll we're we've well were weren't what what's when when's where
    where's whether which while who who's whom why why's will with won't would wouldn't
    yet you you'd you'll you're you've your yours yourself yourselves
    im ive dont cant wont didnt doesnt isnt thats whats youre id ill
    s t m d ll re ve n
    yes yeah yep yup no nope ok okay oh ah uh um hmm hm wow lol haha hahaha lmao omg
    cool nice great good awesome sure thanks thank please hi hello hey bye
    know think say said tell go going gonna make made see lot lots maybe probably
    actually pretty kind sort something anything nothing everything someone anyone
    time times day days today right fine sound sounds mean guess
    """.split()
)
#: Kept for readers of the older name.
STOPWORDS = ENGLISH_STOPWORDS

#: Latin-script languages told apart by their stop words, with their Snowball stemmers.
_LATIN_LANGUAGES: dict[str, str] = {
    "en": "english",
    "es": "spanish",
    "de": "german",
    "fr": "french",
    "it": "italian",
    "pt": "portuguese",
    "nl": "dutch",
}
_STEMMERS: dict[str, str] = {**_LATIN_LANGUAGES, "ru": "russian"}
DEFAULT_LANGUAGE = "en"


@cache
def stopwords(language: str) -> frozenset[str]:
    """The stop words of ``language`` (ISO 639-1), lower-cased; English is the chat list."""
    if language == "en":
        return ENGLISH_STOPWORDS
    try:
        listed = {word.lower() for word in stopwordsiso.stopwords(language)}
    except Exception:  # a language the collection lacks: no stop words
        return frozenset()
    # typed without accents too: "tres", "deja", "fur"
    return frozenset(listed | {_fold(word, language) for word in listed})


@cache
def _stop_word_votes() -> dict[str, dict[str, float]]:
    """For each stop word, the languages it belongs to, each with weight 1/(their count)."""
    owners: dict[str, list[str]] = {}
    for language in _LATIN_LANGUAGES:
        words_ = stopwordsiso.stopwords(language) | (
            ENGLISH_STOPWORDS if language == "en" else set()
        )
        for word in words_:
            owners.setdefault(word.lower(), []).append(language)
    return {word: {lang: 1.0 / len(langs) for lang in langs} for word, langs in owners.items()}


@lru_cache(maxsize=16384)
def language_of(text: str) -> str:
    """ISO 639-1 code of the text's language, guessed; English when nothing tells.

    Japanese when it has kana, Chinese when it has Han characters and no kana, Russian
    when Cyrillic letters outnumber Latin ones; otherwise the Latin-script language
    whose stop words the text uses most.
    """
    cyrillic = latin = 0
    for char in text:
        if "\u3041" <= char <= "\u30ff":
            return "ja"
        if not char.isalpha():
            continue
        name = unicodedata.name(char, "")
        if name.startswith("CJK UNIFIED"):
            return "zh" if not _HIRAGANA.search(text) and not _KATAKANA.search(text) else "ja"
        if name.startswith("CYRILLIC"):
            cyrillic += 1
        elif name.startswith("LATIN"):
            latin += 1
    if cyrillic > latin:
        return "ru"
    votes: Counter[str] = Counter()
    table = _stop_word_votes()
    for token in words(text):
        # "qu'est-ce" and "l'eau" vote by their parts ("qu", "l") when whole they are unknown
        for part in [token] if token in table or "'" not in token else token.split("'"):
            for language, weight in table.get(part, {}).items():
                votes[language] += weight
    if not votes:
        return DEFAULT_LANGUAGE
    best, weight = max(votes.items(), key=lambda item: (item[1], item[0] == DEFAULT_LANGUAGE))
    return best if weight > votes.get(DEFAULT_LANGUAGE, 0.0) else DEFAULT_LANGUAGE


@cache
def _stemmer(language: str):  # noqa: ANN202  (snowballstemmer has no public type)
    algorithm = _STEMMERS.get(language)
    return snowballstemmer.stemmer(algorithm) if algorithm else None


@lru_cache(maxsize=65536)
def stem(word: str, language: str = DEFAULT_LANGUAGE) -> str:
    """The Snowball stem of a lower-cased ``word`` in ``language`` (the word itself when
    there is no stemmer for the language)."""
    stemmer = _stemmer(language)
    return stemmer.stemWord(word) if stemmer is not None else word


def words(text: str) -> list[str]:
    """Lower-cased word tokens, apostrophes kept inside words ("don't")."""
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def _spaceless_terms(token: str) -> list[str]:
    """Terms of a token written without spaces: Han bigrams, katakana words, the rest."""
    terms: list[str] = []
    for run in _SPACELESS.split(token):
        if not run or _HIRAGANA.fullmatch(run):
            continue
        if _HAN.fullmatch(run):
            terms.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        elif _KATAKANA.fullmatch(run):
            if len(run.strip("ー")) >= 2:
                terms.append(run)
        elif len(run) >= 2 and not run.isdigit():
            terms.append(run)
    return terms


@lru_cache(maxsize=32768)
def _content_terms(text: str) -> tuple[str, ...]:
    return _terms(text, language_of(text))


def _terms(text: str, language: str) -> tuple[str, ...]:
    stop = stopwords(language)
    terms: list[str] = []
    for word in words(text):
        if _SPACELESS.search(word):
            terms.extend(t for t in _spaceless_terms(word) if t not in stop)
            continue
        if word in stop or word.isdigit() or len(word) < 2:
            continue
        terms.extend(stem(_fold(part, language), language) for part in _word_parts(word, stop))
    return tuple(terms)


@lru_cache(maxsize=65536)
def _fold(term: str, language: str) -> str:
    """A Latin-script word without its accents, so that "école" and "ecole", "canapé" and
    "canape" (typed on a phone or a foreign keyboard) stem alike; Cyrillic keeps its
    letters (й is not и)."""
    if term.isascii() or language not in _LATIN_LANGUAGES:
        return term
    decomposed = unicodedata.normalize("NFD", term)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _word_parts(word: str, stop: frozenset[str]) -> list[str]:
    """The parts of a word joined by apostrophes that carry meaning.

    An apostrophe joins an elided article, pronoun or conjunction to the word after it
    in French and Italian ("l'appartement", "d'embauche", "qu'il", "dell'acqua") and a
    possessive or contraction to the word before it in English ("people's"): the parts
    that are stop words or single letters go, the others are words of their own.
    """
    if "'" not in word:
        return [word]
    return [part for part in word.split("'") if len(part) >= 2 and part not in stop]


def content_terms(text: str) -> list[str]:
    """Stemmed words that carry subject matter: no stop words, no bare numbers."""
    return list(_content_terms(text))


def bag(texts: Iterable[str]) -> Counter[str]:
    """Term counts of several texts pooled together."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_content_terms(text))
    return counts


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine similarity of two sparse vectors; 0.0 when either is empty."""
    if not a or not b:
        return 0.0
    if len(a) > len(b):
        a, b = b, a
    dot = sum(weight * b.get(term, 0.0) for term, weight in a.items())
    if dot == 0.0:
        return 0.0
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm


# --------------------------------------------------------------------------- #
# Topic vocabulary (for threads with real roles)
# --------------------------------------------------------------------------- #

#: Words that are content words to the tokenizer above but say nothing about the
#: subject: the advice register of an assistant ("usually", "worth", "step") and
#: amounts of time. Two long replies on unrelated subjects share many of them, so
#: they are left out when whole topics are compared (:func:`topic_terms`).
GENERIC_WORDS: frozenset[str] = frozenset(
    """
    usually often common commonly typical typically especially simple simply easy easier
    easiest hard harder great better best worth help helps helped helpful use used uses
    using work works worked working need needs needed start starts started starting first
    second third last next new old little bit few many less least enough important main
    mainly mostly perfect perfectly quite rather around approximately roughly exactly
    almost always never sometimes already usual instead example examples etc even
    look looks looking find found try tried trying take takes took taking give gives gave
    put puts keep keeps kept wants wanted likes liked comes came goes went makes making
    way ways part parts kinds type types option options choice choices step steps
    question questions answer idea ideas point problem problems case cases place places
    able possible likely different another every whole long short big small large high
    low full half minute minutes hour hours week weeks month months year years
    one two three four five six seven eight nine ten twenty thirty hundred
    sorry happy glad left top side end
    """.split()
)


@lru_cache(maxsize=32768)
def _topic_terms(text: str, language: str | None = None) -> tuple[str, ...]:
    language = language or language_of(text)
    if language != "en":
        return _terms(text, language)
    kept = " ".join(word for word in words(text) if word not in GENERIC_WORDS)
    return _terms(kept, "en")


def topic_terms(text: str, language: str | None = None) -> list[str]:
    """Content terms of ``text`` without :data:`GENERIC_WORDS`: what it is about. Read in
    ``language`` when it is known (a word or two is too little to tell it by: "car" and
    "font" read as French stop words), else in the language guessed from the text."""
    return list(_topic_terms(text, language))


def topic_bag(texts: Iterable[str]) -> Counter[str]:
    """:func:`topic_terms` counts of several texts pooled together."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_topic_terms(text))
    return counts


# --------------------------------------------------------------------------- #
# Subject similarity (for consolidation: are these memory entries one subject?)
# --------------------------------------------------------------------------- #


def _script(language: str) -> str:
    return language if language in ("ja", "zh", "ru") else "latin"


def subject_similarity(first: str, second: str) -> float | None:
    """How much two short texts share what they are about: the cosine of their
    :func:`topic_terms` counts, both stemmed in one language (the language of the two
    together, so "Ledger on Postgres" and "Ledger storage" stem "ledger" alike even when
    one alone reads as French). ``None`` when they are written in different scripts
    (Japanese and English): word statistics cannot compare them."""
    overlap = subject_overlap(first, second)
    return None if overlap is None else overlap[0]


def subject_overlap(first: str, second: str) -> tuple[float, int] | None:
    """:func:`subject_similarity` and how many distinct terms the two texts share."""
    if _script(language_of(first)) != _script(language_of(second)):
        return None
    language = language_of(f"{first}\n{second}")
    a, b = Counter(_terms_in(first, language)), Counter(_terms_in(second, language))
    return cosine(a, b), len(a.keys() & b.keys())


def kept_share(source: str, merged: str) -> float | None:
    """The share of ``source``'s distinct topic terms that ``merged`` holds too, both stemmed
    in the language of the two together. ``None`` when they are written in different scripts
    (word statistics cannot compare them) or ``source`` has no term."""
    if _script(language_of(source)) != _script(language_of(merged)):
        return None
    language = language_of(f"{source}\n{merged}")
    terms = set(_terms_in(source, language))
    if not terms:
        return None
    return len(terms & set(_terms_in(merged, language))) / len(terms)


def _terms_in(text: str, language: str) -> tuple[str, ...]:
    if language != "en":
        return _terms(text, language)
    return _terms(" ".join(word for word in words(text) if word not in GENERIC_WORDS), "en")
