"""Definitions and references parsed by the real tree-sitter grammars (pure)."""

from __future__ import annotations

import pytest

from hydra_rag.read.grammars import language_of
from hydra_rag.read.symbols import parse

SAMPLES = {
    "pkg/a.py": '''import os

# The helper.
@decorator
def foo(x):
    return bar(x)

class A(Base):
    """Doc."""
    def method(self):
        self.x = foo(1)

TIMEOUT: int = 3
''',
    "a.go": '''package main

// Server serves.
type Server struct { x int }

const Max = 3

// Start starts it.
func (s *Server) Start() error {
    return helper(s)
}

func helper(s *Server) error { return nil }
''',
    "src/a.rs": '''/// A thing.
#[derive(Debug)]
pub struct Regex { x: u8 }

impl Regex {
    pub fn new(s: &str) -> Regex {
        build(s)
    }
}

const LIMIT: usize = 10;
fn build(s: &str) -> Regex { Regex { x: 0 } }
''',
    "lib/a.js": '''// Router
export function route(path) { return match(path); }
class App extends Base {
  listen(port) { return http.createServer(this); }
}
const handler = (req) => req;
''',
    "a.ts": '''export interface Opts { a: number }
export type Id = string;
export class Client { request(o: Opts): Id { return send(o); } }
export function send(o: Opts): Id { return "x"; }
''',
    "Foo.java": '''public class Foo {
  public static final int MAX = 3;
  @Override
  public String toString() { return bar(); }
  enum Kind { A, B }
}
''',
    "a.c": '''#define MAX 10
/* adds */
static int
add(int a, int b)
{
    return a + b;
}
''',
    "a.rb": '''module Net
  class HTTP
    def get(path)
      request(path)
    end
  end
end
''',
    "build.sh": '''#!/bin/sh
# builds it
build() {
  make all
}
build
''',
}

# (path, qualified name, kind, first line, last line)
DEFINED = [
    ("pkg/a.py", "foo", "function", 3, 6),  # the comment and decorator above it included
    ("pkg/a.py", "A", "class", 8, 11),
    ("pkg/a.py", "A.method", "method", 10, 11),
    ("pkg/a.py", "TIMEOUT", "constant", 13, 13),
    ("a.go", "Server", "type", 3, 4),
    ("a.go", "Max", "constant", 6, 6),
    ("a.go", "Server.Start", "method", 8, 11),  # a method's receiver is its scope
    ("src/a.rs", "Regex", "class", 1, 3),  # doc comment and attribute included
    ("src/a.rs", "Regex.new", "method", 6, 8),  # an impl is a scope
    ("src/a.rs", "LIMIT", "constant", 11, 11),
    ("lib/a.js", "route", "function", 1, 2),
    ("lib/a.js", "App.listen", "method", 4, 4),
    ("lib/a.js", "handler", "function", 6, 6),
    ("a.ts", "Opts", "interface", 1, 1),
    ("a.ts", "Id", "type", 2, 2),
    ("a.ts", "Client.request", "method", 3, 3),
    ("Foo.java", "Foo.MAX", "constant", 2, 2),
    ("Foo.java", "Foo.toString", "method", 3, 4),
    ("Foo.java", "Foo.Kind", "class", 5, 5),
    ("a.c", "MAX", "constant", 1, 1),
    ("a.c", "add", "function", 2, 7),  # the whole definition, not its declarator
    ("a.rb", "Net.HTTP.get", "method", 3, 5),
    ("build.sh", "build", "function", 2, 5),  # the comment, not the #! line
]


@pytest.mark.parametrize("path, qualified, kind, first, last", DEFINED)
def test_definitions(path: str, qualified: str, kind: str, first: int, last: int) -> None:
    lang = language_of(path)
    assert lang is not None
    symbols, _ = parse(SAMPLES[path], lang)
    found = {s.qualified: s for s in symbols}
    assert qualified in found, sorted(found)
    s = found[qualified]
    assert (s.kind, s.line_start, s.line_end) == (kind, first, last)


