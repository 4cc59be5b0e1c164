"""The definitions and references of a code file, parsed with tree-sitter (pure), with the
grammar and query of its language (hydra_rag.read.grammars).

A definition's lines run from its first decorator, attribute or the comment lines just above it
to its last line; its scope is the chain of definitions around it (`Session` for
`Session.send`; a Rust `impl` and a Go method's receiver count as scopes).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hydra_rag.read.grammars import (
    FUNCTION_VALUES,
    GROUPS,
    KINDS,
    LEADING,
    NAMESPACES,
    SCOPES,
    WRAPPERS,
    grammar,
)

# Parsed at most this many bytes of one file (a generated file is not worth the time).
MAX_BYTES = 2_000_000


class Defined(Protocol):
    """A definition as scope_of reads it (a Symbol, or a row of the symbol table)."""

    @property
    def qualified(self) -> str: ...
    @property
    def line_start(self) -> int: ...
    @property
    def line_end(self) -> int: ...
    @property
    def name_line(self) -> int: ...


@dataclass(frozen=True)
class Symbol:
    """A definition: its name, kind, the lines it spans (decorators and the comment above it
    included), the line its name is on, and the definitions it stands in ("Session")."""

    name: str
    kind: str
    line_start: int
    line_end: int
    name_line: int
    scope: str = ""

    @property
    def qualified(self) -> str:
        return f"{self.scope}.{self.name}" if self.scope else self.name


def scope_of(defs: Sequence[Defined], first: int, last: int) -> str:
    """The definition a code chunk stands in (`Client.send`): the innermost one holding its
    first line, else the first one whose name is on its lines; "" when none. `defs`: a
    file's definitions, as parsed (Symbol) or as the symbol table keeps them."""
    holding = [d for d in defs if d.line_start <= first <= d.line_end]
    if holding:
        d = min(holding, key=lambda d: d.line_end - d.line_start)
    else:
        named = [d for d in defs if first <= d.name_line <= last]
        if not named:
            return ""
        d = min(named, key=lambda d: d.name_line)
    return d.qualified


@dataclass(frozen=True)
class Reference:
    """A use of a name: a call, a type or class named, an implementation; `through` is what
    it is reached through, dotted (`re` for `re.escape(…)`, `self.adapter`, `crate.util` for
    `crate::util::escape`), "" for a bare use."""

    name: str
    line: int
    kind: str
    through: str = ""


# A macro that decorates a declaration (`SPDLOG_INLINE void f()`, `void SPDLOG_INLINE f()`,
# `class FMT_API buffer`, `int g() NOEXCEPT_MACRO {`): an upper-case name with an underscore,
# where C's grammar wants a type, a name or a body. Unexpanded, it turns the definition into
# an error node and its function is missed (ctags asks for such names with -I); blanked, the
# definition parses.
_DECORATION = re.compile(
    r"(?m)(?:^[ \t]*(?:(?:static|inline|extern|virtual|friend|constexpr|explicit)[ \t]+)*"
    r"(?:[A-Za-z_][\w:]*[ \t]+(?=[A-Z][A-Z0-9]*_[A-Z0-9_]*[ \t]+[A-Za-z_:~]))?"
    r"|\b(?:class|struct|union)[ \t]+|\)[ \t]*(?:(?:const|override|final|noexcept)[ \t]*)*)"
    r"(?P<m>[A-Z][A-Z0-9]*_[A-Z0-9_]*)(?=[ \t]+[A-Za-z_:~]|[ \t]*(?:$|\{|;|//))")


def blank_decoration_macros(text: str) -> str:
    """C or C++ with its declarations' decorating macros blanked out (spaces of the same
    length, so lines and columns stay), preprocessor lines left as they are."""
    if "_" not in text:
        return text

    def blank(m: re.Match[str]) -> str:
        line_start = text.rfind("\n", 0, m.start("m")) + 1
        if text[line_start:m.start("m")].lstrip().startswith("#"):
            return m.group()
        a, b = m.span("m")
        return m.group()[:a - m.start()] + " " * (b - a) + m.group()[b - m.start():]

    return _DECORATION.sub(blank, text)


