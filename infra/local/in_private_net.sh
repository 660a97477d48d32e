#!/usr/bin/env bash
# Run a command inside a private network namespace that has only a loopback interface.
#
#   in_private_net.sh CMD [ARGS...]
#
# Why: LocalStack's child servers (DynamoDB Local, kinesis-mock) bind every interface and have
# no bind-address option, so on the shared network they would expose unauthenticated services.
# Inside a fresh namespace "every interface" is just `lo`: nothing is reachable from outside, and
# nothing outside (a developer's own LocalStack on 4566, say) can collide with our ports.
#
# The namespace also gets its own PID namespace with CMD's shell as PID 1: when the command ends,
# the kernel kills whatever it left behind (a JVM orphaned by a crashed LocalStack), and
# `unshare --kill-child` takes the whole namespace down if this script is killed. The scripts
# inside still stop their servers by PID; this is the backstop, not the mechanism.
#
# As root this uses `unshare --net`; otherwise a user namespace maps the caller to root first
# (needs unprivileged user namespaces). Nothing outside the namespace is reachable from inside,
# package registries included: install before entering.
#
# Inside, DURABLE_PRIVATE_NET=1 is exported; a nested call just runs CMD.
#
# Environment:
#   DURABLE_PRIVATE_NET   set to 1 inside (read by localstack.sh to refuse the shared network)

set -euo pipefail

die() {
    echo "in_private_net: error: $*" >&2
    exit 1
}

# Interfaces other than lo in the current network namespace (/proc/self/net is per namespace,
# unlike /sys/class/net, which shows the namespace that mounted sysfs).
foreign_interfaces() {
    tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ' | grep -vx lo || true
}

if [[ "${1:-}" == "--inside" ]]; then
    shift
    ip link set lo up || die "could not bring up the loopback interface in the new namespace"
    others="$(foreign_interfaces)"
    [[ -z "$others" ]] || die "the new namespace unexpectedly has interfaces: $others"
    export DURABLE_PRIVATE_NET=1
    # Not exec: this shell is PID 1 of the namespace and must stay to reap orphans (a PID 1 that
    # never waits would leave zombies that still answer `kill -0`). Its exit status is CMD's.
    "$@" &
    child=$!
    # PID 1 ignores signals it has no handler for; forward the usual stop signals to CMD.
    trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT HUP
    status=0
    wait "$child" || status=$?
    # wait returns early (status > 128) when a trapped signal arrives; wait for the real end.
    while kill -0 "$child" 2>/dev/null; do
        status=0
        wait "$child" || status=$?
    done
    exit "$status"
fi

(($#)) || die "usage: $(basename "$0") CMD [ARGS...]"

if [[ "${DURABLE_PRIVATE_NET:-}" == "1" && -z "$(foreign_interfaces)" ]]; then
    exec "$@"
fi

command -v unshare >/dev/null 2>&1 || die "'unshare' not found (Debian: apt-get install util-linux)"
command -v ip >/dev/null 2>&1 || die "'ip' not found (Debian: apt-get install iproute2)"

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
ns_flags=(--net --pid --fork --kill-child --mount-proc)
if ((EUID != 0)); then
    ns_flags=(--user --map-root-user "${ns_flags[@]}")
fi
# The probe tells a missing privilege apart from a failing command, so the error names the cause.
if ! unshare "${ns_flags[@]}" true 2>/dev/null; then
    if ((EUID == 0)); then
        die "unshare ${ns_flags[*]} failed even as root (a container without CAP_SYS_ADMIN?)"
    fi
    die "unshare ${ns_flags[*]} failed: run as root, or enable unprivileged user namespaces"
fi
exec unshare "${ns_flags[@]}" bash "$self" --inside "$@"
