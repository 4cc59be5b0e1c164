"""The web chat at `/` of `hydra-rag serve`, in a real headless browser: Debian's chromium driven
by Playwright (`make browser` installs chromium; Playwright's own browser download is not used).
The page asks through the OpenAI route with streaming, lists the sources, opens the cited lines
beside the answer, searches, lists and shows past sessions; it is logged in by the URL serve
prints (a cookie, the token) or asks for the token."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, run_cli, wait_listening, write_tree

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
QUESTION = "How often should tomatoes be watered?"
SLOW = 120_000  # ms: a turn on a busy 2-core machine (the answer itself takes a few seconds)

# The fixture's tomatoes paragraph under a second heading, after enough text that the chunker
# starts a new passage there: the cited passage then stands in a section ("Kitchen garden"),
# which the viewer must show.
GARDEN = """\
# Kitchen garden

A kitchen garden is planned in beds about a metre wide, so that every plant can be reached from
the path without stepping on the soil. Lettuce, radishes and spinach go in first, as soon as the
ground can be worked in spring; they are quick and are cleared before the summer crops need the
room. Runner beans climb a frame of canes tied at the top, and a row of marigolds along the edge
keeps the aphids busy elsewhere. Onions and garlic like a bed of their own, in the lightest soil
of the plot, and they are lifted when their leaves fall over and turn yellow. Courgettes take up
more space than anyone expects: one or two plants feed a family, and the fruit is picked small.
Herbs in pots by the door get used far more than herbs at the far end of the plot. Every autumn
the empty beds get a layer of compost and are left rough over winter for the frost to break up.
A notebook of what grew where each year helps to rotate the crops, so that no family of plants
stands in the same bed two years running.
Peas are sown in a double row against netting in early spring, and picked every other day once
they start, because a pod left to ripen tells the plant to stop flowering. Leeks are planted out
deep in holes made with a dibber, and they stand in the bed all winter until they are wanted.
Strawberries are grown through a sheet of straw that keeps the fruit off the mud, and the runners
are pinned down in summer to make the plants for next year's bed.

## Growing tomatoes

Tomatoes need full sun, at least six hours a day, and deep watering twice a week.
Stake the plants early so that the stems do not break under the weight of fruit.
"""
SUN_LINE = GARDEN.splitlines().index(
    "Tomatoes need full sun, at least six hours a day, and deep watering twice a week.") + 1
HEADING_LINE = GARDEN.splitlines().index("## Growing tomatoes") + 1


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium of the system, or a skip that says what is missing (a failure on CI,
    which must run this test)."""
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("playwright (the dev extras: pip install -e '.[dev]')")
    if CHROMIUM is None:
        missing.append("Debian's chromium (`make browser` installs it as root)")
    if missing:
        message = "the web test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def garden(home: Path, corpus: Path) -> Path:
    write_tree(corpus, {"docs/gardening.md": GARDEN})
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    return corpus


