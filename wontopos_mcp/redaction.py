"""Secrets kept out of memory (SPEC "Time and identity", Redaction; opt-in ``redact = secrets``).

Before a write is checked for duplicates, embedded or stored, each secret in its text is
replaced by ``[redacted:<kind>]``; the write answer lists ``redacted: [{kind, count}]``,
counted from the replacements themselves, so a kind is listed only when something was
replaced. README lists the kinds. What finds what, best first (where two findings
overlap, their union is replaced and the better one names it):

1. **private keys**: PEM blocks whole (also cut short, or only their end pasted, or inside
   a JSON string with ``\\n`` escapes), PuTTY key files, age secret keys.
2. **provider tokens**, by their fixed prefixes and shapes (``ghp_``, ``github_pat_``,
   ``glpat-``, ``xoxb-``/``xapp-``, ``sk_live_``, ``sk-``/``sk-ant-``, ``AIza``,
   ``hf_``, ``npm_``, ``hvs.``, ``dop_v1_``, ``shpat_``, ``dapi``, ``SG.``, JWTs checked
   by decoding their header, ...), and an AWS secret access key (40 characters of base64)
   where "AWS" or an access key id is near it.
3. **passwords in URLs**: ``scheme://user:password@host``, any characters RFC 3986 allows
   in the password (``!$&'()*+,;=``), an empty user (``redis://:pw@host``).
4. **headers and command lines**: ``Authorization: Bearer ...``, ``Bearer ...``,
   ``curl -u user:pw``, ``docker login -p``, ``mysql -pPW``/``-p PW``, ``sshpass -p``,
   ``redis-cli -a``, ``--password``/``--token``/``--api-key`` options, ``openssl
   -passout pass:``, ``keytool -storepass``, ``.netrc`` lines.
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
   sentence ends with it and it is no common word ("the password is wrong").

Linear time, whatever the text (Python's ``re`` backtracks, and 3.10 has no atomic groups,
so the patterns are written to need none). A rule is tried only where one of its literals
(a keyword, a prefix) is, found by substring search in C; the few rules without one scan
from a character class at the start of a run. Every gap and every value is bounded, and
every unbounded repetition is one character class that what follows cannot match or that
ends the pattern, so an attempt reads a bounded stretch or its own run once. Patterns
succeed and their judge refuses, so finditer never reads a refused value twice.
``bench/redaction.py`` measures it; ``tests/test_redaction.py`` bounds it.

Why not detect-secrets (used before): several of its patterns are quadratic on the texts
an agent stores (128,000 characters of ``sk-sk-...`` took 46 s), it reported kinds its
patterns did not locate (an AWS secret in prose was counted and kept), its fixed-length
patterns stopped inside today's longer tokens, and it has no rules for passwords in
commands or sentences. Its provider list and gitleaks' rules were the starting point.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any


class _Lazy:
    """A pattern compiled on its first use: importing this module compiles nothing, so a
    server that does not redact never pays for the patterns (tens of milliseconds)."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    def __getattr__(self, name: str) -> Any:  # match, fullmatch, search
        return getattr(self.compiled, name)


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
    "ibm_cloud_key", "ibm_cos_key", "softlayer_key", "url_password", "authorization", "bearer_token", "password",
    "secret", "token", "api_key",
)  # fmt: skip

Span = tuple[int, int, str]  # start, end, kind


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


def with_redactions(answer: dict[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    """``answer`` with ``redacted: [{kind, count}]`` (by kind) when anything was redacted."""
    if counts:
        answer["redacted"] = [{"kind": kind, "count": counts[kind]} for kind in sorted(counts)]
    return answer


def find_secrets(text: str) -> list[Span]:
    """The spans to replace, in text order, never overlapping."""
    folded = _folded(text)
    found: list[tuple[int, int, int, str]] = []
    for rule in _rules():
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


# -- rules ---------------------------------------------------------------------------------------

Judge = Callable[[re.Match[str], str], "Span | None"]


@dataclass(frozen=True)
class _Rule:
    """One pattern and the ``judge`` that turns its matches into spans (or refuses them).

    With ``anchors``, literals the pattern starts with, the pattern is tried only where
    one of them is (found by substring search, fast whatever the text); without, it is
    scanned through the text when one of ``needles`` is in it. ``folded``: those literals
    are looked for in the lower-case text. ``requires``: a literal the text must hold too.
    """

    rank: int
    pattern: re.Pattern[str]
    judge: Judge
    anchors: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    folded: bool = False
    requires: str = ""

    def spans(self, text: str, folded: str) -> Iterator[Span]:
        hay = folded if self.folded else text
        if self.requires and self.requires not in hay:
            return
        for match in self._matches(text, hay):
            span = self.judge(match, text)
            if span is not None and span[1] > span[0]:
                yield span

    def _matches(self, text: str, hay: str) -> Iterator[re.Match[str]]:
        if not self.anchors:
            if any(needle in hay for needle in self.needles):
                yield from self.pattern.finditer(text)
            return
        done = 0  # as finditer: a match is never tried inside the previous one
        for at in sorted({at for anchor in self.anchors for at in _occurrences(hay, anchor)}):
            if at < done:
                continue
            match = self.pattern.match(text, at)
            if match is not None:
                done = max(match.end(), at + 1)
                yield match


def _occurrences(hay: str, literal: str) -> Iterator[int]:
    at = hay.find(literal)
    while at >= 0:
        yield at
        at = hay.find(literal, at + 1)


PRIVATE_KEY, PROVIDER, URL, HEADER, COMMAND, ASSIGNMENT, PROSE = range(7)

_TOKEN_START = r"(?<![A-Za-z0-9_-])"
_TOKEN_END = r"(?![A-Za-z0-9])"


def _value(match: re.Match[str]) -> tuple[int, int, str] | None:
    """The first of the groups ``dq``, ``sq``, ``bt``, ``bare``, ``s`` that matched."""
    for group in ("dq", "sq", "bt", "bare", "s"):
        if group in match.re.groupindex and match.group(group) is not None:
            return match.start(group), match.end(group), group
    return None


def _whole(kind: str, check: Callable[[str], bool] | None = None) -> Judge:
    """The value (or the whole match) as ``kind``, when ``check`` accepts it."""

    def judge(match: re.Match[str], text: str) -> Span | None:
        start, end, _ = _value(match) or (match.start(), match.end(), "")
        if check is not None and not check(text[start:end]):
            return None
        return start, end, kind

    return judge


def _mixed(value: str) -> bool:
    """Letters and digits both: a random token, not a word or a number."""
    return any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)


def _cased(value: str) -> bool:
    """Upper and lower case letters and a digit: base64 of random bytes, not hex."""
    return any(ch.isupper() for ch in value) and any(ch.islower() for ch in value) and any(ch.isdigit() for ch in value)


def _jwt(value: str) -> bool:
    """A JWT's header is base64url of a JSON object naming its algorithm."""
    header = value.split(".", 1)[0]
    if len(header) > 2000:
        return False  # no algorithm takes that many words to name
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError, RecursionError):  # RecursionError: "[[[[..." nested deep
        return False
    return isinstance(decoded, dict) and ("alg" in decoded or "enc" in decoded or "typ" in decoded)


