"""The model seam against what real models do (LOCAL_MODEL.md in the shared notes): fenced
and chatty JSON, endpoints that refuse a response_format, slow first tokens and stalled
streams, reasoning blocks. The real `openai` client against the fake server, scripted to
misbehave that way."""

from __future__ import annotations

import json
import time

import pytest

from memory.llm import Completion, LLMError, get_chat_model, parse_json_object, strip_reasoning
from memory.llm.output import ReasoningFilter
from tests.fake_openai import FakeOpenAI

USER_HELLO = [{"role": "user", "content": "Hello there"}]
SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}


def _drain(stream) -> tuple[list[str], Completion]:
    *deltas, completion = list(stream)
    assert isinstance(completion, Completion)
    return deltas, completion


# --- 1. JSON as small models write it --------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"title": "Kyoto trip"}\n```',
        'Sure! Here is the JSON you asked for:\n\n```json\n{"title": "Kyoto trip"}\n```\n'
        "Let me know if you need anything else.",
        'The answer is {"title": "Kyoto trip"} as requested.',
        '```\n{"title": "Kyoto trip"}\n```',
        'Note {not json} first, then {"title": "Kyoto trip"}',
    ],
)
def test_fenced_or_chatty_json_parses(fake_openai: FakeOpenAI, content: str):
    fake_openai.reply_raw_content(content)

    assert get_chat_model().complete_json(messages=USER_HELLO) == {"title": "Kyoto trip"}


def test_an_answer_with_no_json_object_in_it_is_a_clear_error(fake_openai: FakeOpenAI):
    fake_openai.reply_raw_content("I'm sorry, I can't help with that.")

    with pytest.raises(LLMError, match="model answer is not valid JSON: \"I'm sorry"):
        get_chat_model().complete_json(messages=USER_HELLO)


def test_a_brace_storm_is_given_up_on_quickly():
    with pytest.raises(LLMError, match="not valid JSON"):
        parse_json_object("{x} " * 5000 + '{"title": "x"}')


def test_json_nested_past_the_depth_limit_is_a_clear_error_not_a_crash():
    with pytest.raises(LLMError, match="model answer is nested deeper than 32 levels"):
        parse_json_object('{"a": ' * 900 + "1" + "}" * 900)


# --- 2. endpoints that refuse a response_format ------------------------------------------


def _formats(fake: FakeOpenAI) -> list[str | None]:
    return [(request.get("response_format") or {}).get("type") for request in fake.requests]


def test_json_schema_is_asked_first_with_the_schema(fake_openai: FakeOpenAI):
    fake_openai.reply_json({"title": "Trip"})

    get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA, schema_name="t")

    assert fake_openai.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "t", "schema": SCHEMA, "strict": True},
    }


def test_an_endpoint_refusing_json_schema_falls_back_to_json_object_and_remembers(
    fake_openai: FakeOpenAI,
):
    fake_openai.refuse_response_formats("json_schema")
    fake_openai.reply_json({"title": "First"})
    fake_openai.reply_json({"title": "Second"})

    model = get_chat_model("summary")
    assert model.complete_json(messages=USER_HELLO, schema=SCHEMA) == {"title": "First"}
    assert get_chat_model("summary").complete_json(messages=USER_HELLO, schema=SCHEMA) == {
        "title": "Second"
    }

    # The refusal cost one request once; the second call went straight to json_object.
    assert _formats(fake_openai) == ["json_schema", "json_object", "json_object"]


def test_an_endpoint_refusing_both_formats_gets_the_prompt_alone_and_it_is_remembered(
    fake_openai: FakeOpenAI,
):
    fake_openai.refuse_response_formats("json_schema", "json_object")
    fake_openai.reply_raw_content('```json\n{"title": "Fenced"}\n```')
    fake_openai.reply_raw_content('{"title": "Bare"}')

    model = get_chat_model()
    assert model.complete_json(messages=USER_HELLO, schema=SCHEMA) == {"title": "Fenced"}
    assert model.complete_json(messages=USER_HELLO) == {"title": "Bare"}

    assert _formats(fake_openai) == ["json_schema", "json_object", None, None]


def test_what_an_endpoint_accepts_is_remembered_per_model(fake_openai: FakeOpenAI, settings):
    fake_openai.refuse_response_formats("json_schema")
    fake_openai.reply_json({"title": "a"})
    get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA)
    fake_openai.refuse_response_formats()
    fake_openai.reply_json({"title": "b"})

    get_chat_model(model_name="another-model").complete_json(messages=USER_HELLO, schema=SCHEMA)

    assert _formats(fake_openai) == ["json_schema", "json_object", "json_schema"]


def test_a_bad_request_the_format_does_not_explain_is_still_an_error(fake_openai: FakeOpenAI):
    for _ in range(3):
        fake_openai.fail(status=400, message="the prompt is too long")

    with pytest.raises(LLMError, match="HTTP 400: the prompt is too long") as caught:
        get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA)

    assert caught.value.status == 400
    assert _formats(fake_openai) == ["json_schema", "json_object", None]
    # Nothing was learnt from a request that failed in every mode.
    fake_openai.reply_json({"title": "ok"})
    get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA)
    assert _formats(fake_openai)[-1] == "json_schema"


def test_a_server_error_is_not_taken_for_a_refused_format(fake_openai: FakeOpenAI):
    fake_openai.fail(status=500, message="boom")

    with pytest.raises(LLMError, match="HTTP 500"):
        get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA)

    assert _formats(fake_openai) == ["json_schema"]


# --- 3. slow first tokens, stalled streams -----------------------------------------------


@pytest.fixture
def short_idle(settings):
    """A first-token timeout of 2 s and an idle one of 0.3 s."""
    settings.LLM_TIMEOUT_SECONDS = 2.0
    settings.LLM_IDLE_TIMEOUT_SECONDS = 0.3


