# NVFP4 grouped GEMM toolkit. The harness's targets work on whatever device is there (a CPU included);
# the benchmarks and the GPU tests say so and stop where they need a GPU.
PYTHON      ?= python3
SPEC        ?= task.yml
SUBMISSION  ?= submission.py
# What CI tests; pyproject.toml asks for at least the oldest version tested (2.11).
TORCH_SPEC  ?= torch==2.13.0
MODE        ?= test
EVAL_ARGS   ?=
LEADERBOARD ?= nvfp4_group_gemm
GPU         ?= B200
SANITIZER   ?= $(shell command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
EVAL         = $(PYTHON) eval.py

.PHONY: help deps run test test-gpu-quick test-gpu benchmark leaderboard profile diff compare official submit bundle check-bundle check-submission check-cuda format format-check check-changed k-block library-bench kernels-ab timeline regimes moe-bench decode-bench two-level-bench peers dry-run sanitize b200-model

help:  ## this list (the default target)
	@awk -F':.*## ' '/^[a-z0-9-]+:.*## /{printf "  make %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps:  ## install what is missing (torch only where none is installed; without KernelGuard only check-submission loses a check)
	@$(PYTHON) -c "import torch" 2>/dev/null || { echo "installing $(TORCH_SPEC) (no torch found; on a machine without a GPU install the CPU build first: README.md)"; $(PYTHON) -m pip install "$(TORCH_SPEC)"; }
	@$(PYTHON) -c "import numpy, yaml, pytest, ninja" 2>/dev/null || $(PYTHON) -m pip install -q -r requirements.txt
	@$(PYTHON) -c "import safetensors" 2>/dev/null || $(PYTHON) -m pip install -q safetensors 2>/dev/null || \
		echo "note: safetensors could not be installed (no package index?): nvfp4.load_experts and its tests need it"
	@$(PYTHON) -c "import kernelguard" 2>/dev/null || $(PYTHON) -m pip install -q $$(grep '^kernelguard' requirements.txt) 2>/dev/null || \
		echo "note: KernelGuard could not be installed (no package index?): make check-submission will say that its check did not run"

run: deps  ## the harness on the official tests (SUBMISSION=submission.py, on this device)
	$(EVAL) test $(SPEC) --submission $(SUBMISSION)

test: deps  ## the test suite (CPU-only machines skip the GPU tests and say so)
	$(PYTHON) -m pytest -q tests

test-gpu-quick: deps  ## the GPU smoke set (tests/conftest.py's QUICK): the kernels' forms, exactness, graph replays, queues
	@$(PYTHON) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'make $@ needs a CUDA GPU (make test runs the suite on any machine)')"
	$(PYTHON) -m pytest -q -m quick --durations=5 tests

test-gpu: deps  ## on a GPU, every test test-gpu-quick leaves out (the two together: the whole suite); TESTS=tests/kernels: one room
	@$(PYTHON) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'make $@ needs a CUDA GPU (make test runs the suite on any machine)')"
	$(PYTHON) -m pytest -q -m "not quick" --durations=10 $(or $(TESTS),tests)

benchmark: deps  ## time the submission on the official benchmarks, as the leaderboard times it
	$(EVAL) benchmark $(SPEC) --submission $(SUBMISSION) $(EVAL_ARGS)

leaderboard: deps  ## the leaderboard's ranked run: every output of every repeat rechecked
	$(EVAL) leaderboard $(SPEC) --submission $(SUBMISSION) $(EVAL_ARGS)

profile: deps  ## a torch-profiler table per benchmark case
	$(EVAL) profile $(SPEC) --submission $(SUBMISSION)

diff: deps  ## per group: max error, mismatch count and the worst elements
	$(EVAL) diff $(SPEC) --submission $(SUBMISSION)

compare: deps  ## A=one.py B=other.py: both timed on the same inputs, alternating; per-case ratios
	@test -n "$(A)" -a -n "$(B)" || { echo "usage: make compare A=first.py B=second.py [SPEC=task.yml]"; exit 2; }
	$(EVAL) compare $(A) $(B) $(SPEC)

official: deps  ## REF=path/to/reference-kernels: the leaderboard's own eval on our files (MODE=test|benchmark|leaderboard)
	$(PYTHON) -m tools.official --ref "$(REF)" --mode $(MODE) --submission $(SUBMISSION)

bundle:  ## write the generated headers (wgmma, the boundary) and csrc/ into submission.py
	$(PYTHON) -m tools.bundle

check-bundle:  ## fail when submission.py is not what csrc/ produces
	$(PYTHON) -m tools.bundle --check

