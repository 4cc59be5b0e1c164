"""The context budget: passages narrowed to the lines around their best matches, with exact
line ranges, best first, within the budget (pure: a word count stands in for the tokenizer)."""

from __future__ import annotations

from dataclasses import replace

from hydra_rag.answer.budget import by_lines, entry_cost, fit, head_lines, windows
from hydra_rag.answer.prompt import Source
from hydra_rag.search.hits import Hit


def words(text: str) -> int:
    return len(text.split())


CODE = "\n".join([
    "import os",
    "",
    "def unrelated(a, b):",
    "    return a + b",
    "",
    "def send_from_directory(directory, path, **kwargs):",
    "    \"\"\"Send a file from within a directory.\"\"\"",
    "    path = safe_join(directory, path)",
    "    if path is None:",
    "        raise NotFound()",
    "    return send_file(path, **kwargs)",
    "",
    "def other():",
    "    pass",
] + [f"# filler line number {i} with several words in it" for i in range(40)])


def source(text: str = CODE, start: int = 100, n: int = 1, path: str = "flask/helpers.py") -> Source:
    return Source(n, "/corpus", path, start, start + len(text.splitlines()) - 1, text)


def test_a_passage_that_fits_is_kept_whole() -> None:
    s = source("def f():\n    return 1")
    assert windows(s, "f", words, 50) == [s]


def _exact(s: Source, text: str, start: int) -> None:
    """The entry's lines are the chunk's lines its label names."""
    lines = text.splitlines()
    assert s.text.splitlines() == lines[s.line_start - start:s.line_end - start + 1]


def test_the_window_holds_the_best_match_and_its_exact_lines() -> None:
    (s,) = windows(source(), "send_from_directory", words, 60)
    assert "def send_from_directory(directory, path, **kwargs):" in s.text.splitlines()
    assert entry_cost(s, words) <= 60
    _exact(s, CODE, 100)
    assert "filler line number 39" not in s.text


def test_matches_far_apart_get_windows_of_their_own() -> None:
    text = "\n".join(["class Auth:", "    name = 'basic'"] + [f"    # step {i} of many" for i in range(30)]
                     + ["    headers['Authorization'] = token", "    return headers"])
    got = windows(source(text, start=10), "which header does Auth set", words, 80)
    assert len(got) == 2
    for s in got:
        _exact(s, text, 10)
    assert "class Auth:" in got[0].text and "headers['Authorization']" in got[1].text
    assert got[0].line_end < got[1].line_start
    assert sum(entry_cost(s, words) for s in got) <= 80


def test_a_long_single_line_is_cut_around_its_match() -> None:
    para = " ".join(["lorem"] * 400) + " the hepatocyte marker is albumin " + " ".join(["ipsum"] * 400)
    (s,) = windows(source(para, start=7), "which marker do hepatocytes express", words, 60)
    assert s.line_start == s.line_end == 7
    assert "marker" in s.text and len(s.text) < len(para) // 4
    assert s.text.startswith("…") and s.text.endswith("…")


def test_fit_shares_the_budget_and_renumbers() -> None:
    sources = [source(n=i, path=f"f{i}.py") for i in range(1, 6)]
    out = fit(sources, "send_from_directory", words, 200)
    assert [s.n for s in out] == list(range(1, len(out) + 1))
    assert [s.path for s in out] == [f"f{i}.py" for i in range(1, len(out) + 1)]
    assert sum(entry_cost(s, words) for s in out) <= 200 + 10
    assert len({s.path for s in out}) >= 2


def test_budget_zero_keeps_whole_chunks() -> None:
    sources = [source(n=i) for i in range(1, 4)]
    assert fit(sources, "send_from_directory", words, 0) == sources


def test_a_passage_without_matching_lines_keeps_its_first_lines() -> None:
    (s,) = windows(source(), "zebra quagga", words, 20)
    assert s.line_start == 100 and s.text.startswith("import os")


def test_overlapping_chunks_send_each_line_once() -> None:
    lines = CODE.splitlines()
    a = source("\n".join(lines[:12]), start=1, n=1)
    b = source("\n".join(lines[8:20]), start=9, n=2)
    out = fit([a, b], "send_from_directory", words, 400)
    sent = [(s.line_start, s.line_end) for s in out]
    assert sent[0] == (1, a.line_end) and all(lo > a.line_end for lo, _ in sent[1:]), sent
    assert len(sent) >= 2
    for s in out:
        _exact(s, CODE, 1)


