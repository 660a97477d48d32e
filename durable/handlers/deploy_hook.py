"""CodeDeploy's PreTraffic hook: checks in-flight runs against the new worker version."""

from durable.aws import deploy_hook_handler
from durable.handlers import bootstrap

handler = deploy_hook_handler(bootstrap.settings)
