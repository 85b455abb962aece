# The two commands of the README:
#   make book   build the rendered book (creates/reuses the virtual environment .venv with what the book needs)
#   make test   lint, unit tests, notebook tests (nbval) and the rendered-book tests (the full environment)
PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# Where pip finds the CPU build of torch pinned in constraints.txt, if not on the default index:
# e.g. make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
PIP         := $(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt \
               $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
# pip installs one package after another; uv (pinned in constraints.txt, put into the venv by pip) installs
# the same pins in parallel and compiles their bytecode as pip does, several times faster (benchmarks/README.md
# has the times).
# uv does not read pip's configuration, so the wheel folder pip is pointed at (PIP_FIND_LINKS: where a
# machine keeps its CPU build of torch) is passed on; if uv fails, pip installs the same thing.
# INSTALLER=pip skips uv.
INSTALLER   ?= uv
UV          := $(BIN)/python -m uv pip install -q --python $(BIN)/python --compile-bytecode \
               --index-strategy unsafe-best-match -c constraints.txt \
               $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
               $(foreach links,$(PIP_FIND_LINKS),--find-links $(links))
# $(call install,ARGS): install ARGS into the venv with uv, or with pip if uv cannot.
install = $(if $(filter uv,$(INSTALLER)),{ $(BIN)/python -m uv --version >/dev/null 2>&1 || $(PIP) uv; } && $(UV) $(1) \
          || { echo "uv failed: installing with pip"; $(PIP) $(1); },$(PIP) $(1))
PYTEST_ARGS ?=
# make test and make unit spread the tests over PYTEST_JOBS processes (pytest-xdist); --dist loadscope keeps a
# test module, or a notebook's cells, in one process, in order. PYTEST_JOBS=0 runs them all in this process.
PYTEST_JOBS ?= 2
XDIST       := -n $(PYTEST_JOBS) --dist loadscope
# nbval re-executes every chapter and assignment source and compares with the stored outputs.
# conftest.py adds the rest (this environment's kernel, tests/nbval_sanitize.cfg, skip the student releases)
# and pyproject.toml's testpaths adds notebooks/ to tests/, so plain `pytest --nbval` is the whole check.
NBVAL       := --nbval
JB_STRICT   := -W -n --keep-going

.PHONY: help venv book-venv book test course unit notebooks notebooks-generic lint assignments bench constraints clean
.DEFAULT_GOAL := help

help:
	@echo "make book         build the book into _build/html (strict: any warning fails) when a source changed;"
	@echo "                  installs only what the book needs"
	@echo "make test         ruff + the book + pytest (2 processes): the tests, the notebooks (nbval), the rendered book;"
	@echo "                  under CI=true also the course cycle and check-newest"
	@echo "make course       nbgrader's course cycle: planted-mistake submissions autograded (CI runs it)"
	@echo "make unit         the fast unit tests only: no slow, book, nbgrader or hub tests"
	@echo "make notebooks    re-execute the chapters and assignment sources and compare their outputs (nbval)"
	@echo "make notebooks-generic  the same with ATen's generic CPU kernels, as on another kind of CPU (CI runs it)"
	@echo "make lint         ruff check ."
	@echo "make venv         create or update the virtual environment .venv with everything (every target but book)"
	@echo "make book-venv    create or update .venv with what building the book needs (make book does this first)"
	@echo "make assignments  regenerate the student notebooks from notebooks/assignments/source"
	@echo "make bench        vitedu vs timm vs transformers, attention time and memory, bf16 / torch.compile"
	@echo "make constraints  freeze the environment into constraints.new, to review against constraints.txt"
	@echo "make weights      retrain the weights shipped in vitedu/assets (minutes on a GPU, hours on a CPU)"
	@echo "make speedrun     train the book's cluttered-digits ViT from scratch on the CPU in minutes, and score it"
	@echo "make mae          pre-train the MAE encoder on unlabelled canvases (hours on one CPU thread; resumes)"
	@echo "make mae-probe    the linear probe of that encoder against a random encoder's"
	@echo "make mutation     mutation testing of the package (slow, not part of make test): score per module"
	@echo "make check-newest a fresh env from requirements.txt at the newest versions, then nbval (downloads torch)"
	@echo "make clean        remove _build and .pytest_cache"
	@echo "make help         this list"

venv: $(VENV)/.installed
book-venv: $(VENV)/.book-installed

# Each stamp is rebuilt whenever a requirements file changes; otherwise the venv is reused. The full environment
# (requirements-dev.txt) includes the book's (requirements-book.txt), so it stamps both.
$(VENV)/.installed: requirements.txt requirements-book.txt requirements-dev.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install,-r requirements-dev.txt)
	# timm is only a test reference; it hard-requires torchvision, which has no CPU wheel here.
	$(call install,--no-deps timm -e .)
	touch $(VENV)/.book-installed $@

