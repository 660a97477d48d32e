"""The shape of a callback token inside any text, and its redaction: the one rule every
layer that keeps tokens out of storage applies (the ledger's write boundary, the byte-level
check of every item and object, the refusal of names and keys, the scrub of a value before
a codec encodes it).

A leaf module (it imports nothing of the package), so every one of those layers can use it
without an import cycle between them.
"""

from __future__ import annotations

import re

REDACTED_TOKEN = "<callback token redacted>"

# A token's parts (``durable.core.tokens`` mints them): the run id (a ULID, or an id derived
# from a key, 26 characters), the position (dot-separated indexes of at least four digits:
# a run's 10,000th call is position 10000, a map item's 0003.0012), and the MAC (43
# characters of unpadded base64url). The parser and every scan are built from these, so
# the engine can never mint or accept a token the scans do not recognise.
RUN_ID_PART = r"[0-9A-Z]{26}"
POSITION_PART = r"[0-9]{4,}(?:\.[0-9]{4,})*"
MAC_PART = r"[A-Za-z0-9_-]{43}"
# The shape of a minted token anywhere in a text.
TOKEN_TEXT = re.compile(rf"{RUN_ID_PART}\.{POSITION_PART}\.{MAC_PART}")


# A token's tail: a pattern that starts with a literal dot, which the regex engine finds
# by a fast scan, where TOKEN_TEXT's leading character class is tried at every position
# (about 7 times slower over a 2 KB text with dots and no token: benchmarks.write_boundary).
# Every text TOKEN_TEXT matches has it, so a text without it holds no token.
TOKEN_TAIL = rf"\.{POSITION_PART}\.{MAC_PART}"
_TOKEN_TAIL = re.compile(TOKEN_TAIL)


def scrub_text(text: str) -> str:
    """``text`` with every token in it redacted."""
    if "." not in text:  # every token has two dots: most texts end here
        return text
    if _TOKEN_TAIL.search(text) is None:  # dots, but no token's tail: nothing to redact
        return text
    return TOKEN_TEXT.sub(REDACTED_TOKEN, text)


# The same shape over bytes: a token is ASCII, so its UTF-8 bytes match this wherever they
# sit (JSON, text, an uncompressed binary value).
TOKEN_BYTES = re.compile(TOKEN_TEXT.pattern.encode())
_TAIL_BYTES = re.compile(TOKEN_TAIL.encode())
REDACTED_TOKEN_BYTES = REDACTED_TOKEN.encode()


def bytes_hold_token(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` holds a token's bytes, searched without decoding."""
    raw = bytes(data) if isinstance(data, memoryview) else data
    if b"." not in raw:  # every token has two dots
        return False
    return _TAIL_BYTES.search(raw) is not None and TOKEN_BYTES.search(raw) is not None


def scrub_bytes(data: bytes) -> bytes:
    """``data`` with every token in it redacted (the same object when it holds none)."""
    if not bytes_hold_token(data):
        return data
    return TOKEN_BYTES.sub(REDACTED_TOKEN_BYTES, data)
