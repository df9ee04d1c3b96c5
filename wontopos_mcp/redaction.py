"""Secrets kept out of memory (SPEC "Time and identity", Redaction; opt-in ``redact = secrets``).

Before a write is checked for duplicates, embedded or stored, each secret in its text is
replaced by ``[redacted:<kind>]``; the write answer lists ``redacted: [{kind, count}]``.
What finds what:

- **detect-secrets** (Yelp), the provider plugins, line by line as the library scans:
  AWS, Azure storage, Artifactory, Cloudant, Discord, GitHub (``ghp_`` ...), GitLab, IBM
  Cloud IAM and COS, Mailchimp, npm, OpenAI (legacy), PyPI, SendGrid, Slack (tokens and
  webhooks), SoftLayer, Square, Stripe, Telegram, Twilio, JSON Web Tokens (its base64 and
  JSON check) and passwords in URLs (``scheme://user:pass@host``, the password only). A
  plugin says which values are secrets (``analyze_string``); its own patterns give where
  they are, and each place is widened to the whole token, because the library's
  fixed-length patterns stop inside longer ones (a Stripe key is now ~100 characters; the
  JWT pattern ends before the signature).
- **written here**, what the library lacks: PEM private key blocks, whole (its plugin
  flags only the ``BEGIN`` line), and PuTTY key files; newer token formats (Anthropic
  ``sk-ant-``, OpenAI ``sk-proj-``, GitHub ``github_pat_``, Google ``AIza``, Hugging Face
  ``hf_``, Stripe test keys); ``Authorization`` headers and bearer tokens; and
  assignments (``password=...``, ``api_key: ...``, ``"token": "..."``). Assignments are
  not the library's keyword plugin: it takes the rest of the line as the value and reads
  prose ("secret: we never ship on Fridays") as a secret. Here the value is one token or
  one quoted string, the name must *end* with the keyword (``max_tokens``,
  ``password_hash``, ``bypass`` are other names), and an unquoted value made of letters,
  dots and underscores only (``password = expected``, ``api_key = os.environ[...]``,
  ``secret: tomorrow``) is read as a name, not a secret.
- **left out**: the library's high-entropy plugins (they flag commit hashes and ids), its
  public-IP plugin (not a secret) and its keyword plugin (above).

detect-secrets is imported on the first redaction only, so a server that does not
redact never loads it (importing it costs about half a second cold).
"""

from __future__ import annotations

import bisect
import importlib
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

NONE, SECRETS = "none", "secrets"
MODES = (NONE, SECRETS)

# detect-secrets plugins used: (module under detect_secrets.plugins, class, our kind, and
# text a line must hold for the plugin to look at it, when its pattern requires one).
# Our kind names are part of the answers, so they do not follow the library's labels.
_PLUGINS = (
    ("aws", "AWSKeyDetector", "aws_key"),
    ("azure_storage_key", "AzureStorageKeyDetector", "azure_storage_key"),
    ("artifactory", "ArtifactoryDetector", "artifactory_token"),
    ("cloudant", "CloudantDetector", "cloudant_key"),
    ("discord", "DiscordBotTokenDetector", "discord_token"),
    ("github_token", "GitHubTokenDetector", "github_token"),
    ("gitlab_token", "GitLabTokenDetector", "gitlab_token"),
    ("ibm_cloud_iam", "IbmCloudIamDetector", "ibm_cloud_key"),
    ("ibm_cos_hmac", "IbmCosHmacDetector", "ibm_cos_key"),
    ("mailchimp", "MailchimpDetector", "mailchimp_key"),
    ("npm", "NpmDetector", "npm_token", "_authToken"),  # its pattern is quadratic in a line of URLs
    ("openai", "OpenAIDetector", "openai_key"),
    ("pypi_token", "PypiTokenDetector", "pypi_token"),
    ("sendgrid", "SendGridDetector", "sendgrid_key"),
    ("slack", "SlackDetector", "slack_token"),
    ("softlayer", "SoftlayerDetector", "softlayer_key"),
    ("square_oauth", "SquareOAuthDetector", "square_secret"),
    ("stripe", "StripeDetector", "stripe_key"),
    ("telegram_token", "TelegramBotTokenDetector", "telegram_token"),
    ("twilio", "TwilioKeyDetector", "twilio_key"),
    ("jwt", "JwtTokenDetector", "jwt"),
    ("basic_auth", "BasicAuthDetector", "url_password"),
)

