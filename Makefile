# The two commands of the README, plus lint and bazel.
#   make demo   install into .venv, then train/evaluate/export the small SSD
#               on the embedded synthetic shapes data (DEMO_STEPS=N to change)
#   make test   install into .venv, then run the whole test suite
#   make demo-zoo  fine-tune the zoo's ssd_mobilenet_v1 (300x300) from a checkpoint
#               in the zoo's layout (ZOO_CHECKPOINT=path for a downloaded one)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= out/demo
DEMO_STEPS ?= 1000
DEMO_ZOO_DIR ?= out/demo-zoo
DEMO_ZOO_STEPS ?= 300
ZOO_CHECKPOINT ?=
# Three workers on two cores: the cluster tests spend much of their time
# waiting (timeouts, process starts), which a third worker fills; loadfile
# keeps a file's module fixtures in one worker, and tests/conftest.py orders
# the longest files first (tests/file_seconds.json), an order that
# --no-loadscope-reorder keeps (xdist would hand out the files with the most
# tests first, leaving the long few-test files for the end).
PYTEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder

# make test-fast: the developer's loop, no clusters, no slow tests, nothing that
# took more than FAST_TEST_SECONDS in the measured run (tests/test_seconds.json).
FAST_TEST_SECONDS ?= 3
FAST_PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: venv demo demo-zoo test test-fast lint bazel-test clean

venv: $(VENV)/.installed

$(VENV)/.installed: setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) protos/compile_protos.py
	touch $@

demo: venv
	$(PY) protos/compile_protos.py
	$(PY) -m trainer.demo --output_dir=$(DEMO_DIR) --num_train_steps=$(DEMO_STEPS)

demo-zoo: venv
	$(PY) protos/compile_protos.py
	$(PY) -m trainer.demo_zoo --output_dir=$(DEMO_ZOO_DIR) --num_train_steps=$(DEMO_ZOO_STEPS) \
	  --fine_tune_checkpoint=$(ZOO_CHECKPOINT)

# pytest's exit code 5 (no tests collected) means the suite itself is broken.
test: venv
	$(PY) protos/compile_protos.py
	$(PY) -m pytest tests -q $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo 'make test: pytest collected no tests' >&2; fi; \
	  exit $$rc

test-fast: venv
	$(PY) protos/compile_protos.py
	$(PY) -m pytest tests -q $(FAST_PYTEST_ARGS) -m 'not cluster and not slow' \
	  --max-test-seconds=$(FAST_TEST_SECONDS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo 'make test-fast: pytest collected no tests' >&2; fi; \
	  exit $$rc

lint: venv
	$(PY) -m ruff check .

bazel-test: venv
	tools/bazel_test.sh

clean:
	rm -rf $(VENV) out bazel-* protos/*_pb2.py
