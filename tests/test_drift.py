"""Drift detection: the model decides (validated), selection of the detector, the cut."""

import pytest

from memory.actions.fork import plan_fork, tool_safe_cut
from memory.drift.detectors import DriftVerdict, Turn
from memory.drift.llm import (
    DRIFT_SCHEMA,
    VERDICT_MAX_TOKENS,
    LLMDriftDetector,
    Subject,
    get_drift_detector,
)
from memory.llm import get_chat_model
from memory.models import Message
from tests.evaluation_helpers import SUBJECT_A, SUBJECT_B, FixedDetector, MarkerDetector

TURNS = [Turn(role, text) for role, text in SUBJECT_A + SUBJECT_B]  # 10 turns, B starts at 6


def llm_detector(prefilter=False):
    return LLMDriftDetector(get_chat_model("summary"), prefilter=prefilter)


def test_the_model_detector_asks_about_the_window_and_trusts_a_valid_answer(fake_openai):
    fake_openai.reply_json({"drifted": True, "start": 6})

    subject = Subject(title="Balcony garden", summary="Tomatoes and basil in pots.")
    verdict = llm_detector().detect(TURNS, scan_back=5, subject=subject)

    assert verdict == DriftVerdict(True, 6, "model: new subject at turn 6")
    (request,) = fake_openai.requests
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "drift_verdict", "schema": DRIFT_SCHEMA, "strict": True},
    }
    system = request["messages"][0]["content"]
    assert "turns numbered 5\nto 9" in system
    assert "Balcony garden — Tomatoes and basil in pots." in system
    assert "[6] user: NEW-SUBJECT: my laptop battery" in request["messages"][1]["content"]


def test_the_model_detector_takes_a_strict_false_as_no_drift(fake_openai):
    fake_openai.reply_json({"drifted": False, "start": None})

    assert llm_detector().detect(TURNS, scan_back=5).drifted is False


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"drifted": "true", "start": 6}, id="string-true"),
        pytest.param({"drifted": 1, "start": 6}, id="one"),
        pytest.param({"start": 6}, id="missing-flag"),
        pytest.param({"drifted": True}, id="missing-start"),
        pytest.param({"drifted": True, "start": 2}, id="start-before-window"),
        pytest.param({"drifted": True, "start": 10}, id="start-past-end"),
        pytest.param({"drifted": True, "start": "6"}, id="start-string"),
        pytest.param({"drifted": True, "start": True}, id="start-bool"),
        pytest.param({"drifted": True, "start": 6.0}, id="start-float"),
        pytest.param(["drifted", True], id="not-an-object"),
    ],
)
def test_an_unusable_model_answer_never_forks(fake_openai, answer):
    fake_openai.reply_json(answer)

    verdict = llm_detector().detect(TURNS, scan_back=5)

    assert (verdict.drifted, verdict.start) == (False, None)
    assert verdict.reason == "model answer unusable; no fork"


@pytest.mark.parametrize("failure", ["garbage", "http-500", "never-ends"])
def test_a_failed_model_call_means_no_drift(fake_openai, failure):
    if failure == "garbage":
        fake_openai.reply_raw_content("drifted: yes")
    elif failure == "never-ends":  # a small model that keeps talking is cut off
        why = "so " * 600  # whole, a valid answer that forks; cut at the bound, no JSON
        fake_openai.reply_raw_content('{"drifted": true, "start": 6, "why": "' + why + '"}')
    else:
        fake_openai.fail(500)

    verdict = llm_detector().detect(TURNS, scan_back=5)

    assert (verdict.drifted, verdict.start) == (False, None)
    assert all(request.get("max_tokens") == VERDICT_MAX_TOKENS for request in fake_openai.requests)


def test_auto_asks_the_model_where_the_text_is_unsure_and_takes_a_borderline_fork(fake_openai):
    fake_openai.reply_json({"drifted": True, "start": 6})
    assert llm_detector(prefilter=True).detect(TURNS, scan_back=5).start == 6
    assert len(fake_openai.requests) == 1


