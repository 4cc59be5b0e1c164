"""The chunker: lines kept whole, exact line ranges, bounded sizes, overlap, long-line cuts."""

from __future__ import annotations

import random

import pytest

from hydra_rag.read.chunk import HARD, OVERLAP, TARGET, chunk_text, headings


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _check_ranges(text: str, chunks) -> None:
    lines = _lines(text)
    for ch in chunks:
        assert 1 <= ch.line_start <= ch.line_end <= len(lines)
        span = "".join(lines[ch.line_start - 1 : ch.line_end])
        assert ch.text in span
        # Whole lines, except where a chunk starts or ends inside an over-long line.
        if len(lines[ch.line_start - 1]) <= HARD and len(lines[ch.line_end - 1]) <= HARD:
            assert ch.text == span


def _python_source(n_funcs: int) -> str:
    parts = []
    for i in range(n_funcs):
        body = "\n".join(f"    value_{j} = compute_{i}(argument_{j}) + {j}" for j in range(6))
        parts.append(f"def function_number_{i}(argument_0, argument_1):\n{body}\n    return value_0\n")
    return "\n\n".join(parts)


def test_short_text_is_one_chunk() -> None:
    chunks = chunk_text("line one\nline two\n")
    assert [(c.line_start, c.line_end, c.text) for c in chunks] == [(1, 2, "line one\nline two\n")]


def test_empty_and_blank_text_give_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text("\n\n   \n") == []


def test_ranges_sizes_and_coverage_on_code() -> None:
    text = _python_source(40)
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    assert len(chunks) > 5
    assert all(len(c.text) <= TARGET for c in chunks)
    covered = set()
    for c in chunks:
        covered.update(range(c.line_start, c.line_end + 1))
    assert covered == set(range(1, len(_lines(text)) + 1)) - {
        i + 1 for i, ln in enumerate(_lines(text)) if not ln.strip()
    } | covered  # every non-blank line is in some chunk
    nonblank = {i + 1 for i, ln in enumerate(_lines(text)) if ln.strip()}
    assert nonblank <= covered


def test_chunks_end_at_definition_boundaries() -> None:
    text = _python_source(40)
    lines = _lines(text)
    for c in chunk_text(text)[:-1]:
        nxt = lines[c.line_end] if c.line_end < len(lines) else ""
        # The next line after a chunk starts a definition or is blank: no cut signature.
        assert nxt.startswith("def ") or not nxt.strip() or not lines[c.line_end - 1].strip()


def test_overlap_is_whole_lines_and_bounded() -> None:
    text = "".join(f"sentence number {i} of a long plain text file\n" for i in range(300))
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.line_start <= a.line_end + 1  # contiguous or overlapping
        shared = a.line_end - b.line_start + 1
        if shared > 0:
            overlap_chars = sum(len(ln) for ln in _lines(text)[b.line_start - 1 : a.line_end])
            assert 0 < overlap_chars <= OVERLAP


def test_single_long_line_is_cut_below_the_hard_limit() -> None:
    minified = "{" + ",".join(f'"key{i}":"value {i}"' for i in range(20000)) + "}"
    text = "first line\n" + minified + "\nlast line\n"
    chunks = chunk_text(text)
    assert len(chunks) > 100
    assert max(len(c.text) for c in chunks) <= max(TARGET, HARD)
    assert {c.line_start for c in chunks if c.line_start == c.line_end} >= {2}
    assert "".join(c.text for c in chunks if c.line_start == 2 == c.line_end).startswith('{"key0"')
    _check_ranges(text, chunks)


def test_fits_callback_forces_smaller_chunks() -> None:
    text = _python_source(10)
    chunks = chunk_text(text, fits=lambda s: len(s) <= 300)
    assert chunks and all(len(c.text) <= 300 for c in chunks)
    _check_ranges(text, chunks)


def test_fits_callback_cuts_a_line_that_alone_is_too_long() -> None:
    text = "x" * 1000 + "\n"
    chunks = chunk_text(text, fits=lambda s: len(s) <= 100)
    assert all(len(c.text) <= 100 for c in chunks)
    # Pieces are disjoint and in order; only the whitespace-only tail (the newline) is dropped.
    assert "".join(c.text for c in chunks) == "x" * 1000