# The book renders stored outputs and documents the package (sphinx autodoc imports vitedu): the book tools and
# vitedu with its own dependencies, nothing of the notebooks' or the tests'.
$(VENV)/.book-installed: requirements-book.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install,-r requirements-book.txt -e .)
	touch $@

# What the book is built from: the two configuration files, the pages, the notebooks' stored outputs, the package
# (the API reference imports it) and the pinned tools. When any of them is newer than the last build, the book is
# built again from scratch (no stale pages of removed chapters); otherwise make book, and make test after it, have
# nothing to do (make clean book rebuilds anyway). A failed build leaves no stamp, so the next make builds again.
BOOK_SOURCES := _config.yml _toc.yml $(shell find book notebooks vitedu -type f -not -path '*/__pycache__/*' \
                -not -path '*/.ipynb_checkpoints/*' 2>/dev/null)
BOOK_STAMP   := _build/html/.built

book: $(BOOK_STAMP)

# The environment is an order-only prerequisite (make test's full install touches its stamp); the pins count.
$(BOOK_STAMP): $(BOOK_SOURCES) requirements-book.txt constraints.txt | book-venv
	rm -rf _build/.doctrees _build/html
	$(BIN)/jupyter-book build . $(JB_STRICT)
	touch $@

lint: venv
	$(BIN)/ruff check .

# The unit tier: what a change to the package should pass within a minute. The slow tier (trainings, nbgrader's
# course cycle, timm's checkpoint families, the built book) runs in `make test`.
UNIT_MARKERS := not slow and not book and not nbgrader and not hub and not network and not integration
unit: venv
	$(BIN)/python -m pytest tests -m "$(UNIT_MARKERS)" $(XDIST) $(PYTEST_ARGS)

notebooks: venv
	$(BIN)/python -m pytest notebooks $(NBVAL) $(XDIST) $(PYTEST_ARGS)

# The same nbval with ATen's generic kernels, as on a CPU of another kind (no AVX2 or AVX-512): every stored output
# must hold there too (a number that depends on a kernel's last bits is printed at a precision that holds).
notebooks-generic: venv
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest notebooks $(NBVAL) $(XDIST) $(PYTEST_ARGS)

# make test leaves out one slow tier: nbgrader's course cycle on planted-mistake submissions (tests marked
# `course`; `make course` runs them). Under CI (.ci/run sets CI=true) it runs everything, that
# tier included, then the notebooks again with ATen's generic kernels (another kind of CPU), and then
# check-newest: the notebooks at the newest versions.
TEST_SELECTION := $(if $(filter true,$(CI)),,-m "not course")
test: venv lint book
	$(BIN)/python -m pytest $(NBVAL) $(XDIST) $(TEST_SELECTION) $(PYTEST_ARGS)
	$(if $(filter true,$(CI)),$(MAKE) notebooks-generic)
	$(if $(filter true,$(CI)),$(MAKE) check-newest)

course: venv
	$(BIN)/python -m pytest tests -m course $(PYTEST_ARGS)

assignments: venv
	$(BIN)/python tools/make_assignments.py $(if $(COURSE_DIR),--course-dir $(COURSE_DIR)) $(if $(COURSE_SEED),--course-seed $(COURSE_SEED))

# BENCH_ARGS passes options to the model comparison, e.g. make bench BENCH_ARGS="--threads 2 --repeats 15";
# the full digits recipe per precision setting: python benchmarks/bench_precision.py --full
BENCH_ARGS ?=
bench: venv
	$(BIN)/python benchmarks/bench_models.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/bench_precision.py

constraints: venv
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^vitedu' > constraints.new
	@echo "review constraints.new, then move it over constraints.txt (keep the header)"

clean:
	rm -rf _build .pytest_cache