def test_references_are_uses_not_definitions() -> None:
    _, refs = parse(SAMPLES["pkg/a.py"], "python")
    assert {(r.name, r.line) for r in refs} == {("bar", 6), ("foo", 11)}
    _, refs = parse(SAMPLES["a.go"], "go")
    uses = {(r.name, r.line) for r in refs}
    assert ("helper", 10) in uses and ("Server", 9) in uses
    assert ("Server", 4) not in uses  # its own definition
    _, refs = parse(SAMPLES["build.sh"], "bash")
    assert ("build", 6) in {(r.name, r.line) for r in refs}


@pytest.mark.parametrize(("lang", "text", "uses"), [
    ("python", "re.escape(s)\nescape(s)\nself.adapter.send(x)\nfoo().escape(1)\n",
     [("escape", 1, "re"), ("escape", 2, ""), ("send", 3, "self.adapter"), ("foo", 4, ""),
      ("escape", 4, "foo()")]),
    ("javascript", "utils.escape(s);\nescape(s);\nthis.send(x);\n",
     [("escape", 1, "utils"), ("escape", 2, ""), ("send", 3, "this")]),
    ("go", "package main\nfunc f() { strings.Replace(a); helper() }\n",
     [("Replace", 2, "strings"), ("helper", 2, "")]),
    ("java", "class A { void f() { Util.escape(s); escape(s); } }\n",
     [("escape", 1, "Util"), ("escape", 1, "")]),
    ("cpp", "void f() { p->send(1); escape(3); }\n", [("send", 1, "p"), ("escape", 1, "")]),
])
def test_a_use_knows_what_it_is_reached_through(lang: str, text: str,
                                                 uses: list[tuple[str, int, str]]) -> None:
    _, refs = parse(text, lang)
    assert [(r.name, r.line, r.through) for r in refs] == uses


def test_languages() -> None:
    assert language_of("x/y.tsx") == "tsx"
    assert language_of("include/z.h") == "cpp"
    assert language_of("README.md") is None
    assert language_of("bin/tool", "#!/usr/bin/env python3\nprint(1)\n") == "python"
    assert language_of("bin/run", "#!/bin/bash\n") == "bash"
    assert language_of("bin/run", "no shebang") is None


def test_broken_and_odd_input_parses_without_error() -> None:
    symbols, _ = parse("def ok():\n    pass\n\ndef broken(:\n", "python")
    assert "ok" in {s.name for s in symbols}
    assert parse("", "go") == ([], [])
    assert parse("\x00\udcff garbage ((((", "rust")[0] == []


def test_rust_items_in_a_macro_and_a_named_function_expression() -> None:
    rust = ('macro_rules! define_builder {\n    ($name:ident) => {\n        pub mod $name {\n'
            '            /// A builder.\n            pub struct RegexBuilder(Options);\n'
            '            impl RegexBuilder {\n                pub fn new(p: &str) -> Self {\n'
            '                    todo!()\n                }\n            }\n        }\n    };\n}\n')
    found = {s.name: s for s in parse(rust, "rust")[0]}
    assert (found["RegexBuilder"].line_start, found["RegexBuilder"].name_line) == (4, 5)
    assert (found["new"].line_start, found["new"].line_end) == (7, 9)
    js = "res.json = function json(obj) {\n  return send(obj);\n};\n"
    (only,) = parse(js, "javascript")[0]
    assert (only.name, only.scope) == ("json", "")