def test_auto_skips_the_call_only_for_a_window_without_a_user_turn(fake_openai):
    replies_only = [*TURNS[:6], Turn("assistant", "Part one."), Turn("assistant", "Part two.")]
    verdict = llm_detector(prefilter=True).detect(replies_only, scan_back=2)
    assert verdict.drifted is False and fake_openai.requests == []


def test_with_the_offline_model_only_the_model_free_detector_runs(settings):
    for choice in ("auto", "llm"):
        settings.DRIFT_DETECTOR = choice
        assert get_drift_detector().name == "semantic"


def test_the_setting_chooses_the_detector(fake_openai, settings):
    settings.DRIFT_DETECTOR = "auto"
    detector = get_drift_detector()
    assert isinstance(detector, LLMDriftDetector) and detector.prefilter
    settings.DRIFT_DETECTOR = "llm"
    detector = get_drift_detector()
    assert isinstance(detector, LLMDriftDetector) and not detector.prefilter
    settings.DRIFT_DETECTOR = "lexical"
    assert get_drift_detector().name == "lexical"
    settings.DRIFT_DETECTOR = "nonsense"
    with pytest.raises(ValueError, match="unknown drift detector"):
        get_drift_detector()


# --- from a verdict to the cut ---------------------------------------------------------------


def msg(seq, role, content="", **fields):
    return Message(seq=seq, role=role, content=content, **fields)


def call(call_id):
    return [{"id": call_id, "type": "function", "function": {"name": "notes", "arguments": "{}"}}]


def test_the_cut_moves_back_so_a_tool_call_stays_with_its_result():
    history = [
        msg(1, "user", "a"),
        msg(2, "assistant", tool_calls=call("c1")),
        msg(3, "user", "typed in another tab"),
        msg(4, "tool", "result", tool_call_id="c1"),
        msg(5, "assistant", "done"),
    ]
    assert tool_safe_cut(history, 2, lowest=1) == 1
    assert tool_safe_cut(history, 4, lowest=1) == 4


def test_the_cut_moves_forward_rather_than_below_the_window():
    history = [
        msg(1, "user", "a"),
        msg(2, "assistant", tool_calls=call("c1")),
        msg(3, "user", "b"),
        msg(4, "tool", "result", tool_call_id="c1"),
        msg(5, "user", "c"),
    ]
    assert tool_safe_cut(history, 2, lowest=2) == 4
    assert tool_safe_cut(history[:4], 2, lowest=2) is None


def test_an_unmatched_tool_result_stays_with_the_nearest_earlier_call():
    history = [
        msg(1, "user", "a"),
        msg(2, "assistant", tool_calls=call("c1")),
        msg(3, "tool", "result", tool_call_id="unknown"),
    ]
    assert tool_safe_cut(history, 2, lowest=1) == 1


@pytest.fixture
def saved_history(session):
    for role, text in SUBJECT_A + SUBJECT_B:
        session.append_message(role=role, content=text)
    topic = session.active_topic()
    return topic, list(topic.messages.order_by("seq"))


def test_a_verdict_outside_the_window_is_ignored(saved_history):
    topic, history = saved_history
    detector = FixedDetector(DriftVerdict(True, 2, "reaching too far back"))

    verdict, plan = plan_fork(topic=topic, history=history, detector=detector, scan_back=4)

    assert plan is None and verdict.drifted is False


def test_the_detector_sees_turns_and_the_window_in_turns(saved_history):
    topic, history = saved_history
    detector = MarkerDetector()

    verdict, plan = plan_fork(topic=topic, history=history, detector=detector, scan_back=3)

    ((turns, scan_back),) = detector.calls
    assert [t.text for t in turns] == [text for _, text in SUBJECT_A + SUBJECT_B]
    assert scan_back == 3
    assert plan is None  # the marker is one message before the window


def test_the_plan_starts_at_the_new_subjects_first_message(saved_history):
    topic, history = saved_history

    verdict, plan = plan_fork(topic=topic, history=history, detector=MarkerDetector(), scan_back=10)

    assert verdict.drifted and plan.start_seq == history[6].seq
    assert (plan.topic_id, plan.session_id) == (topic.pk, topic.session_id)
