"""Secrets kept out of memory (opt-in: ``redact = secrets``).

Before a write is checked for duplicates, embedded or stored, each secret in its text is
replaced by ``[redacted:<kind>]``; the write answer lists ``redacted: [{kind, count}]``,
counted from the replacements themselves, so a kind is listed only when something was
replaced. README lists the kinds. What finds what, best first (where two findings
overlap, their union is replaced and the better one names it); ``secret_shapes`` holds
the rules of 1-3, ``secret_wallets`` those of 2 for wallets, ``secret_words`` those of
4-7, ``secret_matching`` how a rule runs:

1. **private keys**: PEM blocks whole (also cut short, or only their end pasted, or inside
   a JSON string with ``\\n`` escapes), PuTTY key files, age secret keys, the private
   members of a JSON Web Key.
2. **provider tokens**, by their fixed prefixes and shapes (``ghp_``, ``github_pat_``,
   ``glpat-``, ``xoxb-``/``xapp-``, ``sk_live_``, ``sk-``/``sk-ant-``, ``AIza``,
   ``hf_``, ``npm_``, ``hvs.``, ``dop_v1_``, ``shpat_``, ``dapi``, ``SG.``, JWTs checked
   by decoding their header, ``key-`` of Mailgun, ``AAAA...:APA91b`` of Firebase, ...), an
   AWS secret access key (40 characters of base64) where "AWS" or an access key id is
   near it; wallets: Bitcoin WIF and ``xprv`` keys by their checksum, an Ethereum key (64
   hex digits) near "private key" or "wallet", BIP39 seed phrases (12 to 24 of its words, with
   their checksum or after "seed", "recovery", ...).
3. **passwords in URLs**: ``scheme://user:password@host``, any characters RFC 3986 allows
   in the password (``!$&'()*+,;=``) and ``#``/``?`` written unescaped, an empty user
   (``redis://:pw@host``).
4. **headers and command lines**: ``Authorization: Bearer ...``, ``Bearer ...``,
   ``curl -u user:pw``, ``docker login -p``, ``mysql -pPW``/``-p PW``, ``sshpass -p``,
   ``redis-cli -a``, ``--password``/``--token``/``--api-key`` options, ``openssl
   -passout pass:``, ``keytool -storepass``, ``.netrc`` and ``.pgpass`` lines, SQL's
   ``WITH PASSWORD``/``IDENTIFIED BY``, ``sqlplus user/pw@db``, ``ldapsearch -w``.
5. **assignments**: ``password=...``, ``SECRET_KEY: ...``, ``"token": "..."``,
   ``<password>...</password>``, ``define('AUTH_KEY', '...')``, ``auth=("user", "pw")``.
   The name must *end* with the keyword (``max_tokens``, ``password_hash`` are other
   names; ``bypass`` is not ``pass``), in several languages (``Passwort``,
   ``mot_de_passe``, ``contraseña``, ...). The value is one token or one quoted string;
   placeholders (``${DB_PASSWORD}``, ``<your-key>``, ``***``) and code (``os.environ[...]``,
   ``getpass()``, ``password = expected``) are not secrets.
6. **prose**: "the password is ...", "my wifi password is now ...", "Passwort: ...",
   "le mot de passe est ...", "la contraseña es ...", "パスワードは ...", and "the API key
   is ..." for a value shaped like a token. A plain word is a password only where the
   sentence ends with it and it is no common word ("the password is wrong"); "password at
   https://..." is a link to a page, not a password.
7. **pairs and passwords said without "is"**: "login is root with ...", "admin / ...",
   "admin:...", "Benutzer admin, Kennwort ...", "пароль ...", "the Hetzner token ...": the
   password by its look alone (8 characters or more, a letter, a digit, and a sign or
   both cases), the token by its (32 or more, both cases and digits); "read / write",
   "log in as root with sudo" are not pairs.

Linear time, whatever the text (Python's ``re`` backtracks, and 3.10 has no atomic groups,
so the patterns are written to need none). A rule is tried only where one of its literals
(a keyword, a prefix) is, found by substring search in C; the few rules without one scan
from a character class at the start of a run. Every gap and every value is bounded, and
every unbounded repetition is one character class that what follows cannot match or that
ends the pattern, so an attempt reads a bounded stretch or its own run once. Patterns
succeed and their judge refuses, so finditer never reads a refused value twice.
``bench/redaction.py`` measures it; ``tests/rules/test_redaction.py`` bounds it.

Why not detect-secrets (used before): several of its patterns are quadratic on the texts
an agent stores (128,000 characters of ``sk-sk-...`` took 46 s), it reported kinds its
patterns did not locate (an AWS secret in prose was counted and kept), its fixed-length
patterns stopped inside today's longer tokens, and it has no rules for passwords in
commands or sentences. Its provider list and gitleaks' rules were the starting point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from typing_extensions import NotRequired, TypedDict

from wontopos_mcp.errors import InvalidRequestError

from . import secret_shapes, secret_wallets, secret_words
from .answers import Redaction
from .secret_matching import Rule, Span

NONE, SECRETS = "none", "secrets"
MODES = (NONE, SECRETS)

# Every kind a replacement can name (README lists what each is).
KINDS = (
    "private_key", "aws_key", "aws_secret_key", "github_token", "gitlab_token", "slack_token", "stripe_key",
    "openai_key", "anthropic_key", "google_api_key", "google_oauth_secret", "google_oauth_token",
    "huggingface_token", "npm_token", "pypi_token", "sendgrid_key", "twilio_key", "telegram_token",
    "discord_token", "mailchimp_key", "square_secret", "artifactory_token", "vault_token", "digitalocean_token",
    "shopify_token", "databricks_token", "azure_storage_key", "azure_key", "jwt", "linear_key", "postman_key",
    "newrelic_key", "grafana_token", "sentry_token", "groq_key", "replicate_token", "perplexity_key", "xai_key",
    "pulumi_token", "tailscale_key", "doppler_token", "atlassian_token", "notion_token", "cloudant_key",
    "ibm_cloud_key", "ibm_cos_key", "softlayer_key", "mailgun_key", "firebase_key", "heroku_key", "netlify_token",
    "supabase_token", "planetscale_token", "mapbox_token", "dropbox_token", "figma_token", "airtable_token",
    "asana_token", "brevo_key", "braintree_token", "plaid_token", "dynatrace_token", "contentful_token",
    "prefect_key", "pinecone_key", "langsmith_key", "openrouter_key", "aws_session_token", "alibaba_key",
    "tencent_key", "terraform_token", "docker_token", "rubygems_key", "nuget_key", "crates_token", "ngrok_token",
    "twitter_token", "facebook_token", "salesforce_token", "launchdarkly_key", "render_key", "onepassword_token",
    "resend_key", "fly_token", "wallet_key", "seed_phrase", "url_password", "authorization", "bearer_token",
    "password", "secret", "token", "api_key",
)  # fmt: skip


@dataclass(frozen=True)
class Redacted:
    """A text with its secrets replaced, and how many of each kind were."""

    text: str
    counts: Mapping[str, int]


class Redactor:
    """The ``redact`` setting at work: ``"none"`` leaves texts as they are."""

    def __init__(self, mode: str = NONE) -> None:
        if mode not in MODES:
            raise ValueError(f"redact must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode

    @property
    def enabled(self) -> bool:
        return self.mode == SECRETS

    def redact(self, text: str) -> Redacted:
        if not self.enabled:
            return Redacted(text, {})
        spans = find_secrets(text)
        if not spans:
            return Redacted(text, {})
        pieces, at = [], 0
        for start, end, kind in spans:
            pieces += [text[at:start], f"[redacted:{kind}]"]
            at = end
        pieces.append(text[at:])
        return Redacted("".join(pieces), dict(Counter(kind for _, _, kind in spans)))

    def redact_each(self, texts: Iterable[str]) -> tuple[list[str], dict[str, int]]:
        """Several texts redacted, and their counts summed."""
        found = [self.redact(text) for text in texts]
        return [one.text for one in found], tally(one.counts for one in found)

    def redact_labels(self, *labels: str | None) -> tuple[list[str | None], dict[str, int]]:
        """A write's other free-text fields (``category``, ``conversation_id``) redacted as
        its text is (``None``: not given), and their counts summed."""
        found = [None if label is None else self.redact(label) for label in labels]
        return [None if one is None else one.text for one in found], tally(one.counts for one in found if one)

    def refuse_secret_name(self, name: str | None, *, field: str) -> None:
        """A speaker name that holds a secret is refused, naming ``field`` and the kinds
        found, never the name: a name is an identity, so it is never rewritten."""
        if not self.enabled or name is None:
            return
        kinds = sorted({kind for _, _, kind in find_secrets(name)})
        if kinds:
            raise InvalidRequestError(
                f"{field} is shaped like a secret ({', '.join(kinds)}); a name is an identity and is "
                "never rewritten, so nothing was stored: give the person's name",
                field=field,
            )

    def scrub(self, value: Any) -> Any:
        """``value`` (JSON: objects, lists, strings) with every string redacted: what an
        idempotency fingerprint hashes, so no hash of a secret is kept in the database."""
        if not self.enabled:
            return value
        if isinstance(value, str):
            return self.redact(value).text
        if isinstance(value, dict):
            return {key: self.scrub(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.scrub(item) for item in value]
        return value


def tally(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Several texts' counts as one."""
    total: Counter[str] = Counter()
    for one in counts:
        total.update(one)
    return dict(total)