def test_cpp_definitions_behind_decorating_macros() -> None:
    # spdlog, fmt and many libraries write `SPDLOG_INLINE level_enum from_str(…) NOEXCEPT` or
    # `void SPDLOG_INLINE pool::post(…)`; unexpanded, such a function was an error node, missed.
    text = (
        "#define SPDLOG_INLINE inline\n"
        "namespace spdlog {\n"
        "SPDLOG_INLINE spdlog::level::level_enum from_str(const std::string &name) SPDLOG_NOEXCEPT\n"
        "{\n"
        "    if (name == \"warn\")\n"
        "        return level::warn;\n"
        "    return level::off;\n"
        "}\n"
        "void SPDLOG_INLINE thread_pool::post_log(int n)\n"
        "{\n"
        "    SPDLOG_TRY\n"
        "    {\n"
        "        post_(n + MAX_ITEMS);\n"
        "    }\n"
        "    SPDLOG_CATCH_STD\n"
        "}\n"
        "class SPDLOG_API logger {\n"
        "};\n"
        "}\n")
    defs, refs = parse(text, "cpp")
    got = {(d.name, d.line_start, d.line_end) for d in defs}
    assert {("SPDLOG_INLINE", 1, 1), ("from_str", 3, 8), ("post_log", 9, 16),
            ("logger", 17, 18)} <= got, got
    assert any(r.name == "post_" for r in refs)


def test_a_cpp_member_defined_outside_its_class_is_its_class() -> None:
    # `void logger::flush_() {…}` in logger-inl.h or a .cpp file is logger's method: a query
    # for `logger::flush_` must find this body, not only the declaration in the class.
    text = (
        "namespace spdlog {\n"
        "SPDLOG_INLINE void logger::flush_()\n"
        "{\n"
        "}\n"
        "template<typename T>\n"
        "T pool<T>::get() { return T(); }\n"
        "void details::os::sleep_ms(int ms) {}\n"
        "void free_function() {}\n"
        "void a::b::c::deep() {}\n"
        "template<> void Foo<A<B<C>>>::nested() {}\n"
        "}\n")
    defs, _ = parse(text, "cpp")
    got = {d.name: d.scope for d in defs}
    assert got["flush_"] == "spdlog.logger"
    assert got["get"] == "spdlog.pool"
    assert got["sleep_ms"] == "spdlog.details.os"
    assert got["free_function"] == "spdlog"
    assert got["deep"] == "spdlog.a.b.c"
    assert got["nested"] == "spdlog.Foo"


def test_a_macro_call_in_a_cpp_body_is_no_definition() -> None:
    # `SPDLOG_LOGGER_CATCH(source_loc())` closes a try in spdlog's bodies; C++'s grammar
    # reads it as a prototype of `source_loc`, which `def source_loc` listed beside the
    # struct. A prototype inside a body defines nothing either; a local class does.
    text = (
        "void logger::flush_()\n"
        "{\n"
        "    SPDLOG_TRY { sink->flush(); }\n"
        "    SPDLOG_LOGGER_CATCH(source_loc())\n"
        "}\n"
        "void g() {\n"
        "    void proto(int);\n"
        "    struct local { void m() {} };\n"
        "}\n"
        "int top(int);\n")
    defs, _ = parse(text, "cpp")
    assert [(d.name, d.kind) for d in defs] == [
        ("flush_", "method"), ("g", "function"), ("local", "class"), ("m", "method"),
        ("top", "function")]


def test_cpp_destructors_and_operators_are_definitions() -> None:
    # `hydra-rag def logger::~logger` and `def pool::operator==` find their bodies, in the
    # class or outside it; `operator ==` is kept as `operator==`, as a query names it
    text = (
        "namespace spdlog {\n"
        "logger::~logger() { flush(); }\n"
        "class pool {\n"
        "    ~pool() { stop(); }\n"
        "    bool operator == (const pool &o) const { return true; }\n"
        "    void *operator new(size_t n);\n"
        "};\n"
        "template<typename T> bool pool<T>::operator<(const pool &o) const { return false; }\n"
        "}\n"
        "std::ostream &operator<<(std::ostream &os, const pool &p) { return os; }\n"
        "void *operator new [] (size_t n);\n")
    defs, _ = parse(text, "cpp")
    got = {(d.name, d.scope, d.line_start) for d in defs if d.kind == "method"}
    assert got == {("~logger", "spdlog.logger", 2), ("~pool", "spdlog.pool", 4),
                   ("operator==", "spdlog.pool", 5), ("operator new", "spdlog.pool", 6),
                   ("operator<", "spdlog.pool", 8)}
    # outside a class, an operator is a function
    assert {(d.name, d.kind) for d in defs if d.line_start > 9} == {
        ("operator<<", "function"), ("operator new[]", "function")}


