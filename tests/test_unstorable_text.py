"""What the model and MCP tools send is kept, even when it holds characters PostgreSQL
cannot store (NUL, a lone surrogate): they become U+FFFD, and the turn, the tool round or
the summary goes on. Before, such a reply streamed to the page and then failed the turn as
an internal error, and the reply was lost. (What people send is refused instead:
tests/test_hostile_input.py.)
"""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent

from memory.actions.mcp import _result_text
from memory.actions.summarize import do_summarize_topic
from memory.actions.turn import do_send_message
from memory.models import Message
from tests.evaluation_helpers import say, summary_answer

UNSTORABLE = "a\u0000b\ud800c"
MARKED = "a\ufffdb\ufffdc"


def test_a_reply_holding_a_nul_and_a_lone_surrogate_is_stored_with_them_marked(
    session, fake_openai
):
    fake_openai.reply_text(f"Here {UNSTORABLE} you go.")

    result = do_send_message(session=session, content="Hello")

    assert result.failure is None
    assert Message.objects.get(pk=result.reply.pk).content == f"Here {MARKED} you go."


def test_tool_call_arguments_holding_a_nul_are_stored_and_the_turn_goes_on(session, fake_openai):
    fake_openai.reply_tool_calls([("notes", '{"operation": "read"}\u0000')])
    fake_openai.reply_text("Sorry, that went wrong.")

    result = do_send_message(session=session, content="Read my notes")

    assert result.failure is None
    call, tool_result = result.activity
    stored = Message.objects.get(pk=call.pk).tool_calls[0]["function"]["arguments"]
    assert stored == '{"operation": "read"}\ufffd'
    assert tool_result.role == Message.Role.TOOL
    assert result.reply.content == "Sorry, that went wrong."


def test_a_summary_holding_a_nul_is_kept_with_it_marked(session, fake_openai):
    topic = session.active_topic()
    say(session, "user", "Plan the balcony garden.")
    say(session, "assistant", "Tomatoes and basil.")
    fake_openai.reply_json(summary_answer(title=f"Balcony {UNSTORABLE}", summary="Veg \u0000."))

    do_summarize_topic(topic_id=topic.pk)

    topic.refresh_from_db()
    assert (topic.title, topic.summary) == (f"Balcony {MARKED}", "Veg \ufffd.")


def test_an_mcp_result_holding_a_nul_and_a_lone_surrogate_is_kept_marked():
    result = CallToolResult(content=[TextContent(type="text", text=UNSTORABLE)])

    assert _result_text(result) == MARKED
