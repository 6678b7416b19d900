"""The chat page on a phone-sized screen (390 px): the top bar fits, nothing overlaps."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

PHONE = {"width": 390, "height": 844}
# What pokes out past the right edge (for the failure message).
WIDEST = """() => [...document.querySelectorAll('body *')]
    .filter((n) => n.getBoundingClientRect().right > innerWidth + 1)
    .slice(0, 6).map((n) => n.tagName + '.' + n.className + ' ' +
                     Math.round(n.getBoundingClientRect().right))"""


def _box(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_the_top_bar_fits_a_phone_with_search_and_log_out_apart(open_chat, session):
    page = open_chat(session)
    page.set_viewport_size(PHONE)
    page.locator(".brand-mark").wait_for()
    search = _box(page, ".topbar-search input")
    log_out = _box(page, ".user-menu button")
    assert not _overlap(search, log_out), (search, log_out)
    for selector in (".topbar-search input", ".user-menu button", ".panel-toggle.for-sidebar"):
        box = _box(page, selector)
        assert 0 <= box["x"] and box["x"] + box["width"] <= PHONE["width"], (selector, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_no_page_scrolls_sideways_at_390_px(live, login, page, session, alice, agent):
    """Issue 24: the phone home page was 594 px wide, hiding the delete buttons."""
    from memory.models import Message, Session, Topic

    long_title = "Deploy on Heroku or Fly.io: costs, regions and the whole migration plan"
    other = Session.objects.start(user=alice, agent=agent, title=long_title)
    Topic.objects.filter(pk=session.active_topic().pk).update(title="Übergrößenträger-Versand")
    session.append_message(role=Message.Role.USER, content="https://example.invalid/" + "a" * 120)
    session.append_message(role=Message.Role.ASSISTANT, content="```\n" + "x = 1; " * 40 + "\n```")
    login(alice)
    page.set_viewport_size(PHONE)
    page.set_default_timeout(10_000)
    pages = [
        "/",
        f"/sessions/{session.pk}/",
        f"/sessions/{other.pk}/delete/",
        "/search/?q=Heroku",
        "/data/",
    ]
    for path in pages:
        page.goto(live + path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width, page.evaluate(WIDEST))
    # The delete links of the home page's list are on the screen.
    page.goto(live + "/")
    for link in page.locator(
        ".session-item .session-delete, .session-item a[href$='/delete/']"
    ).all():
        box = link.bounding_box()
        assert box and box["x"] + box["width"] <= PHONE["width"]
    page.context.clear_cookies()
    page.goto(live + "/login/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
