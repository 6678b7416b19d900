"""The gist of a conversation without a model: a title and a summary that read like a
person wrote them (what the offline model answers a summary call with, memory/llm/offline.py).

* **Salient words** are the content words that come back: a word the user wrote in two
  or more of their messages (stop words of the text's language set aside, from the
  stopwords-iso collection) says what the topic is about; a word said once is detail.
* **The title** is the user's own sentence that carries the most salient words (those of
  the first message that says something, not a greeting, count a little more; when no
  word comes back, a sentence of that first message), taken whole, never cut: discourse
  openers that announce a change of subject ("By the way", "Completely different
  thing:", "Кстати", "ところで") are dropped first, and a sentence too long for a title
  is passed over. When none fits, the title lists the salient words.
* **The summary** leads with the title and the salient words (a parenthetical list), then
  the user's decision sentences ("I'll take the Rail Pass") and their main questions,
  each whole.

Unicode throughout: words are ``\\w`` runs, sentences end at Latin and CJK stops.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

import stopwordsiso

TITLE_CHARS = 60
SENTENCE_CHARS = 140
SUMMARY_CHARS = 480
KEYWORDS = 5

_WORD = re.compile(r"\w+(?:['\u2019-]\w+)*")
_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|$)", re.M)
_OPENER = re.compile(
    r"^\s*(?:by the way|btw|anyway|anyhow|also|oh|ok(?:ay)?|so|well|right|hi|hello|hey|"
    r"one more thing|another thing|quick question|random question|separate question|"
    r"unrelated|off[- ]topic|on another note|changing the subject|new question|"
    r"(?:something|a|one)?\s*(?:completely|totally|entirely)?\s*different\s*(?:thing|question|topic|subject)?|"
    r"кстати|между прочим|ところで|そういえば|übrigens|apropos|por cierto|au fait|à propos|"
    r"a propósito|comunque|tra l'altro|trouwens)"
    r"(?=[\s,;:.!?—–、，。-]|$)[\s,;:.!?—–、，。-]*",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:i'll|i will|we'll|we will|i'm going to|we're going to|i've decided|we've decided|"
    r"decided|let's|i'd like|i want|we want|i prefer|we prefer|i'd rather|i chose|we chose|"
    r"i booked|we booked|i'll take|my plan|our plan)\b",
    re.IGNORECASE,
)
_FILLER = frozenset(
    "yes yeah yep ok okay oh thanks thank please hi hello hey lol haha hmm um uh".split()
)
# A message made of these alone greets and says nothing about a subject ("Hi!", "Good
# morning", "Bonjour, ça va ?", "Привет!", "こんにちは").
_GREETING = frozenset(
    "hi hello hey hiya morning afternoon evening good there everyone all how are you doing "
    "bonjour bonsoir salut coucou ça va hallo guten morgen tag abend servus moin grüß gott "
    "hola buenos buenas días dias tardes noches qué tal ciao buongiorno buonasera olá oi bom "
    "dia boa привет здравствуйте добрый день утро вечер доброе как дела "
    "こんにちは こんばんは おはよう おはようございます はじめまして".split()
)
# Latin-script languages told apart by their stop words.
_LANGUAGES = ("en", "es", "de", "fr", "it", "pt", "nl", "ru")


@dataclass(frozen=True)
class Gist:
    title: str
    summary: str
    keywords: tuple[str, ...]


@cache
def _stopwords(language: str) -> frozenset[str]:
    try:
        listed = stopwordsiso.stopwords(language)
    except Exception:  # a language the collection lacks
        listed = set()
    return frozenset(word.lower() for word in listed) | _FILLER


def _language(texts: list[str]) -> str:
    words = [word.lower() for text in texts for word in _WORD.findall(text)]
    hits = {lang: sum(word in _stopwords(lang) for word in words) for lang in _LANGUAGES}
    best = max(hits, key=lambda lang: hits[lang])
    return best if hits[best] else "en"


def _content_words(text: str, stop: frozenset[str]) -> list[str]:
    return [
        word
        for word in _WORD.findall(text)
        if word.lower() not in stop and not word.isdigit() and (len(word) > 2 or not word.isascii())
    ]


def without_opener(sentence: str) -> str:
    """The sentence without the openers that announce a change of subject."""
    previous = None
    while previous != sentence:
        previous, sentence = sentence, _OPENER.sub("", sentence, count=1)
    return sentence.strip()


_SELF = re.compile(r"^(?:i'm|i am|we're|we are)\s+(?=\w+ing\b)", re.IGNORECASE)


def _as_label(sentence: str) -> str:
    """A sentence as a label: no opener, no end stop; "I'm planning…" is "Planning…"."""
    text = without_opener(" ".join(sentence.split())).rstrip(" .!?。！？,;:")
    text = _SELF.sub("", text)
    return text[:1].upper() + text[1:]


def _as_sentence(sentence: str) -> str:
    """A sentence as the summary quotes it: whole, opener dropped, its own stop kept."""
    text = without_opener(" ".join(sentence.split()))
    text = text[:1].upper() + text[1:]
    return text if text[-1:] in ".!?。！？" else text + "."


def says_something(text: str) -> bool:
    """Does the message hold a word about a subject, not only a greeting, filler or an
    opener ("Hi!", "Hello, how are you?", "ok thanks")?"""
    stop = _stopwords(_language([text]))
    return any(
        word.lower() not in stop and word.lower() not in _GREETING and not word.isdigit()
        for word in _WORD.findall(without_opener(text))
    )


def subject_message(messages: list[str]) -> str:
    """The first of the user's ``messages`` that says something (a greeting is skipped),
    else the first one: what a label made without a model is made from."""
    return next((m for m in messages if says_something(m)), messages[0] if messages else "")


def _sentences(text: str) -> list[str]:
    return [match.group().strip() for match in _SENTENCE.finditer(text) if match.group().strip()]


def gist(messages: list[str], *, previous_title: str = "", previous_summary: str = "") -> Gist:
    """The gist of the user's ``messages`` (oldest first); with a previous title and
    summary (a refresh), the title stays and the summary is built on both."""
    units = [m for m in messages if m.strip() and not m.lstrip().startswith("/")]
    basis = units + ([previous_summary] if previous_summary.strip() else [])
    stop = _stopwords(_language(basis))
    seen: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for unit in basis:
        words = _content_words(unit, stop)
        for word in words:
            key = word.lower()
            # A capitalised form wins (a name): "Kyoto", "Rail Pass".
            if key not in shown or (word[:1].isupper() and not shown[key][:1].isupper()):
                shown[key] = word
        seen.update({word.lower() for word in words})
    recurring = {word: count for word, count in seen.items() if count >= 2}
    salient = recurring or dict(seen)
    keywords = tuple(
        shown[word]
        for word, _ in sorted(salient.items(), key=lambda item: (-item[1], _first(item[0], basis)))
    )[:KEYWORDS]

    # (score, position, label, the sentence): the user's first message that says something
    # (not "Hi!") usually states the subject, and a statement names it better than a
    # question does.
    opening = next((i for i, unit in enumerate(units) if says_something(unit)), 0)
    scored: list[tuple[float, int, str, str]] = []
    for position, unit in enumerate(units):
        for sentence in _sentences(unit):
            label = _as_label(sentence)
            words = {word.lower() for word in _content_words(label, stop)}
            score = sum(salient.get(word, 0) for word in words)
            if not words or not score:
                continue
            score *= 1.6 if position == opening else 1.0
            score *= 0.6 if sentence.rstrip().endswith(("?", "？")) else 1.0
            scored.append((score, position, label, _as_sentence(sentence)))
    naming = scored
    if not recurring:  # no word comes back: the opening states the subject, the rest is detail
        naming = [item for item in scored if item[1] == opening] or scored
    title = previous_title.strip() or _title(naming, keywords)
    earlier: tuple[list[str], str] = ([], "")
    if previous_title.strip() and previous_summary.strip():
        earlier = _earlier_parts(title, previous_summary)
        listed = re.match(re.escape(title) + r"\s*\(([^)]*)\)", previous_summary.strip())
        if listed:  # the salient words said before come first
            before = [word.strip() for word in listed.group(1).split(",") if word.strip()]
            merged = {word.lower(): word for word in [*before, *keywords]}
            keywords = tuple(merged.values())[:KEYWORDS]
    summary = _summary(title, keywords, scored, units, earlier=earlier)
    return Gist(title=title, summary=summary, keywords=keywords)


def _earlier_parts(title: str, summary: str) -> tuple[list[str], str]:
    """What a previous summary said after its lead (its decisions, or all of a summary
    the user wrote), and its questions."""
    body = summary.strip()
    if body.startswith(title):
        body = re.sub(r"^\s*(?:\([^)]*\))?\.\s*", "", body[len(title) :])
    asked = ""
    if "Asked: " in body:
        body, asked = body.split("Asked: ", 1)
    return [_as_sentence(sentence) for sentence in _sentences(body)], asked.strip()


def _first(word: str, texts: list[str]) -> int:
    joined = " ".join(texts).lower()
    found = joined.find(word)
    return found if found >= 0 else len(joined)


def _title(scored: list[tuple[float, int, str, str]], keywords: tuple[str, ...]) -> str:
    fitting = [
        item for item in scored if 2 <= len(_WORD.findall(item[2])) and len(item[2]) <= TITLE_CHARS
    ]
    if fitting:
        return max(fitting, key=lambda item: (item[0], -item[1]))[2]
    if not keywords:
        return ""
    named = list(keywords[:3])
    label = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return label[:1].upper() + label[1:]


def _summary(
    title: str,
    keywords: tuple[str, ...],
    scored: list[tuple[float, int, str, str]],
    units: list[str],
    *,
    earlier: tuple[list[str], str] = ([], ""),
) -> str:
    if not title:
        return ""
    others = [word for word in keywords if word.lower() not in title.lower()]
    lead = title + (f" ({', '.join(others)})" if others else "") + "."
    decisions = [
        _as_sentence(sentence)
        for unit in units
        for sentence in _sentences(unit)
        if _DECISION.search(sentence) and len(sentence) <= SENTENCE_CHARS
    ]
    kept, asked_before = earlier
    decisions = [d for d in dict.fromkeys(kept + decisions) if _as_label(d) != title][-4:]
    asked = [
        text
        for _, _, label, text in sorted(scored, key=lambda item: -item[0])
        if label != title and text not in decisions and len(text) <= SENTENCE_CHARS
    ][:2]
    parts = [lead, *decisions]
    if asked or asked_before:
        parts.append("Asked: " + (" ".join(asked) if asked else asked_before))
    summary = ""
    for part in parts:  # whole sentences only, up to the cap
        if len(summary) + len(part) + 1 > SUMMARY_CHARS:
            break
        summary = f"{summary} {part}".strip()
    return summary