@contextmanager
def serving(folder: Path, log: Path, *args: str) -> Iterator[tuple[str, str]]:
    """`hydra-rag serve --path FOLDER ARGS` in a subprocess; its base URL once it listens, and
    the URL it printed to log a browser in."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "serve", "--port", str(port),
                                 "--path", str(folder), *args], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc, log.read_text, seconds=60)
        printed = re.search(r"^open (http://\S+) ", log.read_text(), re.M)
        assert printed, log.read_text()
        yield f"http://127.0.0.1:{port}", printed.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _turn_done(page: Any, n: int) -> Any:
    """The n-th turn (from 0) once its answer has finished streaming, checked for errors."""
    from playwright.sync_api import expect

    expect(page.locator("#send")).to_be_enabled(timeout=SLOW)
    turn = page.locator("#turns .turn").nth(n)
    assert turn.locator(".note").inner_text() == "", "the turn failed"
    return turn


def test_ask_cite_search_and_sessions(garden: Path, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from hydra_rag.answer import sessions

    # A saved session whose answer cites [1] (a real source) and [2] (none): the small chat
    # model of the tests cites by number only now and then, the saved answer always does.
    sessions.save({"name": "web-cited", "model": "smollm2-135m", "stores": [str(garden)],
                   "created": "2026-01-01T00:00:00+0000", "turns": [{
                       "user": "When do tomatoes get water?",
                       "answer": "Deep watering twice a week [1], in full sun [2].",
                       "sources": [{"n": 1, "store": str(garden), "path": "docs/gardening.md",
                                    "line_start": HEADING_LINE, "line_end": SUN_LINE}],
                       "interrupted": False, "time": "2026-01-01T00:00:00+0000"}]})

    with serving(garden, tmp_path / "serve.log") as (url, login):
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # The URL serve printed logs the browser in: a cookie, and the token leaves the address.
        token = login.split("?token=", 1)[1]
        page.goto(f"{login}&max_tokens=40")
        assert page.url == f"{url}/?max_tokens=40"
        assert token not in page.evaluate("document.cookie")  # HttpOnly: no script reads it
        expect(page.locator("#token-form")).to_be_hidden()
        expect(page.locator("#folders input")).to_have_count(1)
        expect(page.locator("#folders input")).to_be_checked()
        expect(page.locator("#folders")).to_have_text(garden.name)

        # Record the answer's length at every change: it must grow in many steps (streamed).
        page.evaluate("""() => { window.seen = [];
            new MutationObserver(() => { const a = document.querySelector('#turns .a');
                if (a) window.seen.push(a.textContent.length); })
              .observe(document.getElementById('turns'),
                       {subtree: true, childList: true, characterData: true}); }""")
        with page.expect_request("**/v1/chat/completions") as sent:
            page.fill("#question", QUESTION)
            page.press("#question", "Enter")
        body = sent.value.post_data_json
        assert body["messages"] == [{"role": "user", "content": QUESTION}]
        assert body["stream"] is True and body["max_tokens"] == 40
        assert re.fullmatch(r"web-\d{8}-\d{6}", body["session"]), body["session"]
        assert "model" not in body and "rag" not in body  # default model, every folder

        turn = _turn_done(page, 0)
        assert len(set(page.evaluate("window.seen"))) >= 5, "the answer did not stream"
        answer = turn.locator(".a").inner_text()
        assert answer.strip() and "Sources:" not in answer  # the page lists the sources itself
        # every [n] the model wrote is a citation button
        assert turn.locator(".a .cite").count() == len(re.findall(r"\d+", "".join(
            re.findall(r"\[\d+(?:\s*,\s*\d+)*\]", answer))))
        expect(turn.locator(".check")).to_contain_text(re.compile("Citation"))
        source = turn.locator(".sources button", has_text="docs/gardening.md").first
        expect(source).to_contain_text(f"gardening.md:{HEADING_LINE}-")
        expect(source).to_contain_text("§ Kitchen garden")

        # the source opens beside the answer: its lines, numbered, and their section
        source.click()
        viewer = page.locator("#viewer")
        expect(viewer).to_be_visible()
        expect(page.locator("#viewer-title")).to_have_text(f"{garden.name}:docs/gardening.md")
        expect(page.locator("#viewer-section")).to_have_text("§ Kitchen garden")
        row = page.locator("#viewer-lines .ln", has_text="Tomatoes need full sun")
        expect(row.locator(".no")).to_have_text(str(SUN_LINE))
        expect(page.locator("#viewer-lines .ln").first.locator(".no")).to_have_text(
            str(HEADING_LINE))
        if turn.locator(".a .cite:not(.invalid)").count():  # the model cited by number
            page.locator("#viewer-close").click()
            turn.locator(".a .cite:not(.invalid)").first.click()
            expect(page.locator("#viewer-lines .ln")).not_to_have_count(0)

        # a follow-up carries the conversation so far, in the same session
        with page.expect_request("**/v1/chat/completions") as sent:
            page.fill("#question", "And how much sun do they need?")
            page.press("#question", "Enter")
        again = sent.value.post_data_json
        assert again["session"] == body["session"]
        assert again["messages"] == [{"role": "user", "content": QUESTION},
                                     {"role": "assistant", "content": answer},
                                     {"role": "user", "content": "And how much sun do they need?"}]
        _turn_done(page, 1)

        # search: results with path:lines, section and the matching line; a click opens them
        page.fill("#search-q", "stake the plants early")
        page.press("#search-q", "Enter")
        hit = page.locator("#results .hit").first
        expect(hit).to_contain_text(f"docs/gardening.md:{HEADING_LINE}-")
        expect(hit).to_contain_text("§ Kitchen garden")
        expect(hit.locator("code")).to_contain_text("Stake the plants early")
        expect(hit).not_to_have_class(re.compile("weak"))
        expect(page.locator("#results .hit.weak")).not_to_have_count(0)  # history.md, README
        page.locator("#viewer-close").click()
        hit.locator("button").click()
        expect(page.locator("#viewer-lines")).to_contain_text("Stake the plants early")

        # past sessions: this chat (two turns) and the saved one, shown read-only
        mine = page.locator("#sessions button", has_text=body["session"])
        expect(mine).to_contain_text("2 turns")
        mine.click()
        expect(page.locator("#saved-name")).to_have_text(body["session"])
        expect(page.locator("#saved")).to_be_visible()
        expect(page.locator("#live")).to_be_hidden()
        expect(page.locator("#saved-turns .q")).to_have_text(
            [QUESTION, "And how much sun do they need?"])
        page.locator("#back").click()
        expect(page.locator("#turns .turn")).to_have_count(2)
        page.locator("#sessions button", has_text="web-cited").click()
        expect(page.locator("#saved-name")).to_have_text("web-cited")
        cited = page.locator("#saved-turns .turn")
        expect(cited.locator(".a")).to_have_text("Deep watering twice a week [1], in full sun [2].")
        expect(cited.locator(".cite.invalid")).to_have_text("2")  # no source [2]
        page.locator("#viewer-close").click()
        cited.locator(".cite", has_text="1").click()
        expect(page.locator("#viewer-section")).to_have_text("§ Kitchen garden")
        expect(page.locator("#viewer-lines .ln", has_text="Tomatoes need full sun")
               .locator(".no")).to_have_text(str(SUN_LINE))
        assert errors == []

        # A browser that did not open the printed URL gets the page, not its data.
        stranger = browser.new_context().new_page()
        stranger.goto(f"{url}/")
        expect(stranger.locator("#token-form")).to_be_visible()
        expect(stranger.locator("#folders input")).to_have_count(0)


def test_a_server_with_a_token(garden: Path, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with serving(garden, tmp_path / "serve.log", "--token", "s3cret") as (url, _login):
        page = browser.new_context().new_page()
        page.goto(f"{url}/")  # the page loads without the token; its data does not
        expect(page.locator("#token-form")).to_be_visible()
        expect(page.locator("#token-why")).to_contain_text("missing or wrong token")
        expect(page.locator("#folders input")).to_have_count(0)
        page.fill("#token-input", "wrong")
        page.press("#token-input", "Enter")
        expect(page.locator("#token-why")).to_contain_text("refused")
        page.fill("#token-input", "s3cret")
        page.press("#token-input", "Enter")
        expect(page.locator("#folders input")).to_have_count(1)
        expect(page.locator("#token-form")).to_be_hidden()

        # given in the address: used, kept for the tab, and taken out of the address
        # A search typed while the page still loads (its past sessions held back here) keeps
        # the keys: the question box takes them only when nothing else has.
        page = browser.new_context().new_page()
        held: list[Any] = []
        page.route("**/api/sessions", lambda route: held.append(route))
        page.goto(f"{url}/#token=s3cret")
        expect(page.locator("#folders input")).to_have_count(1)
        expect(page.locator("#token-form")).to_be_hidden()
        assert "s3cret" not in page.url
        page.fill("#search-q", "tomatoes watering")
        while not held:
            page.wait_for_timeout(20)
        held[0].continue_()
        page.unroute("**/api/sessions")
        expect(page.locator("#status")).to_have_text("1 folder")
        expect(page.locator("#search-q")).to_be_focused()
        expect(page.locator("#question")).to_have_value("")
        page.press("#search-q", "Enter")
        expect(page.locator("#results .hit").first).to_contain_text("docs/gardening.md")
        page.reload()
        expect(page.locator("#folders input")).to_have_count(1)
