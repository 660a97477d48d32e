#!/usr/bin/env bash
# Install and run moto's server (Scheduler, S3, IAM, DynamoDB, ... over HTTP) on 127.0.0.1 only.
#
#   moto_server.sh install                 idempotent; prints the Python that runs the server
#   moto_server.sh start [--port P]        background server; prints shell exports
#   moto_server.sh stop                    stops the server in the pidfile, if any
#   moto_server.sh status                  exit 0 running, 1 stale pidfile, 3 not running
#   moto_server.sh run [--port P]          foreground (exec); used by moto_server.py so the
#                                          command line has a single definition
#
# Environment:
#   DURABLE_LOCAL_HOME       cache/state root (default $HOME/.cache/durable-local)
#   MOTO_SERVER_PYTHON       a Python that has moto[server] installed (default below)
#   MOTO_SERVER_PIDFILE      pidfile (default $DURABLE_LOCAL_HOME/moto-server.pid); the log and
#                            port files sit next to it with .log / .port suffixes
#   MOTO_SERVER_START_TIMEOUT   seconds to wait for readiness (default 30)
#   MOTO_SERVER_STOP_TIMEOUT    seconds between TERM and KILL (default 5)
#
# Which Python: the project's .venv already holds moto[server] from PyPI (the dev extra), so the
# server runs from it when it can import the server; otherwise `install` builds a venv of its own
# with moto[server]==$MOTO_VERSION (about 300 MB: the server extra pulls every service's deps).
#
# Port 0 binds an ephemeral port chosen at bind time; the real port is read back from the
# server's "Running on http://127.0.0.1:PORT" line (no probe-then-bind race between sessions).
# State lives in memory and dies with the process; POST /moto-api/reset clears it.

set -euo pipefail

readonly MOTO_VERSION="5.2.5"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly REPO_VENV_PYTHON="$SCRIPT_DIR/../../.venv/bin/python"

# For lib.sh (its header says what each is).
readonly NAME="moto_server"
readonly SERVER_LABEL="moto server"
readonly SERVER_MATCH="-m moto.server"
readonly PIDFILE_VAR="MOTO_SERVER_PIDFILE" PIDFILE_NAME="moto-server.pid"
readonly START_TIMEOUT="${MOTO_SERVER_START_TIMEOUT:-30}"
readonly STOP_TIMEOUT="${MOTO_SERVER_STOP_TIMEOUT:-5}"
# shellcheck source-path=SCRIPTDIR source=../../durable/local/servers/lib.sh
source "$SCRIPT_DIR/../../durable/local/servers/lib.sh"

readonly OWN_VENV="$STATE_HOME/moto-server/$MOTO_VERSION"
# Werkzeug's banner (it may carry ANSI colour codes around it); with --port 0 the kernel's port.
readonly PORT_LOG_SED="s|.*Running on http://$BIND_HOST:\([0-9][0-9]*\).*|\1|p"

has_server() {
    [[ -x "$1" ]] && "$1" -c "import moto.server, flask, flask_cors" >/dev/null 2>&1
}

# Prints the Python to run the server with, installing one if needed.
resolve_python() {
    if [[ -n "${MOTO_SERVER_PYTHON:-}" ]]; then
        has_server "$MOTO_SERVER_PYTHON" ||
            die "MOTO_SERVER_PYTHON=$MOTO_SERVER_PYTHON cannot import moto.server (pip install 'moto[server]')"
        echo "$MOTO_SERVER_PYTHON"
        return
    fi
    if has_server "$REPO_VENV_PYTHON"; then
        echo "$(cd "$(dirname "$REPO_VENV_PYTHON")" && pwd)/python"
        return
    fi
    if [[ -f "$OWN_VENV/.installed" ]] && has_server "$OWN_VENV/bin/python"; then
        echo "$OWN_VENV/bin/python"
        return
    fi
    command -v python3 >/dev/null 2>&1 || die "python3 not found: moto's server needs Python 3.9+"
    mkdir -p "$STATE_HOME"
    (
        flock 9
        if [[ -f "$OWN_VENV/.installed" ]] && has_server "$OWN_VENV/bin/python"; then
            exit 0
        fi
        info "installing moto[server]==$MOTO_VERSION into $OWN_VENV (about 300 MB)"
        rm -rf "$OWN_VENV"
        python3 -m venv "$OWN_VENV" || die "python3 -m venv failed"
        if ! "$OWN_VENV/bin/python" -m pip install --disable-pip-version-check \
            "moto[server]==$MOTO_VERSION" >"$OWN_VENV/pip.log" 2>&1; then
            tail -n 30 "$OWN_VENV/pip.log" >&2
            die "pip install moto[server]==$MOTO_VERSION failed"
        fi
        touch "$OWN_VENV/.installed"
    ) 9>"$STATE_HOME/.moto-server.lock"
    echo "$OWN_VENV/bin/python"
}

cmd_install() {
    (($# == 0)) || die "install takes no arguments"
    local python version
    python="$(resolve_python)"
    version="$("$python" -c "import moto; print(moto.__version__)")"
    info "moto[server] $version with $python"
    echo "$python"
}

OPT_PORT=5000

parse_port() {
    parse_opts "--port:OPT_PORT" "$@"
    check_port 0
}

server_cmd() {
    # -H: moto's default is every interface; an unauthenticated AWS emulator must not be on the
    # network.
    SERVER_CMD=("$1" -m moto.server -H "$BIND_HOST" -p "$OPT_PORT")
}

# GET /moto-api/data.json: 200 means the Flask app, not just the socket, is up.
server_answers() {
    tcp_probe "$1" 'GET /moto-api/data.json HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n'
}

cmd_run() {
    parse_port "$@"
    local python
    python="$(resolve_python)"
    server_cmd "$python"
    exec "${SERVER_CMD[@]}"
}

cmd_start() {
    parse_port "$@"
    refuse_if_running
    local python
    python="$(resolve_python)"
    server_cmd "$python"
    start_server . "${SERVER_CMD[@]}"
    local endpoint="http://$BIND_HOST:$SERVER_PORT"
    info "moto server ready at $endpoint in $(($(now_ms) - START_MS)) ms (pid $SERVER_PID, log $LOGFILE)"
    # Per-service variables only: a global AWS_ENDPOINT_URL would also send DynamoDB here.
    echo "export AWS_ENDPOINT_URL_SCHEDULER=$endpoint"
    echo "export AWS_ENDPOINT_URL_S3=$endpoint"
    echo "export AWS_ENDPOINT_URL_IAM=$endpoint"
    echo "export DURABLE_TEST_MOTO_ENDPOINT=$endpoint"
}

usage() {
    sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

dispatch "install start stop status run" "$@"
