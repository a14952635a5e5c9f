#!/usr/bin/env bash
# `make test-django`: the Django tests (tests/contrib/django, slow cases included) on each
# Django the backend supports: Django 5.2 with the django-tasks backport on Python 3.11 (the
# project's .venv), and Django 6 (django.tasks) in a venv of its own for each Python >= 3.12
# found (on PATH, or installed by pyenv). With no Python >= 3.12 the Django 6 runs are
# skipped, saying so. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
DJANGO6="Django>=6.1,<7"

echo "== Django 5.2 + django-tasks, $(.venv/bin/python --version)"
.venv/bin/python -m pytest --run-slow -q tests/contrib/django "$@"

found=0
for version in 3.12 3.13; do
    python=""
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version" \
            "$(command -v "python$version" || true)"; do
        # (a pyenv shim is on PATH even where it cannot run that version: try each)
        if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c "" 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "== Python $version not found: Django 6 is not run on it"
        continue
    fi
    found=1
    venv=".venv-django6-py$version"
    if [ ! -f "$venv/.stamp" ] || [ pyproject.toml -nt "$venv/.stamp" ]; then
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet -e . "$DJANGO6" pytest pytest-timeout \
            pytest-xdist gunicorn
        touch "$venv/.stamp"
    fi
    echo "== $("$venv/bin/python" -m django --version | sed 's/^/Django /'), $("$venv/bin/python" --version)"
    "$venv/bin/python" -m pytest --run-slow -q tests/contrib/django "$@"
done
if [ "$found" = 0 ]; then
    echo "== SKIPPED: Django 6 needs Python >= 3.12 and none was found (on PATH as python3.12 or python3.13, or under pyenv): install one (Debian 13: apt-get install python3.13-venv; or pyenv install 3.12) to test Django 6"
fi
