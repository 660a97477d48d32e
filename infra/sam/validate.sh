#!/usr/bin/env bash
# Validate template.yaml offline: `sam validate --lint` and `cfn-lint`.
#
# aws-sam-cli pins its own versions of boto3, cfn-lint and friends, so it lives in its own
# virtualenv (never the project's .venv, whose pins it would fight), installed once from
# PyPI into the local cache by the same code a user's project runs (`durable sam`). Nothing here talks to AWS: a dummy region and credentials keep
# botocore from looking for real ones, and SAM's telemetry is off.
#
#   infra/sam/validate.sh            install if needed, then validate
#   infra/sam/validate.sh install    install only; prints the sam executable
#
# Environment: DURABLE_LOCAL_HOME (default $HOME/.cache/durable-local). Needs the project
# venv (make .venv/.installed).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The installer `durable sam` uses (durable/local/sam.py): one SAM venv in the user cache.
sam="$("$root/.venv/bin/python" -m durable.local.sam install)"
venv="$(dirname "$(dirname "$sam")")"
if [[ "${1:-}" == "install" ]]; then
    echo "$sam"
    exit 0
fi

export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_REGION="$AWS_DEFAULT_REGION"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-validate}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-validate}"
export SAM_CLI_TELEMETRY=0

cd "$root"
echo "== sam validate --lint =="
"$sam" validate --lint --template-file template.yaml --region "$AWS_DEFAULT_REGION"
echo "== cfn-lint =="
"$venv/bin/cfn-lint" template.yaml
echo "template.yaml: sam validate --lint and cfn-lint passed"
