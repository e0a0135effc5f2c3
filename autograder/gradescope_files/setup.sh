#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# It installs Python 3.11 and the course's grading dependencies into {{VENV}}
# (outside /autograder/source, which run_autograder makes readable by root only), and
# the container tier's tree (under /var/cache/l2ft-autograder).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v python3.11 >/dev/null 2>&1; then
    apt-get update
    apt-get install -y --no-install-recommends software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa || true
    apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
apt-get install -y --no-install-recommends util-linux mount || true   # unshare, mount (optional hardening)
python3.11 -m venv {{VENV}}
{{VENV}}/bin/python -m pip install --quiet --upgrade pip
{{VENV}}/bin/python -m pip install --quiet torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
{{VENV}}/bin/python -m pip install --quiet -r /autograder/source/requirements.txt \
    || {{VENV}}/bin/python -m pip install --quiet -r "$(dirname "$0")/requirements.txt"
chmod -R a+rX {{VENV}}
# Gradescope's container refuses namespaces (bubblewrap cannot start there): the grader then
# uses its container tier, whose read-only tree (the interpreter, site-packages, /usr) is
# built here once, at image build time, instead of at every submission.
PYTHONPATH=/autograder/source {{VENV}}/bin/python -m autograder.isolation build \
    || echo "note: the container tier's tree will be built when grading"
