"""hydra-rag: ask your own files, locally — hybrid retrieval over an on-disk index, llama.cpp models."""

__version__ = "0.1.0"
