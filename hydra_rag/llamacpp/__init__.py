"""llama.cpp on this machine: which instructions really execute here (probe), a llama-cpp-python
built for exactly those (build), and what a crash of it means (crash).

Standard library only: `python -m hydra_rag.llamacpp.build` runs before anything else of
hydra-rag's is installed.
"""