check-submission:  ## the server's gate on the submission: its text rules, and KernelGuard where installed
	$(PYTHON) -m tools.check_submission $(SUBMISSION)

CUDA_SOURCES = $(shell find csrc tests/cuda -name '*.cu' -o -name '*.cuh' | grep -v _generated)

check-changed: deps  ## the checks the files that differ from BASE (default main) need (docs/CHANGING.md); DRY_RUN=1 prints the plan
	$(PYTHON) -m tools.check_changed --base $(or $(BASE),main) $(if $(DRY_RUN),--dry-run)

format:  ## apply the house layout: ruff (lint fixes, format) to the Python, clang-format to the CUDA
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .
	clang-format -i $(CUDA_SOURCES)

format-check:  ## fail where the Python or the CUDA is not in the house layout (CI runs it; make format fixes it)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	clang-format --dry-run -Werror $(CUDA_SOURCES)

check-cuda: deps  ## compile the CUDA kernels (nvcc, no GPU needed); fail on spills, stack frames or serialized wgmma
	$(PYTHON) -m tools.check_cuda

dry-run: deps  ## build the sm_100a launch arguments on this GPU (any CUDA GPU) without launching; check them
	$(PYTHON) -m tools.dry_run --arch 100

sanitize: deps  ## the submission on varied inputs under compute-sanitizer memcheck, synccheck, initcheck (a CUDA GPU)
	@test -x "$(SANITIZER)" || { echo "compute-sanitizer not found (it ships in the CUDA toolkit's bin/): set SANITIZER=/path/to/it"; exit 1; }
	@for tool in memcheck synccheck initcheck; do \
	  echo "== $$tool"; \
	  $(SANITIZER) --tool $$tool --error-exitcode 9 $(PYTHON) -m tools.sanitize --submission $(SUBMISSION) $(SANITIZE_ARGS) || exit 1; \
	done

b200-model: deps  ## the calibrated B200 estimate of the sm_100a designs (a model, no GPU; needs nvcc); MODEL_ARGS="--config ours v6b"
	$(PYTHON) -m tools.b200_model $(MODEL_ARGS)

library-bench: deps  ## the library's op (captured, plain) against submission.py on the benchmark, in one run (a CUDA GPU)
	$(PYTHON) -m bench.library

k-block:  ## instructions per K block of the sm_90a kernels, from their SASS (nvcc, no GPU)
	$(PYTHON) -m tools.k_block_sass

kernels-ab: deps  ## KERNELS="main=HEAD~1 new=.": csrc/ of each git revision built with nvcc and timed in one process on the regimes' cases (an sm_90 GPU)
	@test -n "$(KERNELS)" || { echo 'usage: make kernels-ab KERNELS="main=HEAD~1 new=." [AB_ARGS="--regimes benchmark --floors"]'; exit 2; }
	$(PYTHON) -m bench.kernels_ab $(KERNELS) $(AB_ARGS)

timeline: deps  ## per-CTA timeline of the sm_90a GEMM (entry, first stage, K loops, stores) behind the flush; TIMELINE_ARGS="--cases 'E=8, 1-8'" (an sm_90 GPU)
	$(PYTHON) -m bench.timeline $(TIMELINE_ARGS)

regimes: deps  ## the kernel against its floors and cuBLAS: few rows per expert, the benchmark, many rows (a CUDA GPU)
	$(PYTHON) -m bench.regimes

moe-bench: deps  ## the MoE forms against the list form, what empty experts cost, quantize's bandwidth (a CUDA GPU)
	$(PYTHON) -m bench.moe

decode-bench: deps  ## few rows per expert: our MoE forms against vLLM's Marlin (MARLIN_FP4_LIB=...) and the DRAM floor, single-call and in sequence (an sm_90 GPU)
	$(PYTHON) -m bench.decode $(if $(MARLIN_FP4_LIB),--marlin $(MARLIN_FP4_LIB))

two-level-bench: deps  ## what alpha and bf16 output cost; fused_moe end to end against its parts (a CUDA GPU)
	$(PYTHON) -m bench.two_level

peers: deps  ## our submission against torch and cuBLAS on this GPU; writes docs/peers.{md,png}
	@$(PYTHON) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'make $@ needs a CUDA GPU')"
	@$(PYTHON) -c "import matplotlib" 2>/dev/null || $(PYTHON) -m pip install -q matplotlib
	$(PYTHON) -m bench.peers --out docs

submit:  ## send the submission to an open leaderboard (nvfp4_group_gemm closed on 2026-02-21): MODE, LEADERBOARD, GPU
	$(PYTHON) -m tools.submit --mode $(MODE) --leaderboard $(LEADERBOARD) --gpu $(GPU) $(SUBMISSION)