_PEM_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
_PRIVATE_KEYS = (
    # a whole block, or one cut short: its header lines and base64 lines
    re.compile(
        rf"-----BEGIN (?P<label>{_PEM_LABEL})-----"
        r"(?:[\s\S]{0,100000}?-----END (?P=label)-----"
        r"|(?:\s*(?:(?:Proc-Type|DEK-Info|Comment):[^\n]*|[A-Za-z0-9+/=]{16,}))*)"
    ),
    re.compile(rf"(?:[A-Za-z0-9+/=]{{16,}}\s*)+-----END {_PEM_LABEL}-----"),  # its BEGIN in another text
    re.compile(r"PuTTY-User-Key-File-\d:[\s\S]{0,100000}?Private-MAC: *[0-9a-fA-F]+"),
)
_B = r"(?<![\w-])"  # a token starts here
_TOKENS = (
    ("anthropic_key", re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(_B + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|" + _B + r"sk-[A-Za-z0-9]{48}\b")),
    ("github_token", re.compile(_B + r"github_pat_[A-Za-z0-9_]{22,}")),
    ("google_api_key", re.compile(_B + r"AIza[0-9A-Za-z_-]{35}")),
    ("huggingface_token", re.compile(_B + r"hf_[A-Za-z0-9]{30,}")),
    ("stripe_key", re.compile(_B + r"(?:sk|rk)_(?:test|live)_[0-9A-Za-z]{24,}")),
)
_HEADERS = (
    (
        "authorization",
        re.compile(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Bot|Digest)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})"
        ),
    ),
    ("bearer_token", re.compile(_B + r"Bearer\s+(?P<value>(?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{20,}=*)")),
)
_ASSIGNMENT = re.compile(
    r"""(?<![\w.-])(?P<name>
        [\w.-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth[_-]?key)
        |(?:[\w.-]*[_.-])?(?:pass|pwd|pw)
    )(?![\w-])["']?\]?\s*(?::=|=>|==?|:)\s*
    (?P<value>"[^"\n]{1,500}"|'[^'\n]{1,500}'|`[^`\n]{1,500}`|(?:[^\s"'`,;&<>]|&(?!\w+=))+)""",
    re.IGNORECASE | re.VERBOSE,
)
_NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z_.]*(?:[(\[].*)?")  # expected, os.environ[, getpass(), None
# ${DB_PASSWORD}, $API_KEY, {{ secret }}, %(pw)s, <your-key>, ***, xxxx, and our own placeholder
_PLACEHOLDER = re.compile(r"\$\{|\$[A-Z_][A-Z0-9_]*$|\{\{|%\(|<[^<>]*>$|\[redacted:|[*xX.]+$")
_LABEL = re.compile(r"^[A-Za-z]+=(?=.)")  # AccountKey=
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_RANKS = {"private_key": 0, "url_password": 2, "authorization": 3, "bearer_token": 3, "assignment": 4}  # others 1

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
        self._plugins: list[tuple[str, Any, str]] | None = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.mode == SECRETS

    def redact(self, text: str) -> Redacted:
        if not self.enabled:
            return Redacted(text, {})
        spans = _choose(_find(text, self._loaded()))
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

    def _loaded(self) -> list[tuple[str, Any, str]]:
        with self._lock:
            if self._plugins is None:
                self._plugins = [
                    (kind, getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)(), needs)
                    for module, name, kind, *rest in _PLUGINS
                    for needs in [rest[0] if rest else ""]
                ]
            return self._plugins


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


# -- finding -------------------------------------------------------------------------------------


def _find(text: str, plugins: list[tuple[str, Any, str]]) -> Iterator[tuple[int, int, int, str]]:
    """Every candidate ``(rank, start, end, kind)``; they may overlap."""
    if "PRIVATE KEY" in text or "PuTTY-User-Key-File" in text:  # the patterns backtrack on prose
        for pattern in _PRIVATE_KEYS:
            for match in pattern.finditer(text):
                yield 0, match.start(), match.end(), "private_key"
    for kind, pattern in _TOKENS:
        for match in pattern.finditer(text):
            yield 1, match.start(), match.end(), kind
    for kind, pattern in _HEADERS:
        for match in pattern.finditer(text):
            yield _RANKS[kind], match.start("value"), match.end("value"), kind
    for match in _ASSIGNMENT.finditer(text):
        span = _assigned(match)
        if span is not None:
            yield _RANKS["assignment"], *span
    at = 0
    for line in text.split("\n"):
        for kind, plugin, needs in plugins:
            if needs not in line:
                continue
            for start, end in _plugin_spans(plugin, line):
                start, end = _widened(line, start, end)
                yield _RANKS.get(kind, 1), at + start, at + end, kind
        at += len(line) + 1


def _plugin_spans(plugin: Any, line: str) -> Iterator[tuple[int, int]]:
    """Where the values the plugin calls secrets are: the first group its pattern
    captured (a URL's password), else the whole match without the delimiters or label
    some patterns include (``"AKC...``, ``AccountKey=...``)."""
    values = set(plugin.analyze_string(line))
    if not values:
        return
    for pattern in plugin.denylist:
        for match in pattern.finditer(line):
            group = next((g for g in range(1, (pattern.groups or 0) + 1) if match.group(g)), 0)
            if match.group(group) not in values:
                continue
            start, end = match.span(group)
            value = line[start:end]
            kept = _LABEL.sub("", value.strip(" \t\r\"'").lstrip("=:"), count=1)
            offset = value.find(kept)
            yield start + offset, start + offset + len(kept)


def _widened(line: str, start: int, end: int) -> tuple[int, int]:
    """A match grown to the whole token it is part of (a token does not end mid-word)."""
    while start > 0 and line[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(line) and line[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _assigned(match: re.Match[str]) -> Span | None:
    """The value of ``name = value`` when it reads as a secret, with the name's kind."""
    value, start = match.group("value"), match.start("value")
    quoted = value[0] in "\"'`"
    if quoted:
        value, start = value[1:-1], start + 1
        if not value.strip() or _PLACEHOLDER.match(value.strip()):
            return None
    else:
        value = value.rstrip(".)]}:")
        if len(value) < 4 or _PLACEHOLDER.match(value) or _NAME_LIKE.fullmatch(value):
            return None
    return start, start + len(value), _kind_of(match.group("name").lower())


def _kind_of(name: str) -> str:
    for ending, kind in (("token", "token"), ("secret", "secret"), ("private_key", "private_key")):
        if name.endswith(ending) or name.replace("-", "_").endswith(ending):
            return kind
    if re.search(r"(?:pass(?:word|wd|phrase)?|pwd|pw)$", name):
        return "password"
    return "api_key"


def _choose(candidates: Iterable[tuple[int, int, int, str]]) -> list[Span]:
    """Non-overlapping spans, in text order: the better-ranked detector wins an overlap
    (a provider's token inside ``api_key = "..."`` is that provider's), then the earlier
    and longer span."""
    starts: list[int] = []  # of the spans taken, which never overlap: sorted by start, and by end
    taken: list[Span] = []
    for _, start, end, kind in sorted(candidates, key=lambda c: (c[0], c[1], -c[2])):
        at = bisect.bisect_left(starts, end)  # spans from ``at`` on start at or after ``end``
        if end <= start or (at > 0 and taken[at - 1][1] > start):
            continue
        starts.insert(at, start)
        taken.insert(at, (start, end, kind))
    return taken