def parse(text: str, lang: str) -> tuple[list[Symbol], list[Reference]]:
    """The definitions (in file order) and references of a file's text."""
    found = grammar(lang)
    if found is None:
        return [], []
    from tree_sitter import Parser, QueryCursor

    language, query = found
    if lang in ("c", "cpp"):
        text = blank_decoration_macros(text)
    data = text.encode("utf-8", errors="replace")[:MAX_BYTES]
    tree = Parser(language).parse(data)
    defs: dict[int, tuple[Any, Any, str]] = {}  # node id → (node, name node, kind)
    refs: list[Reference] = []
    seen_refs: set[tuple[int, int]] = set()
    macros: list[Symbol] = []
    for _, caps in QueryCursor(query).matches(tree.root_node):
        made = [(cap, nodes[0]) for cap, nodes in caps.items() if cap.startswith("macro.")]
        if made:  # a Rust item written inside a macro's body: only its tokens are known
            macros += [_in_macro(node, cap.partition(".")[2]) for cap, node in made]
            continue
        names = caps.get("name")
        if not names or "ignore" in caps or "value" in caps and _not_a_value(caps["value"][0]):
            continue
        name = _last_name(names[0])
        if name is None:
            continue
        for cap, nodes in caps.items():
            role, _, kind = cap.partition(".")
            if role == "definition" and kind in KINDS:
                node = nodes[0]
                if "value" in caps:
                    kind = _value_kind(caps["value"][0], node, kind)
                node = _whole(node)
                if node.type == "declaration" and name.parent is not None \
                        and name.parent.type == "union_specifier":
                    # `union U {…} u;`: the union is defined (our pattern), once; `union U u;`
                    # only uses it
                    continue
                if node.parent is not None and node.parent.type == "friend_declaration" \
                        and node.child_by_field_name("body") is None \
                        and not any(c.type == "init_declarator" for c in node.named_children):
                    # `friend void ns::f();` names another's function, defines none (`friend
                    # void g(C&) {…}` and `… = default;` define one)
                    continue
                if node.type in ("declaration", "init_declarator") and _in_function(node):
                    # a prototype inside a body, or what a macro call there reads as one
                    # (`SPDLOG_LOGGER_CATCH(source_loc())`): not a definition
                    continue
                known = defs.get(node.id)
                # Two patterns for one node (Rust: a function, and a method in an impl): the
                # more specific word wins.
                if known is None or kind == "method":
                    defs[node.id] = (node, name, kind)
            elif role == "reference":
                key = (name.start_byte, name.end_byte)
                if key not in seen_refs:
                    seen_refs.add(key)
                    refs.append(Reference(_text(name), name.start_point[0] + 1, kind,
                                          _through(name)))
    # A function expression named like the property it is assigned to (`res.json = function
    # json(…)`): one definition, not a second one inside the first.
    for node_id, (node, name, _) in list(defs.items()):
        parent = node.parent
        while parent is not None and parent.id not in defs:
            parent = parent.parent
        if parent is not None and _text(defs[parent.id][1]) == _text(name) \
                and parent.start_point[0] == node.start_point[0]:
            del defs[node_id]
    # A definition's own name is no use of it (Go's and Ruby's tags name it as one as well).
    named = {(_text(name), name.start_point[0] + 1) for _, name, _ in defs.values()}
    refs = [r for r in refs if (r.name, r.line) not in named]
    # the namespaces this file opens, by name: `void ns::f() {…}` is one of their functions
    spaces = {_text(name) for node, name, _ in defs.values() if node.type in NAMESPACES}
    symbols = [_symbol(node, name, kind, defs, spaces) for node, name, kind in defs.values()]
    symbols += macros
    symbols.sort(key=lambda s: (s.line_start, s.name_line, s.name))
    return symbols, refs


