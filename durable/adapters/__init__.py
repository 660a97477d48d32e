"""Adapters: the only modules that talk to AWS (boto3, botocore, pynamodb) or fake it."""
