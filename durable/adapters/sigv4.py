"""Calls to a deployed stack's management API from a developer's machine.

Its operator routes are IAM-authorized: each request is signed with SigV4 for the
``execute-api`` service with the caller's credentials (the usual chain: environment,
profile, SSO). The CLI and ``durable console``'s proxy both sign here.
"""

from __future__ import annotations

import urllib.parse


class NoCredentials(Exception):
    """No AWS credentials were found to sign a request."""


def is_aws_api(base_url: str) -> bool:
    """Whether ``base_url`` is an API Gateway endpoint (its calls need signing)."""
    return ".execute-api." in base_url


def region_of(url: str) -> str:
    """The region in an ``https://<id>.execute-api.<region>.amazonaws.com`` URL."""
    host = urllib.parse.urlsplit(url).hostname or ""
    parts = host.split(".")
    if len(parts) < 4 or parts[1] != "execute-api":
        raise ValueError(f"{url!r} is not an API Gateway URL (<id>.execute-api.<region>...)")
    return parts[2]


def signed_headers(
    url: str,
    method: str,
    body: bytes | None,
    headers: dict[str, str] | None = None,
    *,
    region: str | None = None,
) -> dict[str, str]:
    """``headers`` plus the SigV4 ones for a request to a deployed API (``region``: when
    the URL does not name it, a custom domain)."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise NoCredentials(
            "no AWS credentials found to sign the request: configure a profile "
            "(aws configure / AWS_PROFILE) or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    request = AWSRequest(
        method=method,
        url=url,
        data=body,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    SigV4Auth(credentials, "execute-api", region or region_of(url)).add_auth(request)
    return dict(request.headers.items())