def _whole(node: Any) -> Any:
    """The node a definition spans: C's function is named in its declarator, so take it all;
    a declarator that is one of several (`let a = 1, b = 2;`) stays itself."""
    while node.type.endswith("declarator") and node.parent is not None:
        if node.type in ("variable_declarator", "init_declarator") \
                and sum(c.type == node.type for c in node.parent.named_children) > 1:
            break
        node = node.parent
    return node


def _not_a_value(node: Any) -> bool:
    """A JavaScript variable's value that makes it no value definition of ours: a function
    the tags query names already, an import (`require(…)`, `await import(…)`), another name
    for a name (`var resolve = path.resolve`, `require('./utils').compileTrust`: `def`
    wants the original)."""
    while node.type == "await_expression" and node.named_children:
        node = node.named_children[0]
    if node.type in ("arrow_function", "function_expression", "identifier", "member_expression"):
        return True
    if node.type == "call_expression":
        fn = node.child_by_field_name("function")
        return fn is not None and fn.type in ("identifier", "import") \
            and _text(fn) in ("require", "import")
    return False


def _value_kind(value: Any, node: Any, kind: str) -> str:
    """A JavaScript module value's kind: a function or a class it holds (`(() => 1)`,
    `function* ()`, `class {…}`), or one a call given a function makes (`debounce(() => …)`,
    zod's `core.$constructor("$ZodCheck", (inst, def) => {…})`); else a variable for `let`
    and `var`, a constant for `const`."""
    while value.type == "parenthesized_expression" and value.named_children:
        value = value.named_children[0]
    if value.type == "class":
        return "class"
    if value.type in FUNCTION_VALUES or _made_by_a_call(value):
        return "function"
    if kind == "constant" and node.parent is not None and node.parent.children \
            and node.parent.children[0].type == "let":
        return "variable"
    return kind


# Calls given a function that make a value, not a function: arrays', promises', timers'.
_VALUE_CALLS = {"map", "filter", "reduce", "reduceRight", "flatMap", "find", "findIndex",
                "findLast", "some", "every", "sort", "toSorted", "forEach", "then", "catch",
                "finally", "replace", "replaceAll", "setTimeout", "setInterval"}


def _made_by_a_call(node: Any) -> bool:
    """Is a value made by a call given a function (`debounce(() => …, 100)`, `memo(function
    Row() {…})`, a class factory's `core.$constructor(name, (inst, def) => {…})`), other than
    an array's, a promise's or a timer's (`xs.map(x => 2 * x)`)?"""
    if node.type != "call_expression":
        return False
    fn = node.child_by_field_name("function")
    if fn is not None and fn.type == "member_expression":
        fn = fn.child_by_field_name("property")
    if fn is not None and _text(fn) in _VALUE_CALLS:
        return False
    args = node.child_by_field_name("arguments")
    return args is not None and any(a.type in FUNCTION_VALUES for a in args.named_children)


# What a C++ qualified name may end in: a member, a destructor, an operator; the nodes a
# definition's name stands in (`a::f`, `f<int>`, `template f<U>`).
_LAST_NAMES = ("identifier", "field_identifier", "destructor_name", "operator_name")
_NAMED_THROUGH = ("qualified_identifier", "template_function", "dependent_name")


def _last_name(name: Any) -> Any | None:
    """The name a capture names: itself, or the last part of a qualified C++ name however
    many qualifiers it has (`a::b::c::~c`: `~c`; `pool<T>::get`: `get`), a specialisation's
    template (`A::f<int>`, `A<T>::template f<U>`: `f`); None for a part that is no name."""
    while name.type in _NAMED_THROUGH:
        if name.type == "dependent_name":  # `template f<U>`
            name = name.named_children[0] if name.named_child_count else None
        else:
            name = name.child_by_field_name("name")
        if name is None:
            return None
    if name.parent is not None and name.parent.type in _NAMED_THROUGH \
            and name.type not in _LAST_NAMES:
        return None
    return name


