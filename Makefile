# The two commands of the README: `make demo` (main job) and `make test` (test suite).
VENV ?= .venv
RCA := $(VENV)/bin/rca
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export LANGCHAIN_TRACING_V2 := false
export LANGSMITH_TRACING := false

DEMO_QUESTION ?= From which university did the founder of Amazon graduate?

.PHONY: setup demo test lint format
setup:
	@scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python -e '.[qwen15b]'
	$(RCA) index --demo --quiet
	$(RCA) ask "$(DEMO_QUESTION)"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
