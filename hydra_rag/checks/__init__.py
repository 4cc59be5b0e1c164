"""Checking the tool itself: `doctor` (does every part work here: the llama.cpp build, the
models, each index: doctor.py) and `eval` (does retrieval find what a question file says it
should: evaluate.py, with the measures of metrics.py, which bench/ uses too).
"""
