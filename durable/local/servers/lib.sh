# shellcheck shell=bash
# What dynamodb_local.sh, moto_server.sh and localstack.sh share: state files, a background start
# with a log, the wait for readiness, stop by PID, status, and the command dispatch. Sourced by
# them, never run. Every process it signals is one whose PID a script of ours wrote to its pidfile
# and which still runs our server (ps args contain SERVER_MATCH): nothing is stopped by name.
#
# The sourcing script sets, before `source`:
#   NAME            prefix of its messages (dynamodb_local)
#   SERVER_LABEL    the server in messages (DynamoDB Local)
#   SERVER_MATCH    text in `ps -o args=` that marks a PID as still running our server
#   PIDFILE_VAR     the variable that overrides the pidfile (DYNAMODB_LOCAL_PIDFILE)
#   PIDFILE_NAME    the pidfile under the state root when PIDFILE_VAR is unset (dynamodb-local.pid)
#   START_TIMEOUT   seconds start waits for readiness
#   STOP_TIMEOUT    seconds stop waits between SIGTERM and SIGKILL
#   PORT_LOG_SED    unless it defines server_ready (see below)
# and may change, after `source`, POLL_SECONDS (0.1: seconds between readiness tests), TAIL_LINES
# (40: log lines quoted on failure) and STATUS_NOT_READY ("not answering yet").
#
# Sourcing defines BIND_HOST, STATE_HOME, PIDFILE, STATE_BASE (the pidfile without .pid), LOGFILE
# and PORTFILE. The script defines these hooks:
#   server_answers PORT   exit 0 when the server on PORT answers a real request (status uses it)
#   server_ready SECS     start's readiness test, SECS seconds before the deadline; sets
#                         SERVER_PORT once it is known. Default: SERVER_PORT is the first line
#                         `sed -n "$PORT_LOG_SED" "$LOGFILE"` prints, then server_answers.
#   stop_server PID       default stop_pid (SIGTERM, SIGKILL after STOP_TIMEOUT)
#   usage                 prints --help

readonly BIND_HOST="127.0.0.1"
# shellcheck disable=SC2154  # NAME, SERVER_LABEL, ... are set by the sourcing script (above)
readonly NAME SERVER_LABEL SERVER_MATCH PIDFILE_VAR PIDFILE_NAME START_TIMEOUT STOP_TIMEOUT
# Set here, not taken from the environment: the scripts document every variable they read.
POLL_SECONDS=0.1
TAIL_LINES=40
STATUS_NOT_READY="not answering yet"
SERVER_PID=""
SERVER_PORT=""
START_MS=""

die() {
    echo "$NAME: error: $*" >&2
    exit 1
}
info() { echo "$NAME: $*" >&2; }

if [[ -n "${DURABLE_LOCAL_HOME:-}" ]]; then
    STATE_HOME="$DURABLE_LOCAL_HOME"
elif [[ -n "${HOME:-}" ]]; then
    STATE_HOME="$HOME/.cache/durable-local"
else
    die "neither DURABLE_LOCAL_HOME nor HOME is set"
fi
readonly STATE_HOME
PIDFILE="${!PIDFILE_VAR:-$STATE_HOME/$PIDFILE_NAME}"
STATE_BASE="${PIDFILE%.pid}"
readonly PIDFILE STATE_BASE
readonly LOGFILE="$STATE_BASE.log"
readonly PORTFILE="$STATE_BASE.port"

require_cmd() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH: $2"
}

now_ms() {
    local t
    t="$(date +%s%N)"
    # date without %N support (BSD) prints a literal N.
    if [[ "$t" == *N ]]; then echo $(($(date +%s) * 1000)); else echo $((t / 1000000)); fi
}

java_major() {
    # "java.specification.version = 17" (or "1.8" on old JDKs, which is < 17 either way).
    java -XshowSettings:properties -version 2>&1 |
        sed -n 's/^ *java\.specification\.version = \([0-9.]*\).*/\1/p' | head -n1 | sed 's/^1\.//; s/\..*//'
}