def test_head_lines_name_what_a_line_stands_in() -> None:
    python = [
        "class Segment(NamedTuple):",
        '    """A piece of text with associated style."""',
        "",
        "    def cell_len(",
        "        self, text: str",
        "    ) -> int:",
        '        """',
        "        Get the number of cells required to display text.",
        '        """',
        "        total = 0",
        "        for c in text:",
        "            total += 1",
        "        return total",
    ]
    assert [python[i] for i in head_lines(python, 11)] == [
        "    def cell_len(", "        Get the number of cells required to display text."]
    assert [python[i] for i in head_lines(python, 3)] == [  # a line that opens one itself
        "    def cell_len(", "        Get the number of cells required to display text."]
    go = ["// Execute runs the command tree.", "func (c *Command) Execute() error {",
          "\tif c == nil {", "\t\treturn nil", "\t}", "\treturn c.run()", "}"]
    assert [go[i] for i in head_lines(go, 3)] == [go[1], go[0]]
    cpp = ["/**", " * Return the logger called name.", " */",
           "std::shared_ptr<logger> get(const std::string &name) {",
           "    return registry::instance().get(name);", "}"]
    assert [cpp[i] for i in head_lines(cpp, 4)] == [cpp[3], cpp[1]]
    # at the top level, nothing encloses a line
    assert head_lines(["MAX = 30", "LIMIT = 4"], 1) == []


def test_heads_keep_the_definition_line_of_a_cut_passage() -> None:
    body = ["def cell_len(text):", '    """Get the number of cells required to display text."""']
    body += [f"    step_{i} = compute({i})" for i in range(30)]
    body += ["    return sum(widths)  # the cells of the text"]
    text = "\n".join(body)
    q = "where is the sum of the widths returned"
    plain = windows(source(text, start=51), q, words, 50)
    assert all(s.line_start > 52 for s in plain)  # the cut lost what the lines belong to
    got = windows(source(text, start=51), q, words, 50, heads=True)
    assert [s.line_start for s in got][0] == 51
    assert "def cell_len(text):" in got[0].text and "Get the number" in got[0].text
    assert "return sum(widths)" in got[-1].text
    for s in got:
        _exact(s, text, 51)
    assert sum(entry_cost(s, words) for s in got) <= 50


def test_a_lead_share_and_named_definitions_first() -> None:
    sources = [source(n=i, path=f"f{i}.py") for i in range(1, 6)]
    plain = fit(sources, "send_from_directory", words, 300)
    led = fit(sources, "send_from_directory", words, 300, lead=0.8)
    first = [s for s in led if s.path == "f1.py"]
    assert sum(entry_cost(s, words) for s in first) > max(
        entry_cost(s, words) for s in plain if s.path == "f1.py")
    assert sum(entry_cost(s, words) for s in led) <= 300 + 10
    # the definition a question names (the fifth hit) is sent second, with a lead share
    named = fit(sources, "send_from_directory", words, 300, lead=0.5,
                named=[False, False, False, False, True])
    assert [s.path for s in named][:2] == ["f1.py", "f5.py"] or \
        [s.path for s in named if s.path != "f1.py"][0] == "f5.py"
    assert [s.n for s in named] == list(range(1, len(named) + 1))


def test_shares_fall_with_the_rank() -> None:
    """Each passage takes half of what is left (DECAY), so the second is sent with more of
    its lines than the fourth, and a passage too far down for MIN_SHARE is left out."""
    sources = [source(n=i, path=f"f{i}.py") for i in range(1, 7)]
    got = fit(sources, "send_from_directory", words, 600, lead=0.5)
    cost = {p: sum(entry_cost(s, words) for s in got if s.path == p)
            for p in dict.fromkeys(s.path for s in got)}
    paths = list(cost)
    assert paths[0] == "f1.py" and cost["f1.py"] > cost["f2.py"] > cost["f3.py"], cost
    assert len(paths) < 6 and sum(cost.values()) <= 600 + 10, cost


def test_the_best_line_brings_its_whole_definition_where_it_fits() -> None:
    body = ["def encoding(self):", '    """The headers\' encoding."""', "    if self._encoding is None:",
            "        for enc in ['ascii', 'utf-8']:", "            if fits(enc):",
            "                self._encoding = enc", "                break",
            "        else:", "            self._encoding = 'iso-8859-1'",
            "    return self._encoding"]
    filler = [f"# filler line number {i} with several words in it" for i in range(30)]
    s = source("\n".join(filler + body + filler), start=1)
    first = len(filler) + 1
    scope = [(first, first + len(body) - 1)]
    plain = windows(s, "which encoding is the fallback", words, 50)
    whole = windows(s, "which encoding is the fallback", words, 50, scopes=scope)
    assert not any(w.line_start <= first + 8 <= w.line_end for w in plain)
    assert any(w.line_start <= first and first + 9 <= w.line_end for w in whole), whole