def test_unions_and_deeply_qualified_cpp_names() -> None:
    # A union is a definition as a struct is, at the top or inside a function; a declaration
    # that only names its type defines nothing. A destructor or operator qualified twice or more is
    # still its class's.
    text = (
        "union value { int i; float f; };\n"
        "union value v;\n"
        "union tagged { int a; } t;\n"
        "int main() { union local { int a; } l; return 0; }\n"
        "a::b::c::~c() {}\n"
        "bool a::b::operator == (const b &o) const { return true; }\n")
    for lang in ("c", "cpp"):
        defs, _ = parse(text, lang)
        unions = [(d.name, d.line_start, d.scope) for d in defs if d.kind == "class"]
        assert unions == [("value", 1, ""), ("tagged", 3, ""), ("local", 4, "main")], lang
    defs, _ = parse(text, "cpp")
    assert {(d.name, d.scope, d.kind) for d in defs if d.line_start > 4} == {
        ("~c", "a.b.c", "method"), ("operator==", "a.b", "method")}


def test_a_namespace_function_is_a_function() -> None:
    # C++'s `namespace ns { int f(); }` and `void ns::h() {}` (ns opened in the file), Rust's
    # `mod m { fn f() {} }`: functions of a namespace, not methods; a class's stay methods.
    cpp, _ = parse("namespace ns {\nint f() { return 0; }\nstruct K { void g() {} };\n}\n"
                   "void ns::h() {}\nvoid ns::K::i() {}\nvoid other::j() {}\nvoid ::k() {}\n",
                   "cpp")
    assert {(d.name, d.scope, d.kind) for d in cpp if d.kind != "module"} == {
        ("f", "ns", "function"), ("K", "ns", "class"), ("g", "ns.K", "method"),
        ("h", "ns", "function"), ("i", "ns.K", "method"), ("j", "other", "method"),
        ("k", "", "function")}
    rust, _ = parse("mod m {\n    fn f() {}\n    struct S;\n    impl S { fn g(&self) {} }\n}\n",
                    "rust")
    assert {(d.name, d.scope, d.kind) for d in rust} == {
        ("m", "", "module"), ("f", "m", "function"), ("S", "m", "class"),
        ("g", "m.S", "method")}


def test_typescript_namespaces_and_cpp_specialisations() -> None:
    # TypeScript's `namespace z {…}` (also `a.b.c`) is a definition and the scope of what it
    # holds; a C++ specialisation defines its template's name; a friend declaration, nothing.
    ts, _ = parse("export namespace z {\n  export function f() {}\n  export class C { m() {} }\n"
                  "}\nnamespace a.b.c { function g() {} }\n", "typescript")
    assert {(d.name, d.scope, d.kind) for d in ts} == {
        ("z", "", "module"), ("f", "z", "function"), ("C", "z", "class"),
        ("m", "z.C", "method"), ("c", "a.b", "module"), ("g", "a.b.c", "function")}
    cpp, _ = parse("template<> void A::f<int>() {}\n"
                   "template<class T> template<class U> void A<T>::template g<U>() {}\n"
                   "template<> int max<int>(int a, int b) { return a; }\n"
                   "struct S { friend void ns::h(); friend void i(); void own(); };\n"
                   "class C { friend void g(C&) {} friend bool operator==(C, C) = default; };\n",
                   "cpp")
    assert {(d.name, d.scope, d.kind, d.name_line) for d in cpp} == {
        ("f", "A", "method", 1), ("g", "A", "method", 2), ("max", "", "function", 3),
        ("S", "", "class", 4), ("own", "S", "method", 4), ("C", "", "class", 5),
        ("g", "C", "method", 5), ("operator==", "C", "method", 5)}  # hidden friends define
    # `typedef struct S {…} S_t;`: S_t names S, it is not S's scope
    c, _ = parse("typedef struct S { int a; } S_t;\ntypedef union U { int i; } U_t;\n", "c")
    assert {(d.name, d.scope) for d in c} == {("S", ""), ("S_t", ""), ("U", ""), ("U_t", "")}


