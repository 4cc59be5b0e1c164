# Two targets matter: `make demo` (install everything, prepare the default models, run the main
# job on this repository) and `make test` (the whole test suite; what .ci/run runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test install lint browser ocr bench bench-documents clean

# GPU=cuda (or vulkan, hip) adds a GPU backend to the llama.cpp build; GPU=none removes it.
BUILD_LLAMA = $(BIN)/python -m hydra_rag.llamacpp.build $(if $(GPU),--gpu $(GPU))

$(BIN)/hydra-rag: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# llama.cpp is compiled for the instruction sets this machine really executes, each probed
	# by a tiny program, not for all the processor claims (11-19 minutes on 2 cores, measured:
	# README "How long").
	$(BUILD_LLAMA)
	$(BIN)/pip install --disable-pip-version-check -e '.[dev]'
	touch $@

# Every time: rebuilds llama.cpp only if this machine's probe, the pinned version or the
# installed files no longer match the build (a venv moved to another processor, say).
install: $(BIN)/hydra-rag ocr
	$(BUILD_LLAMA)

# Scanned PDFs and included images are read by Debian's Tesseract (hydra_rag.documents.ocr).
# Installed here when missing, which takes root; otherwise one line says how, and such pages
# are skipped with that reason.
ocr:
	@if ! command -v tesseract >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's tesseract-ocr (OCR of scanned pages)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr; } \
	      >/tmp/hydra-rag-tesseract.log 2>&1 \
	      || { tail -20 /tmp/hydra-rag-tesseract.log; exit 1; }; \
	  else \
	    echo "no tesseract: scanned pages are skipped (as root: apt-get install tesseract-ocr)"; \
	  fi; \
	fi

demo: install
	$(BIN)/hydra-rag rag setup
	$(BIN)/hydra-rag models pull smollm2-135m
	$(BIN)/hydra-rag index .
	$(BIN)/hydra-rag search "how does a sidecar pick its port" -k 5
	$(BIN)/hydra-rag ask "How does a sidecar pick its port?" --rag . --max-tokens 200

lint: install
	$(BIN)/ruff check hydra_rag tests bench
	$(BIN)/mypy hydra_rag

# tests/serve/test_web.py drives Debian's chromium through Playwright (a dev extra) and needs no
# browser download of Playwright's own. Installed here when missing, which takes root; without
# root or apt the test says how to get it and skips, except on CI (CI=true), where it fails.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for tests/serve/test_web.py"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
	      >/tmp/hydra-rag-chromium.log 2>&1 \
	      || { tail -20 /tmp/hydra-rag-chromium.log; exit 1; }; \
	  else \
	    echo "no /usr/bin/chromium: tests/serve/test_web.py skips (install Debian's chromium as root)"; \
	  fi; \
	fi

test: lint browser
	$(BIN)/python -m pytest -q --durations=25

bench: install
	$(BIN)/python bench/index_throughput.py
	$(BIN)/python bench/chat_latency.py

# bench/documents.py's other writers (bench/doc_writers.py): pandoc and LibreOffice from Debian
# (as root), reportlab and ebooklib from PyPI (the `bench` extra).
bench-documents: install
	@for pkg in pandoc:pandoc soffice:libreoffice-writer-nogui \
	    /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf:fonts-dejavu-core; do \
	  { command -v $${pkg%%:*} || [ -e $${pkg%%:*} ]; } >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $${pkg#*:} >/dev/null || exit 1; \
	  else echo "as root: apt-get install $${pkg#*:}"; exit 1; fi; \
	done
	$(BIN)/pip install --disable-pip-version-check -q -e '.[bench]'

clean:
	rm -rf $(VENV) .test-home .hydra-index bench/.work