def _sk_kind(match: re.Match[str], text: str) -> Span | None:
    """``sk-``: Anthropic's ``sk-ant-``, OpenAI's project, service and legacy keys, and
    the many providers that copied the prefix (an ``api_key`` when it looks random)."""
    token = match.group()
    if token.startswith("sk-ant-"):
        kind = "anthropic_key"
    elif token.startswith(("sk-proj-", "sk-svcacct-", "sk-admin-")) or "T3BlbkFJ" in token:
        kind = "openai_key"
    elif len(token) == 51 and token[3:].isalnum():
        kind = "openai_key"
    elif len(token) >= 35 and _mixed(token[3:]):
        kind = "api_key"
    else:
        return None
    return match.start(), match.end(), kind


def _aws_secret(match: re.Match[str], text: str) -> Span | None:
    """40 characters of base64 are an AWS secret access key only with AWS near them."""
    value = match.group()
    if not _cased(value):
        return None
    start, end = match.span()
    near = text[max(0, start - 160) : start].lower() + " " + text[end : end + 80].lower()
    if "aws" not in near and not re.search(r"\ba[ks]ia[0-9a-z]{16}\b", near):
        return None
    return start, end, "aws_secret_key"


# (kind, literal prefixes, what follows, check): provider tokens, whole. The prefixes are
# the rule's literals; a token starts where no token character precedes it.
_PROVIDERS: tuple[tuple[str, tuple[str, ...], str, Callable[[str], bool] | None], ...] = (
    ("aws_key", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), r"[A-Z0-9]{16,17}", None),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"[A-Za-z0-9]{30,251}", None),
    ("github_token", ("github_pat_",), r"[A-Za-z0-9_]{22,}", None),
    (
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-", "glagent-", "gloas-"),
        r"[A-Za-z0-9_.-]{20,}",
        None,
    ),
    (
        "slack_token",
        ("xoxb-", "xoxp-", "xoxa-", "xoxo-", "xoxr-", "xoxs-", "xoxe-", "xoxe.", "xapp-"),
        r"[A-Za-z0-9.-]{10,}",
        _mixed,
    ),
    ("stripe_key", ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"), r"[A-Za-z0-9]{20,}", None),
    ("google_api_key", ("AIza",), r"[0-9A-Za-z_-]{35}", None),
    ("google_oauth_secret", ("GOCSPX-",), r"[0-9A-Za-z_-]{24,}", None),
    ("google_oauth_token", ("ya29.",), r"[0-9A-Za-z_-]{30,}", None),
    ("huggingface_token", ("hf_",), r"[A-Za-z0-9]{30,}", _mixed),
    ("npm_token", ("npm_",), r"[A-Za-z0-9]{36}", None),
    ("pypi_token", ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"), r"[A-Za-z0-9_-]{40,}", None),
    ("sendgrid_key", ("SG.",), r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", None),
    ("twilio_key", ("SK",), r"[0-9a-f]{32}", None),
    ("square_secret", ("sq0csp-", "sq0atp-", "EAAA"), r"[0-9A-Za-z_-]{22,}", _mixed),
    ("artifactory_token", ("AKC",), r"[A-Za-z0-9]{10,}", _mixed),
    ("vault_token", ("hvs.", "hvb.", "hvr."), r"[A-Za-z0-9_-]{20,}", None),
    ("vault_token", ("s.", "b."), r"[A-Za-z0-9]{24}", _cased),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"[a-f0-9]{64}", None),
    ("shopify_token", ("shpat_", "shpss_", "shpca_", "shppa_"), r"[a-fA-F0-9]{32}", None),
    ("databricks_token", ("dapi",), r"[a-f0-9]{32}(?:-[0-9])?", None),
    ("linear_key", ("lin_api_",), r"[A-Za-z0-9]{40}", None),
    ("postman_key", ("PMAK-",), r"[a-f0-9]{24}-[a-f0-9]{34}", None),
    ("newrelic_key", ("NRAK-",), r"[A-Z0-9]{27}", None),
    ("grafana_token", ("glsa_", "glc_"), r"[A-Za-z0-9_=+/-]{32,}", None),
    ("sentry_token", ("sntrys_", "sntryu_"), r"[A-Za-z0-9_=+/-]{40,}", None),
    ("groq_key", ("gsk_",), r"[A-Za-z0-9]{48,}", None),
    ("replicate_token", ("r8_",), r"[A-Za-z0-9]{37}", _mixed),
    ("perplexity_key", ("pplx-",), r"[A-Za-z0-9]{48}", None),
    ("xai_key", ("xai-",), r"[A-Za-z0-9]{70,}", None),
    ("pulumi_token", ("pul-",), r"[a-f0-9]{40}", None),
    ("tailscale_key", ("tskey-",), r"[A-Za-z0-9-]{20,}", None),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct."), r"[A-Za-z0-9]{40,}", None),
    ("atlassian_token", ("ATATT",), r"[A-Za-z0-9_=-]{100,}", None),
    ("notion_token", ("ntn_", "secret_"), r"[A-Za-z0-9]{40,}", _mixed),
    ("age_key", ("AGE-SECRET-KEY-1",), r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", None),
)
_PROVIDER_KINDS = {"age_key": "private_key"}  # an age key is a private key


def _provider_rules() -> list[_Rule]:
    rules = []
    for kind, prefixes, rest, check in _PROVIDERS:
        alternatives = "|".join(re.escape(p) for p in prefixes)
        pattern = re.compile(f"{_TOKEN_START}(?:{alternatives}){rest}{_TOKEN_END}")
        rules.append(_Rule(PROVIDER, pattern, _whole(_PROVIDER_KINDS.get(kind, kind), check), anchors=prefixes))
    return rules


def _behind(length: int, kind: str) -> Judge:
    """The match and the ``length`` characters its lookbehind checked before it."""

    def judge(match: re.Match[str], text: str) -> Span | None:
        return match.start() - length, match.end(), kind

    return judge


def _telegram(match: re.Match[str], text: str) -> Span | None:
    start = match.start()
    while start > 0 and text[start - 1].isdigit():
        start -= 1
    return start, match.end(), "telegram_token"


def _with_scheme(kind: str) -> Judge:
    """A webhook URL whole: its scheme (and Discord's ``ptb.``/``canary.``) too."""
    before = [scheme + sub for scheme in ("https://", "http://") for sub in ("ptb.", "canary.", "")]

    def judge(match: re.Match[str], text: str) -> Span | None:
        start = match.start()
        found = next((len(b) for b in before if text.endswith(b, 0, start)), 0)
        return start - found, match.end(), kind

    return judge


def _other_token_rules() -> list[_Rule]:
    """Tokens whose shape is more than a prefix and a run."""
    t = r"A-Za-z0-9_\-"
    return [
        _Rule(PROVIDER, re.compile(rf"{_TOKEN_START}sk-[{t}]{{20,}}"), _sk_kind, anchors=("sk-",)),
        _Rule(
            PROVIDER, re.compile(rf"{_TOKEN_START}eyJ[{t}]{{8,}}\.eyJ[{t}]{{8,}}\.[{t}]*(?:\.[{t}]*\.[{t}]*)?"),
            _whole("jwt", _jwt), anchors=("eyJ",),
        ),
        # no literal: scanned, starting at a character class (sre skips to its characters)
        _Rule(
            PROVIDER, re.compile(r"[A-Za-z0-9/+](?<![A-Za-z0-9/+=][A-Za-z0-9/+])[A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])"),
            _aws_secret, needles=("aws", "akia", "asia"), folded=True,
        ),
        _Rule(
            PROVIDER, re.compile(rf"[MNO](?<![{t}.][MNO])[{t}]{{23,27}}\.[{t}]{{6}}\.[{t}]{{27,40}}(?![{t}])"),
            _whole("discord_token", _cased), needles=(".",),
        ),
        # anchored at a literal in the middle, what comes before checked by a lookbehind
        _Rule(
            PROVIDER,
            re.compile(r"(?:(?<=(?<![A-Za-z0-9_:-])[0-9]{8})|(?<=(?<![A-Za-z0-9_:-])[0-9]{9})"
                       r"|(?<=(?<![A-Za-z0-9_:-])[0-9]{10})):AA[A-Za-z0-9_-]{30,}(?![A-Za-z0-9_-])"),
            _telegram, anchors=(":AA",),
        ),
        _Rule(
            PROVIDER, re.compile(r"(?<=(?<![A-Za-z0-9])[0-9a-f]{32})-us[0-9]{1,2}(?![A-Za-z0-9])"),
            _behind(32, "mailchimp_key"), anchors=("-us",),
        ),
        _Rule(
            PROVIDER,
            re.compile(r"(?<=(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9])Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
            _behind(4, "azure_key"), anchors=("Q~",),
        ),
        # webhook URLs: the path is the secret; the whole URL goes
        _Rule(
            PROVIDER, re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
            _with_scheme("slack_token"), anchors=("hooks.slack.com/",), requires="://",
        ),
        _Rule(
            PROVIDER, re.compile(r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/[A-Za-z0-9_-]{30,}"),
            _with_scheme("discord_token"), anchors=("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
        ),
        # Azure connection strings and shared access signatures: the key only
        _Rule(
            PROVIDER, re.compile(r"(?i:AccountKey)=(?P<s>[A-Za-z0-9+/]{40,100}={0,2})"), _whole("azure_storage_key"),
            anchors=("accountkey=",), folded=True,
        ),
        _Rule(
            PROVIDER, re.compile(r"(?i:SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{30,100}={0,2})"), _whole("azure_key"),
            anchors=("sharedaccesskey=",), folded=True,
        ),
        _Rule(
            PROVIDER, re.compile(r"(?<=[?&;])sig=(?P<s>[A-Za-z0-9%+/]{20,200}(?:=|%3[Dd]){0,2})"), _whole("azure_key"),
            anchors=("sig=",),
        ),
    ]  # fmt: skip


# -- private keys --------------------------------------------------------------------------------

_PEM_LABEL = r"-----(?:BEGIN|END)[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_GAP = r"(?:\s|\\[nr]){1,8}"  # real line breaks, or a JSON string's escaped ones
_PEM_HEADER = r"(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\n\\]{0,200}"
# A block: BEGIN, then anything but the five dashes of its END line, then END; or, when no
# END follows (the key was cut short), BEGIN and the header and base64 lines after it.
_PEM = _Lazy(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[^-]*(?:-(?!----)[^-]*)*-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    rf"|(?:{_PEM_GAP}(?:[A-Za-z0-9+/=]{{16,}}|{_PEM_HEADER}))+)"
)
_PEM_BODY = _Lazy(r"[A-Za-z0-9+/=]{16,}")
_PEM_END = _Lazy(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_LINE = _Lazy(rf"[A-Za-z0-9+/=]{{16,}}|{_PEM_HEADER}")
_PEM_LAST_LINE = _Lazy(r"[A-Za-z0-9+/=]+")  # the line above END may be short
_PUTTY = _Lazy(
    r"PuTTY-User-Key-File-[0-9]+:[^\n]*"
    r"(?:\r?\n(?!Private-MAC:|PuTTY-User-Key-File)"
    r"(?:[A-Za-z0-9-]{1,30}: [^\n]{0,300}|[A-Za-z0-9+/=]{8,200}(?=\r?\n|$)))*"
    r"(?:\r?\nPrivate-MAC: *[0-9a-fA-F]+)?"
)


def _pem(match: re.Match[str], text: str) -> Span | None:
    """A block with a body: "a key file starts with -----BEGIN PRIVATE KEY-----" is not one."""
    if not _PEM_BODY.search(text, match.start() + 20, match.end() - 20):
        return None
    return match.start(), match.end(), "private_key"


def _orphan_end(match: re.Match[str], text: str) -> Span | None:
    """An END line whose BEGIN was in another text: the base64 lines above it go too
    (walked back line by line, to the first line that is not one of them). Inside a whole
    block this overlaps the block, which it joins."""
    start = match.start()
    if text[text.rfind("\n", 0, start) + 1 : start].strip():
        return None  # not at the start of its line
    while True:
        line_end = text.rfind("\n", 0, start)
        if line_end < 0:
            break
        line_start = text.rfind("\n", 0, line_end) + 1
        line = text[line_start:line_end].strip()
        last = start == match.start()
        if line and not (_PEM_LINE.fullmatch(line) or last and _PEM_LAST_LINE.fullmatch(line)):
            break
        start = line_start
    if start == match.start():
        return None  # nothing above it: a line that names the format
    return start, match.end(), "private_key"


def _private_key_rules() -> list[_Rule]:
    return [
        _Rule(PRIVATE_KEY, _PEM.compiled, _pem, anchors=("-----BEGIN",)),
        _Rule(PRIVATE_KEY, _PEM_END.compiled, _orphan_end, anchors=("-----END",)),
        _Rule(PRIVATE_KEY, _PUTTY.compiled, _whole("private_key"), anchors=("PuTTY-User-Key-File-",)),
    ]


# -- passwords in URLs -----------------------------------------------------------------------------

# After "://": a user (maybe empty), ":", the password up to the last "@" before the host.
_URL = _Lazy(r"://[^\s:/?#@\"'<>\[\]`]{0,128}:(?P<s>[^\s/?#\"<>`]{1,256})@(?=[A-Za-z0-9\[_.-])")


def _url_password(match: re.Match[str], text: str) -> Span | None:
    start, end = match.span("s")
    if _placeholder(text[start:end]):
        return None
    return start, end, "url_password"


# -- values: placeholders and code -------------------------------------------------------------------

_PLACEHOLDER = _Lazy(
    r"""\$\{ | \$[A-Za-z_][A-Za-z0-9_]*$ | \$\(\w | \{\{ | \{[A-Za-z_][\w.]*\}$ | %\(\w+\)s | %s$ | <[^<>]*>$
    | \[redacted: | [*xX.•·_#-]+$ | !vault | \#\{ | @@
    | (?i:your[_ -]|enter[_ ]|insert[_ ]|replace[_ ]|my[_-]?secret$|my[_-]?password$)
    | (?i:(?:change[_-]?me|placeholder|example|dummy|sample|secret|password|passwd|pass|pwd|token|api[_-]?key|
          null|none|nil|undefined|true|false|empty|required|optional|hidden|unset|default|string|str|tbd|todo|
          redacted|masked|removed|x+|\*+)$)""",
    re.VERBOSE,
)
# Code and names: an identifier, a dotted name, a call or a subscript (os.environ[...]).
_CODE = _Lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:[(\[].*)?")
_LETTERS = _Lazy(r"[^\W\d_]+")
_WORDS = _Lazy(r"[^\W\d_]+(?:-[^\W\d_]+)*")  # "case-sensitive"


def _placeholder(value: str) -> bool:
    return not value.strip() or bool(_PLACEHOLDER.match(value.strip()))


# -- assignments -------------------------------------------------------------------------------------

# Keywords a name ends with: long ones after anything, short ones only as a whole part
# (after "_", ".", "-" or at the start: "db_pw", not "bypass").
_LONG_WORDS = (
    r"password|passwd|passphrase|passcode|secret(?:[_.-]?key)?|token|api[_.-]?key|apikey|access[_.-]?key"
    r"|private[_.-]?key|auth[_.-]?key|signing[_.-]?key|encryption[_.-]?key|master[_.-]?key|client[_.-]?key"
    r"|credentials?|passwort|kennwort|mot[_.-]?de[_.-]?passe|motdepasse|contraseña|contrasena|senha|wachtwoord"
    r"|hasło|haslo|lösenord|losenord|salasana|adgangskode|пароль|パスワード|密码|密碼|비밀번호|şifre|sifre"
)
_SHORT_WORDS = r"pass|pwd|pw|mdp|auth|salt"
_SHORT = frozenset(_SHORT_WORDS.split("|"))
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$")
_VALUE = (
    r"""(?:"(?P<dq>(?:[^"\\\n]|\\.){1,500})"|'(?P<sq>[^'\n]{1,500})'|`(?P<bt>[^`\n]{1,500})`"""
    r"""|(?P<bare>(?:[^\s"'`,;&<>]|&(?![\w.-]{1,40}=)){1,500}))"""
)
_ASSIGNMENT = _Lazy(
    rf"(?P<kw>{_LONG_WORDS}|{_SHORT_WORDS})(?![\w-])[\"']?\]?(?P<gap>[ \t]{{0,4}})"
    rf"(?P<sep>:=|=>|==|=|:|：)[ \t]{{0,4}}{_VALUE}",
    re.IGNORECASE,
)
# A name's words that say which provider its secret belongs to.
_NAMED = (
    ("cloudant", "cloudant_key"),
    ("ibm_cloud", "ibm_cloud_key"),
    ("ibmcloud", "ibm_cloud_key"),
    ("cos_hmac", "ibm_cos_key"),
    ("secret_access_key", "aws_secret_key"),
    ("aws_secret", "aws_secret_key"),
    ("softlayer", "softlayer_key"),
    ("_authtoken", "npm_token"),
    ("npm_token", "npm_token"),
)
_UI_TEXT = _Lazy(r"(?i:enter|please|type|bitte|veuillez|introduzca|digite)\b|.*(?:\.\.\.|…|:)$")


def _kind_of(name: str) -> str:
    """The kind a name's keyword gives its value (``DB_PASSWORD`` a password)."""
    lowered = name.lower()
    for part, kind in _NAMED:
        if part in lowered:
            return kind
    folded = re.sub(r"[_.-]", "", lowered)
    if folded.endswith("token") or folded == "auth":
        return "token"
    if folded.endswith(("privatekey",)):
        return "private_key"
    if folded.endswith(("secret", "secretkey", "salt")):
        return "secret"
    if folded.endswith(("key", "credential", "credentials")):
        return "api_key"
    return "password"


def _name_start(text: str, at: int) -> int:
    """Where the name ending with the keyword at ``at`` starts (at most 80 back)."""
    start = at
    while start > 0 and at - start < 80 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return start


def _assignment(match: re.Match[str], text: str) -> Span | None:
    """``name = value`` when the name ends with a keyword and the value reads as a secret."""
    kw_start = match.start("kw")
    start_of_name = _name_start(text, kw_start)
    if match.group("kw").lower() in _SHORT and start_of_name != kw_start and text[kw_start - 1] not in "_.-":
        return None  # "bypass", "compass"
    start, end, group = _value(match) or (0, 0, "")
    value = text[start:end]
    if group == "bare":
        trimmed = value.rstrip(".)]}:")
        end -= len(value) - len(trimmed)
        value = trimmed
        if len(value) < 4 or value[0] in "([{" or _placeholder(value) or not _bare_secret(match, text, value, end):
            return None  # "(see the vault)", a tuple, a list, an object
    elif _placeholder(value) or _UI_TEXT.match(value.strip()):
        return None
    return start, end, _kind_of(text[start_of_name : match.end("kw")])


_PATH = _Lazy(r"(?:~|[A-Za-z]:)?[/\\][\w.-]+(?:[/\\][\w.-]*)*")


def _path(value: str) -> bool:
    """``/home/bob``, ``C:\\Users``, ``https://example.com/reset``: a place, not a password."""
    return bool(_PATH.fullmatch(value) or _URL_VALUE.match(value))


_URL_VALUE = _Lazy(r"[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:@]*$")  # with no password in it


def _code(value: str) -> bool:
    """A call, a subscript, a dotted name or a snake_case name without a digit."""
    if not _CODE.fullmatch(value):
        return False
    return any(ch in value for ch in "([.") or ("_" in value and not any(ch.isdigit() for ch in value))


def _bare_secret(match: re.Match[str], text: str, value: str, end: int) -> bool:
    """An unquoted value: code (a call, a subscript, a dotted or snake_case name) is not
    a secret; a name with a digit is (``q8w7e6r5t4y3``, ``hunter2``); a plain word is a
    password only when it ends its line after ``password: word`` or ``password=word``
    (a YAML or .env line): ``password = expected`` is code, "secret: tomorrow" prose."""
    if _path(value):
        return False
    if not _CODE.fullmatch(value) or any(ch.isdigit() for ch in value) and not _code(value):
        return True
    if _code(value) or match.group("gap") or match.group("sep") == "==":
        return False
    if _kind_of(match.group("kw")) != "password":
        return False
    after = text[end : end + 1]
    return len(value) >= 6 and (not after or after in "\r\n") and value.lower() not in _COMMON


def _xml(match: re.Match[str], text: str) -> Span | None:
    start, end = match.span("s")
    if _placeholder(text[start:end]):
        return None
    return start, end, _kind_of(match.group("tag"))


def _named_value(match: re.Match[str], text: str) -> Span | None:
    """A value whose name was matched with it (``define('AUTH_KEY', '...')``)."""
    start, end, _ = _value(match) or (0, 0, "")
    if _placeholder(text[start:end]):
        return None
    return start, end, _kind_of(match.group("name"))


def _assignment_rules() -> list[_Rule]:
    return [
        _Rule(ASSIGNMENT, _ASSIGNMENT.compiled, _assignment, anchors=_literals(_LONG_WORDS, _SHORT_WORDS), folded=True),
        _Rule(
            ASSIGNMENT,
            re.compile(
                r"<(?P<tag>[A-Za-z0-9_:.-]{0,40}?(?i:password|passwd|secret|token|api[_-]?key|apikey))>"
                r"(?P<s>[^<\n]{1,500})</(?P=tag)>"
            ),
            _xml, anchors=("<",), requires="</",
        ),
        _Rule(
            ASSIGNMENT,
            re.compile(
                r"(?i:define)\([ \t]*['\"](?P<name>[A-Za-z0-9_]{0,60}(?i:PASSWORD|SECRET|KEY|TOKEN|SALT))['\"]"
                r"[ \t]*,[ \t]*(?:'(?P<sq>[^'\n]{1,500})'|\"(?P<dq>[^\"\n]{1,500})\")"
            ),
            _named_value, anchors=("define(",), folded=True,
        ),
        _Rule(
            ASSIGNMENT,
            re.compile(
                r"(?<![\w])(?i:auth|basic_?auth|httpbasicauth|authenticate|login)(?:[ \t]*=[ \t]*)?\([ \t]*"
                r"[\"'][^\"'\n]{0,100}[\"'][ \t]*,[ \t]*(?:'(?P<sq>[^'\n]{1,500})'|\"(?P<dq>[^\"\n]{1,500})\")[ \t]*\)"
            ),
            _argument("password"), anchors=("auth", "basic", "httpbasicauth", "login"), folded=True,
        ),
    ]  # fmt: skip


def _literals(*alternations: str) -> tuple[str, ...]:
    """Where the alternatives of these alternations start: each one's text up to its first
    optional or repeated part (``api[_.-]?key``: ``api``; ``credentials?``: ``credential``),
    in lower case, leaving out those another one starts (``password`` is found as ``pass``)."""
    starts = set()
    for alternation in alternations:
        for alternative in re.sub(r"\([^()]*\)", "(", alternation).split("|"):
            start = re.match(r"[^\[(?*+{\\]*", alternative).group()  # type: ignore[union-attr]
            if alternative[len(start) : len(start) + 1] in ("?", "*", "{"):
                start = start[:-1]  # the last character is optional
            starts.add(start.lower())
    return tuple(sorted(s for s in starts if s and not any(o != s and s.startswith(o) for o in starts)))


# -- headers and command lines ---------------------------------------------------------------------

_ARG = r"""(?:"(?P<dq>[^"\n]{1,500})"|'(?P<sq>[^'\n]{1,500})'|(?P<bare>[^\s'"|;&<>-][^\s'"|;&<>]{0,500}))"""
# The command line's words up to the option (a dozen at most, each tried once).
_BEFORE = r"(?:[ \t]+[^\s]{1,100}){0,12}?[ \t]+"


def _argument(kind: str | None = None) -> Judge:
    """A command line's value (``-p VALUE``, ``--password=VALUE``), unless a placeholder,
    code, a path or a word of a sentence about the option ("--password is deprecated");
    named ``kind``, or by the option's name (group ``name``) when None."""

    def judge(match: re.Match[str], text: str) -> Span | None:
        start, end, group = _value(match) or (0, 0, "")
        value = text[start:end]
        if (
            _placeholder(value)
            or group == "bare"
            and (_code(value) or _path(value) or _in_a_sentence(value, text, end))
        ):
            return None
        return start, end, kind or _kind_of(match.group("name"))

    return judge


_SENTENCE_GOES_ON = _Lazy(r"[ \t]+[^\W\d_]+(?=[ \t.,;:!?]|$)", re.MULTILINE)


def _in_a_sentence(value: str, text: str, end: int) -> bool:
    """A word followed by another word on its line: prose, not a command's argument."""
    return bool(_LETTERS.fullmatch(value)) and _SENTENCE_GOES_ON.match(text, end) is not None


def _command_rules() -> list[_Rule]:
    password = _argument("password")
    options = (
        r"password|passwd|passphrase|pass|token|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
        r"|client[_-]?secret"
    )
    return [
        _Rule(
            HEADER,
            re.compile(
                r"(?i:(?:proxy-)?authorization)[\"']?(?:[ \t]{0,4}(?P<sep>[:=])[ \t]{0,4}|[ \t]{1,4})[\"']?"
                r"(?:(?P<scheme>(?i:bearer|basic|token|bot|digest|negotiate|apikey|sso-key))[ \t]+)?"
                r"(?P<s>[A-Za-z0-9._~+/=:-]{8,})"
            ),
            _authorization, anchors=("authorization", "proxy-authorization"), folded=True,
        ),
        _Rule(
            COMMAND, re.compile(r"(?<![\w-])(?i:bearer)[ \t]+(?:(?i:token)[ \t]+)?(?P<s>[A-Za-z0-9._~+/-]{16,}=*)"),
            _whole("bearer_token", lambda value: any(ch.isdigit() for ch in value)), anchors=("bearer",), folded=True,
        ),
        _Rule(
            COMMAND,
            re.compile(
                rf"\b(?i:curl|wget|httpie|xh|https?(?=[ \t]))\b{_BEFORE}(?:-u|--user|--http-user|-a|--auth)"
                r"(?:[ \t]*=|[ \t]+)?[\"']?[^\s:'\"]{0,100}:(?P<s>[^\s'\"]{1,500})"
            ),
            password, anchors=("curl", "wget", "httpie", "xh", "http"), folded=True,
        ),
        _Rule(
            COMMAND,
            re.compile(
                r"\b(?i:docker|podman|nerdctl|buildah|skopeo|oras|helm|az|oc|crane|regctl)\b[^\n]{0,40}?\blogin\b"
                rf"{_BEFORE}(?:-p|--password)(?:[ \t]*=[ \t]*|[ \t]+){_ARG}"
            ),
            password, anchors=("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "az", "oc",
                               "crane", "regctl"), folded=True, requires="login",
        ),
        _Rule(
            COMMAND,
            re.compile(
                r"\b(?:mysql(?:dump|admin|import|sh|check|binlog)?|mariadb(?:-dump|-admin|dump)?|mycli"
                r"|mongo(?:sh|dump|restore|export|import)?)\b"
                rf"{_BEFORE}(?:-p(?=[^\s-])|-p[ \t]+|--password(?:[ \t]*=[ \t]*|[ \t]+)){_ARG}"
            ),
            password, anchors=("mysql", "mariadb", "mycli", "mongo"),
        ),
        _Rule(COMMAND, re.compile(rf"\bsshpass\b[^\n]{{0,100}}?[ \t]-p[ \t]*{_ARG}"), password, anchors=("sshpass",)),
        _Rule(
            COMMAND, re.compile(rf"\bredis-cli\b{_BEFORE}(?:-a|--pass)[ \t]+{_ARG}"), password, anchors=("redis-cli",),
        ),
        _Rule(
            COMMAND,
            re.compile(
                rf"(?<![\w-])--(?P<name>(?:[A-Za-z0-9]+[-_])*(?i:{options}))(?![\w-])(?:[ \t]*=[ \t]*|[ \t]+){_ARG}"
            ),
            _argument(), anchors=("--",),
        ),
        _Rule(COMMAND, re.compile(rf"(?<![\w-])-pass(?:in|out)[ \t]+pass:{_ARG}"), password, anchors=("-pass",)),
        _Rule(
            COMMAND, re.compile(rf"(?<![\w-])-(?:store|key|srcstore|deststore|srckey|destkey|new)pass[ \t]+{_ARG}"),
            password, anchors=("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass",
                               "-destkeypass", "-newpass"),
        ),
        _Rule(
            COMMAND, re.compile(rf"\b(?i:net[ \t]+use)\b[^\n]{{0,200}}?[ \t]/(?i:user|u):[^\s]{{1,100}}[ \t]+{_ARG}"),
            password, anchors=("net",), folded=True,
        ),
        _Rule(  # .netrc: machine HOST login USER password PW
            COMMAND, re.compile(r"\blogin[ \t]+[^\s]{1,100}[ \t]+password[ \t]+(?P<bare>[^\s]{1,500})"),
            password, anchors=("login",),
        ),
    ]  # fmt: skip


def _authorization(match: re.Match[str], text: str) -> Span | None:
    """The credentials of an Authorization header: after a scheme, any; without one,
    only a value shaped like a token ("Authorization: required" is a sentence)."""
    start, end = match.span("s")
    value = text[start:end]
    scheme = match.group("scheme")
    if _placeholder(value) or scheme is None and (match.group("sep") is None or not _mixed(value)):
        return None  # "Authorization header", "Authorization: required"
    return start, end, "authorization"


# -- prose -----------------------------------------------------------------------------------------

_PROSE_PASSWORD = (
    r"password|passwd|passphrase|passcode|pw|pwd|passwort|kennwort|mot de passe|mdp|contraseña|contrasena"
    r"|senha|wachtwoord|hasło|haslo|lösenordet|lösenord|salasana|adgangskode|şifre|пароль"
)
_PROSE_TOKEN = r"api[ -]?key|access key|secret key|secret|token|access token|api token|auth token|schlüssel|clé|clef"
_CJK = r"パスワード|密码|密碼|口令|비밀번호|암호"
_COPULA = (
    r"(?:[ \t]+(?:is|was|ist|war|lautet|est|était|es|era|é|è|är|er|on|jest|wordt|fica|sería)(?:[ \t]*:)?"
    r"(?:[ \t]+(?:now|still|currently|jetzt|nun|noch|maintenant|désormais|toujours|ahora|todavía|agora|ainda"
    r"|adesso|ora|nu|nog|set to|changed to))?[ \t]+"
    r"|[ \t]+(?:set to|changed to)[ \t]+|[ \t]*[:=：][ \t]*|[ \t]*—[ \t]*)"
)
_PROSE_VALUE = (
    r"""(?:"(?P<dq>[^"\n]{1,200})"|'(?P<sq>[^'\n]{1,200})'|`(?P<bt>[^`\n]{1,200})`"""
    r"|“(?P<cq>[^”\n]{1,200})”|«[ \t]?(?P<gq>[^»\n]{1,200}?)[ \t]?»|「(?P<jq>[^」\n]{1,200})」"
    r"|(?P<bare>\S{1,128}))"
)
_PROSE = _Lazy(
    rf"(?:(?<!\w)(?:(?P<pw>{_PROSE_PASSWORD})|(?P<tok>{_PROSE_TOKEN}))(?:[ \t]+[^\s:=：]{{1,30}}){{0,4}}?{_COPULA}"
    rf"|(?P<cjk>{_CJK})[ \t]*(?:は|是|为|為|는|은|:|：|=)[ \t]*){_PROSE_VALUE}",
    re.IGNORECASE,
)
# "I set the wifi password to ...", "changed my password to ..."
_PROSE_SET = _Lazy(
    rf"(?<!\w)(?:set|changed?|reset|updated?)[ \t]+(?:[^\s]{{1,30}}[ \t]+){{0,3}}?[\w.-]{{0,40}}?"
    rf"(?:(?P<pw>{_PROSE_PASSWORD})|(?P<tok>{_PROSE_TOKEN}))[ \t]+to[ \t]+(?:be[ \t]+)?{_PROSE_VALUE}",
    re.IGNORECASE,
)
# Words that follow "the password is" in a sentence about passwords, not in one that gives one.
_COMMON = frozenset(
    """the a an not too very so also just still now only always never no yes wrong right correct incorrect
    invalid valid expired required needed mandatory optional empty blank missing weak strong long short secure
    insecure safe unsafe different same unknown hidden stored saved encrypted hashed set reset changed
    sensitive case new old mine yours his hers ours theirs here there below above attached enclosed same
    easy hard simple complex ready done fine good bad great okay ok obvious known unchanged temporary
    nicht falsch richtig leer abgelaufen ungültig gültig erforderlich geheim sicher unsicher neu alt gleich
    pas faux vide expiré requis obligatoire nouveau ancien même incorrecte correcte sûr
    no incorrecta correcta vacía vacío requerida nueva vieja igual segura
    errada certa vazia obrigatória nova
    sbagliata giusta vuota nuova
    niet fout leeg verplicht nieuw
    example secret password token""".split()
)
_WORD_ENDINGS = ("ed", "ing", "ly", "ble", "ent", "ive", "ous", "ful", "less", "ion")


def _prose(match: re.Match[str], text: str) -> Span | None:
    groups = match.groupdict()
    found = next(
        ((match.start(g), match.end(g), g) for g in ("dq", "sq", "bt", "cq", "gq", "jq", "bare") if groups.get(g)),
        None,
    )
    if found is None:
        return None
    start, end, group = found
    value = text[start:end]
    if group == "bare":
        if end < len(text) and not text[end].isspace():
            return None  # longer than any password said in a sentence
        trimmed = value.rstrip(".,;:)]}»”\"'")  # not "!" or "?": passwords end with them
        end -= len(value) - len(trimmed)
        value = trimmed.lstrip("\"'“«「(")
        start += len(trimmed) - len(value)
    if not value or _placeholder(value):
        return None
    token = groups.get("tok") is not None
    if group == "bare" and not (_token_like(value) if token else _password_like(value, text, end)):
        return None
    return start, end, _prose_kind(groups["tok"]) if token else "password"


def _token_like(value: str) -> bool:
    return len(value) >= 12 and _mixed(value)


def _password_like(value: str, text: str, end: int) -> bool:
    """A password said in a sentence: anything with a digit or a sign (``hunter2``,
    ``P@ss``), a mixed-case word, or a plain word of 6 letters or more that ends the
    sentence and is no common word ("the password is swordfish." but not "is wrong")."""
    if len(value) < 4 or value.lower() in _COMMON or _code(value) or _path(value):
        return False
    if not _WORDS.fullmatch(value):
        return True
    if any(ch.isupper() for ch in value[1:]):
        return True
    after = text[end : end + 1]
    ends_sentence = not after or after in ".!?\n\r;,)"
    return ends_sentence and len(value) >= 6 and not value.lower().endswith(_WORD_ENDINGS)


def _prose_kind(keyword: str) -> str:
    lowered = keyword.lower()
    if "token" in lowered:
        return "token"
    if lowered in ("secret",):
        return "secret"
    return "api_key"


def _prose_rules() -> list[_Rule]:
    return [
        _Rule(PROSE, _PROSE.compiled, _prose, anchors=_literals(_PROSE_PASSWORD, _PROSE_TOKEN, _CJK), folded=True),
        _Rule(PROSE, _PROSE_SET.compiled, _prose, anchors=("set", "change", "reset", "update"), folded=True),
    ]


@cache
def _rules() -> tuple[_Rule, ...]:
    """Every rule, compiled on the first redaction (a server that does not redact
    compiles none)."""
    return (
        *_private_key_rules(),
        *_provider_rules(),
        *_other_token_rules(),
        _Rule(URL, _URL.compiled, _url_password, anchors=("://",)),
        *_command_rules(),
        *_assignment_rules(),
        *_prose_rules(),
    )