class _Redactable(TypedDict):
    redacted: NotRequired[list[Redaction]]


A = TypeVar("A", bound=_Redactable)  # a write's answer


def with_redactions(answer: A, counts: Mapping[str, int]) -> A:
    """``answer`` with ``redacted: [{kind, count}]`` (by kind) when anything was redacted."""
    if counts:
        answer["redacted"] = [{"kind": kind, "count": counts[kind]} for kind in sorted(counts)]
    return answer


def find_secrets(text: str) -> list[Span]:
    """The spans to replace, in text order, never overlapping."""
    folded = _folded(text)
    found: list[tuple[int, int, int, str]] = []
    for rule in rules():
        found += ((rule.rank, start, end, kind) for start, end, kind in rule.spans(text, folded))
    return _merged(found)


def _folded(text: str) -> str:
    """``text`` in lower case, character for character (``str.lower`` makes two of a few,
    such as "İ", which would move every index after them)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _merged(found: list[tuple[int, int, int, str]]) -> list[Span]:
    """Overlapping findings as one span (their union, so no part of either survives),
    named by the best-ranked of them (a provider's token inside ``api_key = "..."`` is
    that provider's), then the earliest and longest."""
    spans: list[Span] = []
    best: tuple[int, int, int] | None = None
    for rank, start, end, kind in sorted(found, key=lambda f: (f[1], f[2])):
        if end <= start:
            continue
        if spans and start < spans[-1][1]:
            last_start, last_end, last_kind = spans[-1]
            key = (rank, start, -end)
            if best is None or key < best:
                best, last_kind = key, kind
            spans[-1] = (last_start, max(last_end, end), last_kind)
        else:
            spans.append((start, end, kind))
            best = (rank, start, -end)
    return spans


@cache
def rules() -> tuple[Rule, ...]:
    """Every rule, compiled on the first redaction (a server that does not redact
    compiles none). Public: the tests and ``bench/redaction.py`` walk the rules' anchors."""
    return (*secret_shapes.rules(), *secret_wallets.rules(), *secret_words.rules())