def test_a_slow_first_token_within_the_first_token_timeout_succeeds(
    fake_openai: FakeOpenAI, short_idle
):
    # The prompt read takes longer than any pause mid-answer may: still an answer.
    fake_openai.reply_text("Slow to start, then fine.", delay=0.8)
    fake_openai.reply_json({"title": "Slow"}, delay=0.8)

    _, completion = _drain(get_chat_model().stream(messages=USER_HELLO))
    answer = get_chat_model().complete_json(messages=USER_HELLO)

    assert completion.content == "Slow to start, then fine."
    assert answer == {"title": "Slow"}


def test_no_first_token_within_its_timeout_is_a_clear_error(fake_openai: FakeOpenAI, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    fake_openai.hang(5)

    with pytest.raises(LLMError, match=r"timed out after 0\.3s without starting its answer"):
        list(get_chat_model().stream(messages=USER_HELLO))


def test_a_stream_that_stalls_after_starting_fails_with_a_clear_error(
    fake_openai: FakeOpenAI, short_idle
):
    fake_openai.stall_mid_stream(content="one two three four", after=2, seconds=5)

    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        for item in get_chat_model().stream(messages=USER_HELLO):
            deltas.append(item)

    assert deltas == ["one", " two"]
    assert str(caught.value) == (
        "model stream stalled (nothing arrived for 0.3s after the answer started)"
    )


def test_a_pause_shorter_than_the_idle_timeout_is_not_a_stall(fake_openai: FakeOpenAI, settings):
    settings.LLM_IDLE_TIMEOUT_SECONDS = 1.5
    fake_openai.stall_mid_stream(content="one two three four", after=2, seconds=0.3)

    _, completion = _drain(get_chat_model().stream(messages=USER_HELLO))

    assert completion.content == "one two three four"


def test_a_slow_caller_between_deltas_is_not_taken_for_a_stalled_stream(
    fake_openai: FakeOpenAI, short_idle
):
    # The rest comes 0.4 s later (past the idle timeout), but the caller was still busy
    # with the first delta then: the stream never kept it waiting.
    fake_openai.stall_mid_stream(content="one two three", after=1, seconds=0.4)

    items = []
    for item in get_chat_model().stream(messages=USER_HELLO):
        items.append(item)
        time.sleep(0.6)  # the turn publishing a delta slowly (Redis under load)

    assert isinstance(items[-1], Completion) and items[-1].content == "one two three"


def test_a_json_call_that_stalls_fails_with_the_same_clear_error(
    fake_openai: FakeOpenAI, short_idle
):
    fake_openai.stall_mid_stream(content=json.dumps({"title": "a b c d"}), after=1, seconds=5)

    with pytest.raises(LLMError, match="model stream stalled"):
        get_chat_model().complete_json(messages=USER_HELLO)


# --- 8. reasoning blocks ------------------------------------------------------------------


def test_a_leading_think_block_is_neither_streamed_nor_kept(fake_openai: FakeOpenAI):
    fake_openai.reply_text("<think>The user greets me. I should greet back.</think>\n\nHi Ana!")

    deltas, completion = _drain(get_chat_model().stream(messages=USER_HELLO))

    assert "".join(deltas) == "Hi Ana!"
    assert completion.content == "Hi Ana!"
    assert all("think" not in delta and "greet" not in delta for delta in deltas)


def test_a_think_block_holding_json_does_not_hide_the_answers_json(fake_openai: FakeOpenAI):
    fake_openai.reply_raw_content(
        '<think>Maybe {"title": "Wrong"}? No, better a clearer one.</think>\n'
        '```json\n{"title": "Right"}\n```'
    )

    assert get_chat_model().complete_json(messages=USER_HELLO) == {"title": "Right"}


@pytest.mark.parametrize(
    "text, visible",
    [
        ("<think>a</think>answer", "answer"),
        ("  <THINK>a</THINK>\n<reasoning>b</reasoning> answer", "answer"),
        ("<thinking>never closed, the model was cut off", ""),
        ("answer that mentions <think> tags later", "answer that mentions <think> tags later"),
        ("<b>bold</b> reply", "<b>bold</b> reply"),
        ("<", "<"),
        ("  plain", "  plain"),
    ],
)
def test_strip_reasoning(text: str, visible: str):
    assert strip_reasoning(text) == visible


def test_the_filter_holds_a_tag_split_across_deltas():
    reasoning = ReasoningFilter()
    pieces = ["<th", "ink>sec", "ret</thi", "nk>", "\n", "Hel", "lo"]

    shown = [reasoning.feed(piece) for piece in pieces] + [reasoning.flush()]

    assert "".join(shown) == "Hello"
    assert shown[:4] == ["", "", "", ""]


# --- the reply's length ----------------------------------------------------------------------


def test_a_reply_is_capped_at_its_setting_and_a_json_call_is_not(fake_openai: FakeOpenAI, settings):
    settings.LLM_REPLY_MAX_TOKENS = 300
    fake_openai.reply_text("Hello.")
    _drain(get_chat_model().stream(messages=USER_HELLO))
    fake_openai.reply_json({"title": "Trip"})
    get_chat_model().complete_json(messages=USER_HELLO, schema=SCHEMA, schema_name="t")
    settings.LLM_REPLY_MAX_TOKENS = 0
    fake_openai.reply_text("Hello again.")
    _drain(get_chat_model().stream(messages=USER_HELLO))

    capped, summary, uncapped = fake_openai.requests
    assert capped["max_tokens"] == 300
    assert "max_tokens" not in summary  # a JSON answer is cut by its own schema, not here
    assert "max_tokens" not in uncapped  # 0: the provider's own limit
