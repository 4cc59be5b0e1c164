"""What a chunk is embedded and full-text indexed under: a document's headings; code's path
and the definition it stands in."""

from hydra_rag.read.chunk import heading
from hydra_rag.read.symbols import Symbol, scope_of


def test_heading_of_code_is_its_path_and_scope() -> None:
    assert heading("code", "httpx/_client.py", "Client.send") == "httpx/_client.py › Client.send"
    assert heading("code", "src/lib.rs", "") == "src/lib.rs"
    # a file named by a number (a benchmark's document id) says nothing
    assert heading("code", "4471.py", "find_max") == "find_max"
    assert heading("code", "data/12/3.py", "") == "data"
    # prose keeps its headings, nothing more
    assert heading("prose", "docs/guide.md", "Guide › Install") == "Guide › Install"
    assert heading("prose", "notes.md", "") == ""


def test_scope_of_a_chunk() -> None:
    defs = [Symbol("Client", "class", 10, 200, 10),
            Symbol("send", "method", 40, 80, 41, scope="Client"),
            Symbol("helper", "function", 210, 230, 210)]
    assert scope_of(defs, 45, 70) == "Client.send"  # inside the method
    assert scope_of(defs, 90, 150) == "Client"  # in the class, past the method
    assert scope_of(defs, 1, 12) == "Client"  # the class starts within the chunk
    assert scope_of(defs, 201, 215) == "helper"
    assert scope_of(defs, 231, 240) == ""
    assert scope_of([], 1, 10) == ""
