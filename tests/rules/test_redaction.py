"""Secrets kept out (``--redact secrets``): each is replaced by ``[redacted:<kind>]``
before a write is checked for duplicates, embedded or stored.

Every kind is redacted in a memory's content, in conversation messages and in a bulk
text, through the core and over MCP and REST; the secret is then nowhere: not in the
answer, the stored memory, search results or the database's files (their bytes, grepped;
the same grep finds the secret when redaction is off, so it can fail). Texts without
secrets are left exactly as they are, and redaction is off by default.

The secrets are fakes of the right shape, built by concatenation so that no scanner
mistakes this file for a leak.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import timeit
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import lance
import pytest
import wontopos
from redaction_corpora import load, measure, placed
from support import KEY, REPO, all_memories, mcp_session, served

from wontopos_mcp.config import ConfigError, Settings
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.library import Memory
from wontopos_mcp.rules import redaction
from wontopos_mcp.rules.bip39_words import WORDS
from wontopos_mcp.rules.idempotency import Idempotency
from wontopos_mcp.rules.redaction import Redacted, Redactor, rules


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


JWT = _b64({"alg": "HS256", "typ": "JWT"}) + "." + _b64({"sub": "42", "name": "Bob"}) + ".Sfl" + "KxwRJSMeKKF2QT4fw" * 2
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7Q2pR9" + "a1B2c3D4e5F6g7H8" * 3 + "\n"
    + "Zm9vYmFyYmF6cXV4" * 4 + "\n-----END RSA PRIVATE KEY-----"
)  # fmt: skip

# (kind, a text around {s}, the secret)
SECRETS = [
    ("aws_key", "The deploy key is {s}, rotate it monthly.", "AKIA" + "IOSFODNN7" + "EXAMPLE"),
    ("github_token", "CI pushes with {s} for the release job.", "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"),
    ("github_token", "The fine-grained token {s} reads issues.", "github_pat_" + "11ABCDE0123456789abcde_" + "x1" * 20),
    ("gitlab_token", "GitLab runner token {s} for the mirror.", "glpat-" + "a1b2C3d4E5f6G7h8I9j0"),
    (
        "slack_token",
        "The bot posts with {s} in #ops.",
        "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        "slack_token",
        "Alerts go to {s} now.",
        "https://hooks.slack.com/services/" + "T0ABC1234/B0DEF5678/" + "q1w2e3r4t5",
    ),
    ("stripe_key", "Billing runs on {s}.", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + "Q9" * 30),
    ("openai_key", "The summariser calls the API with {s} daily.", "sk-proj-" + "Ab1" * 15),
    ("openai_key", "An old project key {s} still works.", "sk-" + "a1" * 10 + "T3BlbkFJ" + "b2" * 10),
    ("anthropic_key", "Claude is reached with {s} from the bot.", "sk-ant-api03-" + "Zx9" * 20),
    ("google_api_key", "The maps widget uses {s} for tiles.", "AIza" + "SyA1234567890abcdefghijklmnopqrstuv"),
    ("huggingface_token", "Models download with {s} on the runner.", "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    ("sendgrid_key", "Newsletters are sent with {s} weekly.", "SG." + "a1" * 11 + "." + "b2" * 21 + "c"),
    ("npm_token", "The .npmrc line is //registry.npmjs.org/:_authToken={s}", "npm_" + "A1b2" * 9),
    ("pypi_token", "Releases upload with {s} from CI.", "pypi-AgEIcHlwaS5vcmc" + "A1b2C3" * 12),
    ("twilio_key", "Texts go out through {s} at night.", "SK" + "0123456789abcdef" * 2),
    ("telegram_token", "The Telegram bot token is {s} for alerts.", "123456789:" + "AAH" + "x1Y2z3" * 5 + "ab"),
    ("discord_token", "The Discord bot logs in with {s} each boot.", "M" + "T1a" * 8 + ".abcdef." + "g1h2i" * 5 + "jk"),
    ("mailchimp_key", "The mailing list syncs with {s} hourly.", "0123456789abcdef" * 2 + "-us12"),
    ("square_secret", "Payments use the Square secret {s} now.", "sq0csp-" + "A1b2C3d4E5" * 4 + "f6G"),
    ("azure_storage_key", "Blob storage: AccountName=acct;AccountKey={s};EndpointSuffix=core", "A1b2" * 21 + "Cd=="),
    ("artifactory_token", "Artifacts pull with {s} from the mirror.", "AKC" + "a1b2c3d4e5f6g7h8"),
    ("cloudant_key", "cloudant_password='{s}' in the old config", "0123456789abcdef" * 4),
    ("ibm_cloud_key", "ibm_cloud_api_key = '{s}' for the cluster", "a1B2c3D4e5" * 4 + "f6G7"),
    ("ibm_cos_key", "cos_hmac_secret_access_key = '{s}' for backups", "0123456789abcdef" * 3),
    ("softlayer_key", "softlayer_api_key = {s} for the legacy boxes", "a1b2c3d4" * 8),
    ("jwt", "The session cookie held {s} until it expired.", JWT),
    ("url_password", "The app reads postgres://deploy:{s}@db.internal:5432/app at start.", "Pa55-word-77"),
    ("private_key", "Here is the server key:\n{s}\nkeep it safe.", PEM),
    ("password", "The wifi is set up with password={s} in the office.", "hunter2-x9"),
    ("api_key", "The weather service config says api_key: {s} for now.", "q8w7e6r5t4y3"),
    ("token", 'The webhook payload was {{"access_token": "{s}"}} this morning.', "tok-123-abc"),
    ("secret", "The OAuth app has client_secret = '{s}' set.", "s3cr3t value!"),
    ("authorization", "Call it with curl -H 'Authorization: Bearer {s}' on the API.", "abc123def456ghi789jkl0"),
    ("bearer_token", "The dashboard sends Bearer {s} with each call.", "Zq12Wx34Ec56Rv78Tb90Yn"),
]
CLEAN = [
    "Bob said the password policy changes next week; the token: is spent.",
    "The secret to good bread is time. Secret: we never ship on Fridays.",
    "def check(password): return password == expected",
    "max_tokens = 512; password_hash = bcrypt(pw); api_key = os.environ['API_KEY']",
    "password = getpass(); secret = load_secret(name); token = None",
    'api_key = "<your-api-key>" and password=${DB_PASSWORD} and secret: "***"',
    "Fixed in commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 (merge 9fceb02), sha256 "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
    "See https://docs.python.org/3/library/re.html, git@github.com:org/repo.git and ssh://git@host/x.",
    "Open https://example.com:8443/path?user=bob&page=2#top or http://localhost:8080/a@b.",
    "The bypass=1 flag points the compass: north. Bearer of bad news, the bearer token was revoked.",
    "Meeting moved to 2026-03-14 10:30 UTC; call +1 555 0100; budget 12,500 EUR; "
    "UUID 123e4567-e89b-12d3-a456-426614174000.",
    "Ana prefers tea, Ben keeps bees on the roof, and the office closes at 6pm.",
]


def _text(template: str, secret: str) -> str:
    return template.format(s=secret)


def _said(kind: str) -> str:
    """The first sample text of ``kind``."""
    return next(_text(t, s) for k, t, s in SECRETS if k == kind)


def _secret(kind: str) -> str:
    return next(s for k, _, s in SECRETS if k == kind)


def _pieces(secret: str) -> list[str]:
    """What must not survive of a secret: it, and each line of a multi-line one."""
    return [secret] + [line for line in secret.split("\n") if len(line) > 12 and "-----" not in line]


def _no_secret_in(value: Any, secrets: list[str]) -> None:
    dumped = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    for secret in secrets:
        for piece in _pieces(secret):
            assert piece not in dumped, (piece, dumped[:400])


def _files_hold(folder: Path, secret: str) -> bool:
    """Whether any file of a database directory holds the secret's bytes."""
    needle = secret.encode()
    return any(needle in path.read_bytes() for path in folder.rglob("*") if path.is_file())


