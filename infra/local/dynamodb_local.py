"""DynamoDB Local for this repo's tests and benchmarks: the library's own
(``durable.local.servers.dynamodb_local``)."""

from durable.local.servers.dynamodb_local import SCRIPT, DynamoDBLocal, DynamoDBLocalError

__all__ = ["SCRIPT", "DynamoDBLocal", "DynamoDBLocalError"]