@pytest.mark.parametrize("seed", range(5))
def test_random_texts_keep_invariants(seed: int) -> None:
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(1, 400)):
        n = rnd.choice([0, 5, 40, 80, 200, 900, 4000])
        lines.append("é" * (n // 3) + "a" * (n - n // 3) + "\n")
    text = "".join(lines)
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    assert all(len(c.text) <= max(TARGET, HARD) for c in chunks)


# -- documents with headings ----------------------------------------------------------------

def _para(words: int, seed: str) -> str:
    """A wrapped paragraph of about 7·words characters."""
    line, out = [], []
    for i in range(words):
        line.append(f"{seed}{i}")
        if len(line) == 12:
            out.append(" ".join(line))
            line = []
    return "\n".join(out + ([" ".join(line)] if line else [])) + "\n"


def test_markdown_outline_reads_atx_setext_and_skips_code_and_front_matter() -> None:
    from hydra_rag.read.chunk import outline

    text = (
        "---\ntitle: front matter\n---\n"  # 1-3: the closing rule is no setext heading
        "Guide\n=====\n\n"  # 4-5: setext level 1
        "# Install #\n\n"  # 7: ATX with a closing sequence
        "```sh\n# not a heading\n```\n\n"  # 9-11: fenced code
        "- a list item\n---\n\n"  # 13-14: a rule after a list item, no heading
        "Usage\n-----\n"  # 16-17: setext level 2
        "    # indented code\n"  # 18
        "#hashtag\n"  # 19: no space after the marks
    )
    heads = outline(text.splitlines(keepends=True), "md")
    assert heads == {4: (1, "Guide", 2), 7: (1, "Install", 1), 16: (2, "Usage", 2)}


def test_rst_adoc_and_org_outlines() -> None:
    from hydra_rag.read.chunk import outline

    rst = "=====\nTitle\n=====\n\nIntro.\n\nFirst\n-----\n\nText.\n\nSub\n~~~\n\nSecond\n------\n"
    assert outline(rst.splitlines(), "rst") == {
        1: (1, "Title", 3), 7: (2, "First", 2), 12: (3, "Sub", 2), 15: (2, "Second", 2)}
    adoc = "= Doc\n\n== Part\n\n----\n== not a heading\n----\n\n=== Detail\n"
    assert outline(adoc.splitlines(), "adoc") == {1: (1, "Doc", 1), 3: (2, "Part", 1),
                                                  9: (3, "Detail", 1)}
    assert outline("* Top\ntext\n** Inner\n*bold* text\n".splitlines(), "org") == {
        1: (1, "Top", 1), 3: (2, "Inner", 1)}
    assert outline(["# comment in a script\n"], None) == {}


def _report() -> str:
    parts = ["# Annual report\n\n"]
    for s in range(1, 5):
        parts.append(f"## Section {s}\n\n")
        for p in range(1, 3):
            parts.append(f"### Part {s}.{p}\n\n{_para(150, f'w{s}{p}x')}\n")
    return "".join(parts)


def test_chunks_follow_headings_and_know_their_section() -> None:
    from hydra_rag.read.chunk import markup_of

    text = _report()
    lines = _lines(text)
    chunks = chunk_text(text, markup=markup_of("docs/report.md"))
    _check_ranges(text, chunks)
    heading = {i + 1 for i, line in enumerate(lines) if line.startswith("#")}
    for ch in chunks:
        body = [n for n in range(ch.line_start, ch.line_end + 1) if lines[n - 1].strip()]
        assert body[-1] not in heading, f"chunk {ch.line_start}-{ch.line_end} ends on a heading"
        first = lines[body[0] - 1]
        if first.startswith("### Part"):
            part = first.split()[-1]
            assert ch.section == f"Annual report › Section {part.split('.')[0]}"
        elif not first.startswith("#"):
            # mid-section: the whole path down to the innermost heading above
            above = [lines[n - 1] for n in sorted(heading) if n < body[0]]
            assert ch.section.endswith("› " + above[-1].lstrip("# ").strip())
            assert ch.section.startswith("Annual report › Section ")
    # Every part starts a chunk of its own, without the end of the part before as overlap.
    starts = {lines[ch.line_start - 1] for ch in chunks}
    for s in range(1, 5):
        assert f"### Part {s}.2\n" in starts
    # Without markup the same text is chunked as before: no sections.
    assert all(ch.section == "" for ch in chunk_text(text))


def test_a_heading_is_never_left_alone_at_a_chunk_end() -> None:
    # A heading followed by a line too long for the rest of the chunk.
    text = "# Title\n\n" + "intro " * 150 + "\n\n## Long one\n\n" + "x" * 1400 + "\n"
    chunks = chunk_text(text, markup="md")
    _check_ranges(text, chunks)
    assert [c.text.split("\n", 1)[0] for c in chunks] == ["# Title", "## Long one"]
    assert [c.section for c in chunks] == ["", "Title"]
    # A heading alone with no room: it goes with its content even past the target.
    text = "## Only\n\n" + "y" * 1600 + "\n"
    (chunk,) = chunk_text(text, markup="md")
    assert chunk.text.startswith("## Only") and chunk.text.rstrip().endswith("y")


def test_a_sections_short_tail_does_not_run_into_the_next_section() -> None:
    """A section a little longer than one chunk: its tail is a chunk of its own, and the next
    section's title and first lines start the next chunk (not the end of one about both)."""
    para = " ".join(f"alpha{i}" for i in range(40)) + "\n"  # ~330 characters a paragraph
    first = "## First study\n\n" + "\n".join([para] * 6)  # ~2,000 characters
    second = "## Second study\n\n" + "\n".join(p.replace("alpha", "beta") for p in [para] * 3)
    text = "# Report\n\n" + first + "\n" + second
    chunks = chunk_text(text, markup="md")
    _check_ranges(text, chunks)
    for ch in chunks:
        assert not ("alpha" in ch.text and "beta" in ch.text), (ch.line_start, ch.line_end)
    assert any(ch.text.startswith("## Second study") for ch in chunks)


def test_long_section_paths_are_cut() -> None:
    from hydra_rag.read.chunk import SECTION_SEP

    text = "".join(f"{'#' * (i + 1)} {'T' * 150}{i}\n\nbody {i}\n\n" for i in range(6))
    chunks = chunk_text(text, markup="md", target=30, overlap=0)
    deepest = chunks[-1].section
    assert len(deepest) <= 300 and "…" in deepest
    assert deepest.split(SECTION_SEP)[0].startswith("T" * 90)


def test_a_heading_with_text_too_long_for_the_embedder_is_split() -> None:
    text = "# Title\n\n" + "word " * 700 + "\n"
    chunks = chunk_text(text, markup="md", fits=lambda s: len(s) <= 1200)
    _check_ranges(text, chunks)
    assert all(len(c.text) <= 1200 for c in chunks) and len(chunks) >= 3
    assert all(c.section == "Title" for c in chunks if not c.text.startswith("# Title"))


def test_heading_edge_cases_found_in_review() -> None:
    import time

    from hydra_rag.read.chunk import outline

    # A long run of blank lines is linear, not quadratic (this took 100 s).
    t0 = time.perf_counter()
    chunk_text("# Notes\n\nSome text.\n" + "   \n" * 50_000 + "end\n", markup="md")
    assert time.perf_counter() - t0 < 5
    # A chain of headings is not left alone at a chunk's end either.
    chunks = chunk_text("# Guide\n\n## Install\n\n" + "apt get install thing " * 68, markup="md")
    assert chunks[0].text.startswith("# Guide\n\n## Install\n\napt get")
    # A fence indented in a list item and closed with less indent still closes.
    md = ("1. Build it:\n\n    ```bash\n    make\n   ```\n\n## Configure\n\nSet the path.\n\n"
          "```bash\n# install deps\n```\n")
    assert outline(md.splitlines(), "md") == {7: (2, "Configure", 1)}
    for md in ("1. one\n   two\n---", "- item\ncontinued\n---", "<!--\n# x\n-->", "<div>\ntext\n---",
               "one line\nof a paragraph\n---"):
        assert outline(md.splitlines(), "md") == {}, md
    # reST: a short underline still makes a title; a paragraph's last line is no title.
    assert outline(["Installation Guide", "=========="], "rst") == {1: (1, "Installation Guide", 2)}
    assert outline(["Para one", "line two", "--------"], "rst") == {}
    # AsciiDoc: no headings inside source, table or sidebar blocks.
    adoc = "= T\n\n```\n== x\n```\n|===\n== y\n|===\n****\n== z\n****\n"
    assert outline(adoc.splitlines(), "adoc") == {1: (1, "T", 1)}
    # A title cannot carry terminal escape sequences into the section.
    chunks = chunk_text("# T\x1b]0;pwned\x07\n\n" + "a\n" * 2000, markup="md")
    assert chunks[-1].section == "T]0;pwned"


def test_overlap_does_not_crawl_before_a_long_line() -> None:
    text = "".join(f"short line {i}\n" for i in range(10)) + "z" * 1450 + "\n"
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    assert len(chunks) == 2, [(c.line_start, c.line_end) for c in chunks]


def test_code_chunks_start_where_definitions_start() -> None:
    from hydra_rag.read.symbols import chunk_spans, parse

    funcs = []
    for i in range(8):
        body = "".join(f"    total += step_{j}(value, {i})\n" for j in range(10))
        funcs.append(f"# Helper {i}: adds the steps.\n@traced\ndef helper_{i}(value):\n"
                     f"    total = 0\n{body}    return total\n\n\n")
    text = "".join(funcs)
    defs, _ = parse(text, "python")
    starts = {d.line_start for d in defs}
    assert len(starts) == 8 and all(text.splitlines()[s - 1].startswith("# Helper") for s in starts)
    plain = chunk_text(text)
    cut = chunk_text(text, defs=chunk_spans(defs))
    assert sum(c.line_start in starts for c in plain) <= 2
    assert all(c.line_start in starts for c in cut)  # each starts with a comment and decorator
    assert all(len(c.text) <= 1500 for c in cut)
    assert "".join(c.text for c in cut) == text  # no overlap needed, nothing lost
    # A function's inner helper is no place to cut it.
    inner = "def outer():\n" + "".join(f"    x{i} = {i}\n" for i in range(60)) + \
        "    def inner():\n        return 1\n" + "".join(f"    y{i} = {i}\n" for i in range(60))
    spans = chunk_spans(parse(inner, "python")[0])
    assert spans == [(1, 123)]
    # An object literal's functions are, as a class's methods are.
    literal = ("const defaults = {\n  timeout: 0,\n  transformRequest: function (data) {\n"
               "    return data;\n  },\n  validate(status) {\n    return status < 300;\n  },\n};\n")
    assert chunk_spans(parse(literal, "javascript")[0]) == [(1, 9), (3, 5), (6, 8)]


def test_a_chunk_too_long_for_the_embedder_is_cut_at_its_definitions_first() -> None:
    """The logger-inl.h case: a short function and the start of a long one made one chunk;
    too long for the embedder, it was halved by characters, cutting the long function one
    line before the line that answers a question about it. Now the cut is between them."""
    from hydra_rag.read.symbols import chunk_spans, parse

    short = "def short(msg):\n    return msg.level >= 3\n\n\n"
    long_body = "".join(f"    step_{j} = handle(step_{j - 1}, {j})\n" for j in range(1, 30))
    text = short + "def long_one(msg):\n    step_0 = msg\n" + long_body + "    return step_29\n"
    spans = chunk_spans(parse(text, "python")[0])
    assert spans == [(1, 2), (5, 36)]
    assert len(chunk_text(text, defs=spans)) == 1  # one chunk by characters alone
    fits = lambda s: len(s) <= 1030  # noqa: E731 - the embedder takes less than the whole
    cut = chunk_text(text, defs=spans, fits=fits)
    assert [(c.line_start, c.line_end) for c in cut] == [(1, 4), (5, 36)]
    _check_ranges(text, cut)
    # A definition that alone does not fit is still cut until every piece fits.
    tight = chunk_text(text, defs=spans, fits=lambda s: len(s) <= 500)
    assert all(len(c.text) <= 500 for c in tight) and tight[0].line_end == 4
    _check_ranges(text, tight)
    assert {n for c in tight for n in range(c.line_start, c.line_end + 1)} == set(range(1, 37))


GUIDE = ("# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n### Linux\n\napt install it\n\n"
         "```sh\n# not a heading\n```\n\n## Use\n\nGo.\n\nAppendix\n========\nx\n")


def test_headings_are_a_documents_outline() -> None:
    got = [(h.title, h.level, h.line_start, h.line_end, h.depth, h.above)
           for h in headings(GUIDE, "md")]
    assert got == [
        ("Guide", 1, 1, 19, 0, ()),  # to the line before the next heading of its level
        ("Install", 2, 5, 15, 1, ("Guide",)),  # blank lines before the next one left out
        ("Linux", 3, 9, 15, 2, ("Guide", "Install")),  # a fenced `#` line is no heading
        ("Use", 2, 17, 19, 1, ("Guide",)),
        ("Appendix", 1, 21, 23, 0, ()),  # setext
    ]
    assert headings(GUIDE, None) == [] and headings("no heading here\n", "md") == []
    rst = "Title\n=====\n\nText.\n\nPart\n----\n\nMore.\n"
    assert [(h.title, h.depth) for h in headings(rst, "rst")] == [("Title", 0), ("Part", 1)]