def _redacted(answer: dict[str, Any]) -> dict[str, int]:
    return {entry["kind"]: entry["count"] for entry in answer.get("redacted", [])}


ALL = [secret for _, _, secret in SECRETS]
KINDS: dict[str, int] = {}
for _kind, _, _ in SECRETS:
    KINDS[_kind] = KINDS.get(_kind, 0) + 1


# -- the redactor itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "template", "secret"), SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)]
)
def test_each_kind_becomes_its_placeholder_and_the_words_around_it_stay(kind: str, template: str, secret: str) -> None:
    found = Redactor("secrets").redact(_text(template, secret))
    assert (found.text, found.counts) == (template.format(s=f"[redacted:{kind}]"), {kind: 1})
    _no_secret_in(found.text, [secret])


@pytest.mark.parametrize("text", CLEAN)
def test_a_text_without_secrets_is_left_exactly_as_it_is(text: str) -> None:
    found = Redactor("secrets").redact(text)
    assert (found.text, found.counts) == (text, {})


def test_redacting_a_redacted_text_again_finds_nothing() -> None:
    redactor = Redactor("secrets")
    for kind, template, secret in SECRETS:
        once = redactor.redact(_text(template, secret))
        assert redactor.redact(once.text) == Redacted(once.text, {}), kind


def test_several_secrets_in_one_text_are_counted_by_kind() -> None:
    text = "AKIA" + "IOSFODNN7EXAMPLE and password=abc-123-x then AKIA" + "IOSFODNN7EXAMPLF, api_key: zz-99-yy"
    found = Redactor("secrets").redact(text)
    assert found.counts == {"aws_key": 2, "password": 1, "api_key": 1}
    assert found.text == (
        "[redacted:aws_key] and password=[redacted:password] then [redacted:aws_key], api_key: [redacted:api_key]"
    )


def test_placeholders_are_not_secrets_but_a_password_that_starts_like_one_is() -> None:
    redactor = Redactor("secrets")
    for text in ("password=$DB_PASSWORD", "api_key: ${API_KEY}", 'token = "{{ vault.token }}"', "secret=<your-secret>"):
        assert redactor.redact(text).counts == {}, text
    for text, kind in (
        ('password="$ecret-123"', "password"),
        ("api_key=%zz9-key", "api_key"),
        ("pw = @home-99", "password"),
    ):
        found = redactor.redact(text)
        assert found.counts == {kind: 1}, text
        assert "[redacted:" in found.text, text


def test_a_provider_token_in_an_assignment_is_named_for_its_provider() -> None:
    found = Redactor("secrets").redact('OPENAI_API_KEY="sk-proj-' + "Ab1" * 15 + '"')
    assert found == Redacted('OPENAI_API_KEY="[redacted:openai_key]"', {"openai_key": 1})


