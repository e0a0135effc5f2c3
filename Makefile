# Course commands. `make help` lists them. Everything runs inside .venv,
# which the first command you run creates.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
LABS := $(notdir $(wildcard solutions/lab[0-9][0-9]))
LAB ?=

.PHONY: help setup lab instructor hub e2e test test-fast docs new-lab mutation release fixtures model bench grade gradescope clean-grading serve

help:  ## list the commands
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (logit-to-first-token)" >/dev/null
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv and install everything (done for you by lab and test)

lab: $(STAMP)  ## copy new labs into work/ (never overwrites) and open JupyterLab there, learner mode
	$(PY) -m course.lab_server

instructor: $(STAMP)  ## open JupyterLab on the course root with nbgrader's formgrader
	$(PY) -m course.lab_server --instructor

HUB_STAMP := $(VENV)/.hub-installed
ROSTER ?= hub/roster.csv

# JupyterHub and its culler and LTI login (the `hub` extra), and the proxy from npm into hub/node_modules.
$(HUB_STAMP): $(STAMP) pyproject.toml hub/package-lock.json
	@command -v npm >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	  else echo "the hub's proxy needs Node.js and npm: sudo apt-get install nodejs npm"; exit 1; fi; }
	$(PY) -m pip install --quiet -e '.[hub,e2e]'
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	@touch $@

hub: $(HUB_STAMP)  ## as root: JupyterHub for a class from ROSTER (hub/roster.csv): PAM or LTI 1.3 login, nbgrader exchange, idle culler (hub/README.md)
	@test "$$(id -u)" = 0 || { echo "make hub runs as root: it makes the roster's users and starts their servers as them (sudo make hub)"; exit 1; }
	$(PY) hub/roster.py apply $(ROSTER)
	LTFT_HUB_ROSTER=$(abspath $(ROSTER)) $(PY) -m jupyterhub -f hub/jupyterhub_config.py

test: $(STAMP)  ## run the test suite (two workers, one torch thread each; a test file stays on one worker)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile

test-fast: $(STAMP)  ## run the tests not marked slow (no real nbgrader, kernels or servers; about 3 minutes on 2 cores)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -m "not slow" -q -n 2 --dist loadfile

docs: $(STAMP)  ## rebuild course/SYLLABUS.md and course/GLOSSARY.md from course/syllabus/ and course/glossary/
	$(PY) -m course.docs

new-lab: $(STAMP)  ## scaffold every file of a new lab: make new-lab LAB=lab05 TITLE="KV memory"
	@test -n "$(LAB)" || { echo "usage: make new-lab LAB=labNN [TITLE=...]"; exit 2; }
	$(PY) -m autograder.new_lab $(LAB) $(if $(TITLE),--title "$(TITLE)")

mutation: $(STAMP)  ## mutation score of the graders per lab (mutmut and its pytest runner, in a private copy): make mutation [LAB=lab04]
	$(PY) -m autograder.mutation $(LAB)

e2e: $(STAMP) $(HUB_STAMP)  ## end to end: real nbgrader over every lab and edition, JupyterLab in headless Chromium, a class on JupyterHub (installs chromium, a CJK font, acl as root)
	@if [ ! -x /usr/bin/chromedriver ] || ! command -v chromium >/dev/null || ! fc-list :lang=zh 2>/dev/null | grep -q . || ! command -v setfacl >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-noto-cjk acl; \
	  else echo "e2e needs chromium, chromium-driver, a CJK font and acl: sudo apt-get install chromium chromium-driver fonts-noto-cjk acl"; exit 1; fi; fi
	@if [ "$$(id -u)" = 0 ] && ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-seccomp || true; fi  # the emulated container (e2e/test_container.py)
	$(PY) -m pytest e2e -p no:cacheprovider
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest autograder/variants -n 2 --dist loadfile -p no:cacheprovider  # every variant graded case by case, on two workers

release: $(STAMP)  ## regenerate labs/ (student release) from solutions/ with nbgrader
	$(PY) -m autograder.release $(LABS)

fixtures: $(STAMP)  ## rewrite datasets/fixtures/ from the generator (and the graders' digests of them)
	$(PY) datasets/generators/make_fixtures.py
	$(PY) -m autograder.kept

model: $(STAMP)  ## retrain the tiny model into datasets/tiny-model (about 8 minutes on 2 cores)
	$(PY) datasets/tiny_model_train.py
	$(PY) -m autograder.memo

serve: $(STAMP)  ## serve the lab07 engine over an OpenAI-compatible API on 127.0.0.1 (PORT=8000)
	$(PY) -m course.serve --port $(or $(PORT),8000)

bench: $(STAMP)  ## run the benchmarks (prints tables, writes benchmarks/results/)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

grade: $(STAMP)  ## grade submissions standalone: make grade LAB=lab01 SUBMISSIONS=folder
	$(PY) -m autograder grade $(SUBMISSIONS) --lab $(LAB) --out grades/$(LAB)

gradescope: $(STAMP)  ## build the Gradescope autograder zip: make gradescope LAB=lab01
	$(PY) -m autograder gradescope --lab $(LAB) --out gradescope/

clean-grading:  ## delete what grading produced (course/nbgrader, grades, gradescope)
	rm -rf course/nbgrader grades gradescope
