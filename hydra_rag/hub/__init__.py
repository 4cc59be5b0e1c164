"""Models by name: pulled from the Hugging Face hub (download.py, refs.py), found where
Ollama, LM Studio, the Hugging Face cache and llama.cpp keep theirs (found.py), described by
their own GGUF metadata (describe.py), registered in the user's catalog once llama.cpp has run
them (register.py), and judged for this machine (recommend.py)."""
