"""Wallets' secrets: Bitcoin private keys (WIF) and extended private keys (``xprv``), known
by their base58check checksum; an Ethereum private key (64 hex digits, ``0x`` or not)
where words such as "private key" or "wallet" are near it, since a hash has the same shape;
and BIP39 seed phrases: 12 to 24 words of BIP39's list in a row, with a valid checksum or
after "seed", "mnemonic", "recovery" or "wallet". The rules ``redaction`` runs, as
``secret_shapes`` and ``secret_words`` hold theirs.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

from .bip39_words import WORDS
from .secret_matching import PROVIDER, Rule, Span, mixed

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_CLASS = "1-9A-HJ-NP-Za-km-z"
_B58_INDEX = {ch: i for i, ch in enumerate(_B58)}
WALLET_KEY, SEED_PHRASE = "wallet_key", "seed_phrase"


def _base58check(value: str) -> bytes | None:
    """The payload of a base58check string whose checksum holds, else None."""
    number = 0
    for ch in value:
        number = number * 58 + _B58_INDEX[ch]
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    raw = b"\0" * (len(value) - len(value.lstrip("1"))) + raw
    payload, check = raw[:-4], raw[-4:]
    if len(raw) < 5 or hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != check:
        return None
    return payload


def _wif(match: re.Match[str], text: str) -> Span | None:
    """A private key in wallet import format: version 0x80 (0xef on testnet), 32 bytes,
    0x01 when its public key is compressed."""
    payload = _base58check(match.group())
    if payload is None or payload[0] not in (0x80, 0xEF) or len(payload) not in (33, 34):
        return None
    if len(payload) == 34 and payload[-1] != 1:
        return None
    return match.start(), match.end(), WALLET_KEY


def _extended(match: re.Match[str], text: str) -> Span | None:
    """An extended private key (BIP32): 78 bytes whose key starts with 0x00."""
    payload = _base58check(match.group())
    if payload is None or len(payload) != 78 or payload[45] != 0:
        return None
    return match.start(), match.end(), WALLET_KEY


# "private" alone is not enough: "make the repo private (commit <sha256>)"
_ETH_WORDS = (
    "private key", "private_key", "privatekey", "privkey", "priv key", "wallet", "metamask", "ethers", "web3",
    "signer", "keystore",
)  # fmt: skip


def _ethereum(match: re.Match[str], text: str) -> Span | None:
    """64 hex digits are a hash (a commit, a block, a transaction) unless words of a
    wallet's key ("private key", "wallet", "MetaMask", ...) are within 100 characters
    before them."""
    start, end = match.span()
    if not mixed(match.group()):
        return None
    if text.startswith("0x", start - 2) or text.startswith("0X", start - 2):
        start -= 2
    near = text[max(0, start - 100) : start].lower()
    if not any(word in near for word in _ETH_WORDS):
        return None
    return start, end, WALLET_KEY


# -- seed phrases --------------------------------------------------------------------------------

_LENGTHS = (24, 21, 18, 15, 12)  # the words of a phrase: 128 to 256 bits and their checksum
_SEED_WORDS = ("seed", "mnemonic", "recovery", "wallet", "secret phrase", "backup phrase", "passphrase")
_WORD = re.compile(r"[a-z]+")


@cache
def _index() -> dict[str, int]:
    return {word: i for i, word in enumerate(WORDS)}


def _checksum_holds(indexes: list[int]) -> bool:
    bits = "".join(f"{i:011b}" for i in indexes)
    size = len(bits) * 32 // 33
    entropy = int(bits[:size], 2).to_bytes(size // 8, "big")
    return f"{hashlib.sha256(entropy).digest()[0]:08b}"[: len(bits) - size] == bits[size:]


def _seed_phrase(match: re.Match[str], text: str) -> Span | None:
    """The first run of 12 to 26 words of BIP39's list in this run of lower-case words
    that holds a phrase with a valid checksum (the phrase alone is replaced), or, after a
    word such as "seed" or "recovery", that is 12 to 24 words long (replaced whole)."""
    index = _index()
    words = list(_WORD.finditer(text, match.start(), match.end()))
    run: list[re.Match[str]] = []
    for word in [*words, None]:
        if word is not None and word.group() in index:
            run.append(word)
            continue
        if 12 <= len(run) <= 26:
            found = _phrase_in(run, index, text)
            if found is not None:
                return found
        run = []
    return None


def _phrase_in(run: list[re.Match[str]], index: dict[str, int], text: str) -> Span | None:
    numbers = [index[word.group()] for word in run]
    for length in _LENGTHS:
        for at in range(len(run) - length + 1):
            if _checksum_holds(numbers[at : at + length]):
                return run[at].start(), run[at + length - 1].end(), SEED_PHRASE
    near = text[max(0, run[0].start() - 80) : run[0].start()].lower()
    if len(run) <= 24 and any(word in near for word in _SEED_WORDS):
        return run[0].start(), run[-1].end(), SEED_PHRASE
    return None


# Lower-case ASCII words split by blanks or line breaks (a list may number them: "1. word"),
# 12 to 401 of them (a longer run is read as several). Each word is one character class that
# its separator cannot match.
_RUN = (
    r"(?<![A-Za-z0-9])[a-z]+(?:(?:[ \t]*\r?\n[ \t]*|[ \t]+)(?:[0-9]{1,2}[.):]?[ \t]+)?[a-z]+){11,400}"
    r"(?![A-Za-z0-9])"
)


def rules() -> list[Rule]:
    b58 = _B58_CLASS
    hex_ = "0-9a-fA-F"
    return [
        # no literal: scanned, starting at a character class (sre skips to its characters)
        Rule(
            PROVIDER, re.compile(rf"[59cKL](?<![{b58}][59cKL])[{b58}]{{50,51}}(?![{b58}])"), _wif,
            needles=("5", "9", "c", "k", "l"), folded=True,
        ),
        Rule(
            PROVIDER, re.compile(rf"(?<![{b58}])[xtyz]prv[{b58}]{{107,108}}(?![{b58}])"), _extended,
            anchors=("xprv", "tprv", "yprv", "zprv"),
        ),
        Rule(
            PROVIDER,
            re.compile(
                rf"[{hex_}](?:(?<![0-9A-Za-z][{hex_}])|(?<=(?<![0-9A-Za-z])0[xX][{hex_}]))[{hex_}]{{63}}(?![0-9A-Za-z])"
            ),
            _ethereum, needles=_ETH_WORDS, folded=True,
        ),
        Rule(PROVIDER, re.compile(_RUN), _seed_phrase, needles=(" ", "\n")),
    ]  # fmt: skip
