"""Fuzz the live OpenAI-compatible server from its own /openapi.json with schemathesis.

`python -m course.serve` (what `make serve` runs: the lab07 engine, the shipped tiny model,
one torch thread) starts on a free loopback port; schemathesis reads the schema and sends
every operation a bounded number of generated requests, valid and invalid. Every answer
must be: not a 5xx, documented (status code and content type), and shaped as the schema
says; a request that does not answer within REQUEST_TIMEOUT_S fails as a hang.

Two runs: hypothesis strategies per operation (valid and invalid bodies), and the
`schemathesis run` CLI (its coverage phase: boundary values, wrong types, missing and
extra fields; its fuzzing phase; wrong methods). Bounds: MAX_EXAMPLES generated requests
per operation and phase, no hypothesis deadline (a request that generates up to the
context on CPU takes seconds, and that is not a failure), and the server's
--request-timeout, so a generated request cannot run for minutes. About 3-4 minutes on
2 cores.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import schemathesis                  # the e2e extra, which `make e2e` installs
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                               status_code_conformance)

ROOT = Path(__file__).resolve().parents[1]
MAX_EXAMPLES = 40
REQUEST_TIMEOUT_S = 60           # far above any answer: --request-timeout ends a request after 10 s
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    """The server `make serve` runs, on a free port; stopped at the end, and alive until then."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "course.serve", "--port", "0", "--threads", "1",
                                 "--request-timeout", "10", "--log-level", "warning"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Serving tiny-model at http://127.0.0.1:"), line + log.read_text()[-3000:]
        url = line.split(" at ")[1].split("/v1")[0]
        yield url
        assert proc.poll() is None, "the server exited during the run:\n" + log.read_text()[-3000:]
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def api_schema(server_url):
    return schemathesis.openapi.from_url(f"{server_url}/openapi.json")


OPERATIONS = [("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models"),
              ("GET", "/health"), ("GET", "/metrics")]


def test_the_schema_has_exactly_these_operations(api_schema):
    found = sorted((op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations())
    assert found == sorted(OPERATIONS)


# schemathesis' own pytest plugin (schema.parametrize) does not run under this pytest, so each
# operation and generation mode is a plain test that draws its cases with hypothesis. A GET here
# takes no parameters, so there is nothing to make invalid.
CASES = [(m, p, mode) for m, p in OPERATIONS for mode in ("positive", "negative") if m == "POST" or mode == "positive"]


@pytest.mark.parametrize("method, path, mode", CASES, ids=[f"{m} {p} {mode}" for m, p, mode in CASES])
def test_every_answer_is_documented_and_no_5xx_or_hang(api_schema, method, path, mode):
    strategy = api_schema[path][method].as_strategy(generation_mode=schemathesis.GenerationMode(mode))

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def check(case):
        case.call_and_validate(checks=CHECKS, timeout=REQUEST_TIMEOUT_S)

    check()


def test_the_schemathesis_cli_finds_nothing(server_url, tmp_path):
    """`schemathesis run` as a user would: its coverage phase (boundary values of every
    field, wrong types, missing and extra properties) and its fuzzing phase, plus wrong
    methods, which must answer 405."""
    cli = Path(sys.executable).with_name("schemathesis")
    cmd = [str(cli), "run", f"{server_url}/openapi.json", "--phases", "coverage,fuzzing",
           "--max-examples", str(MAX_EXAMPLES), "--request-timeout", str(REQUEST_TIMEOUT_S), "--no-color",
           "--checks", ",".join(c.__name__ for c in CHECKS) + ",unsupported_method"]
    # in a scratch folder: the CLI keeps its example database (.schemathesis/) where it runs
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout, run.stdout[-3000:]
