"""The LLM seam: the real `openai` client against the fake server, and the offline model."""

from __future__ import annotations

import json

import pytest

from memory.llm import (
    Completion,
    LLMError,
    OfflineModel,
    OpenAIChatModel,
    ToolCall,
    Usage,
    get_chat_model,
)
from tests.fake_openai import FakeOpenAI

USER_HELLO = [{"role": "user", "content": "Hello there"}]


def _drain(stream) -> tuple[list[str], Completion]:
    """Split a stream into its text deltas and its final Completion."""
    items = list(stream)
    *deltas, completion = items
    assert all(isinstance(delta, str) for delta in deltas)
    assert isinstance(completion, Completion)
    return deltas, completion


def _deltas_before_error(stream) -> list[str]:
    """Collect the deltas a stream yielded before it raised LLMError."""
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        for item in stream:
            deltas.append(item)
    deltas.append(str(caught.value))
    return deltas


# --- the OpenAI-compatible model, through the fake server -----------------------------


def test_it_streams_text_deltas_then_a_completion_with_usage(fake_openai: FakeOpenAI):
    usage = Usage(prompt_tokens=120, cached_tokens=64, completion_tokens=5)
    fake_openai.reply_text("The quick brown fox jumps", usage=usage)

    deltas, completion = _drain(get_chat_model().stream(messages=USER_HELLO))

    assert len(deltas) == 5
    assert "".join(deltas) == "The quick brown fox jumps"
    assert completion == Completion(
        content="The quick brown fox jumps", tool_calls=(), usage=usage, model="gpt-4o-mini"
    )
    request = fake_openai.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == USER_HELLO
    assert request["model"] == "gpt-4o-mini"


def test_it_reports_zero_cached_tokens_when_the_server_omits_them(fake_openai: FakeOpenAI):
    fake_openai.reply_text(
        "hi", usage=Usage(prompt_tokens=10, cached_tokens=0, completion_tokens=1)
    )

    _, completion = _drain(get_chat_model().stream(messages=USER_HELLO))

    assert completion.usage == Usage(prompt_tokens=10, cached_tokens=0, completion_tokens=1)


def test_it_assembles_tool_call_deltas(fake_openai: FakeOpenAI):
    remember = {"operation": "$set", "key": "favourite colour", "value": "teal"}
    note = {"operation": "$set", "content": "We chose PostgreSQL for production."}
    fake_openai.reply_tool_calls([("important_info", remember), ("notes", note)])
    tools = [{"type": "function", "function": {"name": "notes", "parameters": {}}}]

    deltas, completion = _drain(get_chat_model().stream(messages=USER_HELLO, tools=tools))

    assert deltas == []
    assert completion.content == ""
    assert completion.tool_calls == (
        ToolCall(id="call_1", name="important_info", arguments=json.dumps(remember)),
        ToolCall(id="call_2", name="notes", arguments=json.dumps(note)),
    )
    assert fake_openai.requests[0]["tools"] == tools


def test_it_sends_prompt_cache_key_in_the_request_body(fake_openai: FakeOpenAI):
    _drain(get_chat_model().stream(messages=USER_HELLO, prompt_cache_key="agent1:user2:org3"))

    assert fake_openai.requests[0]["prompt_cache_key"] == "agent1:user2:org3"


def test_it_sends_the_body_it_was_given_and_nothing_else(fake_openai: FakeOpenAI):
    tools = [{"type": "function", "function": {"name": "notes", "parameters": {}}}]
    stream = get_chat_model().stream(
        messages=USER_HELLO, tools=tools, temperature=0.25, prompt_cache_key="agent1:user2:org3"
    )
    _drain(stream)

    assert fake_openai.requests[0] == {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": USER_HELLO,
        "tools": tools,
        "temperature": 0.25,
        "prompt_cache_key": "agent1:user2:org3",
        "max_tokens": 1024,  # the settings' reply limit
    }


def test_it_leaves_prompt_cache_key_out_when_not_given(fake_openai: FakeOpenAI):
    _drain(get_chat_model().stream(messages=USER_HELLO))

    assert "prompt_cache_key" not in fake_openai.requests[0]
    assert "tools" not in fake_openai.requests[0]


