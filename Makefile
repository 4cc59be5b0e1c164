# Two targets matter: `make demo` (install everything, prepare the default models, run the main
# job on this repository) and `make test` (the whole test suite; what .ci/run runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test install lint bench clean

# GPU=cuda (or vulkan, hip) adds a GPU backend to the llama.cpp build; GPU=none removes it.
BUILD_LLAMA = $(BIN)/python -m hydra_rag.llamacpp.build $(if $(GPU),--gpu $(GPU))

$(BIN)/hydra-rag: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# llama.cpp is compiled for the instruction sets this machine really executes, each probed
	# by a tiny program, not for all the processor claims (about 5 minutes on 2 cores).
	$(BUILD_LLAMA)
	$(BIN)/pip install --disable-pip-version-check -e '.[dev]'
	touch $@

# Every time: rebuilds llama.cpp only if this machine's probe, the pinned version or the
# installed files no longer match the build (a venv moved to another processor, say).
install: $(BIN)/hydra-rag
	$(BUILD_LLAMA)

demo: install
	$(BIN)/hydra-rag rag setup
	$(BIN)/hydra-rag models pull smollm2-135m
	$(BIN)/hydra-rag index .
	$(BIN)/hydra-rag search "how does a sidecar pick its port" -k 5
	$(BIN)/hydra-rag ask "How does a sidecar pick its port?" --rag . --max-tokens 200

lint: install
	$(BIN)/ruff check hydra_rag tests bench
	$(BIN)/mypy hydra_rag

test: lint
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/index_throughput.py
	$(BIN)/python bench/chat_latency.py

clean:
	rm -rf $(VENV) .test-home .hydra-index bench/.work
