"""The ranking signals for code, the file grouping and centrality: pure functions, tables of
cases."""

from dataclasses import replace

import pytest

from hydra_rag.search import signals
from hydra_rag.search.central import centrality
from hydra_rag.search.definitions import Wanted, named_in
from hydra_rag.search.files import distinct_spans, group, still_holding
from hydra_rag.search.hits import Hit
from hydra_rag.search.signals import body_of, declared


@pytest.mark.parametrize(("query", "kind"), [
    ("Session.send", "name"),
    ("where is build_request defined", "name"),
    ("src/auth/tokens.py", "path"),
    ("tokens.py", "path"),
    ("how does a sidecar pick its port", "question"),
    ("where is the timeout enforced?", "question"),
    ("code that parses the content-type charset", "words"),
    ("what calls get_current_context", "question"),
    ('"no secret key was set"', "phrase"),
    ("No such file or directory: config.yaml", "phrase"),
    ("X-Forwarded-For", "phrase"),
    ("README.md", "path"),
    ("os.path", "name"),
    ("cannot reach the embedder", "words"),
    ("--no-color", "phrase"),
])
def test_kind_of_a_query(query: str, kind: str) -> None:
    assert signals.kind_of(query).kind == kind


@pytest.mark.parametrize(("path", "kind", "role"), [
    ("httpx/_client.py", "code", "code"),
    ("tests/client/test_auth.py", "code", "test"),
    ("command_test.go", "code", "test"),
    ("src/v4/classic/tests/refine.test.ts", "code", "test"),
    ("src/parser.spec.js", "code", "test"),
    ("pkg/testdata/input.go", "code", "test"),
    ("test_suite/run.rs", "code", "test"),
    ("conftest.py", "code", "test"),
    ("example/example.cpp", "code", "example"),
    ("examples/basic.py", "code", "example"),
    ("benches/parse.rs", "code", "bench"),
    ("vendor/github.com/x/y.go", "code", "vendor"),
    ("third_party/zlib/inflate.c", "code", "vendor"),
    ("docs/api.md", "prose", "docs"),
    ("README.md", "prose", "docs"),
    ("docs/conf.py", "code", "docs"),
    ("Makefile", "code", "config"),
    ("CMakeLists.txt", "code", "config"),
    (".github/workflows/ci.yml", "code", "config"),
    ("package.json", "code", "config"),
    ("src/contest.py", "code", "code"),  # not a test for containing "test"
    ("src/latest/attest.go", "code", "code"),
])
def test_role_of_a_path(path: str, kind: str, role: str) -> None:
    assert signals.role(path, kind) == role


def test_aside_puts_tests_and_docs_after_code_unless_asked() -> None:
    q = signals.kind_of("how does the client retry a request")
    assert signals.aside(q, "src/client.py", "code", True) == 1.0
    assert signals.aside(q, "tests/test_client.py", "code", True) == signals.ASIDE
    assert signals.aside(q, "README.md", "prose", True) == signals.DOCS
    assert signals.aside(q, "README.md", "prose", False) == 1.0  # a folder of prose: no code
    asked = signals.kind_of("where are the tests for retries")
    assert "test" in asked.asks
    assert signals.aside(asked, "tests/test_client.py", "code", True) == 1.0
    docs = signals.kind_of("how do I install it, per the docs")
    assert signals.aside(docs, "README.md", "prose", True) == 1.0
    # an error message as copied may stand in a doc: not put aside
    phrase = signals.kind_of('"connection pool is full"')
    assert signals.aside(phrase, "docs/errors.md", "prose", True) == 1.0


def test_path_share_counts_the_question_words_in_names() -> None:
    q = signals.kind_of("how does the default transport open connections")
    share = signals.path_share(q, "httpx/_transports/default.py")
    assert share == pytest.approx(2 / len(q.terms))  # "default", "transport"
    assert signals.path_share(q, "httpx/_models.py") == 0.0
    camel = signals.kind_of("where are interceptors registered")
    assert signals.path_share(camel, "lib/core/InterceptorManager.js") == pytest.approx(0.5)
    assert signals.path_share(signals.kind_of('"interceptor"'), "lib/interceptor.js") == 0.0


def test_a_path_query_names_its_files() -> None:
    q = signals.kind_of("auth.py")
    assert signals.named_file(q, "src/auth.py") and signals.named_file(q, "auth.py")
    assert not signals.named_file(q, "src/oauth.py")
    folder = signals.kind_of("src/net/")
    assert signals.named_file(folder, "src/net/utils.py")
    assert not signals.named_file(folder, "src/network/utils.py")
    assert signals.named_file(signals.kind_of("net/utils.py"), "src/net/utils.py")
    assert not signals.named_file(signals.kind_of("how does auth work"), "auth.py")


def test_literal_weighs_less_for_a_question_in_words() -> None:
    assert signals.literal_weight(signals.kind_of("how does a sidecar pick its port"), 1.0) \
        == signals.QUESTION_LITERAL
    # plain words may be an error message as copied: the literal list keeps its weight
    assert signals.literal_weight(signals.kind_of("cannot reach the embedder"), 1.0) == 1.0


