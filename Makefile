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

.PHONY: help setup lab test release fixtures model bench grade gradescope clean-grading

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (logit-to-first-token)" >/dev/null
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv and install everything (done for you by lab and test)

lab: $(STAMP)  ## open JupyterLab on labs/ (first run: sets everything up)
	$(PY) -m course.lab_server

test: $(STAMP)  ## run the whole test suite
	$(PY) -m pytest

release: $(STAMP)  ## regenerate labs/ (student release) from solutions/ with nbgrader
	$(PY) -m autograder.release $(LABS)

fixtures: $(STAMP)  ## rewrite datasets/fixtures/ from the generator
	$(PY) datasets/generators/make_fixtures.py

model: $(STAMP)  ## retrain the tiny model into datasets/tiny-model (about 8 minutes on 2 cores)
	$(PY) datasets/tiny_model_train.py

bench: $(STAMP)  ## run the benchmarks (prints tables, writes benchmarks/results/)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

grade: $(STAMP)  ## grade submissions standalone: make grade LAB=lab01 SUBMISSIONS=folder
	$(PY) -m autograder grade $(SUBMISSIONS) --lab $(LAB) --out grades/$(LAB)

gradescope: $(STAMP)  ## build the Gradescope autograder zip: make gradescope LAB=lab01
	$(PY) -m autograder gradescope --lab $(LAB) --out gradescope/

clean-grading:  ## delete what grading produced (course/nbgrader, grades, gradescope)
	rm -rf course/nbgrader grades gradescope
