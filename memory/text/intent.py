"""Does a message ask for a memory action (remember, note, forget)? Across languages.

A model that calls tools poorly gets no tool schemas on a question turn
(memory/llm/profiles.py); it gets them when the user's message asks it to remember, note
or forget something. The signal is a nearest-exemplar vote, not a keyword list:

* a small set of **exemplars** per supported language (en, fr, de, es, it, pt, nl, ru,
  ja): short requests for a memory action (``ACTION``: "remember that", "merk dir",
  "n'oublie pas que", "запомни", "覚えておいて") and short questions *about* the past
  that use the same verbs (``RECALL``: "do you remember ...?", "te acuerdas?"), which are
  not actions;
* a message is compared with each exemplar by the share of the exemplar's features it
  holds (:func:`coverage`), by weight: the words stemmed in the exemplar's language
  (Snowball, accents folded, stop words kept at half weight: "that" and "dir" carry the
  intent here, but never alone), character bigrams for scripts written without spaces,
  and a question mark;
* it asks for an action when its best ACTION exemplar is covered at least
  ``ACTION_THRESHOLD`` and better than its best RECALL exemplar.

The comparison is the seam: :class:`IntentVerdict` comes from :func:`memory_action`, whose
``similarity`` argument may be replaced by a sentence encoder's cosine (the exemplars stay)
without touching its callers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from memory.text.stats import _SPACELESS, _fold, stem, stopwords, words

ACTION_THRESHOLD = 0.75
STOP_WORD_WEIGHT = 0.5

# (language, text). Two features at least each: one verb alone is ambiguous ("recuerda"
# asks in Spanish as often as it orders).
ACTION: tuple[tuple[str, str], ...] = (
    ("en", "remember that"),
    ("en", "please remember"),
    ("en", "can you remember that"),
    ("en", "could you note"),
    ("en", "remember my"),
    ("en", "don't forget that"),
    ("en", "keep in mind that"),
    ("en", "make a note"),
    ("en", "note that"),
    ("en", "note down"),
    ("en", "write down"),
    ("en", "save this"),
    ("en", "forget what I said"),
    ("en", "forget about my"),
    ("en", "forget my"),
    ("fr", "souviens-toi que"),
    ("fr", "rappelle-toi que"),
    ("fr", "retiens que"),
    ("fr", "mémorise que"),
    ("fr", "n'oublie pas que"),
    ("fr", "note que"),
    ("fr", "prends note"),
    ("fr", "oublie ce que"),
    ("de", "merk dir"),
    ("de", "merke dir"),
    ("de", "vergiss nicht"),
    ("de", "notiere dir"),
    ("de", "notier dir"),
    ("de", "schreib dir auf"),
    ("de", "vergiss was ich"),
    ("de", "vergiss mein"),
    ("es", "recuerda que"),
    ("es", "acuérdate de que"),
    ("es", "no olvides que"),
    ("es", "toma nota"),
    ("es", "anota que"),
    ("es", "apunta que"),
    ("es", "olvida lo que"),
    ("it", "ricorda che"),
    ("it", "ricordati che"),
    ("it", "prendi nota"),
    ("it", "non dimenticare che"),
    ("pt", "lembre-se de que"),
    ("pt", "lembra que"),
    ("pt", "anote que"),
    ("pt", "não esqueça que"),
    ("nl", "onthoud dat"),
    ("nl", "vergeet niet dat"),
    ("nl", "noteer dat"),
    ("ru", "запомни что"),
    ("ru", "запомни мой"),
    ("ru", "не забудь что"),
    ("ru", "запиши что"),
    ("ru", "забудь что"),
    ("ru", "забудь про"),
    ("ja", "覚えておいて"),
    ("ja", "覚えといて"),
    ("ja", "メモして"),
    ("ja", "記録して"),
    ("ja", "忘れないで"),
    ("ja", "忘れて"),
)
RECALL: tuple[tuple[str, str], ...] = (
    ("en", "do you remember ?"),
    ("en", "remember what ?"),
    ("en", "what did I tell you about ?"),
    ("fr", "tu te souviens ?"),
    ("fr", "te souviens-tu ?"),
    ("fr", "tu te rappelles ?"),
    ("de", "erinnerst du dich ?"),
    ("de", "weißt du noch ?"),
    ("es", "te acuerdas ?"),
    ("es", "recuerdas ?"),
    ("es", "recuerdas que ?"),
    ("it", "ti ricordi ?"),
    ("pt", "você lembra ?"),
    ("nl", "weet je nog ?"),
    ("ru", "ты помнишь ?"),
    ("ru", "помнишь ?"),
    ("ja", "覚えてる？"),
    ("ja", "覚えていますか？"),
)

_QUESTION = "?"
_QUESTION_MARKS = re.compile(r"[?？¿]")


def features(text: str, language: str) -> dict[str, float]:
    """The text's features in ``language``, each with its weight: stems of its words
    (a stop word weighs half a content word: "de que" alone is no request), the
    character bigrams of runs written without spaces, and "?" when it asks."""
    found: dict[str, float] = {}
    stop = stopwords(language)
    for word in words(text):
        if _SPACELESS.search(word):
            found.update((word[i : i + 2], 1.0) for i in range(max(len(word) - 1, 1)))
            continue
        for part in word.split("'"):
            if len(part) >= 2:
                weight = STOP_WORD_WEIGHT if part in stop else 1.0
                found[stem(_fold(part, language), language)] = weight
    if _QUESTION_MARKS.search(text):
        found[_QUESTION] = STOP_WORD_WEIGHT
    return found


def coverage(message: str, exemplar: str, language: str) -> float:
    """The share of the exemplar's features (in its language, by weight) the message holds."""
    wanted = _exemplar_features(exemplar, language)
    total = sum(wanted.values())
    if not total:
        return 0.0
    held = features(message, language)
    return sum(weight for feature, weight in wanted.items() if feature in held) / total


@cache
def _exemplar_features(exemplar: str, language: str) -> dict[str, float]:
    return features(exemplar, language)


@dataclass(frozen=True)
class IntentVerdict:
    asks: bool  # the message asks for a memory action: offer the tools
    action: float  # how well its best ACTION exemplar matches
    recall: float  # how well its best RECALL exemplar matches
    exemplar: str  # the best ACTION exemplar

    def as_dict(self) -> dict:
        return {
            "asks_memory_action": self.asks,
            "action": round(self.action, 3),
            "recall": round(self.recall, 3),
            "exemplar": self.exemplar,
        }


Similarity = Callable[[str, str, str], float]


def memory_action(text: str, *, similarity: Similarity = coverage) -> IntentVerdict:
    """Whether ``text`` asks to remember, note or forget something (see the module)."""
    text = text[:2000]
    action, best = max(((similarity(text, ex, lang), ex) for lang, ex in ACTION), default=(0, ""))
    recall = max((similarity(text, ex, lang) for lang, ex in RECALL), default=0.0)
    asks = action >= ACTION_THRESHOLD and action > recall
    return IntentVerdict(asks=asks, action=action, recall=recall, exemplar=best)