def test_names_inside_a_question() -> None:
    assert named_in("what does build_request return") == [Wanted("build_request", "", False)]
    assert named_in("how is `Style.parse` used") == [Wanted("parse", "Style", False)]
    assert named_in("What does the Segment class represent?") == [Wanted("Segment", "", False)]
    assert named_in("how does the client retry") == []
    # a request's first word is not a name; a carried subject's is (followup puts names first)
    assert named_in("Compare the pool with the queue") == []
    assert named_in("Segment class represent where defined") == [Wanted("Segment", "", False)]
    assert named_in("Session.send") == []  # a bare name: its definitions come first anyway


def _hit(path: str, a: int, b: int, score: float, cid: str) -> Hit:
    text = "".join(f"line {n}\n" for n in range(a, b + 1))
    return Hit("/f", path, "code", a, b, text, score, {}, cid)


def test_overlapping_chunks_show_their_lines_once() -> None:
    hits = [_hit("a.py", 1, 40, 0.9, "1"), _hit("a.py", 38, 80, 0.8, "2"),
            _hit("b.py", 1, 40, 0.7, "3"), _hit("a.py", 81, 120, 0.6, "4"),
            _hit("a.py", 10, 30, 0.5, "5"), _hit("a.py", 95, 130, 0.4, "6"),
            _hit("a.py", 140, 140, 0.3, "7")]
    hits[-1] = replace(hits[-1], text="a piece of an over-long line")
    kept = distinct_spans(hits)
    # the second chunk less the lines the first shows; the fifth is all shown already
    assert [(h.id, h.line_start, h.line_end) for h in kept] == [
        ("1", 1, 40), ("2", 41, 80), ("3", 1, 40), ("4", 81, 120), ("6", 121, 130),
        ("7", 140, 140)]
    assert kept[1].text.splitlines()[0] == "line 41" and kept[1].text.endswith("line 80\n")
    assert kept[1].score == 0.8 and kept[1].id == "2"
    # a better chunk inside a longer one: the longer run of lines left is shown
    inner = distinct_spans([_hit("c.py", 5, 10, 0.9, "a"), _hit("c.py", 1, 40, 0.8, "b")])
    assert [(h.line_start, h.line_end) for h in inner] == [(5, 10), (11, 40)]
    # what is left of a small tail chunk (two lines, a closing brace) is no passage
    tail = distinct_spans([_hit("e.py", 1, 40, 0.9, "a"), _hit("e.py", 36, 42, 0.8, "b")])
    assert [h.id for h in tail] == ["a"]
    # a document's cut hit is given the pages of the lines it keeps
    doc = [_hit("f.pdf", 1, 40, 0.9, "a"), replace(_hit("f.pdf", 30, 70, 0.8, "b"),
                                                   page_start=1, page_end=2, page_unit="page")]
    cut = distinct_spans(doc, lambda h: replace(h, page_start=h.line_start // 20))
    assert (cut[1].line_start, cut[1].page_start) == (41, 2)
    # a cut hit whose exact match was in the lines its neighbour shows loses that match's
    # rank (it would keep a weak remnant in the answer's sources); one it still holds stays
    two = [_hit("g.py", 1, 40, 0.9, "a"), replace(_hit("g.py", 38, 80, 0.8, "b"),
                                                  ranks={"literal": 1, "term:LINE 60": 2,
                                                         "bm25": 3})]
    holds = {"literal": "line 39", "term:LINE 60": "LINE 60"}
    cut = distinct_spans(two, lambda h: still_holding(h, holds))
    assert cut[1].ranks == {"term:LINE 60": 2, "bm25": 3}
    assert distinct_spans(two)[1].ranks == two[1].ranks  # nothing to mend it with
    # a piece of an over-long line that a better hit covers is not shown twice
    long_line = [_hit("d.py", 5, 5, 0.9, "a"), replace(_hit("d.py", 5, 5, 0.8, "b"), text="x")]
    assert [h.id for h in distinct_spans(long_line)] == ["a"]


def test_files_are_ranked_from_all_their_evidence() -> None:
    hits = [_hit("one.py", 1, 10, 1.0, "1"), _hit("two.py", 1, 10, 0.95, "2"),
            _hit("two.py", 20, 30, 0.9, "3"), _hit("one.py", 5, 10, 0.5, "4")]
    files = group(hits, second=0.2)
    # two.py: 0.95 + 0.2 · 0.9 beats one.py's single passage (its second overlaps the first)
    assert [f.path for f in files] == ["two.py", "one.py"]
    assert files[0].score == pytest.approx(0.95 + 0.2 * 0.9)
    assert [h.id for h in files[0].passages] == ["2", "3"]
    assert [f.path for f in group(hits, second=0.0)] == ["one.py", "two.py"]
    assert len(group(hits, k=1)) == 1
    # the hits' order is the authority (a reranker's): none counts more than the one before
    reranked = [_hit("z.py", 1, 5, 0.1, "9"), *hits]
    scores = {f.path: f.score for f in group(reranked, second=0.2)}
    assert scores == pytest.approx({"z.py": 0.1, "one.py": 0.1, "two.py": 0.1 + 0.2 * 0.1})
    # a name's definition stays first
    definition = Hit("/f", "z.py", "code", 1, 5, "x", 0.1, {"definition": 1}, "9")
    assert group([*hits, definition])[0].path == "z.py"


def test_a_header_declares_what_its_bodies_implement() -> None:
    assert declared("include/spdlog/logger.h") == ("logger", declared("x.hpp")[1])  # type: ignore[index]
    assert declared("include/spdlog/logger-inl.h") is None  # a body, not a declaration
    assert declared("pkg/mod.pyi") == ("mod", (".py",))
    assert declared("types/index.d.ts")[0] == "index"  # type: ignore[index]
    assert declared("src/main.cpp") is None and declared(".h") is None
    assert body_of("include/spdlog/logger-inl.h") == "logger"
    assert body_of("src/logger.cpp") == "logger" and body_of("pkg/mod.py") == "mod"
    assert body_of("README.md") is None
    assert declared("types/index.d.mts") == ("index", (".mts", ".mjs"))
    assert declared("types/index.d.cts") == ("index", (".cts", ".cjs"))


def test_a_file_search_puts_the_implementation_before_its_header() -> None:
    hits = [_hit("inc/log.h", 1, 10, 0.9, "1"), _hit("inc/sink.h", 1, 10, 0.8, "2"),
            _hit("inc/sink-inl.h", 1, 10, 0.7, "3"), _hit("inc/log-inl.h", 1, 10, 0.3, "4"),
            _hit("other/sink.cpp", 1, 10, 0.6, "5"), _hit("inc/util.h", 1, 10, 0.5, "6"),
            _hit("src/util.cpp", 1, 10, 0.2, "7"), _hit("a/conf.h", 1, 10, 0.45, "8"),
            _hit("b/conf.h", 1, 10, 0.44, "9"), _hit("c/conf.cpp", 1, 10, 0.1, "10")]
    hits.sort(key=lambda h: -h.score)
    assert [f.path for f in group(hits)] == [
        "inc/log.h", "inc/sink.h", "inc/sink-inl.h", "other/sink.cpp", "inc/util.h", "a/conf.h",
        "b/conf.h", "inc/log-inl.h", "src/util.cpp", "c/conf.cpp"]  # off: as they rank
    files = group(hits, bodies_first=True)
    # each body just before its header: in the header's folder, or in another when the
    # name stands once among the files (util); conf.h twice, sink's bodies twice: not across
    assert [f.path for f in files] == [
        "inc/log-inl.h", "inc/log.h", "inc/sink-inl.h", "inc/sink.h", "other/sink.cpp",
        "src/util.cpp", "inc/util.h", "a/conf.h", "b/conf.h", "c/conf.cpp"]
    assert files[0].score > 0.9 and files[0].passages[0].signals["implements"] == \
        pytest.approx(0.6, abs=1e-5)  # shown in --json
    assert "implements" not in files[1].passages[0].signals
    # a tie goes to the body; a test's x.cpp is not include/x.h's body from another folder
    tie = group([_hit("x.h", 1, 5, 0.5, "a"), _hit("x.tcc", 1, 5, 0.5, "b")], bodies_first=True)
    assert [f.path for f in tie] == ["x.tcc", "x.h"]
    test = group([_hit("include/y.h", 1, 5, 0.5, "a"), _hit("tests/y.cpp", 1, 5, 0.4, "b")],
                 bodies_first=True)
    assert [f.path for f in test] == ["include/y.h", "tests/y.cpp"]
    # a body that already ranks above its header stays where it is
    assert [f.path for f in group([_hit("x.cpp", 1, 5, 0.9, "a"), _hit("x.h", 1, 5, 0.5, "b")],
                                  bodies_first=True)] == ["x.cpp", "x.h"]
    # names pair whatever their case (`Logger.h`, `logger.cpp`); an ES module's `.d.mts`
    mixed = group([_hit("src/Logger.h", 1, 5, 0.5, "a"), _hit("src/logger.cpp", 1, 5, 0.4, "b"),
                   _hit("lib/api.d.mts", 1, 5, 0.3, "c"), _hit("lib/api.mjs", 1, 5, 0.2, "d")],
                  bodies_first=True)
    assert [f.path for f in mixed] == ["src/logger.cpp", "src/Logger.h", "lib/api.mjs",
                                       "lib/api.d.mts"]


def test_centrality_ranks_the_module_everyone_uses() -> None:
    links = [("core.py", "Engine", True), ("core.py", "run", True),
             ("a.py", "Engine", False), ("b.py", "Engine", False), ("c.py", "run", False),
             ("a.py", "helper", True), ("b.py", "helper", False),
             # a name defined in many files says nothing
             *((f"m{i}.py", "new", True) for i in range(5)), ("c.py", "new", False)]
    c = centrality(links)
    assert c["core.py"] == 1.0
    assert c["core.py"] > c["a.py"] > c["c.py"]
    assert all(f"m{i}.py" not in c for i in range(5))
    assert centrality([]) == {}
