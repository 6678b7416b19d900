"""The memory QA bench's inputs and scoring (bench.memory_qa): the project's JSON Lines
histories, LoCoMo's ``locomo10.json`` (read from where it lies; never copied), and how a
reply is scored against a gold answer."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

KINDS = (
    "fact",
    "decision",
    "update",
    "multi",
    "temporal",
    "preference",
    "abstain",
    "detail-in-small-talk",
    "cross-language",  # asked in another language than the history (its "lang")
)
LOCOMO_KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class Part:
    """One session of a history."""

    date: str  # YYYY-MM-DD
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    q: str
    answer: str
    kind: str
    accept: tuple[str, ...] = ()
    evidence: tuple[tuple[int, int], ...] = ()  # (session, turn), both from 0
    lang: str = ""  # the question's, when not the history's (kind "cross-language")


@dataclass(frozen=True)
class History:
    id: str
    lang: str
    sessions: tuple[Part, ...]
    questions: list[Question]


class DataError(ValueError):
    """A history that does not follow the format, with where."""


def load_histories(path: str | Path) -> list[History]:
    """The histories of a memory-qa JSON Lines file, checked (DataError says where)."""
    histories = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                histories.append(parse_history(json.loads(line)))
            except (DataError, json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataError(f"{path}:{number}: {err}") from err
    return histories


def parse_history(row: dict) -> History:
    sessions = []
    for index, part in enumerate(row["sessions"]):
        datetime.strptime(part["date"], "%Y-%m-%d")  # ValueError names the bad date
        turns = tuple(Turn(t["role"], t["text"]) for t in part["turns"])
        if not turns or any(t.role not in ROLES or not t.text.strip() for t in turns):
            raise DataError(f"session {index}: turns need a role (user/assistant) and text")
        sessions.append(Part(part["date"], turns))
    if [p.date for p in sessions] != sorted(p.date for p in sessions):
        raise DataError("sessions must be in date order")
    questions = []
    for q in row["questions"]:
        if q["kind"] not in KINDS:
            raise DataError(f"unknown kind {q['kind']!r} (one of {', '.join(KINDS)})")
        evidence = tuple((int(s), int(t)) for s, t in q.get("evidence", ()))
        for s, t in evidence:
            if not (0 <= s < len(sessions) and 0 <= t < len(sessions[s].turns)):
                raise DataError(f"evidence {[s, t]} of {q['q']!r} is outside the history")
        questions.append(
            Question(
                q["q"],
                str(q["answer"]),
                q["kind"],
                tuple(q.get("accept", ())),
                evidence,
                q.get("lang", ""),
            )
        )
    return History(row["id"], row.get("lang", "en"), tuple(sessions), questions)


def load_locomo(path: str | Path, *, conversations: int, categories: set[int]) -> list[History]:
    """LoCoMo's first ``conversations`` conversations as histories: the first speaker is
    the user, the second the assistant; each session keeps its date; a shared photo is
    kept as its caption. Questions of ``categories`` only (5, adversarial, is usually
    left out), their category's name as the kind."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    histories = []
    for sample in data[:conversations]:
        talk = sample["conversation"]
        first = talk["speaker_a"]
        numbers = sorted(
            int(key.split("_")[1])
            for key in talk
            if re.fullmatch(r"session_\d+", key) and talk[key]
        )
        sessions, where = [], {}
        for number in numbers:
            turns = []
            for turn in talk[f"session_{number}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                where[turn.get("dia_id", "")] = (len(sessions), len(turns))
                turns.append(Turn("user" if turn["speaker"] == first else "assistant", text))
            date = locomo_date(talk[f"session_{number}_date_time"])
            sessions.append(Part(date, tuple(turns)))
        questions = [
            Question(
                qa["question"],
                str(qa["answer"]),
                LOCOMO_KINDS[qa["category"]],
                evidence=tuple(where[e] for e in qa.get("evidence", ()) if e in where),
            )
            for qa in sample["qa"]
            if qa.get("category") in categories and "answer" in qa
        ]
        histories.append(
            History(sample.get("sample_id", str(len(histories))), "en", tuple(sessions), questions)
        )
    return histories


def locomo_date(text: str) -> str:
    """``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08"``."""
    day = text.split(" on ", 1)[-1].strip()
    return datetime.strptime(day, "%d %B, %Y").date().isoformat()


# --- scoring --------------------------------------------------------------------------------

_ARTICLES = frozenset({"a", "an", "the"})
# Normalized phrases that say "I do not know" (the bench's languages).
ABSTAIN_PHRASES = (
    "don t know",
    "do not know",
    "don t have",
    "do not have",
    "not sure",
    "no record",
    "no information",
    "not mentioned",
    "didn t mention",
    "did not mention",
    "haven t mentioned",
    "have not mentioned",
    "haven t told",
    "have not told",
    "never mentioned",
    "never told",
    "not aware",
    "no idea",
    "can t find",
    "cannot find",
    "couldn t find",
    "could not find",
    "unable to find",
    "no mention",
    "not specified",
    "wasn t mentioned",
    "was not mentioned",
    "not provided",
    "no details",
    "no specific information",
    "weiss nicht",
    "weiss ich nicht",
    "keine information",
    "keine informationen",
    "keine angabe",
    "nicht erwahnt",
    "nicht bekannt",
    "je ne sais pas",
    "aucune information",
    "pas mentionne",
    "je n ai pas",
    "no lo se",
    "no tengo informacion",
    "no tengo datos",
    "no has mencionado",
    "no me has dicho",
    "no lo mencionaste",
)


def normalize(text: str) -> str:
    """Lower case, no accents, punctuation as spaces, English articles dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    plain = plain.replace("ß", "ss")
    words = re.findall(r"\w+", plain.replace("_", " "))
    return " ".join(word for word in words if word not in _ARTICLES)


def contains(reply: str, gold: str) -> bool:
    gold = normalize(gold)
    return bool(gold) and f" {gold} " in f" {normalize(reply)} "


def token_f1(reply: str, gold: str) -> float:
    said, wanted = normalize(reply).split(), normalize(gold).split()
    common = sum((Counter(said) & Counter(wanted)).values())
    if not common:
        return 0.0
    precision, recall = common / len(said), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def abstains(reply: str) -> bool:
    text = f" {normalize(reply)} "
    return not text.strip() or any(f" {phrase} " in text for phrase in ABSTAIN_PHRASES)


def score_reply(question: Question, reply: str) -> tuple[bool, float]:
    """(right, token F1): containment of the gold answer or an accepted one; an abstain
    question (gold "unknown") is right, with F1 1, when the reply says it does not know."""
    if question.kind == "abstain" or normalize(question.answer) == "unknown":
        right = bool(reply.strip()) and abstains(reply)
        return right, 1.0 if right else 0.0
    golds = (question.answer, *question.accept)
    right = any(contains(reply, gold) for gold in golds)
    return right, max(token_f1(reply, gold) for gold in golds)
