"""botocore's SigV4 signer with the work it repeats per request done once.

The direct step put (``durable.adapters.dynamodb_direct``) signs every request itself;
botocore's ``SigV4Auth`` derives the signing key (four HMACs) on every request and
canonicalizes the headers twice, through email-header objects. Here the key is derived
once a day per credential and scope, and the headers once per signing, into a sorted list.
Which headers are signed, how values are trimmed and joined, and the scope are botocore's
own methods and constants: a test holds the signature byte for byte equal to botocore's.
"""

from __future__ import annotations

import hmac
from hashlib import sha256
from typing import Any

import botocore.auth
from botocore.auth import SIGNED_HEADERS_BLACKLIST, SigV4Auth
from botocore.awsrequest import AWSRequest

# Signing keys by (secret, day, region, service): one HMAC chain a day instead of one a
# request. A few entries cover a credential rotation; the dict is cleared past that.
_KEYS: dict[tuple[str, str, str, str], bytes] = {}
_KEYS_KEPT = 8
_HEADERS = "durable_signed_headers"  # the canonical headers, computed once per signing


class CachedKeySigV4(SigV4Auth):
    """botocore's SigV4 signer with its repeated work done once: the signing key is
    derived once a day, and the headers to sign are canonicalized once per signing
    instead of twice, into a sorted list instead of an email-header object. The rules
    (which headers, how values are trimmed and joined, the scope) are botocore's own
    methods and constants; only their data structure changes."""

    def __init__(self, credentials: Any, service_name: str, region_name: str) -> None:
        super().__init__(credentials, service_name, region_name)
        self.service, self.region = service_name, region_name

    def add_auth(self, request: AWSRequest) -> None:
        # The headers are canonicalized once for this signing only: a request signed again
        # (a retry) may carry other headers by then.
        try:
            super().add_auth(request)
        finally:
            request.context.pop(_HEADERS, None)

    def headers_to_sign(self, request: AWSRequest) -> Any:
        made = request.context.get(_HEADERS)
        if made is None:
            grouped: dict[str, list[str]] = {}
            for name, value in request.headers.items():
                lname = name.lower()
                if lname not in SIGNED_HEADERS_BLACKLIST:
                    grouped.setdefault(lname, []).append(value)
            if "host" not in grouped:
                host = botocore.auth._host_from_url(request.url)  # type: ignore[attr-defined]
                grouped["host"] = [host]
            made = request.context[_HEADERS] = sorted(grouped.items())
        return made

    def canonical_headers(self, headers_to_sign: Any) -> str:
        return "\n".join(
            f"{name}:" + ",".join(self._header_value(v) for v in values)  # type: ignore[attr-defined]
            for name, values in headers_to_sign
        )

    def signed_headers(self, headers_to_sign: Any) -> str:
        return ";".join(name.strip() for name, _ in headers_to_sign)

    def signature(self, string_to_sign: str, request: AWSRequest) -> str:
        day = request.context["timestamp"][0:8]
        secret = str(self.credentials.secret_key)
        # Keyed by the secret's digest: the module keeps no secret of its own.
        slot = (sha256(secret.encode()).hexdigest(), day, self.region, self.service)
        key = _KEYS.get(slot)
        if key is None:
            key = f"AWS4{secret}".encode()
            for part in (day, self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode("utf-8"), sha256).digest()
            if len(_KEYS) >= _KEYS_KEPT:
                _KEYS.clear()
            _KEYS[slot] = key
        return hmac.new(key, string_to_sign.encode("utf-8"), sha256).hexdigest()
