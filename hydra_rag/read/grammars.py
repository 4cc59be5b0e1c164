"""What each language's definitions are: its tree-sitter grammar, the files it reads, and the
query that names definitions and uses in it (pure).

Each language's grammar comes from its own PyPI package (tree-sitter-python, -go, …, published
by the tree-sitter project with the grammar), and so does its tagging query (`queries/tags.scm`,
the query GitHub's code navigation runs): the grammar's authors say what a definition is. A few
patterns of our own (EXTRA) fill what a tags query leaves out (constants, enums, shell
functions, C macros, TypeScript namespaces). A language whose package is missing is simply not
parsed: its files keep the plain path, as every other file does. hydra_rag.read.symbols runs
these queries.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

# language → (module, function that returns the grammar, modules whose tags.scm apply)
GRAMMARS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "python": ("tree_sitter_python", "language", ("tree_sitter_python",)),
    "javascript": ("tree_sitter_javascript", "language", ("tree_sitter_javascript",)),
    "typescript": ("tree_sitter_typescript", "language_typescript",
                   ("tree_sitter_javascript", "tree_sitter_typescript")),
    "tsx": ("tree_sitter_typescript", "language_tsx",
            ("tree_sitter_javascript", "tree_sitter_typescript")),
    "go": ("tree_sitter_go", "language", ("tree_sitter_go",)),
    "rust": ("tree_sitter_rust", "language", ("tree_sitter_rust",)),
    "java": ("tree_sitter_java", "language", ("tree_sitter_java",)),
    "c": ("tree_sitter_c", "language", ("tree_sitter_c",)),
    "cpp": ("tree_sitter_cpp", "language", ("tree_sitter_cpp",)),
    "ruby": ("tree_sitter_ruby", "language", ("tree_sitter_ruby",)),
    "bash": ("tree_sitter_bash", "language", ()),
}
SUFFIXES = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "cpp",  # a header may be either: C++'s grammar reads C too
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".hxx": "cpp", ".inl": "cpp",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".ksh": "bash",
}
NAMES = {"Rakefile": "ruby", "Gemfile": "ruby", ".bashrc": "bash", ".profile": "bash",
         ".bash_profile": "bash"}
SHEBANGS = {"python": "python", "python3": "python", "node": "javascript", "ruby": "ruby",
            "bash": "bash", "sh": "bash", "zsh": "bash", "ksh": "bash", "dash": "bash"}

# C and C++: a variable given a value outside any function or class (`static const
# std::array<…> months{{"Jan", …}};`, `const char *names[] = {…};`, `int m[2][3] = {…};`,
# `char **argv_copy = 0;`, a namespace's `const int y = 2;`; in C++ also `int &r = g;`,
# `extern "C" int w = 2;`, a variable template and a class's static member given its value
# outside the class, `int Registry::count = 0;`); a declaration without one (`extern int
# z;`) defines nothing here. Its name inside at most two array, pointer or reference
# declarators.
def _c_values(cpp: bool) -> str:
    wraps = ["array_declarator declarator:", "pointer_declarator declarator:",
             *(["reference_declarator"] if cpp else [])]
    names = ["(identifier) @name", *(["(qualified_identifier) @name"] if cpp else [])]
    forms = [*names, *(f"({w} {n})" for w in wraps for n in names),
             *(f"({w} ({v} {n}))" for w in wraps for v in wraps for n in names)]
    arounds = ("translation_unit", "declaration_list", "preproc_if", "preproc_ifdef",
               "preproc_else", "preproc_elif",
               *(("linkage_specification", "template_declaration") if cpp else ()))
    declarators = "\n  ".join(forms)
    return "\n".join(f"""({around} (declaration declarator: (init_declarator declarator: [
  {declarators}]) @definition.variable))""" for around in arounds)


# JavaScript and TypeScript: a module's constants and variables given a value (`export const
# nanoid = /^…{21}$/`). One whose value is an arrow function or a function expression is the
# tags query's function; one whose value is `require(…)` or another name is an import or an
# alias (parse() leaves them out, and says which others hold a function or a class).
_JS_VALUES = "\n".join(
    f"""(program {open_} ({decl} (variable_declarator name: (identifier) @name value: (_) @value)
  @definition.{kind}){close})"""
    for decl, kind in (("lexical_declaration", "constant"), ("variable_declaration", "variable"))
    for open_, close in (("", ""), ("(export_statement declaration:", ")")))
# What a JavaScript value that is a function may be.
FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}

# What the tags queries leave out, in our words.
EXTRA = {
    "python": """
