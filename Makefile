# Every target sets itself up from a fresh clone: the virtual environment is
# created and the project installed on first use (and again when pyproject changes).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# The demo's instant: after every creationTimestamp in examples/cluster.yaml (README quotes its output).
DEMO_NOW := 2026-01-01T01:00:00Z

.PHONY: demo test test-offline lint fuzz bench bench-live bench-trace controlplane constraints clean image

# Every extra, with the exact versions of constraints.txt, so that CI is reproducible.
$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[dev,live,report]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kai simulate -f examples/cluster.yaml --now $(DEMO_NOW) -o table

# Pin what the virtual environment holds now (after changing a range in pyproject.toml).
constraints: $(STAMP)
	{ sed -n '/^#/p' constraints.txt; $(VENV)/bin/pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# Builds (or reuses) the real control plane, then runs every test: offline core,
# lint and layering contracts, and the live tests against kube-apiserver + etcd.
test: $(STAMP) controlplane
	$(PY) -m pytest

test-offline: $(STAMP)
	$(PY) -m pytest -m "not live"

controlplane: $(STAMP)
	$(PY) -m kai.devcluster.build --for-tests

# kai's OCI image, tagged localhost/kai:<version> (the Helm chart's default image): Debian's root
# filesystem made by mmdebstrap (cached in ~/.cache/kai/image) plus kai and its pinned dependencies,
# built by buildah or podman FROM scratch (no registry). IMAGE_ARGS="--install" installs the tools
# (as root), "--archive out/kai.oci.tar" also writes an OCI archive.
IMAGE_ARGS ?=
image: $(STAMP)
	$(PY) deploy/image/build.py --python $(PY) $(IMAGE_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check kai tests bench tools
	$(VENV)/bin/lint-imports

# The fuzz suite at full size: FUZZ_CASES (10,000) mutated snapshots, configs and AdmissionReviews each,
# in a worker under a 1 GiB memory limit, plus FUZZ_CLI cases through the real kai binary (1 GiB limit
# each). Prints the outcome counts; fails on any internal error or crash (the inputs land in .fuzz-failures/).
FUZZ_CASES ?= 10000
FUZZ_CLI ?= 200
fuzz: $(STAMP)
	$(PY) -m tests.fuzz.census --cases $(FUZZ_CASES) --cli $(FUZZ_CLI)

bench: $(STAMP)
	$(PY) bench/run.py

# The simulator over time: a 10,000-job synthetic week on 500 nodes x 8 GPUs (BENCH_TRACE_ARGS to vary it).
bench-trace: $(STAMP)
	$(PY) bench/trace.py $(BENCH_TRACE_ARGS)

# The live scheduler on a real control plane: N KWOK nodes, M pods in gangs (override with
# BENCH_LIVE_ARGS="--nodes 50 --pods 500"); prints pods bound per second and cycle latencies.
bench-live: $(STAMP) controlplane
	$(PY) bench/live.py $(BENCH_LIVE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
