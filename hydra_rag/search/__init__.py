"""Searching: vector kNN, BM25 and literal matches over every table of every folder asked,
fused into one ranking (retrieve.py, fuse.py; small tables searched in memory: table_cache.py),
optionally reranked by a cross-encoder (rerank.py); which lines of a hit carry the query
(evidence.py); and reading a cited range back from a file (excerpt.py).

Offers the stages above: Searcher and Hit (hits.py), matching_lines() and weak(),
read_excerpt().
"""