def test_private_keys_cut_short_split_by_blank_lines_or_from_putty_are_redacted_whole() -> None:
    redactor = Redactor("secrets")
    body = "Zm9vYmFyYmF6cXV4" * 4
    cut_short = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n{body}"
    headers = "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n"
    encrypted = f"-----BEGIN RSA PRIVATE KEY-----\n{headers}\n{body}\n-----END RSA PRIVATE KEY-----"
    orphan_end = f"{body}\n{body}\n-----END EC PRIVATE KEY-----"
    putty = f"PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\n{body}\nPrivate-MAC: 0a1b2c3d4e"
    for text in (cut_short, encrypted, orphan_end, putty):
        found = redactor.redact(f"before\n{text}\nafter")
        assert found == Redacted("before\n[redacted:private_key]\nafter", {"private_key": 1}), text


def test_a_long_stripe_key_and_a_jwt_are_redacted_to_their_last_character() -> None:
    """A Stripe key is now ~100 characters, a JWT ends with its signature: the whole token goes."""
    stripe = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + "Tail" * 20
    found = Redactor("secrets").redact(f"{stripe} and {JWT}.")
    assert found.text == "[redacted:stripe_key] and [redacted:jwt]."
    assert "Tail" not in found.text
    assert "KxwRJ" not in found.text


