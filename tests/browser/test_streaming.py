"""The page's stream rendering in Chromium: batched reply deltas (the server coalesces them,
at most one event per ~100 ms) render exactly as per-token deltas do, and are revealed over
several animation frames rather than in jumps. The page's own modules run on a blank page
served from static/ by Playwright itself: no server is involved, the thread is driven as
chat.js drives it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory.text.markdown import render_markdown

pytestmark = [pytest.mark.browser]

SCRIPTS = Path(__file__).resolve().parents[2] / "static" / "js"
REPLY = (
    "Here is the plan for the **balcony garden**, step by step:\n\n"
    "1. Pots at least 30 cm deep, with drainage holes.\n"
    "2. Tomatoes in the sunniest corner; basil beside them 🌿.\n"
    "3. Water in the morning, when the top centimetre is dry.\n\n"
    "```python\nfor plant in ('tomato', 'basil', 'lettuce'):\n    water(plant)\n```\n\n"
    "Lettuce tolerates shade — 生菜 grows fine in half a day of sun. Ask me about pests "
    "next, or about a drip line if you travel in summer; both are cheap to set up."
)
TOKENS = re.findall(r"\s*\S+|\s+$", REPLY)

ORIGIN = "http://driftless.test"
DRIVE = """
async ({ batches, delayMs, full, html }) => {
  const { createThread } = await import("/static/js/thread.js");
  const scroller = document.getElementById("scroller");
  const root = document.getElementById("root");
  root.replaceChildren();
  const thread = createThread({
    root, scroller, agentName: "Drift", onRetry() {}, onOpenTopic() {},
  });
  const shown = [];
  const observer = new MutationObserver(() => {
    const node = root.querySelector(".part.is-streaming .md");
    if (node) shown.push(node.textContent.length);
  });
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  for (const piece of batches) {
    thread.delta("turn-1", piece);
    await sleep(delayMs);
  }
  const { showStreaming } = await import("/static/js/render.js");
  const probe = document.createElement("div");
  showStreaming(probe, full);
  for (let waited = 0; waited < 5000; waited += 20) {
    if (root.querySelector(".part.is-streaming .md").innerHTML === probe.innerHTML) break;
    await sleep(20);
  }
  observer.disconnect();
  const streamed = root.innerHTML;
  const text = root.querySelector(".part.is-streaming .md").innerText;
  thread.append({ id: 7, role: "assistant", content: full, content_html: html, tool_calls: [] });
  return { streamed, text, final: root.innerHTML, shown };
}
"""


@pytest.fixture
def thread_page(page):
    """A blank page on an origin of its own, whose /static/js/ is the repository's."""

    def serve(route):
        path = route.request.url.removeprefix(ORIGIN)
        if path.startswith("/static/js/"):
            body = (SCRIPTS / path.removeprefix("/static/js/")).read_text()
            route.fulfill(body=body, content_type="text/javascript")
        else:
            route.fulfill(
                body='<div id="scroller" style="height: 300px; overflow: auto">'
                '<div id="root"></div></div>',
                content_type="text/html",
            )

    page.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/")
    return page


def drive(page, batches: list[str], *, delay_ms: int) -> dict:
    assert "".join(batches) == REPLY
    html = render_markdown(REPLY)
    return page.evaluate(
        DRIVE, {"batches": batches, "delayMs": delay_ms, "full": REPLY, "html": html}
    )


def in_batches(tokens: list[str], size: int) -> list[str]:
    return ["".join(tokens[start : start + size]) for start in range(0, len(tokens), size)]


def test_a_batched_stream_renders_exactly_as_a_per_token_one(thread_page):
    per_token = drive(thread_page, TOKENS, delay_ms=15)  # a fast model, one event a token
    batched = drive(thread_page, in_batches(TOKENS, 7), delay_ms=100)  # the server's batches

    assert batched["streamed"] == per_token["streamed"]
    assert 'class="part is-streaming"' in batched["streamed"]
    # While it streams the reply is text, in paragraphs and code blocks; no markup is made.
    assert "<strong>" not in batched["streamed"] and "**balcony garden**" in batched["text"]
    assert "<pre><code>for plant in" in batched["streamed"]
    assert batched["final"] == per_token["final"]
    assert "is-streaming" not in batched["final"] and "data-message-id" in batched["final"]
    # Once stored, the server's rendering replaces it.
    assert "<strong>balcony garden</strong>" in batched["final"]
    assert '<span class="hl-k">for</span>' in batched["final"]
    assert "🌿" in batched["final"] and "生菜" in batched["final"]


def test_a_batch_is_revealed_over_several_frames_not_at_once(thread_page):
    batches = in_batches(TOKENS, 7)
    batched = drive(thread_page, batches, delay_ms=100)

    steps = sorted(set(batched["shown"]))
    assert len(steps) >= 3 * len(batches)  # each batch flows in over several frames
    largest_batch = max(len(batch) for batch in batches)
    jumps = [later - earlier for earlier, later in zip(steps, steps[1:], strict=False)]
    assert max(jumps) <= largest_batch / 2
