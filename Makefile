# NVFP4 grouped GEMM toolkit. Every target works on whatever device is there (a CPU included).
PYTHON     ?= python3
SPEC       ?= task.yml
SUBMISSION ?= submission.py
TORCH_SPEC ?= torch==2.13.0
MODE       ?= test
EVAL_ARGS  ?=
SANITIZER  ?= $(shell command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
EVAL        = $(PYTHON) eval.py

.PHONY: deps run test benchmark leaderboard profile diff submit bundle check-bundle check-submission check-cuda peers dry-run sanitize b200-model

deps:  ## install what is missing (torch only where none is installed)
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install -q "$(TORCH_SPEC)"
	@$(PYTHON) -c "import numpy, yaml, pytest, ninja" 2>/dev/null || $(PYTHON) -m pip install -q -r requirements.txt

run: deps  ## the harness on the official tests
	$(EVAL) test $(SPEC) --submission $(SUBMISSION)

test: deps  ## the test suite
	$(PYTHON) -m pytest -q tests

benchmark: deps
	$(EVAL) benchmark $(SPEC) --submission $(SUBMISSION) $(EVAL_ARGS)

leaderboard: deps
	$(EVAL) leaderboard $(SPEC) --submission $(SUBMISSION) $(EVAL_ARGS)

profile: deps
	$(EVAL) profile $(SPEC) --submission $(SUBMISSION)

diff: deps
	$(EVAL) diff $(SPEC) --submission $(SUBMISSION)

bundle:  ## write csrc/ (and the generated wgmma code) into submission.py
	$(PYTHON) tools/bundle.py

check-bundle:  ## fail when submission.py is not what csrc/ produces
	$(PYTHON) tools/bundle.py --check

check-submission:  ## the leaderboard server's text rules on $(SUBMISSION): no banned word, size, UTF-8, imports
	$(PYTHON) tools/check_submission.py $(SUBMISSION)

check-cuda: deps  ## compile the CUDA kernels (nvcc, no GPU needed); fail on spills, stack frames or serialized wgmma
	$(PYTHON) tools/check_cuda.py

dry-run: deps  ## build the sm_100a launch arguments on this GPU (any CUDA GPU) without launching; check them
	$(PYTHON) tools/dry_run.py --arch 100

sanitize: deps  ## the submission on varied inputs under compute-sanitizer memcheck, synccheck, initcheck (a CUDA GPU)
	@test -x "$(SANITIZER)" || { echo "compute-sanitizer not found (it ships in the CUDA toolkit's bin/): set SANITIZER=/path/to/it"; exit 1; }
	@for tool in memcheck synccheck initcheck; do \
	  echo "== $$tool"; \
	  $(SANITIZER) --tool $$tool --error-exitcode 9 $(PYTHON) tools/sanitize.py --submission $(SUBMISSION) $(SANITIZE_ARGS) || exit 1; \
	done

b200-model: deps  ## the calibrated B200 estimate of the sm_100a designs (a model, no GPU; needs nvcc); MODEL_ARGS="--config ours v6b"
	$(PYTHON) tools/b200_model.py $(MODEL_ARGS)

peers: deps  ## our submission against torch and cuBLAS on the current GPU; writes docs/peers.{md,png}
	@$(PYTHON) -c "import matplotlib" 2>/dev/null || $(PYTHON) -m pip install -q matplotlib
	$(PYTHON) bench/peers.py --out docs

submit: check-submission  ## send $(SUBMISSION) to the leaderboard's B200 (MODE=test, the default, or benchmark or leaderboard) after check-submission
	$(PYTHON) tools/submit.py --mode $(MODE) $(SUBMISSION)
