"""The KMS key service (moto in-process; the same calls as on AWS)."""

from __future__ import annotations

from typing import Any

import pytest

from durable.adapters.kms import KmsKeys
from durable.core.secrets import Sealer
from durable.errors import StorageError
from tests.conftest import aws_client


@pytest.fixture
def kms(mock_aws_session: None) -> KmsKeys:
    client: Any = aws_client("kms", None)
    key = client.create_key(Description="durable test")["KeyMetadata"]["Arn"]
    return KmsKeys(client, key)


def test_a_data_key_opens_for_its_run_and_seals_values(kms: KmsKeys) -> None:
    key, wrapped = kms.new_data_key("RUN1")
    assert len(key) == 32 and key.hex() not in wrapped
    assert kms.open_data_key("RUN1", wrapped) == key
    sealed = Sealer(key, "RUN1").seal(b"secret")
    assert Sealer(kms.open_data_key("RUN1", wrapped), "RUN1").open(sealed) == b"secret"


def test_a_wrapped_key_moved_to_another_run_does_not_open(kms: KmsKeys) -> None:
    _, wrapped = kms.new_data_key("RUN1")
    with pytest.raises(StorageError):
        kms.open_data_key("RUN2", wrapped)