def test_the_definition_a_question_names_is_sent_alone() -> None:
    # "What does `send_from_directory` do?": its definition, whole, and nothing else of its
    # chunk (the filler below it would take tokens the next passages need). Another
    # definition holding the best line is not sent alone, nor one that starts before the chunk.
    s = source(start=1)
    scope = [(6, 11), (13, 14)]
    q = "what does send_from_directory do with the directory"
    plain = windows(s, q, words, 120, scopes=scope)
    alone = windows(s, q, words, 120, scopes=scope, named={(6, 11)})
    assert [(w.line_start, w.line_end) for w in alone] == [(6, 11)]
    assert sum(words(w.text) for w in plain) > sum(words(w.text) for w in alone)
    assert windows(s, q, words, 120, scopes=scope, named={(13, 14)}) == plain
    late = source(CODE, start=6)  # the chunk starts at the definition's second line
    assert windows(late, q, words, 120, scopes=[(5, 10)], named={(5, 10)}) == \
        windows(late, q, words, 120, scopes=[(5, 10)])
    # through fit: the passages after it get what the definition left
    other = source(CODE, start=1, n=2, path="flask/other.py")
    sent = fit([source(start=1), other], q, words, 200, lead=0.5, named=[True, False],
               scopes=[scope, []], defining=[{(6, 11)}, set()])
    assert [(s.path, s.line_start, s.line_end) for s in sent][0] == ("flask/helpers.py", 6, 11)
    assert any(s.path == "flask/other.py" for s in sent)


def hit(path: str, text: str, score: float) -> Hit:
    return Hit("/corpus", path, "code", 1, len(text.splitlines()), text, score)


def test_passages_are_chosen_by_fused_score_and_their_best_line() -> None:
    q = "which hash algorithm is assumed when the server challenge names none"
    meaning = hit("a.py", "def auth_flow(self, request):\n    yield request", 0.80)
    word = hit("b.py", "def parse(challenge):\n    pass", 0.78)
    answer = hit("c.py", "# the challenge names no algorithm: assume this hash\nalgo = 'MD5'", 0.70)
    other = hit("d.py", "def unrelated():\n    return 1", 0.75)
    hits = [meaning, word, other, answer]
    # the line holding four of the question's words lifts its chunk past the ones found by
    # meaning alone or by one word
    assert by_lines(hits, q, 3) == [answer, word, meaning]
    assert by_lines(hits, q, 4)[-1] == other
    assert by_lines(hits[:2], q, 3) == [word, meaning]  # fewer hits than passages: reordered
    assert by_lines([], q, 3) == []
    assert by_lines([other, meaning], "nothing matches here", 1) == [meaning]


def test_a_follow_up_counts_the_lines_of_the_question_before_it() -> None:
    first = hit("a.py", "def auth_flow(self, request):\n    yield request", 0.80)
    earlier = hit("b.py", "# the challenge names no algorithm: assume this hash", 0.70)
    q, before = "and where is it done?", "which hash algorithm is assumed when the challenge names none"
    assert by_lines([first, earlier], q, 1) == [first]
    assert by_lines([first, earlier], q, 1, also=before) == [earlier]


def test_a_window_in_another_definition_is_shown_under_that_one() -> None:
    # The chunk starts in `unrelated` (its section); the window the question finds lies in
    # `send_from_directory` and is shown under that name, not the chunk's. Without the
    # file's definitions (a document) the chunk's section stands.
    from functools import partial

    from hydra_rag.read.symbols import Symbol, scope_of

    # (long lines above: the window cannot widen into them)
    body = [f"    total = total + a * b  # step {i} " + "of the sum " * 30 for i in range(20)]
    lines = ["def unrelated(a, b):", *body, *CODE.splitlines()[5:11],
             *(f"# filler line number {i} with several words in it" for i in range(20))]
    defs = [Symbol("unrelated", "function", 1, 21, 1),
            Symbol("send_from_directory", "function", 22, 27, 22)]
    s = replace(source("\n".join(lines), start=1), section=scope_of(defs, 1, len(lines)))
    assert s.section == "unrelated"
    q = "what does safe_join return when the path is outside the directory"
    sent = fit([s], q, words, 100, titles=[partial(scope_of, defs)])
    assert any(w.line_start <= 24 <= w.line_end for w in sent), sent
    assert all(w.line_start > 21 for w in sent), sent
    assert {w.section for w in sent} == {"send_from_directory"}
    assert {w.section for w in fit([s], q, words, 100)} == {"unrelated"}
    whole = fit([s], q, words, 0, titles=[partial(scope_of, defs)])
    assert [w.section for w in whole] == ["unrelated"]