def test_c_and_cpp_values_outside_functions_are_definitions() -> None:
    # what a passage's `months[i]` leans on: a variable given a value at file or namespace
    # level (arrays and pointers too); a local, a declaration without a value, a member, not
    src = ('static const std::array<const char *, 12> months{{"Jan", "Feb"}};\n'
           'static const char *const names[] = {"a", "b"};\n'
           "namespace n { constexpr int y = 2; }\n"
           "extern int z;\nint w;\nvoid f() { int local = 3; }\n"
           "struct S { static constexpr int m = 4; };\n")
    cpp, _ = parse(src, "cpp")
    assert {(d.name, d.scope, d.line_start) for d in cpp if d.kind == "variable"} == {
        ("months", "", 1), ("names", "", 2), ("y", "n", 3)}
    c, _ = parse('static const char *names[] = {"a"};\nint answer = 42;\nextern int z;\n'
                 "static int x = 1, y = 2;\nstruct P { int v; } pt = {1};\n"
                 "#ifndef G\nstatic const int kMax = 10;\n#endif\n"
                 "void f() {\n#ifdef X\n  int q = 1, r = 2;\n#endif\n}\n", "c")
    assert {(d.name, d.kind, d.scope) for d in c} == {
        ("names", "variable", ""), ("answer", "variable", ""), ("x", "variable", ""),
        ("y", "variable", ""), ("P", "class", ""), ("pt", "variable", ""),
        ("kMax", "variable", ""), ("f", "function", "")}
    # Declarators in declarators, C++'s references, `extern "C"`, variable templates, and a
    # class's static member given its value outside the class.
    deep = ("int grid[2][3] = {{0}};\nchar **argv_copy = 0;\nint *slots[4] = {0};\n"
            "int &alias = grid[0][0];\nextern \"C\" int w = 2;\nextern \"C\" { int v = 3; }\n"
            "template<class T> constexpr T pi = T(3);\nstruct S { static int count; };\n"
            "int S::count = 4;\nint *S::head = nullptr;\nvoid g() { int **local = 0; }\n")
    cpp, _ = parse(deep, "cpp")
    assert {(d.name, d.scope, d.line_start) for d in cpp if d.kind == "variable"} == {
        ("grid", "", 1), ("argv_copy", "", 2), ("slots", "", 3), ("alias", "", 4),
        ("w", "", 5), ("v", "", 6), ("pi", "", 7), ("count", "S", 9), ("head", "S", 10)}
    c, _ = parse("int grid[2][3] = {{0}};\nchar **argv_copy = 0;\nvoid g(void) { int **l = 0; }\n",
                 "c")
    assert {d.name for d in c if d.kind == "variable"} == {"grid", "argv_copy"}


def test_javascript_module_values_are_definitions_not_their_imports_or_aliases() -> None:
    src = ("export const nanoid = /^[a-z]{21}$/;\nlet counter = 0;\nvar legacy = { a: 1 };\n"
           "const fs = require('fs');\nconst mod = await import('x');\n"
           "var resolve = path.resolve;\nvar trust = require('./utils').trust;\n"
           "const f = () => 1;\nconst DEFAULTS = new Limits(100, 20);\n"
           "function h() { const inner = 2; }\n"
           "export const $Check = core.$constructor('$Check', (inst, def) => {});\n"
           "const c = 1, d = () => 2;\nconst twice = xs.map(x => 2 * x);\n"
           "const Foo = class {};\nconst gen = function* () {};\n")
    for lang in ("javascript", "typescript"):
        got, _ = parse(src, lang)
        assert {(d.name, d.kind) for d in got} == {
            ("nanoid", "constant"), ("counter", "variable"), ("legacy", "variable"),
            ("f", "function"), ("DEFAULTS", "constant"), ("h", "function"),
            ("$Check", "function"),  # made by a call given a function: no value
            ("c", "constant"), ("d", "function"), ("twice", "constant"), ("Foo", "class"),
            ("gen", "function")}, lang