def test_it_sends_the_temperature_only_when_one_is_given(fake_openai: FakeOpenAI):
    _drain(get_chat_model().stream(messages=USER_HELLO, temperature=0.0))
    _drain(get_chat_model().stream(messages=USER_HELLO))

    assert fake_openai.requests[0]["temperature"] == 0.0
    assert "temperature" not in fake_openai.requests[1]


def test_a_model_name_replaces_the_configured_model_and_blank_keeps_it(
    fake_openai: FakeOpenAI, settings
):
    settings.DRIFTLESS_MODEL = "llama3.1:8b"

    _drain(get_chat_model("chat", model_name="qwen2.5:14b").stream(messages=USER_HELLO))
    _drain(get_chat_model("chat", model_name="").stream(messages=USER_HELLO))

    assert [request["model"] for request in fake_openai.requests] == [
        "qwen2.5:14b",
        "llama3.1:8b",
    ]


def test_complete_json_returns_the_parsed_object(fake_openai: FakeOpenAI):
    answer = {"title": "Trip planning", "summary": "Lisbon in May", "include_in_memory": True}
    fake_openai.reply_json(answer)

    assert get_chat_model().complete_json(messages=USER_HELLO) == answer
    request = fake_openai.requests[0]
    assert request["response_format"] == {"type": "json_object"}
    assert request["stream"] is True  # JSON calls stream too: the same timeouts apply


def test_complete_json_accepts_an_object_wrapped_in_a_code_fence(fake_openai: FakeOpenAI):
    fake_openai.reply_raw_content('```json\n{"title": "Trip"}\n```')

    assert get_chat_model().complete_json(messages=USER_HELLO) == {"title": "Trip"}


def test_complete_json_rejects_content_that_is_not_json(fake_openai: FakeOpenAI):
    fake_openai.reply_raw_content("Sure! Here is your summary.")

    with pytest.raises(LLMError, match="not valid JSON"):
        get_chat_model().complete_json(messages=USER_HELLO)


def test_complete_json_rejects_json_that_is_not_an_object(fake_openai: FakeOpenAI):
    fake_openai.reply_json(["title", "summary"])

    with pytest.raises(LLMError, match="not an object"):
        get_chat_model().complete_json(messages=USER_HELLO)


def test_it_turns_an_http_500_into_llm_error(fake_openai: FakeOpenAI):
    fake_openai.fail(status=500, message="upstream exploded")
    fake_openai.fail(status=500, message="upstream exploded")

    with pytest.raises(LLMError, match="model endpoint returned HTTP 500: upstream exploded"):
        get_chat_model().complete_json(messages=USER_HELLO)
    with pytest.raises(LLMError, match="HTTP 500: upstream exploded"):
        list(get_chat_model().stream(messages=USER_HELLO))