def operator_name(name: str) -> str:
    """A C++ operator's name as the symbol table keeps it and a query names it: `operator==`
    (written `operator ==` too), `operator()`, `operator new[]`."""
    if not re.match(r"operator(?![\w$])", name):  # `operators`, `build_request`: a name
        return name
    rest = " ".join(name.removeprefix("operator").split())
    if rest[:1].isalnum() or rest[:1] == "_":  # new, delete, a conversion: `operator new[]`
        return "operator " + re.sub(r"\s+(?=[^\w\s])|(?<=[^\w\s])\s+", "", rest)
    return "operator" + rest.replace(" ", "")


def _in_function(node: Any) -> bool:
    """Does the node stand inside a function's body?"""
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            return True
        parent = parent.parent
    return False


# The field that holds what a name is reached through, per grammar: Python's attribute and
# JavaScript's member expression (object), Go's selector (operand) and qualified type
# (package), Rust's field (value) and path (path), C++'s field (argument) and qualified name
# (scope), Ruby's call (receiver).
_THROUGH = ("object", "operand", "package", "value", "path", "argument", "scope", "receiver")
MAX_THROUGH = 80  # characters kept of it (a long chain of calls tells no more)


def _through(name: Any) -> str:
    """What a used name is reached through (`re` in `re.escape`), dotted; "" for none."""
    parent = name.parent
    if parent is None:
        return ""
    for field in _THROUGH:
        node = parent.child_by_field_name(field)
        if node is not None and node.end_byte <= name.start_byte:
            text = " ".join(_text(node).split()).replace("::", ".").replace("->", ".")
            return text[:MAX_THROUGH]
    return ""


def _in_macro(name: Any, kind: str) -> Symbol:
    """An item in a Rust macro's body, from its tokens: from the doc comments and attributes
    before it to the end of its `{…}` (or its `;`)."""
    first = last = name.start_point[0]
    sib = name.next_sibling
    for _ in range(8):  # its parameters, return type, then the body
        if sib is None or sib.type == ";":
            break
        if sib.type == "token_tree" and sib.child_count and sib.children[0].type == "{":
            last = sib.end_point[0]
            break
        sib = sib.next_sibling
    sib = name.prev_sibling
    while sib is not None and sib.type not in ("{", "}", ";", "=>") and (
            sib.start_point[0] >= first - 1 or sib.type in ("pub", "fn")):
        if sib.type in ("line_comment", "block_comment", "#", "token_tree") or not sib.is_named:
            first = min(first, sib.start_point[0])
            sib = sib.prev_sibling
        else:
            break
    return Symbol(_text(name), kind, first + 1, last + 1, name.start_point[0] + 1)


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def _untemplated(name: str) -> str:
    """A qualifier without its template arguments, however nested (`Pool<A<B>>` is Pool)."""
    while True:
        bare = _TEMPLATE_ARGS.sub("", name)
        if bare == name:
            return bare
        name = bare


def _text(node: Any) -> str:
    return bytes(node.text or b"").decode("utf-8", errors="replace")


