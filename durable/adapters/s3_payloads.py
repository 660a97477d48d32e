"""The payload store on S3 (``durable.core.claim_check``): one object per large value under
``<prefix><run id>/<sha256>`` in the stack's PayloadBucket. The bucket encrypts at rest
and refuses public access (``template.yaml``); secret-typed values are sealed before they
get here, so an object holds what the ledger item would have held."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from durable.adapters.dynamodb_support import error_code, storage_error
from durable.core.lifetime import LIFECYCLE_TAG
from durable.core.stored_bytes import check_object
from durable.errors import PayloadMissing, StorageError

PREFIX = "runs/"
# S3 answers a missing key with 403 AccessDenied to a role that may not list the bucket
# (the functions may not: they read keys they wrote), so that reads as missing too.
_MISSING = {"NoSuchKey", "404", "NotFound", "AccessDenied", "403"}


class S3Payloads:
    def __init__(self, client: Any, bucket: str, prefix: str = PREFIX) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    def put(self, key: str, data: bytes, *, expire_days: int | None = None) -> None:
        # The stored-bytes rule: an object holding a token is refused before it is sent.
        check_object(f"s3://{self.bucket}", key, data)
        # A declared lifetime's value is tagged with its expiry class: the bucket's
        # lifecycle rule of that class deletes it (template.yaml), not the purge.
        tagging = {} if expire_days is None else {"Tagging": f"{LIFECYCLE_TAG}={expire_days}"}
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.prefix + key,
                Body=data,
                ContentType="application/json",
                **tagging,
            )
        except Exception as e:  # botocore's ClientError and connection errors alike
            storage_error(e, f"storing payload {key} in s3://{self.bucket}")

    def get(self, key: str) -> bytes:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
            data: bytes = answer["Body"].read()
        except Exception as e:
            if error_code(e) in _MISSING:
                raise PayloadMissing(
                    f"payload {key} is missing from s3://{self.bucket} (or this role may not "
                    f"read it: {error_code(e)})"
                ) from e
            storage_error(e, f"reading payload {key} from s3://{self.bucket}")
        return data

    def delete_older(self, prefix: str, before: datetime) -> int:
        old: list[dict[str, str]] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            for page in pages:
                for item in page.get("Contents", []):
                    if item["LastModified"] < before:
                        old.append({"Key": item["Key"]})
            for start in range(0, len(old), 1000):  # DeleteObjects takes 1,000 keys a call
                answer = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": old[start : start + 1000], "Quiet": True}
                )
                # A batch answers 200 with the keys it could not delete listed apart.
                failed = answer.get("Errors", [])
                if failed:
                    raise StorageError(
                        f"{len(failed)} payload(s) under {prefix} in s3://{self.bucket} were "
                        f"not deleted: {failed[0].get('Code')} {failed[0].get('Message')}",
                        retryable=True,
                    )
        except StorageError:
            raise
        except Exception as e:
            storage_error(e, f"deleting the payloads under {prefix} in s3://{self.bucket}")
        return len(old)