def test_it_turns_a_timeout_into_llm_error(fake_openai: FakeOpenAI, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    fake_openai.hang(5)
    fake_openai.hang(5)

    with pytest.raises(LLMError, match=r"model endpoint timed out after 0\.3s"):
        get_chat_model().complete_json(messages=USER_HELLO)
    with pytest.raises(LLMError, match=r"timed out after 0\.3s"):
        list(get_chat_model().stream(messages=USER_HELLO))


def test_it_answers_when_a_slow_reply_arrives_within_the_timeout(fake_openai: FakeOpenAI):
    fake_openai.reply_json({"ok": True}, delay=0.2)

    assert get_chat_model().complete_json(messages=USER_HELLO) == {"ok": True}


def test_it_raises_llm_error_after_the_deltas_of_a_dropped_stream(fake_openai: FakeOpenAI):
    fake_openai.fail_mid_stream(content="one two three four", after=2, mode="drop")

    *deltas, error = _deltas_before_error(get_chat_model().stream(messages=USER_HELLO))

    assert deltas == ["one", " two"]
    assert "connection to model endpoint at http://127.0.0.1" in error


def test_it_raises_llm_error_on_a_stream_chunk_that_is_not_json(fake_openai: FakeOpenAI):
    fake_openai.fail_mid_stream(content="one two three", after=1, mode="garbage")

    *deltas, error = _deltas_before_error(get_chat_model().stream(messages=USER_HELLO))

    assert deltas == ["one"]
    assert "unreadable response" in error


def test_it_raises_llm_error_when_a_stream_ends_without_finishing(fake_openai: FakeOpenAI):
    fake_openai.fail_mid_stream(content="one two three", after=2, mode="end")

    *deltas, error = _deltas_before_error(get_chat_model().stream(messages=USER_HELLO))

    assert deltas == ["one", " two"]
    assert "closed the stream before the answer was complete" in error


@pytest.mark.parametrize("mode", ["drop", "garbage", "end"])
def test_it_raises_llm_error_on_a_truncated_json_answer(fake_openai: FakeOpenAI, mode: str):
    fake_openai.fail_mid_stream(mode=mode)

    with pytest.raises(LLMError):
        get_chat_model().complete_json(messages=USER_HELLO)


def test_it_raises_llm_error_when_the_endpoint_is_unreachable(fake_openai: FakeOpenAI, settings):
    fake_openai.close()
    settings.OPENAI_BASE_URL = fake_openai.base_url

    with pytest.raises(LLMError, match="connection to model endpoint at http://127.0.0.1.* failed"):
        get_chat_model().complete_json(messages=USER_HELLO)


def test_it_reuses_one_client_per_endpoint(fake_openai: FakeOpenAI, settings):
    chat, summary = get_chat_model("chat"), get_chat_model("summary")
    settings.LLM_TIMEOUT_SECONDS = 7.0
    slower = get_chat_model()

    assert isinstance(chat, OpenAIChatModel)
    assert chat._client is summary._client
    assert slower._client is not chat._client


def test_a_base_url_without_a_key_sends_a_placeholder_key(fake_openai: FakeOpenAI, settings):
    settings.OPENAI_API_KEY = ""
    fake_openai.reply_json({"ok": True})

    get_chat_model().complete_json(messages=USER_HELLO)

    assert fake_openai.headers[0]["authorization"] == "Bearer not-needed"


# --- choosing the model ----------------------------------------------------------------


def test_get_chat_model_is_offline_without_a_key_or_base_url(settings):
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""

    for purpose in ("chat", "summary"):
        model = get_chat_model(purpose)
        assert isinstance(model, OfflineModel)
        assert (model.name, model.offline) == ("offline", True)


def test_get_chat_model_uses_the_openai_model_with_a_key(settings):
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_BASE_URL = ""
    settings.DRIFTLESS_MODEL = "gpt-4.1"
    settings.DRIFTLESS_SUMMARY_MODEL = ""

    chat, summary = get_chat_model("chat"), get_chat_model("summary")

    assert isinstance(chat, OpenAIChatModel)
    assert (chat.name, chat.offline) == ("gpt-4.1", False)
    assert summary.name == "gpt-4.1"
    assert str(chat._client.base_url) == "https://api.openai.com/v1/"


def test_summary_purpose_uses_the_summary_model(fake_openai: FakeOpenAI, settings):
    settings.DRIFTLESS_MODEL = "llama3.1:8b"
    settings.DRIFTLESS_SUMMARY_MODEL = "qwen2.5:3b"
    fake_openai.reply_json({"title": "t"})

    summary = get_chat_model("summary")
    summary.complete_json(messages=USER_HELLO)

    assert (get_chat_model("chat").name, summary.name) == ("llama3.1:8b", "qwen2.5:3b")
    assert fake_openai.requests[0]["model"] == "qwen2.5:3b"


# --- the offline model -------------------------------------------------------------------


def _offline(content: str) -> tuple[list[str], Completion]:
    return _drain(OfflineModel().stream(messages=[{"role": "user", "content": content}]))


def test_offline_remember_calls_important_info_set():
    deltas, completion = _offline("/remember favourite colour = deep teal")

    assert deltas == []
    assert completion.content == ""
    (call,) = completion.tool_calls
    assert call.name == "important_info"
    assert call.id.startswith("offline-call-")
    assert json.loads(call.arguments) == {
        "operation": "$set",
        "key": "favourite colour",
        "value": "deep teal",
    }


def test_offline_tool_call_ids_are_deterministic():
    first = _offline("/remember a = b")[1].tool_calls[0].id
    again = _offline("/remember a = b")[1].tool_calls[0].id
    other = _offline("/remember a = c")[1].tool_calls[0].id

    assert first == again
    assert first != other


def test_offline_forget_calls_important_info_unset():
    (call,) = _offline("/forget a")[1].tool_calls

    assert call.name == "important_info"
    assert json.loads(call.arguments) == {"operation": "$unset", "key": "a"}


def test_offline_note_calls_notes_set():
    (call,) = _offline("/note x marks the spot")[1].tool_calls

    assert call.name == "notes"
    assert json.loads(call.arguments) == {"operation": "$set", "content": "x marks the spot"}


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("/remember a b", "/remember KEY = VALUE"),
        ("/remember = b", "/remember KEY = VALUE"),
        ("/forget", "/forget KEY"),
        ("/note   ", "/note TEXT"),
    ],
)
def test_offline_malformed_command_explains_the_syntax(command: str, usage: str):
    deltas, completion = _offline(command)

    assert completion.tool_calls == ()
    assert completion.content.startswith(f"Usage: {usage}")
    assert "".join(deltas) == completion.content


