"""Small, dependency-free text statistics for the lexical drift detectors.

Drift detection runs inside the message-send path, so everything here is plain
Python: a regex tokenizer, an English stopword list that also covers chat filler
("lol", "yeah"), and a light suffix stripper so that "cooking" and "cooked" count
as the same content word. None of it aims at linguistic accuracy; it only has to
make two turns about the same subject share their content words.

For conversations between a user and an assistant it also tells what a turn is about
(content words without the assistant's generic advice vocabulary) and how the turn
announces itself: a change of subject ("Different question: ..."), a return to an
earlier one ("Back to ..."), or a follow-up ("What about ...", "Is it ...").
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


# --------------------------------------------------------------------------- #
# Topic vocabulary and conversational cues (for threads with real roles)
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


def topic_terms(text: str) -> list[str]:
    """Content terms of ``text`` without :data:`GENERIC_WORDS`: what it is about."""
    return [
        term for word in words(text) if word not in GENERIC_WORDS for term in content_terms(word)
    ]


def topic_bag(texts: Iterable[str]) -> Counter[str]:
    """:func:`topic_terms` counts of several texts pooled together."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(topic_terms(text))
    return counts


# A turn often opens with courtesy ("Thanks. Ok, ...") before saying what it is about.
_COURTESY = re.compile(
    r"^(?:(?:ok(?:ay)?|thanks?(?: you)?(?: so much)?|great|perfect|cool|nice|awesome|"
    r"got it|sorry|alright|all right|right|oh|hmm|hey|hi|well|good to know|makes sense|"
    r"that (?:helps|makes sense)|understood)\b[\s,.!:;\u2014\u2013-]*)+",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END = re.compile(r"[:;?\u2014\u2013]|\s-\s|\.(?:\s|$)")

#: Phrases by which a speaker announces a change of subject, wherever they stand in
#: the opening clause ("Can I ask you a different question?").
_SWITCH_CUE = re.compile(
    r"\b(?:by the way|btw|off[- ]topic|random question|separate question|"
    r"different (?:question|topic|subject|matter)|new (?:topic|subject)|"
    r"(?:another|other) (?:topic|subject|matter)|unrelated (?:question|thing|note)|"
    r"switch(?:ing)? (?:gears|topics?|subjects?)|chang(?:e|ing) (?:of |the )?(?:topics?|subject)|"
    r"on (?:an)?other note|on an? (?:different|separate|unrelated|side|lighter) note)\b",
    re.IGNORECASE,
)
#: Words that announce a change of subject only where a clause starts: "Unrelated,
#: but ..." and "Something else: ..." do, "is it unrelated to ..." and "laziness or
#: something else?" do not. A few words may come first ("Quick unrelated ...").
_SWITCH_OPENER = re.compile(
    r"^(?:(?:anyway|anyways|moving on)\b|(?:(?:a|one|more|quick|random|small|little|"
    r"totally|completely|somewhat|something|also|and|but|so|now)[\s,]+){0,2}"
    r"(?:unrelated|something else|something (?:completely|totally|entirely) different)\b)",
    re.IGNORECASE,
)
#: Phrases by which a speaker goes back to an earlier subject, where a clause starts
#: ("Back to Japan: ...", "Going back to the trip ..."), not "put it back to ...".
_RETURN_CUE = re.compile(
    r"^(?:(?:going|coming|getting|get|go|come|to|so|now|and|but|anyway|anyways|just)"
    r"[\s,]+){0,2}(?:back to|return(?:ing)? to)\b",
    re.IGNORECASE,
)
#: Openings that continue the subject at hand ("And ...", "What about ...", "Is it ...").
_FOLLOW_UP_OPENER = re.compile(
    r"^(?:and|also|so|then|but|or|what about|how about|what if|in that case|if so|if not|"
    r"(?:does|is|would|will|can|could|should) (?:that|it|this|they|these|those)|"
    r"it|that|this|these|those|they|them|same|which one|"
    r"(?:one more|one last|last|another) (?:thing|question))\b",
    re.IGNORECASE,
)
_PRONOUNS = frozenset("it its that this these those they them their he she him her".split())


def opening_clauses(text: str, sentences: int = 2) -> list[str]:
    """First clause of each of the first ``sentences`` sentences, courtesy stripped.

    "Thanks, that helps. Different question: how do I ..." gives ["that helps",
    "Different question"]: a cue phrase counts where a speaker announces the turn,
    not anywhere in it.
    """
    body = _COURTESY.sub("", " ".join(text.split()))
    clauses = []
    for sentence in _SENTENCE_END.split(body)[:sentences]:
        clause = _CLAUSE_END.split(_COURTESY.sub("", sentence), maxsplit=1)[0].strip(" ,")
        if clause:
            clauses.append(clause)
    return clauses


def announces_switch(text: str) -> bool:
    """Does the turn announce a new subject ("Different question: ...", "By the way, ...")?"""
    return any(
        _SWITCH_CUE.search(clause) or _SWITCH_OPENER.match(clause)
        for clause in opening_clauses(text)
    )


def announces_return(text: str) -> bool:
    """Does the turn announce going back to an earlier subject ("Back to Japan: ...")?"""
    return any(_RETURN_CUE.match(clause) for clause in opening_clauses(text))


def opens_as_follow_up(text: str) -> bool:
    """Does the turn open like a follow-up ("And ...", "What about ...", "Is it ...")?"""
    clauses = opening_clauses(text, sentences=1)
    return bool(clauses) and bool(_FOLLOW_UP_OPENER.match(clauses[0]))


def opens_with_reference(text: str) -> bool:
    """Does the first sentence name its subject by a pronoun before any content word?

    "What should it include?" points back at the subject of the conversation;
    "How do I cancel my gym membership if they ..." names its subject first.
    """
    clauses = opening_clauses(text, sentences=1)
    for word in words(clauses[0]) if clauses else ():
        if word in _PRONOUNS:
            return True
        if content_terms(word):
            return False
    return False