# java_at_least MIN WHY: dies if `java` is missing (WHY: what needs it) or its version unknown;
# else sets JAVA_MAJOR and fails if it is below MIN.
java_at_least() {
    require_cmd java "$2"
    JAVA_MAJOR="$(java_major)"
    [[ -n "$JAVA_MAJOR" ]] || die "could not determine the Java version of '$(command -v java)'"
    ((JAVA_MAJOR >= $1))
}

# --- options --------------------------------------------------------------------------------

# parse_opts "--opt:VAR ..." ARGS...: sets VAR from `--opt VALUE` or `--opt=VALUE`.
parse_opts() {
    local -a spec
    read -r -a spec <<<"$1"
    shift
    local opt var word
    while (($#)); do
        opt="${1%%=*}"
        var=""
        for word in "${spec[@]}"; do
            if [[ "${word%%:*}" == "$opt" ]]; then var="${word#*:}"; fi
        done
        [[ -n "$var" ]] || die "unknown option: $1"
        if [[ "$1" == *=* ]]; then
            printf -v "$var" '%s' "${1#*=}"
            shift
        else
            (($# >= 2)) || die "$1 needs a value"
            printf -v "$var" '%s' "$2"
            shift 2
        fi
    done
}

# check_port MIN [WHY]: OPT_PORT must be a port from MIN to 65535; leaves it in plain decimal.
check_port() {
    if [[ ! "$OPT_PORT" =~ ^[0-9]{1,5}$ ]] || ((10#$OPT_PORT < $1 || 10#$OPT_PORT > 65535)); then
        die "invalid port: $OPT_PORT${2:+ ($2)}"
    fi
    OPT_PORT=$((10#$OPT_PORT))
}

# --- processes ------------------------------------------------------------------------------

# A zombie has exited already; in containers whose PID 1 reaps slowly (seen here: ~2 s) it
# lingers and still answers kill -0, so test the process state instead.
is_alive() {
    local stat
    stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
    [[ -n "$stat" && "$stat" != Z* ]]
}

# True if PID is alive and runs our server: guards against killing an unrelated process that
# inherited the PID of a server that died without cleaning up its pidfile.
is_our_server() {
    local pid="$1" args
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    is_alive "$pid" || return 1
    args="$(ps -o args= -p "$pid" 2>/dev/null)" || return 1
    [[ "$args" == *"$SERVER_MATCH"* ]]
}

read_pid() {
    [[ -f "$PIDFILE" ]] && tr -dc '0-9' <"$PIDFILE"
}

# shellcheck disable=SC2120  # localstack.sh passes a line count
print_tail() {
    if [[ -f "$LOGFILE" ]]; then
        echo "---- last lines of $LOGFILE ----" >&2
        tail -n "${1:-$TAIL_LINES}" "$LOGFILE" >&2
        echo "----" >&2
    fi
}

# tcp_probe PORT REQUEST: sends REQUEST (a printf format given BIND_HOST and PORT) over plain
# bash TCP (no curl/python needed) and succeeds on an HTTP 200 status line.
tcp_probe() {
    local port="$1" line=""
    {
        exec 3<>"/dev/tcp/$BIND_HOST/$port"
    } 2>/dev/null || return 1
    # shellcheck disable=SC2059  # the request is the format
    printf "$2" "$BIND_HOST" "$port" >&3 2>/dev/null || {
        exec 3<&-
        return 1
    }
    IFS= read -r -t 3 line <&3 || true
    exec 3<&-
    [[ "$line" == "HTTP/1.1 200"* ]]
}

server_ready() {
    if [[ -z "$SERVER_PORT" ]]; then
        SERVER_PORT="$(sed -n "$PORT_LOG_SED" "$LOGFILE" 2>/dev/null | head -n1)" || true
    fi
    [[ -n "$SERVER_PORT" ]] && server_answers "$SERVER_PORT"
}

# --- start ----------------------------------------------------------------------------------

# Dies if the pidfile names our running server; else clears the state files.
refuse_if_running() {
    local pid
    pid="$(read_pid || true)"
    if [[ -n "$pid" ]] && is_our_server "$pid"; then
        die "already running (pid $pid, pidfile $PIDFILE); stop it first, or set $PIDFILE_VAR for a second instance"
    fi
    rm -f "$PIDFILE" "$PORTFILE"
}

startup_failed() {
    echo "$NAME: error: $1" >&2
    print_tail
    exit 1
}

# start_server DIR CMD...: runs CMD from DIR in the background, output to LOGFILE, its PID in
# PIDFILE, and waits until server_ready passes. Sets START_MS, SERVER_PID and SERVER_PORT (also
# written to PORTFILE). If CMD exits or is not ready within START_TIMEOUT seconds: the error, the
# log's last lines (with its path), the server stopped, exit 1.
start_server() {
    local dir="$1"
    shift
    mkdir -p "$(dirname "$PIDFILE")"
    START_MS="$(now_ms)"
    # nohup: the server must outlive the terminal that started it until `stop` (a JVM leaves
    # SIGHUP ignored when it starts with it ignored).
    (cd "$dir" && exec nohup "$@" </dev/null >"$LOGFILE" 2>&1) &
    SERVER_PID=$!
    echo "$SERVER_PID" >"$PIDFILE.tmp"
    mv "$PIDFILE.tmp" "$PIDFILE"

    local deadline=$((START_MS + START_TIMEOUT * 1000)) left
    while :; do
        # Not is_our_server: for a moment the PID is still the subshell, before it execs CMD.
        if ! is_alive "$SERVER_PID"; then
            rm -f "$PIDFILE"
            startup_failed "$SERVER_LABEL exited during startup"
        fi
        left=$((deadline - $(now_ms)))
        if ((left <= 0)); then
            echo "$NAME: error: $SERVER_LABEL not ready after ${START_TIMEOUT}s; stopping pid $SERVER_PID" >&2
            print_tail
            stop_server "$SERVER_PID"
            rm -f "$PIDFILE"
            exit 1
        fi
        if server_ready $(((left + 999) / 1000)); then
            break
        fi
        sleep "$POLL_SECONDS"
    done
    echo "$SERVER_PORT" >"$PORTFILE"
}

# --- stop, status ---------------------------------------------------------------------------

stop_pid() {
    local pid="$1" i
    is_our_server "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        is_our_server "$pid" || return 0
        sleep 0.1
    done
    info "pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        is_our_server "$pid" || return 0
        sleep 0.1
    done
    die "pid $pid still running after SIGKILL"
}

stop_server() { stop_pid "$1"; }

cmd_stop() {
    (($# == 0)) || die "stop takes no arguments"
    local pid
    pid="$(read_pid || true)"
    if [[ -z "$pid" ]]; then
        info "not running (no pidfile $PIDFILE)"
    elif is_our_server "$pid"; then
        stop_server "$pid"
        info "stopped pid $pid"
    else
        info "pid $pid from $PIDFILE is not running (or is not $SERVER_LABEL); removing the pidfile"
    fi
    rm -f "$PIDFILE" "$PORTFILE"
}

# Exit 0 running, 1 stale pidfile, 3 not running.
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
    if [[ -n "$port" ]] && server_answers "$port"; then
        echo "running: pid $pid, endpoint http://$BIND_HOST:$port, log $LOGFILE"
    else
        echo "running: pid $pid, $STATUS_NOT_READY${port:+ on port $port}, log $LOGFILE"
    fi
    return 0
}

# --- main -----------------------------------------------------------------------------------

# dispatch "install start ..." ARGS...: runs cmd_ARGS[0] with the rest, if it is listed.
dispatch() {
    local -a commands
    read -r -a commands <<<"$1"
    shift
    local cmd="${1:-}" known
    (($#)) && shift
    for known in "${commands[@]}"; do
        if [[ "$cmd" == "$known" ]]; then
            "cmd_$cmd" "$@"
            return
        fi
    done
    case "$cmd" in
    -h | --help | help) usage ;;
    *)
        local IFS="|"
        echo "usage: $(basename "$0") {${commands[*]}} [options]; --help for more" >&2
        exit 2
        ;;
    esac
}