@pytest.mark.parametrize(
    ("command", "arguments", "result", "sentence"),
    [
        (
            "/remember favourite colour = teal",
            {"operation": "$set", "key": "favourite colour", "value": "teal"},
            {"ok": True, "key": "favourite colour", "value": "teal"},
            "Remembered: favourite colour = teal",
        ),
        (
            "/forget favourite colour",
            {"operation": "$unset", "key": "favourite colour"},
            {"ok": True, "key": "favourite colour", "removed": True},
            "Forgot: favourite colour",
        ),
        (
            "/forget x",
            {"operation": "$unset", "key": "x"},
            {"ok": True, "key": "x", "removed": False},
            "Nothing stored under 'x'",
        ),
        (
            "/note we chose PostgreSQL",
            {"operation": "$set", "content": "we chose PostgreSQL"},
            {"ok": True, "topic_id": 1, "notes": "we chose PostgreSQL"},
            "Noted: we chose PostgreSQL",
        ),
        (
            "/remember a = b",
            {"operation": "$set", "key": "a", "value": "b"},
            {"error": "value must be at most 2000 characters"},
            "important_info failed: value must be at most 2000 characters",
        ),
    ],
)
def test_offline_says_what_a_command_did_in_a_sentence(command, arguments, result, sentence):
    call = {"id": "offline-call-1", "type": "function"}
    name = "notes" if command.startswith("/note") else "important_info"
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    messages = [
        {"role": "user", "content": command},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "offline-call-1", "content": json.dumps(result)},
    ]

    _, completion = _drain(OfflineModel().stream(messages=messages))

    assert completion.content == sentence
    assert "Done" not in completion.content and "{" not in completion.content
    assert completion.tool_calls == ()


def test_offline_plain_message_says_how_to_configure_a_model():
    deltas, completion = _offline("What did we decide about the database?")

    assert len(deltas) > 5
    assert "".join(deltas) == completion.content
    assert completion.tool_calls == ()
    assert completion.usage is None
    assert completion.model == "offline"
    for needle in (
        "no language model is configured",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DRIFTLESS_MODEL",
        "Ollama",
        "/remember KEY = VALUE",
        "/forget KEY",
        "/note TEXT",
    ):
        assert needle in completion.content


def test_offline_replies_never_echo_the_user_and_stay_short_after_the_first():
    question = "What did we decide about the database?"
    first = _offline(question)[1].content
    later = _drain(
        OfflineModel().stream(
            messages=[
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": first},
                {"role": "user", "content": question},
            ]
        )
    )[1].content

    assert "database" not in first and "database" not in later
    assert later.startswith("Offline mode: no language model is configured")
    assert len(later.split()) <= 25 < len(first.split())


def test_offline_reply_is_deterministic():
    assert _offline("hello")[1] == _offline("hello")[1]


def test_offline_complete_json_raises_llm_error():
    with pytest.raises(LLMError, match="offline model: no model configured"):
        OfflineModel().complete_json(messages=USER_HELLO)