(module (expression_statement (assignment left: (identifier) @name
  type: (_)) @definition.constant))
""",
    "go": """
(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @definition.variable))
""",
    "rust": """
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
(token_tree "struct" . (identifier) @macro.class)
(token_tree "enum" . (identifier) @macro.class)
(token_tree "trait" . (identifier) @macro.interface)
(token_tree "fn" . (identifier) @macro.function)
""",
    "java": """
(enum_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface
(constructor_declaration name: (identifier) @name) @definition.method
(field_declaration (modifiers "static") declarator: (variable_declarator
  name: (identifier) @name)) @definition.constant
""",
    "c": """
(preproc_def name: (identifier) @name) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.macro
(enum_specifier name: (type_identifier) @name body: (_)) @definition.type
(union_specifier name: (type_identifier) @name body: (_)) @definition.class
(call_expression function: (identifier) @name) @reference.call
""" + _c_values(cpp=False),
    "cpp": """
(preproc_def name: (identifier) @name) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.macro
(enum_specifier name: (type_identifier) @name body: (_)) @definition.type
(namespace_definition name: (namespace_identifier) @name) @definition.module
(call_expression function: (identifier) @name) @reference.call
(call_expression function: (field_expression field: (field_identifier) @name)) @reference.call
(union_specifier name: (type_identifier) @name body: (_)) @definition.class
(function_declarator declarator: (destructor_name) @name) @definition.function
(function_declarator declarator: (operator_name) @name) @definition.function
(function_declarator declarator: (qualified_identifier) @name) @definition.method
(function_declarator declarator: (template_function) @name) @definition.function
""" + _c_values(cpp=True),
    "ruby": """
(assignment left: (constant) @name) @definition.constant
""",
    "bash": """
(function_definition name: (word) @name) @definition.function
(command name: (command_name (word) @name)) @reference.call
""",
    "javascript": _JS_VALUES,
    "typescript": _JS_VALUES + """
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.type
(internal_module name: (identifier) @name) @definition.module
(internal_module name: (nested_identifier (property_identifier) @name .)) @definition.module
""",
}
EXTRA["tsx"] = EXTRA["typescript"]
# Nodes that are a scope without being a definition the query names: the type they are for.
SCOPES = {"impl_item": "type"}
# Definitions whose functions are functions, not methods: C++ and TypeScript namespaces, Rust
# modules (a Ruby module's are its methods).
NAMESPACES = {"namespace_definition", "mod_item", "internal_module"}
# Nodes that wrap a definition and belong to it (decorators, `export`, templates).
WRAPPERS = {"decorated_definition", "export_statement", "template_declaration"}
# Declarations that wrap one definition or several (Go's `type ( … )`): theirs when one.
GROUPS = {"type_declaration", "const_declaration", "var_declaration", "lexical_declaration",
          "variable_declaration"}
# Siblings just above a definition that belong to it.
LEADING = {"comment", "line_comment", "block_comment", "attribute_item", "decorator",
           "annotation", "marker_annotation"}
# Kinds named by a tags query, as we name them.
KINDS = {"function", "method", "class", "interface", "type", "constant", "variable", "module",
         "macro"}


def language_of(path: str, head: str = "") -> str | None:
    """The language whose grammar parses a file, from its name (or its `#!` line)."""
    p = PurePosixPath(path)
    lang = SUFFIXES.get(p.suffix.lower()) or NAMES.get(p.name)
    if lang is None and head.startswith("#!"):
        words = head[2:].split("\n", 1)[0].split()
        if words:
            prog = PurePosixPath(words[0]).name
            if prog == "env" and len(words) > 1:
                prog = words[1]
            lang = SHEBANGS.get(prog.rstrip("0123456789.") or prog) or SHEBANGS.get(prog)
    return lang if lang is not None and grammar(lang) is not None else None


@cache
def grammar(lang: str) -> tuple[Any, Any] | None:
    """(language, query) for a language, or None when its grammar package is not installed."""
    try:
        from tree_sitter import Language, Query
    except ImportError:
        return None
    module, func, tag_modules = GRAMMARS[lang]
    try:
        language = Language(getattr(importlib.import_module(module), func)())
    except (ImportError, AttributeError):
        return None
    sources = []
    for name in tag_modules:
        try:
            tags = Path(importlib.import_module(name).__file__ or "").parent / "queries" / "tags.scm"
        except ImportError:
            continue
        if tags.is_file():
            sources.append(tags.read_text(encoding="utf-8"))
    sources.append(EXTRA.get(lang, ""))
    return language, Query(language, "\n".join(sources))
