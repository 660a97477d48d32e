"""``make smoke`` on a machine without AWS credentials (issue 46, item 5).

The smoke's stack (``durable.local.deployed.DeployedStack``) sets up its tables and
services on local servers. Its own clients took the machine's credentials, so on a new
user's laptop (or this sandbox) ``make smoke`` failed with NoCredentialsError while creating
the tables; they now use the stack's credentials, the ones its functions get."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.local.deployed import CREDENTIALS, local_client

pytestmark = pytest.mark.integration


def test_the_smoke_stack_needs_no_credentials_of_the_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_server_endpoint: str
) -> None:
    for name in (*CREDENTIALS, "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = local_client("dynamodb", moto_server_endpoint)
    assert isinstance(client.list_tables()["TableNames"], list)
    credentials = client._request_signer._credentials  # what it signs with
    assert credentials.access_key == CREDENTIALS["AWS_ACCESS_KEY_ID"]
