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
readonly BIND_HOST="127.0.0.1"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly REPO_VENV_PYTHON="$SCRIPT_DIR/../../.venv/bin/python"

die() {
    echo "moto_server: error: $*" >&2
    exit 1
}
info() { echo "moto_server: $*" >&2; }

if [[ -n "${DURABLE_LOCAL_HOME:-}" ]]; then
    STATE_HOME="$DURABLE_LOCAL_HOME"
elif [[ -n "${HOME:-}" ]]; then
    STATE_HOME="$HOME/.cache/durable-local"
else
    die "neither DURABLE_LOCAL_HOME nor HOME is set"
fi
readonly STATE_HOME
readonly OWN_VENV="$STATE_HOME/moto-server/$MOTO_VERSION"
PIDFILE="${MOTO_SERVER_PIDFILE:-$STATE_HOME/moto-server.pid}"
STATE_BASE="${PIDFILE%.pid}"
readonly PIDFILE STATE_BASE
readonly LOGFILE="$STATE_BASE.log"
readonly PORTFILE="$STATE_BASE.port"

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
    while (($#)); do
        case "$1" in
        --port)
            (($# >= 2)) || die "--port needs a value"
            OPT_PORT="$2"
            shift 2
            ;;
        --port=*)
            OPT_PORT="${1#*=}"
            shift
            ;;
        *) die "unknown option: $1" ;;
        esac
    done
    if [[ ! "$OPT_PORT" =~ ^[0-9]{1,5}$ ]] || ((10#$OPT_PORT > 65535)); then
        die "invalid port: $OPT_PORT"
    fi
    OPT_PORT=$((10#$OPT_PORT))
}

server_cmd() {
    # -H: moto's default is every interface; an unauthenticated AWS emulator must not be on the
    # network.
    SERVER_CMD=("$1" -m moto.server -H "$BIND_HOST" -p "$OPT_PORT")
}

is_alive() {
    local stat
    stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
    [[ -n "$stat" && "$stat" != Z* ]]
}

is_our_server() {
    local pid="$1" args
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    is_alive "$pid" || return 1
    args="$(ps -o args= -p "$pid" 2>/dev/null)" || return 1
    [[ "$args" == *"-m moto.server"* ]]
}

read_pid() {
    [[ -f "$PIDFILE" ]] && tr -dc '0-9' <"$PIDFILE"
}

print_tail() {
    if [[ -f "$LOGFILE" ]]; then
        echo "---- last lines of $LOGFILE ----" >&2
        tail -n 40 "$LOGFILE" >&2
        echo "----" >&2
    fi
}

# GET /moto-api/data.json over bash TCP: 200 means the Flask app, not just the socket, is up.
probe() {
    local port="$1" line=""
    {
        exec 3<>"/dev/tcp/$BIND_HOST/$port"
    } 2>/dev/null || return 1
    printf 'GET /moto-api/data.json HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' \
        "$BIND_HOST" "$port" >&3 2>/dev/null || {
        exec 3<&-
        return 1
    }
    IFS= read -r -t 3 line <&3 || true
    exec 3<&-
    [[ "$line" == "HTTP/1.1 200"* ]]
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

cmd_run() {
    parse_port "$@"
    local python
    python="$(resolve_python)"
    server_cmd "$python"
    exec "${SERVER_CMD[@]}"
}

cmd_start() {
    parse_port "$@"
    local pid python
    pid="$(read_pid || true)"
    if [[ -n "$pid" ]] && is_our_server "$pid"; then
        die "already running (pid $pid, pidfile $PIDFILE); stop it first, or set MOTO_SERVER_PIDFILE for a second instance"
    fi
    rm -f "$PIDFILE" "$PORTFILE"
    python="$(resolve_python)"
    server_cmd "$python"
    mkdir -p "$(dirname "$PIDFILE")"

    local t0
    t0="$(now_ms)"
    (exec nohup "${SERVER_CMD[@]}" </dev/null >"$LOGFILE" 2>&1) &
    pid=$!
    echo "$pid" >"$PIDFILE.tmp"
    mv "$PIDFILE.tmp" "$PIDFILE"

    local timeout="${MOTO_SERVER_START_TIMEOUT:-30}"
    local deadline=$((t0 + timeout * 1000)) port=""
    while :; do
        if ! is_alive "$pid"; then
            rm -f "$PIDFILE"
            echo "moto_server: error: moto server exited during startup" >&2
            print_tail
            exit 1
        fi
        if [[ -z "$port" ]]; then
            port="$(sed -n "s|.*Running on http://$BIND_HOST:\([0-9][0-9]*\).*|\1|p" "$LOGFILE" 2>/dev/null | head -n1)"
        fi
        if [[ -n "$port" ]] && probe "$port"; then
            break
        fi
        if (($(now_ms) >= deadline)); then
            echo "moto_server: error: not ready after ${timeout}s; stopping pid $pid" >&2
            print_tail
            stop_pid "$pid"
            rm -f "$PIDFILE"
            exit 1
        fi
        sleep 0.1
    done
    echo "$port" >"$PORTFILE"
    local endpoint="http://$BIND_HOST:$port"
    info "moto server ready at $endpoint in $(($(now_ms) - t0)) ms (pid $pid, log $LOGFILE)"
    # Per-service variables only: a global AWS_ENDPOINT_URL would also send DynamoDB here.
    echo "export AWS_ENDPOINT_URL_SCHEDULER=$endpoint"
    echo "export AWS_ENDPOINT_URL_S3=$endpoint"
    echo "export AWS_ENDPOINT_URL_IAM=$endpoint"
    echo "export DURABLE_TEST_MOTO_ENDPOINT=$endpoint"
}

stop_pid() {
    local pid="$1" timeout="${MOTO_SERVER_STOP_TIMEOUT:-5}" i
    is_our_server "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
        is_our_server "$pid" || return 0
        sleep 0.1
    done
    info "pid $pid ignored SIGTERM for ${timeout}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        is_our_server "$pid" || return 0
        sleep 0.1
    done
    die "pid $pid still running after SIGKILL"
}

cmd_stop() {
    (($# == 0)) || die "stop takes no arguments"
    local pid
    pid="$(read_pid || true)"
    if [[ -z "$pid" ]]; then
        info "not running (no pidfile $PIDFILE)"
        rm -f "$PORTFILE"
        return 0
    fi
    if is_our_server "$pid"; then
        stop_pid "$pid"
        info "stopped pid $pid"
    else
        info "pid $pid from $PIDFILE is not running (or is not moto's server); removing the pidfile"
    fi
    rm -f "$PIDFILE" "$PORTFILE"
}

cmd_status() {
    (($# == 0)) || die "status takes no arguments"
    local pid port
    pid="$(read_pid || true)"
    if [[ -z "$pid" ]]; then
        echo "not running"
        return 3
    fi
    if ! is_our_server "$pid"; then
        echo "not running (stale pidfile $PIDFILE names pid $pid)"
        return 1
    fi
    port="$(cat "$PORTFILE" 2>/dev/null || true)"
    if [[ -n "$port" ]] && probe "$port"; then
        echo "running: pid $pid, endpoint http://$BIND_HOST:$port, log $LOGFILE"
    else
        echo "running: pid $pid, not answering yet${port:+ on port $port}, log $LOGFILE"
    fi
    return 0
}

usage() {
    sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
    local cmd="${1:-}"
    (($#)) && shift
    case "$cmd" in
    install) cmd_install "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    run) cmd_run "$@" ;;
    -h | --help | help) usage ;;
    *)
        echo "usage: $(basename "$0") {install|start|stop|status|run} [options]; --help for more" >&2
        exit 2
        ;;
    esac
}

main "$@"
