#!/usr/bin/env bash
# Chromium for the console's browser test (tests/browser): Debian's package, the only
# browser build these machines can install (Playwright's own download is not reachable),
# and Playwright's Python driver into the project venv (the `browser` extra).
#
#   infra/local/chromium.sh install    # idempotent; prints the browser's path
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
install)
    if ! command -v chromium >/dev/null 2>&1; then
        if [[ $(id -u) != 0 ]]; then
            echo "chromium is missing: install Debian's package (sudo apt-get install chromium)" >&2
            exit 1
        fi
        echo "• installing Debian's chromium package (apt-get)…" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
    if ! .venv/bin/python -c "import playwright" 2>/dev/null; then
        log=$(mktemp)
        # Playwright at the version requirements/dev.lock names (make lock locks this extra too).
        .venv/bin/uv pip install --quiet --python .venv/bin/python \
            --constraint requirements/dev.lock -e ".[browser]" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
        rm -f "$log"
    fi
    command -v chromium
    ;;
*)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
