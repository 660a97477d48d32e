#!/usr/bin/env bash
# DynamoDB Local for this repo's scripts and CI: the script that ships with the library
# (durable/local/servers/dynamodb_local.sh, which `durable dev` uses in any project).
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../../durable/local/servers/dynamodb_local.sh" "$@"