# The trained weights shipped in the package (vitedu.create_model("vit_cluttered_digits", pretrained=True)):
# retrain them with the preset's recipe (seed 7, fp32); WEIGHTS_ARGS="--device cuda" on a GPU. A GPU takes
# minutes, a CPU hours (benchmarks/README.md, "The honest task", has the times). Not bit-exact across devices
# or thread counts (CUDA's kernels are not deterministic; other hardware rounds differently); on one CPU thread
# it is. tools/seed_weights.py packs the seeds chapter 8 reads.
WEIGHTS_ARGS ?=
.PHONY: weights
weights: venv
	$(BIN)/python -m vitedu.train --dataset cluttered_digits --precision fp32 \
		--save-weights vitedu/assets/vit_cluttered_digits.safetensors $(WEIGHTS_ARGS)

# The CPU speedrun (vitedu.speedrun): vit_cluttered_digits from scratch with PRESETS["speedrun"], scored as chapter 8
# scores the shipped model; the last line is "speedrun: test accuracy A %, worst offset W %, S s on T threads".
# Two one-thread processes share every batch (faster than one process of two threads on a 2-core CPU);
# SPEEDRUN_ARGS="--seed 1" for another seed; runs/speedrun must not hold a run yet.
SPEEDRUN_ARGS ?=
.PHONY: speedrun
speedrun: venv
	$(BIN)/python -m vitedu.speedrun --processes 2 --out runs/speedrun $(SPEEDRUN_ARGS)

# MAE pre-training on unlabelled cluttered canvases (tools/pretrain_mae.py): checkpoints every epoch into runs/mae
# (git-ignored), so `make mae` again resumes an interrupted run; the encoder ends in runs/mae/encoder.safetensors.
# Hours on one CPU thread (benchmarks/README.md has the times); MAE_ARGS="--device cuda" on a GPU. `make mae-probe`
# then compares its linear probe with a random encoder's.
MAE_ARGS ?=
.PHONY: mae mae-probe
mae: venv
	$(BIN)/python tools/pretrain_mae.py --out runs/mae --threads 1 $(MAE_ARGS)
mae-probe: venv
	$(BIN)/python tools/pretrain_mae.py --out runs/mae --probe 1000 --seeds 0 1 2 --json runs/mae/probe.json

# Mutation testing: mutmut plants one bug at a time in vitedu and runs the unit tests that reach it;
# tools/mutation_report.py prints the score per module and the mutants no test noticed. Too slow for `make test`.
# The modules and tests are configured in pyproject.toml ([tool.mutmut]). Results are kept in mutants/ (git-ignored):
# a second run tests only the functions that changed; `rm -rf mutants` starts afresh. MUTATE re-runs some modules
# only (make mutation MUTATE="attention blocks"). One worker, niced, one torch thread; MUTATION_JOBS=8 on a machine
# of your own. The address space is capped (8 GB): a mutant that broadcasts a batch against itself fails at once
# instead of exhausting the machine's memory.
MUTATE        ?=
MUTATION_JOBS ?= 1
.PHONY: mutation
mutation: venv
	mkdir -p mutants/book  # mutmut copies also_copy's book/api.md without creating its folder (fresh checkout)
	ulimit -v 8000000; env -u PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS=1 VITEDU_TEST_THREADS=1 nice -n 15 \
		$(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(foreach m,$(MUTATE),"vitedu.$(m).*")
	$(BIN)/python tools/mutation_report.py

# What a reader who installs only requirements.txt gets: a fresh environment at the newest versions pip finds
# (no constraints.txt), then every chapter and assignment source re-run by nbval against its stored outputs.
# `make test` runs it under CI. The newest torch is, on Linux, a CUDA build of gigabytes (pip takes it from
# the local disk where the machine has it) unless TORCH_INDEX names PyTorch's CPU index; NEWEST_TORCH pins one.
# tests/test_requirements.py, part of `make test`, checks that requirements.txt names every notebook import.
NEWEST_VENV  ?= _build/venv-newest
NEWEST_TORCH ?= torch
.PHONY: check-newest
check-newest:
	rm -rf $(NEWEST_VENV)
	$(PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "$(NEWEST_TORCH)" -r requirements.txt pytest pytest-xdist nbval ipykernel
	$(NEWEST_VENV)/bin/python -m pip list --disable-pip-version-check | grep -iE '^(torch|numpy|matplotlib|transformers) '
	PYTHONPATH=$(CURDIR) $(NEWEST_VENV)/bin/python -m pytest --nbval notebooks -p no:cacheprovider $(XDIST) \
		$(PYTEST_ARGS)
