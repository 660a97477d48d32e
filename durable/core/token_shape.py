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
# The shape of a minted token anywhere in a text (``durable.core.tokens`` parses exactly one).
TOKEN_TEXT = re.compile(r"[0-9A-Z]{26}\.[0-9]{4}(?:\.[0-9]{4})*\.[A-Za-z0-9_-]{43}")


# A token's tail: a pattern that starts with a literal dot, which the regex engine finds
# by a fast scan, where TOKEN_TEXT's leading character class is tried at every position
# (about 7 times slower over a 2 KB text with dots and no token: benchmarks.write_boundary).
# Every text TOKEN_TEXT matches has it, so a text without it holds no token.
_TOKEN_TAIL = re.compile(r"\.[0-9]{4}(?:\.[0-9]{4})*\.[A-Za-z0-9_-]{43}")


def scrub_text(text: str) -> str:
    """``text`` with every token in it redacted."""
    if "." not in text:  # every token has two dots: most texts end here
        return text
    if _TOKEN_TAIL.search(text) is None:  # dots, but no token's tail: nothing to redact
        return text
    return TOKEN_TEXT.sub(REDACTED_TOKEN, text)
