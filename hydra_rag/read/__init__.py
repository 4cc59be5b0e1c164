"""Walking and reading: which files of a folder are indexed (walk.py: ignore files, secrets,
binaries, size), what each one is (classify.py: code or prose), the text it gives (source.py:
a text file as it is, a document through hydra_rag.documents) and the chunks that text is cut
into (chunk.py: line-aware, heading-aware, never past the embedder's limit).

Offers the stages above: Walker, read_source(), classify(), chunk_text() and with_context().
Nothing here writes an index.
"""
