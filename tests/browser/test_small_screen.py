"""The chat page on a phone-sized screen (390 px): the top bar fits, nothing overlaps."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

PHONE = {"width": 390, "height": 844}


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