def test_off_leaves_texts_alone_and_compiles_no_pattern() -> None:
    off = Redactor()
    text = _said("aws_key")
    assert off.mode == "none"
    assert not off.enabled
    assert off.redact(text) == Redacted(text, {})
    assert off.scrub({"content": text}) == {"content": text}
    code = (
        "import wontopos_mcp.cli.main, wontopos_mcp.library, wontopos_mcp.engine.service\n"
        "from wontopos_mcp.rules import redaction, secret_words\n"
        "redaction.Redactor().redact('password=hunter2-x9')\n"
        "print(redaction.rules.cache_info().currsize, 'compiled' in vars(secret_words._PROSE))\n"
        "redaction.Redactor('secrets').redact('password=hunter2-x9')\n"
        "print(redaction.rules.cache_info().currsize, 'compiled' in vars(secret_words._PROSE))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.splitlines() == ["0 False", "1 True"]


def test_scrub_redacts_every_string_of_a_request_body() -> None:
    body = {"content": "password=hunter2-x9", "metadata": {"speaker": "Bob"}, "items": ["api_key: zz-99-yy", 3]}
    assert Redactor("secrets").scrub(body) == {
        "content": "password=[redacted:password]",
        "metadata": {"speaker": "Bob"},
        "items": ["api_key: [redacted:api_key]", 3],
    }


# -- the audit's misses, the corpus, the kinds ----------------------------------------------------

_B64 = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCY9x2Qz8LmT4"  # an AWS secret access key's shape: 40 characters
# (kind, a text around {s}, the secret): each was missed before (issue 22's audit)
AUDIT = [
    ("url_password", "postgres://app:{s}@db.example.com/app", "p!ss$w&rd'(x)*+,;=9"),
    ("url_password", "redis://:{s}@cache.internal:6379/0", "r3d1sOnly!Pw"),
    ("secret", "SECRET_KEY={s}", "django-insecure-" + "k9m2x7q4w8e1r5t3"),
    ("aws_secret_key", "my AWS secret is {s} (the key id is in the vault)", _B64),
    ("password", "docker login -u bob -p {s} registry.example.com", "D0ckerHub#Pass"),
    ("password", "curl -u admin:{s} https://jenkins.internal/api/json", "J3nk1ns!Adm1n"),
    ("password", "mysql -u root -p{s} shop < dump.sql", "MySqlR00t!"),
    ("password", "mysql -h db.internal -u app -p {s}", "appPass-2024"),
    ("password", "sshpass -p {s} ssh admin@10.0.0.5", "sshPa55-Adm!n"),
    ("password", "the password is {s}", "hunter2"),
    ("password", "my password is {s}. please don't tell anyone", "Sw0rdfish!"),
    ("password", "password: {s}", "kX7#p2Lm"),
    ("password", "Das Passwort für das WLAN lautet {s}, bitte nicht weitergeben.", "Sommer2024"),
    ("password", "Le mot de passe du wifi est {s}.", "azerty123"),
    ("password", "La contraseña es {s}, cámbiala pronto.", "Sol2024"),
    ("npm_token", "//registry.npmjs.org/:_authToken={s}", "npm_" + "a1B2c3D4e5F6g7H8i9J0" * 1 + "k1L2m3N4o5P6q7R8"),
    ("vault_token", "vault login {s}", "hvs." + "CAESIJ8x2Qm4Zk7Lp9Rt1Vw3Yb5" * 2),
    ("vault_token", "VAULT_TOKEN={s}", "hvb." + "AAAAAQJ8x2Qm4Zk7Lp9Rt1Vw3Yb5Nc"),
    ("vault_token", "the old root token {s} still works", "s." + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"),
    ("digitalocean_token", "doctl auth init -t {s}", "dop_v1_" + "0123456789abcdef" * 4),
    ("shopify_token", "SHOPIFY_ACCESS_TOKEN={s}", "shpat_" + "0123456789abcdef" * 2),
    ("shopify_token", "shared secret {s}", "shpss_" + "fedcba9876543210" * 2),
    ("shopify_token", "custom app {s}", "shpca_" + "0a1b2c3d4e5f6a7b" * 2),
    ("shopify_token", "private app {s}", "shppa_" + "9f8e7d6c5b4a3f2e" * 2),
    ("databricks_token", "token = {s}", "dapi" + "0123456789abcdef" * 2),
    ("slack_token", "socket mode uses {s}", "xapp-1-" + "A0123ABCDEF-1234567890123-" + "ab12" * 16),
]


@pytest.mark.parametrize(("kind", "template", "secret"), AUDIT, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(AUDIT)])
def test_what_the_audit_found_missing_is_redacted(kind: str, template: str, secret: str) -> None:
    found = Redactor("secrets").redact(_text(template, secret))
    assert (found.text, found.counts) == (template.format(s=f"[redacted:{kind}]"), {kind: 1})


def _placeholders(text: str) -> Counter[str]:
    return Counter(re.findall(r"\[redacted:(\w+)\]", text))


def test_the_corpus_loses_its_secrets_whole_and_keeps_its_look_alikes() -> None:
    """>= 95% of the secrets replaced, none in part (no 8 characters of a replaced secret
    left anywhere), at most one look-alike changed; each text's answer counts exactly
    the placeholders it holds, of documented kinds; a redacted text redacts to itself."""
    corpus, redactor = load("redaction_corpus.json"), Redactor("secrets")
    secrets = replaced = 0
    partial, wrong_kinds = [], []
    for entry in corpus["secrets"]:
        text, expected = placed(entry)
        found = redactor.redact(text)
        assert _placeholders(found.text) == Counter(found.counts), entry
        assert set(found.counts) <= set(redaction.KINDS), entry
        assert redactor.redact(found.text).counts == {}, entry
        for secret in expected:
            secrets += 1
            if secret in found.text:
                continue  # a miss
            replaced += 1
            if any(secret[i : i + 8] in found.text for i in range(len(secret) - 7)):
                partial.append(found.text)
        if not any(secret in found.text for secret in expected) and Counter(found.counts) != Counter(entry["kinds"]):
            wrong_kinds.append((entry["where"], dict(found.counts), entry["kinds"]))
    changed = [text for text in corpus["look_alikes"] if redactor.redact(text).text != text]
    print(
        f"\ncorpus: {replaced}/{secrets} secrets replaced, {len(partial)} partial, "
        f"{len(changed)}/{len(corpus['look_alikes'])} look-alikes changed, {len(wrong_kinds)} kinds wrong"
    )
    assert secrets >= 100
    assert len(corpus["look_alikes"]) >= 65
    assert replaced >= 0.95 * secrets
    assert partial == []
    assert len(changed) <= 1, changed
    assert wrong_kinds == []


def test_the_security_page_documents_every_kind() -> None:
    page = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = page[page.index("## Keeping secrets out of memory") :]
    assert [kind for kind in redaction.KINDS if f"`{kind}`" not in section] == []


def test_the_second_corpus_loses_every_secret_whole_and_keeps_every_look_alike() -> None:
    """Issue 30's corpus, written before its rules: kinds the first corpus has not (wallet
    keys, seed phrases, passwords in prose and pairs, other providers' tokens) and their
    look-alikes (a link to a password page, hashes, public addresses, word lists)."""
    corpus, redactor = load("redaction_corpus_2.json"), Redactor("secrets")
    found = measure(corpus, redactor)
    assert len(found["caught"]) == sum(len(entry["secrets"]) for entry in corpus["secrets"]) >= 60
    assert len(corpus["look_alikes"]) >= 60
    assert {what: found[what] for what in ("missed", "partial", "wrong_kind", "changed")} == {
        "missed": [],
        "partial": [],
        "wrong_kind": [],
        "changed": [],
    }
    for entry in corpus["secrets"]:
        assert set(redactor.redact(placed(entry)[0]).counts) <= set(redaction.KINDS), entry


def test_the_issues_misses_are_redacted_and_a_link_to_a_password_page_is_not() -> None:
    redactor = Redactor("secrets")
    for text, kind in (
        ("postgresql://app:" + "S3c#et!" + "@db.internal:5432/app", "url_password"),
        ("Authorization: SSWS 00" + "a1B2c3D4e5" * 4, "authorization"),
        ("the login is root with Winter" + "2024!Snow", "password"),
        ("admin / P@ssw0" + "rd123", "password"),
        ("the key is key-" + "0123456789abcdef" * 2, "mailgun_key"),
    ):
        assert redactor.redact(text).counts == {kind: 1}, text
    for text in ("reset your password at https://example.com/reset", "http://localhost:8080?to=a@b.example"):
        assert redactor.redact(text) == Redacted(text, {}), text


def _base58check(payload: bytes) -> str:
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    alphabet, number, out = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", int.from_bytes(data), ""
    while number:
        number, digit = divmod(number, 58)
        out = alphabet[digit] + out
    return out


def test_a_wallet_key_is_known_by_its_checksum_and_a_seed_phrase_by_its_checksum_or_its_words() -> None:
    redactor = Redactor("secrets")
    wif = _base58check(b"\x80" + bytes(range(1, 33)) + b"\x01")
    broken = wif[:-1] + ("2" if wif[-1] != "2" else "3")
    assert redactor.redact(f"it is {wif} here").counts == {"wallet_key": 1}
    assert redactor.redact(f"it is {broken} here").counts == {}
    valid = "abandon " * 11 + "about"  # BIP39's first test vector: its checksum holds
    invalid = "abandon " * 11 + "abandon"
    assert redactor.redact(f"note: {valid}").text == "note: [redacted:seed_phrase]"
    assert redactor.redact(f"note: {invalid}").counts == {}
    assert redactor.redact(f"my seed words: {invalid}").text == "my seed words: [redacted:seed_phrase]"
    block_hash = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"
    assert redactor.redact(f"block {block_hash}").counts == {}
    assert redactor.redact(f"made the repo private; commit {block_hash}").counts == {}
    assert redactor.redact(f"wallet private key 0x{block_hash}").counts == {"wallet_key": 1}


@pytest.mark.slow
def test_the_answer_lists_only_what_was_replaced(redacting: MemoryService) -> None:
    """The audit saw an AWS secret in prose reported as redacted and stored as it was:
    the answer's kinds and counts are the placeholders in the stored text."""
    said = f"my AWS secret is {_B64}, and commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 is on AWS"
    answer = redacting.memory_add(said)
    content = redacting.memory_get(answer["id"])["memory"]["content"]
    assert answer["redacted"] == [{"kind": "aws_secret_key", "count": 1}]
    assert _placeholders(content) == {"aws_secret_key": 1}
    assert _B64 not in content
    assert "3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39" in content


# -- linear time -------------------------------------------------------------------------------------

PROSE = (
    "Ana said the release moved to Tuesday because the build server was down again. "
    "Ben will check the password policy and the token expiry with security next week; "
    "the staging database keeps its key in the vault, see https://wiki.example.com/ops. "
)
ADVERSARIAL = [
    "sk-", "a", "=", "://", "password is ", "password=", "pw=f(", "-", "://:a@", "curl -u a:b ",
    "docker login ", "--password ", "-----BEGIN RSA PRIVATE KEY-----\n",
    "QUJDREVGR0hJSktMTU5PUA==\n-----END PRIVATE KEY-----\n", "Authorization: ", "eyJ", "passwordtokensecret",
    "c ", " ".join(WORDS[:20]) + " zz ", " ".join(WORDS[:50]) + " ", "admin / ", "login is root with ",
]  # fmt: skip


def _cpu_seconds(redactor: Redactor, text: str, runs: int = 2) -> float:
    """The best of ``runs`` in this process's CPU time (other processes' load does not count)."""
    return min(timeit.repeat(lambda: redactor.redact(text), timer=time.process_time, number=1, repeat=runs))


def _of_length(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.slow
def test_redacting_200k_characters_of_any_shape_costs_at_most_20_times_prose() -> None:
    """Redaction takes time linear in the text's length, whatever the text. A pattern
    that backtracks quadratically takes minutes on these (128,000 characters of ``sk-``
    took 46 s before); linear ones take a few times what prose takes.
    bench/redaction.py prints the full table."""
    redactor, n = Redactor("secrets"), 200_000
    shapes = {repr(unit): _of_length(unit, n) for unit in ADVERSARIAL}
    shapes["long base64"] = base64.b64encode(os.urandom(n))[:n].decode()
    shapes["long hex"] = os.urandom(n // 2).hex()
    shapes["a wallet's hex"] = "wallet " + os.urandom(n // 2).hex()
    base58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    shapes["long base58"] = "".join(base58[b % 58] for b in os.urandom(n))
    prose = _cpu_seconds(redactor, _of_length(PROSE, n), runs=3)
    slow = {}
    for name, text in shapes.items():
        spent = _cpu_seconds(redactor, text, runs=1)
        if spent >= max(20 * prose, 0.05) or spent >= 2:
            slow[name] = (round(spent, 3), round(prose, 3))
    assert slow == {}


@pytest.mark.slow
def test_no_rule_is_slow_on_its_own_literal_repeated() -> None:
    """Each rule's literals, repeated alone or with a space, 10,000 characters: the texts
    that make a rule try itself at every position (a quadratic rule takes a quarter of a
    second or more here, 46 s at 128,000 before; a linear one milliseconds). 10,000 and
    not more: the literals are ~300, each text run once through every rule."""
    redactor, n = Redactor("secrets"), 10_000
    prose = _cpu_seconds(redactor, _of_length(PROSE, n), runs=3)
    units = {literal + after for rule in rules() for literal in rule.anchors or rule.needles for after in ("", " ")}
    slow = {}
    for unit in sorted(units):
        spent = _cpu_seconds(redactor, _of_length(unit, n), runs=1)
        if spent >= max(20 * prose, 0.05) or spent >= 1:
            slow[unit] = round(spent, 3)
    assert slow == {}, f"prose: {prose:.3f} s"


# -- the setting --------------------------------------------------------------------------------


def test_redaction_is_off_by_default_and_set_by_flag_environment_or_library() -> None:
    assert Settings.load({}, environ={}).redact == "none"
    assert Settings.load({}, environ={"WONTOPOS_REDACT": " Secrets "}).redact == "secrets"
    assert Settings.load({"redact": "none"}, environ={"WONTOPOS_REDACT": "secrets"}).redact == "none"
    assert Settings.load({"redact": None}, environ={"WONTOPOS_REDACT": "secrets"}).redact == "secrets"


@pytest.mark.parametrize("value", ["all", "yes", "secret", "none,secrets", "1"])
def test_a_bad_redact_setting_is_refused(value: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="redact must be one of none, secrets"):
        Settings.load({"redact": value}, environ={})
    with pytest.raises(ConfigError, match="redact must be one of none, secrets"):
        Settings.load({}, environ={"WONTOPOS_REDACT": value})
    with pytest.raises(ConfigError, match="redact must be one of none, secrets"):
        Memory(db=str(tmp_path / "db"), redact=value)
    with pytest.raises(ValueError, match="redact must be one of none, secrets"):
        Redactor(value)


@pytest.mark.slow
def test_a_bad_redact_flag_stops_every_command_with_one_line(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WONTOPOS_")}, "PYTHONPATH": str(REPO)}
    for argv in (["--redact", "all"], ["add", "x", "--redact", "all"], ["--redact", "all", "stores", "list"]):
        done = subprocess.run(
            [sys.executable, "-m", "wontopos_mcp", "--db", str(tmp_path / "db"), *argv],
            env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines() == ["wontopos-mcp: redact must be one of none, secrets, not 'all'"]


def test_the_setting_reaches_the_service_through_bootstrap(tmp_path: Path, embedder: Any) -> None:
    from wontopos_mcp.model.embeddings import ModelLoader

    svc = MemoryService.open(
        Settings.load({"db": str(tmp_path / "db"), "redact": "secrets"}, environ={}), models=ModelLoader.of(embedder)
    )
    try:
        assert svc.redact == "secrets"
        assert svc.memory_add("password=hunter2-x9 for the vpn")["redacted"] == [{"kind": "password", "count": 1}]
    finally:
        svc.close()


# -- through the core: content, messages, bulk ----------------------------------------------------


@pytest.fixture
def redacting(make_service: Callable[..., MemoryService]) -> MemoryService:
    return make_service(redact="secrets")


def _nothing_kept(svc: MemoryService, db: Path, user_id: str | None = None) -> None:
    stored = all_memories(svc, user_id)
    assert stored
    _no_secret_in(stored, ALL)
    for query in ("key token password secret", "the deploy key and the bot token", "private key of the server"):
        _no_secret_in(svc.memory_search(query, limit=20, user_id=user_id), ALL)
    _no_secret_in(svc.memory_recall("which token does the bot use?", user_id=user_id), ALL)
    for secret in ALL:
        assert not _files_hold(db, secret), secret


@pytest.mark.slow
def test_every_kind_is_redacted_from_content_before_it_is_stored(redacting: MemoryService, tmp_path: Path) -> None:
    for kind, template, secret in SECRETS:
        answer = redacting.memory_add(_text(template, secret))
        assert answer["status"] == "stored", kind
        assert answer["redacted"] == [{"kind": kind, "count": 1}], kind
        _no_secret_in(answer, [secret])
        assert f"[redacted:{kind}]" in redacting.memory_get(answer["id"])["memory"]["content"]
    _nothing_kept(redacting, tmp_path / "db")


@pytest.mark.slow
def test_every_kind_is_redacted_from_messages_and_from_add_turn(redacting: MemoryService, tmp_path: Path) -> None:
    redacting.speaker_register("Bob")
    messages = [
        {"role": ("user", "assistant")[i % 2], **({"name": "Bob"} if i % 3 == 0 else {}), "content": _text(t, s)}
        for i, (_, t, s) in enumerate(SECRETS)
    ]
    answer = redacting.memory_add_messages(messages + [{"role": "user", "content": "Thanks, all set."}])
    assert _redacted(answer) == KINDS
    assert [r["status"] for r in answer["results"]] == ["stored"] * (len(SECRETS) + 1)
    assert "redacted" not in answer["results"][0]  # one summary for the call, not per message
    turn = Memory(service=redacting).add_turn("my password=pa55-turn-1 is new", "Noted: api_key: turn-key-22")
    assert _redacted(turn) == {"api_key": 1, "password": 1}
    _no_secret_in(turn, ["pa55-turn-1", "turn-key-22"])
    _nothing_kept(redacting, tmp_path / "db")
    assert not _files_hold(tmp_path / "db", "pa55-turn-1")


@pytest.mark.slow
def test_every_kind_is_redacted_from_a_bulk_text_and_a_batch(redacting: MemoryService, tmp_path: Path) -> None:
    blob = "\n\n".join(_text(t, s) for _, t, s in SECRETS)
    encrypted = (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n\n"
        + "Q2lwaGVyVGV4dEJvZHk" * 3
        + "\n-----END RSA PRIVATE KEY-----"
    )  # fmt: skip  a blank line inside: the blob is redacted before it is cut into paragraphs
    bulk = redacting.memory_add_bulk(f"{blob}\n\nAn encrypted key:\n{encrypted}")
    assert _redacted(bulk) == {**KINDS, "private_key": KINDS["private_key"] + 1}
    assert bulk["count"] == len(SECRETS) + 1
    assert not _files_hold(tmp_path / "db", "Q2lwaGVyVGV4dEJvZHk")
    redacting.store_create("batch")
    items = [{"content": _text(t, s), "category": "ops"} for _, t, s in SECRETS]
    batch = redacting.memory_add_batch(items, "batch")
    assert _redacted(batch) == KINDS
    assert batch["count"] == len(SECRETS)
    _nothing_kept(redacting, tmp_path / "db")
    _nothing_kept(redacting, tmp_path / "db", "batch")


def test_a_supersede_is_redacted_and_duplicates_see_only_the_redacted_text(redacting: MemoryService) -> None:
    first = redacting.memory_add("The vpn uses password=first-pass-11 since May")
    again = redacting.memory_add("The vpn uses password=other-pass-22 since May")
    assert again["status"] == "duplicate"
    assert again["duplicate_of"] == first["id"]
    assert again["redacted"] == [{"kind": "password", "count": 1}]
    newer = redacting.memory_supersede(first["id"], "The vpn uses password=third-pass-33 since June")
    assert newer["redacted"] == [{"kind": "password", "count": 1}]
    assert newer["superseded"] == first["id"]
    assert (
        redacting.memory_get(newer["id"])["memory"]["content"] == "The vpn uses password=[redacted:password] since June"
    )
    _no_secret_in(all_memories(redacting), ["first-pass-11", "other-pass-22", "third-pass-33"])


# -- every stored field; a name that is a secret ---------------------------------------------------

GHP = "ghp_" + "Zz9Yy8Xx7W" * 3 + "v6U5t4"  # a token where a label or a name goes


def test_category_and_conversation_id_are_redacted_and_counted_with_the_content(
    redacting: MemoryService, tmp_path: Path
) -> None:
    answer = redacting.memory_add(
        "The deploy runs nightly with password=nightly-77x", category=f"ops {GHP}", conversation_id=f"chat {GHP}"
    )
    assert _redacted(answer) == {"github_token": 2, "password": 1}
    stored = redacting.memory_get(answer["id"])["memory"]
    assert stored["category"] == "ops [redacted:github_token]"
    assert stored["conversation_id"] == "chat [redacted:github_token]"
    said = redacting.memory_add_messages([{"role": "user", "content": "Ana prefers tea."}], conversation_id=GHP)
    assert said["conversation_id"] == "[redacted:github_token]"
    assert _redacted(said) == {"github_token": 1}
    redacting.store_create("many")
    batch = redacting.memory_add_batch([{"content": "Ben keeps bees.", "category": GHP}], "many")
    assert _redacted(batch) == {"github_token": 1}
    bulk = redacting.memory_add_bulk("One plain paragraph.", category=f"{GHP}", user_id="many")
    assert _redacted(bulk) == {"github_token": 1}
    _no_secret_in([all_memories(redacting), all_memories(redacting, "many")], [GHP, "nightly-77x"])
    assert not _files_hold(tmp_path / "db", GHP)


def test_a_speaker_name_that_is_a_secret_is_refused_naming_the_field_and_nothing_is_stored(
    redacting: MemoryService, tmp_path: Path
) -> None:
    redacting.speaker_register("Bob")
    refusals = {
        "speaker": lambda: redacting.speaker_register(GHP),
        "new_name": lambda: redacting.speaker_rename("Bob", f"Bob {GHP}"),
        "into": lambda: redacting.speaker_merge("Bob", GHP, confirm_records=0),
        "messages[1].name": lambda: redacting.memory_add_messages(
            [{"role": "user", "content": "hi"}, {"role": "user", "name": GHP, "content": "hello"}]
        ),
        "items[0].speaker": lambda: redacting.memory_add_batch([{"content": "hello", "speaker": GHP}]),
    }
    for field, call in refusals.items():
        with pytest.raises(InvalidRequestError) as refused:
            call()
        assert refused.value.field == field, refused.value
        assert "github_token" in str(refused.value)
        _no_secret_in([str(refused.value), refused.value.details], [GHP])
    with pytest.raises(InvalidRequestError, match="shaped like a secret") as refused:
        redacting.memory_add("hello", speaker=GHP)
    assert refused.value.field == "speaker"
    assert [s["speaker"] for s in redacting.speakers_list()["speakers"]] == ["Bob"]
    assert all_memories(redacting) == []
    assert not _files_hold(tmp_path / "db", GHP)


def test_without_redaction_a_name_shaped_like_a_token_is_a_name(service: MemoryService) -> None:
    assert service.speaker_register(GHP)["status"] == "registered"


@pytest.mark.slow
def test_a_write_without_secrets_carries_no_redacted_key(redacting: MemoryService) -> None:
    for text in CLEAN:
        answer = redacting.memory_add(text)
        assert "redacted" not in answer
        assert redacting.memory_get(answer["id"])["memory"]["content"] == text
    assert "redacted" not in redacting.memory_add_bulk("One plain paragraph.\n\nAnother plain one.")


def test_off_by_default_a_secret_is_stored_verbatim_and_the_file_grep_finds_it(
    service: MemoryService, tmp_path: Path
) -> None:
    """The control of every grep above: without redaction the secret is in the files."""
    answer = service.memory_add(_said("github_token"))
    assert "redacted" not in answer
    assert service.memory_get(answer["id"])["memory"]["content"] == _said("github_token")
    assert _files_hold(tmp_path / "db", _secret("github_token"))


# -- MCP and REST -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_answers_list_what_was_redacted_and_validate_against_their_schemas(
    redacting: MemoryService, tmp_path: Path
) -> None:
    async with mcp_session(redacting) as mcp:
        schema = mcp.tools["memory_add"].output_schema["$defs"]
        assert "redacted" in schema["MemoryAddAnswer"]["properties"]
        assert "redacted" not in schema["MemoryAddAnswer"]["required"]
        added = await mcp.ok("memory_add", content=_said("url_password"))
        assert added["redacted"] == [{"kind": "url_password", "count": 1}]
        said = await mcp.ok("memory_add_messages", messages=[{"role": "user", "content": _said("private_key")}])
        assert said["redacted"] == [{"kind": "private_key", "count": 1}]
        newer = await mcp.ok("memory_supersede", memory_id=added["id"], content=_said("jwt"))
        assert newer["redacted"] == [{"kind": "jwt", "count": 1}]
        plain = await mcp.ok("memory_add", content="Ana prefers tea.")
        assert "redacted" not in plain
        found = await mcp.ok("memory_search", query="database password, server key, session cookie")
        _no_secret_in([added, said, newer, found], ALL)
    for kind in ("url_password", "private_key", "jwt"):
        assert not _files_hold(tmp_path / "db", _secret(kind)), kind


@pytest.fixture
def live(tmp_path: Path, embedder: Any) -> Iterator[Any]:
    with served(tmp_path, embedder, api_key=KEY, redact="secrets") as live:
        yield live


@pytest.mark.anyio
async def test_mcp_and_the_library_redact_every_field_and_refuse_a_secret_name(redacting: MemoryService) -> None:
    async with mcp_session(redacting) as mcp:
        added = await mcp.ok("memory_add", content="Ana prefers tea.", category=GHP, conversation_id=GHP)
        assert added["redacted"] == [{"kind": "github_token", "count": 2}]
        for tool, arguments, field in (
            ("speaker_register", {"speaker": GHP}, "speaker"),
            ("memory_add", {"content": "hello", "speaker": GHP}, "speaker"),
            ("memory_add_messages", {"messages": [{"role": "user", "name": GHP, "content": "hi"}]}, "messages[0].name"),
        ):
            error = await mcp.refused(tool, arguments, status=400, type="invalid_request_error", field=field)
            _no_secret_in(error, [GHP])
    library = Memory(service=redacting)
    with pytest.raises(InvalidRequestError, match=r"^metadata\.speaker is shaped like a secret") as refused:
        library.add("hello", metadata={"speaker": GHP})
    assert refused.value.field == "metadata.speaker"
    assert _redacted(library.add("Ben keeps bees.", metadata={"category": GHP})) == {"github_token": 1}
    _no_secret_in(all_memories(redacting), [GHP])


@pytest.mark.slow
def test_rest_through_the_sdk_redacts_store_turn_bulk_and_update(live: Any, tmp_path: Path) -> None:
    with wontopos.Client(api_key=KEY, base_url=live.url, deadline=60) as mem:
        mem.create_store("rest")
        added = mem.add(_said("aws_key"), user_id="rest")
        assert added["redacted"] == [{"kind": "aws_key", "count": 1}]
        turn = mem.add_turn(_said("password"), _said("api_key"), user_id="rest")
        assert _redacted(turn) == {"password": 1, "api_key": 1}
        bulk = mem.add_bulk(f"{_said('stripe_key')}\n\n{_said('anthropic_key')}", user_id="rest")
        assert _redacted(bulk) == {"stripe_key": 1, "anthropic_key": 1}
        newer = mem.update(added["id"], _said("gitlab_token"), user_id="rest")
        assert newer["redacted"] == [{"kind": "gitlab_token", "count": 1}]
        found = mem.search("deploy key, wifi password, billing, claude", user_id="rest")
        _no_secret_in([added, turn, bulk, newer, found], ALL)
        labelled = mem.add("Ana prefers tea.", user_id="rest", metadata={"category": GHP, "conversation_id": GHP})
        assert labelled["redacted"] == [{"kind": "github_token", "count": 2}]
        with pytest.raises(wontopos.BadRequestError) as refused:
            mem.add_speaker(GHP, user_id="rest")
        assert (refused.value.type, (refused.value.details or {}).get("field")) == ("invalid_request_error", "speaker")
        assert GHP not in str(refused.value)
        assert mem.list_speakers(user_id="rest")["speakers"] == []
    for kind in ("aws_key", "password", "api_key", "stripe_key", "anthropic_key", "gitlab_token"):
        assert not _files_hold(tmp_path / "db", _secret(kind)), kind
    assert not _files_hold(tmp_path / "db", GHP)


@pytest.mark.slow
def test_rest_idempotency_fingerprints_hash_the_redacted_body(live: Any, tmp_path: Path) -> None:
    """A retry whose secret differs would store the same text, so it replays; and the
    database keeps the hash of the redacted body, never one of the secret's (which a
    dictionary of weak passwords could match)."""
    path = "/api/v1/memory/store"
    body = {"content": "The alarm code is password=alarm-1234 at the back door"}
    with httpx.Client(base_url=live.url, headers={"X-API-Key": KEY}, timeout=60) as http:
        first = http.post(path, json=body, headers={"Idempotency-Key": "alarm-1"})
        other = {"content": body["content"].replace("1234", "9876")}
        retry = http.post(path, json=other, headers={"Idempotency-Key": "alarm-1"})
    assert first.status_code == 200
    assert first.json()["redacted"] == [{"kind": "password", "count": 1}]
    assert retry.status_code == 200
    assert retry.json()["replayed"] is True
    assert retry.json()["id"] == first.json()["id"]

    db = tmp_path / "db"
    kept = lance.dataset(str(db / "registry.lance")).to_table(filter="kind = 'secret'")["value"]
    secret = bytes.fromhex(kept[0].as_py())  # the database's key: fingerprints are keyed hashes

    def fingerprint(sent: dict[str, Any]) -> str:
        canonical = json.dumps(sent, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return Idempotency.keyed("alarm-1", lambda: secret, f"{path}\n{canonical}").fingerprint

    assert _files_hold(db, fingerprint(Redactor("secrets").scrub(body)))  # the control: fingerprints are findable
    assert not _files_hold(db, fingerprint(body))
    assert not _files_hold(db, "alarm-1234")