def _symbol(node: Any, name: Any, kind: str, defs: dict[int, tuple[Any, Any, str]],
            spaces: set[str]) -> Symbol:
    outer = node
    while outer.parent is not None and (
            outer.parent.type in WRAPPERS
            or outer.parent.type in GROUPS and outer.parent.named_child_count == 1):
        outer = outer.parent
    first = outer.start_point[0]
    sib = outer.prev_named_sibling
    while (sib is not None and sib.type in LEADING and sib.end_point[0] >= first - 1
           and not _text(sib).startswith("#!")):
        first = sib.start_point[0]
        sib = sib.prev_named_sibling
    scope: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type in ("type_definition", "declaration", "init_declarator"):
            pass  # `typedef struct S {…} S_t;`, `struct P {…} pt;`: pt names P, not its scope
        elif parent.id in defs:
            around = defs[parent.id][1]
            if around.parent is not None and around.parent.type == "nested_identifier":
                around = around.parent  # `namespace a.b {…}`: a.b
            scope.append(_text(around))
        elif parent.type in SCOPES:
            field = parent.child_by_field_name(SCOPES[parent.type])
            if field is not None:
                scope.append(_text(field))
        parent = parent.parent
    receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
    if receiver is not None:  # Go: func (s *Server) Start(): Server.Start
        types = [n for n in _walk(receiver) if n.type == "type_identifier"]
        if types:
            scope.insert(0, _text(types[0]))
    # C++: `void logger::flush_() {…}` outside its class is logger's (spdlog.logger.flush_);
    # `a::b::f`, `pool<T>::f` likewise
    qualified, quals = name.parent, list[str]()
    while qualified is not None and qualified.type in ("template_function", "dependent_name"):
        qualified = qualified.parent
    while qualified is not None and qualified.type == "qualified_identifier":
        of = qualified.child_by_field_name("scope")
        if of is not None:
            quals += reversed([p for p in _untemplated(_text(of)).split("::") if p])
        qualified = qualified.parent
    if name.parent.type == "nested_identifier":  # TypeScript: `namespace a.b {…}` is b in a
        quals += reversed(_text(name.parent).split(".")[:-1])
    scope[:0] = quals
    if kind == "function" and scope and _is_class_scope(node, defs):
        kind = "method"
    elif kind == "method" and (quals[0] in spaces if quals else _in_namespace(node, defs)
                               or name.parent.type == "qualified_identifier"):
        # a namespace's: `void ns::f() {…}` where this file opens `namespace ns`, Rust's
        # `mod m { fn f() {} }` (its tags query says method), C++'s `void ::g() {…}`
        kind = "function"
    text = operator_name(_text(name)) if name.type == "operator_name" else _text(name)
    return Symbol(text, kind, first + 1, node.end_point[0] + 1 - _trailing(node),
                  name.start_point[0] + 1, ".".join(reversed(scope)))


def _in_namespace(node: Any, defs: dict[int, tuple[Any, Any, str]]) -> bool:
    """Is the nearest scope around a definition a namespace (or module) of NAMESPACES?"""
    parent = node.parent
    while parent is not None:
        if parent.id in defs or parent.type in SCOPES:
            return parent.type in NAMESPACES
        parent = parent.parent
    return False


def _is_class_scope(node: Any, defs: dict[int, tuple[Any, Any, str]]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.id in defs:
            return defs[parent.id][2] in ("class", "interface", "module") \
                and parent.type not in NAMESPACES
        if parent.type in SCOPES:
            return True
        parent = parent.parent
    return False


def _trailing(node: Any) -> int:
    """1 when a node ends at the start of a line (its last line holds none of it)."""
    return 1 if node.end_point[1] == 0 and node.end_point[0] > node.start_point[0] else 0


def _walk(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


# What a definition may stand in and still start or end a chunk: a value holds functions as
# a class does (JavaScript's `const defaults = { transformRequest: function … }`).
CONTAINERS = {"class", "interface", "module", "type", "constant", "variable"}


def chunk_spans(symbols: list[Symbol]) -> list[tuple[int, int]]:
    """The (first, last) lines of the definitions a chunk may start or end at: those not
    inside a function (a class's methods are, and an object literal's functions; a function's
    inner helpers are not). In n log n: a generated file may define tens of thousands."""
    ends: dict[int, int] = {}  # first line → the last line of the longest non-container there
    for o in symbols:
        if o.kind not in CONTAINERS:
            ends[o.line_start] = max(ends.get(o.line_start, 0), o.line_end)
    starts = sorted(ends)
    reach = [0]  # reach[i]: the furthest a non-container starting before starts[i] reaches
    for a in starts:
        reach.append(max(reach[-1], ends[a]))
    spans = []
    for s in symbols:
        before = reach[bisect.bisect_left(starts, s.line_start)]
        if before < s.line_end and ends.get(s.line_start, 0) <= s.line_end:
            spans.append((s.line_start, s.line_end))
    return spans
