"""Small, dependency-free text statistics for the lexical drift detectors.

Drift detection runs inside the message-send path, so everything here is plain
Python: a regex tokenizer, an English stopword list that also covers chat filler
("lol", "yeah"), and a light suffix stripper so that "cooking" and "cooked" count
as the same content word. None of it aims at linguistic accuracy; it only has to
make two turns about the same subject share their content words.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

STOPWORDS: frozenset[str] = frozenset(
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

_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ers", "er"),
    ("ed", ""),
    ("es", ""),
    ("ly", ""),
    ("s", ""),
)


def stem(word: str) -> str:
    """Strip one common English suffix, keeping at least three letters.

    Deliberately crude (no Porter rules): the detectors compare turns of one
    conversation, where the same subject mostly comes back in the same few word
    forms, and a crude stemmer cannot over-merge unrelated words the way a
    lemmatiser without context sometimes does.
    """
    if word.endswith("ss") or len(word) <= 3:
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: len(word) - len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]  # "running" -> "run", "stopped" -> "stop"
            return base
    return word


def words(text: str) -> list[str]:
    """Lower-cased word tokens, apostrophes kept inside words ("don't")."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def content_terms(text: str) -> list[str]:
    """Stemmed words that carry subject matter: no stopwords, no bare numbers."""
    terms = []
    for word in words(text):
        if word in STOPWORDS or word.isdigit() or len(word) < 2:
            continue
        terms.append(stem(word.split("'")[0]))
    return terms


def bag(texts: Iterable[str]) -> Counter[str]:
    """Term counts of several texts pooled together."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(content_terms(text))
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
