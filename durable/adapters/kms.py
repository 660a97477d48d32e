"""The key service on AWS KMS: one data key per run (``durable.core.secrets``).

``GenerateDataKey`` makes a 256-bit key and returns it with its wrapped form, which only
``Decrypt`` under the same KMS key and encryption context opens: the context names the
run, so a wrapped key moved to another run's item does not open there either.
"""

from __future__ import annotations

import base64
from typing import Any

from durable.adapters.dynamodb_support import storage_error

CONTEXT = "durable:run"


class KmsKeys:
    def __init__(self, client: Any, key_id: str) -> None:
        self.client = client
        self.key_id = key_id

    def new_data_key(self, run_id: str) -> tuple[bytes, str]:
        try:
            answer = self.client.generate_data_key(
                KeyId=self.key_id, KeySpec="AES_256", EncryptionContext={CONTEXT: run_id}
            )
        except Exception as e:
            storage_error(e, "making a data key")
        return bytes(answer["Plaintext"]), base64.b64encode(answer["CiphertextBlob"]).decode()

    def open_data_key(self, run_id: str, wrapped: str) -> bytes:
        try:
            answer = self.client.decrypt(
                KeyId=self.key_id,
                CiphertextBlob=base64.b64decode(wrapped),
                EncryptionContext={CONTEXT: run_id},
            )
        except Exception as e:
            storage_error(e, "opening a data key")
        return bytes(answer["Plaintext"])
