"""Secrets known by their own shape: provider tokens (fixed prefixes and lengths), JWTs,
AWS secret access keys near "AWS", private key blocks, passwords in URLs. The rules
``redaction`` runs; ``secret_words`` finds those known by the words around them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable

from .secret_matching import (
    PRIVATE_KEY,
    PROVIDER,
    URL,
    Judge,
    Lazy,
    Rule,
    Span,
    cased,
    mixed,
    placeholder,
    whole,
)

_TOKEN_START = r"(?<![A-Za-z0-9_-])"
_TOKEN_END = r"(?![A-Za-z0-9])"


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
    elif token.startswith("sk-or-"):
        kind = "openrouter_key"
    elif (
        token.startswith(("sk-proj-", "sk-svcacct-", "sk-admin-"))
        or "T3BlbkFJ" in token
        or (len(token) == 51 and token[3:].isalnum())
    ):
        kind = "openai_key"
    elif len(token) >= 35 and mixed(token[3:]):
        kind = "api_key"
    else:
        return None
    return match.start(), match.end(), kind


def _aws_secret(match: re.Match[str], text: str) -> Span | None:
    """40 characters of base64 are an AWS secret access key only with AWS near them."""
    value = match.group()
    if not cased(value):
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
        mixed,
    ),
    ("stripe_key", ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"), r"[A-Za-z0-9]{20,}", None),
    ("google_api_key", ("AIza",), r"[0-9A-Za-z_-]{35}", None),
    ("google_oauth_secret", ("GOCSPX-",), r"[0-9A-Za-z_-]{24,}", None),
    ("google_oauth_token", ("ya29.",), r"[0-9A-Za-z_-]{30,}", None),
    ("huggingface_token", ("hf_",), r"[A-Za-z0-9]{30,}", mixed),
    ("npm_token", ("npm_",), r"[A-Za-z0-9]{36}", None),
    ("pypi_token", ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"), r"[A-Za-z0-9_-]{40,}", None),
    ("sendgrid_key", ("SG.",), r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", None),
    ("twilio_key", ("SK",), r"[0-9a-f]{32}", None),
    ("square_secret", ("sq0csp-", "sq0atp-", "EAAA"), r"[0-9A-Za-z_-]{22,}", mixed),
    ("artifactory_token", ("AKC",), r"[A-Za-z0-9]{10,}", mixed),
    ("vault_token", ("hvs.", "hvb.", "hvr."), r"[A-Za-z0-9_-]{20,}", None),
    ("vault_token", ("s.", "b."), r"[A-Za-z0-9]{24}", cased),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"[a-f0-9]{64}", None),
    ("shopify_token", ("shpat_", "shpss_", "shpca_", "shppa_"), r"[a-fA-F0-9]{32}", None),
    ("databricks_token", ("dapi",), r"[a-f0-9]{32}(?:-[0-9])?", None),
    ("linear_key", ("lin_api_",), r"[A-Za-z0-9]{40}", None),
    ("postman_key", ("PMAK-",), r"[a-f0-9]{24}-[a-f0-9]{34}", None),
    ("newrelic_key", ("NRAK-",), r"[A-Z0-9]{27}", None),
    ("grafana_token", ("glsa_", "glc_"), r"[A-Za-z0-9_=+/-]{32,}", None),
    ("sentry_token", ("sntrys_", "sntryu_"), r"[A-Za-z0-9_=+/-]{40,}", None),
    ("groq_key", ("gsk_",), r"[A-Za-z0-9]{48,}", None),
    ("replicate_token", ("r8_",), r"[A-Za-z0-9]{37}", mixed),
    ("perplexity_key", ("pplx-",), r"[A-Za-z0-9]{48}", None),
    ("xai_key", ("xai-",), r"[A-Za-z0-9]{70,}", None),
    ("pulumi_token", ("pul-",), r"[a-f0-9]{40}", None),
    ("tailscale_key", ("tskey-",), r"[A-Za-z0-9-]{20,}", None),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct."), r"[A-Za-z0-9]{40,}", None),
    ("atlassian_token", ("ATATT",), r"[A-Za-z0-9_=-]{100,}", None),
    ("notion_token", ("ntn_", "secret_"), r"[A-Za-z0-9]{40,}", mixed),
    ("age_key", ("AGE-SECRET-KEY-1",), r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", None),
    ("mailgun_key", ("key-",), r"[0-9a-f]{32}", None),
    ("heroku_key", ("HRKU-",), r"[A-Za-z0-9_-]{58,}", None),
    ("netlify_token", ("nfp_", "nfc_"), r"[A-Za-z0-9]{36,}", mixed),
    ("supabase_token", ("sbp_",), r"[a-f0-9]{40}", None),
    ("supabase_token", ("sb_secret_",), r"[A-Za-z0-9_-]{30,}", None),
    ("planetscale_token", ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"), r"[A-Za-z0-9_.-]{32,}", None),
    ("mapbox_token", ("sk.eyJ",), r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", None),
    ("dropbox_token", ("sl.",), r"[A-Za-z0-9_.-]{130,}", mixed),
    ("figma_token", ("figd_", "figu_"), r"[A-Za-z0-9_-]{40,}", None),
    ("airtable_token", ("pat",), r"[A-Za-z0-9]{14}\.[a-f0-9]{64}", None),
    ("asana_token", ("1/", "2/"), r"[0-9]{13,16}/[0-9]{13,16}:[a-f0-9]{32}", None),
    ("brevo_key", ("xkeysib-", "xsmtpsib-"), r"[a-f0-9]{64}-[A-Za-z0-9]{16}", None),
    ("braintree_token", ("access_token$production$", "access_token$sandbox$"), r"[a-z0-9]{16}\$[a-f0-9]{32}", None),
    (
        "plaid_token",
        ("access-production-", "access-sandbox-", "access-development-"),
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        None,
    ),
    ("dynatrace_token", ("dt0c01.", "dt0s01.", "dt0s02.", "dt0s16."), r"[A-Z0-9]{24}\.[A-Z0-9]{64}", None),
    ("contentful_token", ("CFPAT-",), r"[A-Za-z0-9_-]{43}", None),
    ("prefect_key", ("pnu_", "pnb_"), r"[A-Za-z0-9]{36}", None),
    ("pinecone_key", ("pcsk_",), r"[A-Za-z0-9_]{60,}", mixed),
    ("langsmith_key", ("lsv2_pt_", "lsv2_sk_"), r"[a-f0-9]{32}_[a-f0-9]{10}", None),
    ("aws_session_token", ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdzE", "FQoGZXIvYXdzE"), r"[A-Za-z0-9/+=]{100,}", None),
    ("alibaba_key", ("LTAI",), r"[A-Za-z0-9]{12,20}", mixed),
    ("tencent_key", ("AKID",), r"[A-Za-z0-9]{32}", mixed),
    ("docker_token", ("dckr_pat_", "dckr_oat_"), r"[A-Za-z0-9_-]{27,}", None),
    ("atlassian_token", ("ATBB",), r"[A-Za-z0-9_=.-]{32,}", mixed),
    ("rubygems_key", ("rubygems_",), r"[a-f0-9]{48}", None),
    ("nuget_key", ("oy2",), r"[a-z0-9]{43}", mixed),
    ("crates_token", ("cio",), r"[A-Za-z0-9]{32}", mixed),
    ("twitter_token", ("AAAAAAAAAAAAAAAAAAAAA",), r"[A-Za-z0-9%]{30,}(?![+/=])", mixed),  # not base64 of zeros
    ("facebook_token", ("EAA",), r"[B-Z][A-Za-z0-9]{100,}", cased),
    ("salesforce_token", ("00D",), r"[A-Za-z0-9]{9,15}![A-Za-z0-9._]{80,}", None),
    (
        "launchdarkly_key",
        ("sdk-", "api-"),
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        None,
    ),
    ("render_key", ("rnd_",), r"[A-Za-z0-9]{32,}", mixed),
    ("onepassword_token", ("ops_eyJ",), r"[A-Za-z0-9_=-]{100,}", None),
    ("resend_key", ("re_",), r"[A-Za-z0-9]{8}_[A-Za-z0-9]{24}", mixed),
    ("fly_token", ("FlyV1 fm1_", "FlyV1 fm2_", "fm1_", "fm2_"), r"[A-Za-z0-9_+/=,-]{100,}", None),
    ("newrelic_key", ("NRII-", "NRJS-"), r"[A-Za-z0-9_-]{32}", None),
    ("artifactory_token", ("cmVmdGtuOjAxOj",), r"[A-Za-z0-9]{40,}", None),
    ("google_oauth_token", ("1//0",), r"[A-Za-z0-9_-]{40,}", None),
)
_PROVIDER_KINDS = {"age_key": "private_key"}  # an age key is a private key


def _provider_rules() -> list[Rule]:
    rules = []
    for kind, prefixes, rest, check in _PROVIDERS:
        alternatives = "|".join(re.escape(p) for p in prefixes)
        pattern = re.compile(f"{_TOKEN_START}(?:{alternatives}){rest}{_TOKEN_END}")
        rules.append(Rule(PROVIDER, pattern, whole(_PROVIDER_KINDS.get(kind, kind), check), anchors=prefixes))
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


def _other_token_rules() -> list[Rule]:
    """Tokens whose shape is more than a prefix and a run."""
    t = r"A-Za-z0-9_\-"
    return [
        Rule(PROVIDER, re.compile(rf"{_TOKEN_START}sk-[{t}]{{20,}}"), _sk_kind, anchors=("sk-",)),
        Rule(
            PROVIDER, re.compile(rf"{_TOKEN_START}eyJ[{t}]{{8,}}\.eyJ[{t}]{{8,}}\.[{t}]*(?:\.[{t}]*\.[{t}]*)?"),
            whole("jwt", _jwt), anchors=("eyJ",),
        ),
        # no literal: scanned, starting at a character class (sre skips to its characters)
        Rule(
            PROVIDER, re.compile(r"[A-Za-z0-9/+](?<![A-Za-z0-9/+=][A-Za-z0-9/+])[A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])"),
            _aws_secret, needles=("aws", "akia", "asia"), folded=True,
        ),
        Rule(
            PROVIDER, re.compile(rf"[MNO](?<![{t}.][MNO])[{t}]{{23,27}}\.[{t}]{{6}}\.[{t}]{{27,40}}(?![{t}])"),
            whole("discord_token", cased), needles=(".",),
        ),
        # anchored at a literal in the middle, what comes before checked by a lookbehind
        Rule(
            PROVIDER,
            re.compile(r"(?:(?<=(?<![A-Za-z0-9_:-])[0-9]{8})|(?<=(?<![A-Za-z0-9_:-])[0-9]{9})"
                       r"|(?<=(?<![A-Za-z0-9_:-])[0-9]{10})):AA[A-Za-z0-9_-]{30,}(?![A-Za-z0-9_-])"),
            _telegram, anchors=(":AA",),
        ),
        Rule(
            PROVIDER, re.compile(r"(?<=(?<![A-Za-z0-9_-])AAAA[A-Za-z0-9_-]{7}):APA91b[A-Za-z0-9_-]{100,}"),
            _behind(11, "firebase_key"), anchors=(":APA91b",),
        ),
        Rule(
            PROVIDER, re.compile(r"(?<=(?<![A-Za-z0-9])[A-Za-z0-9]{14})\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
            _behind(14, "terraform_token"), anchors=(".atlasv1.",),
        ),
        Rule(
            PROVIDER, re.compile(r"(?<=(?<![A-Za-z0-9])[0-9a-f]{32})-us[0-9]{1,2}(?![A-Za-z0-9])"),
            _behind(32, "mailchimp_key"), anchors=("-us",),
        ),
        Rule(
            PROVIDER,
            re.compile(r"(?<=(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9])Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
            _behind(4, "azure_key"), anchors=("Q~",),
        ),
        # webhook URLs: the path is the secret; the whole URL goes
        Rule(
            PROVIDER, re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
            _with_scheme("slack_token"), anchors=("hooks.slack.com/",), requires="://",
        ),
        Rule(
            PROVIDER, re.compile(r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/[A-Za-z0-9_-]{30,}"),
            _with_scheme("discord_token"), anchors=("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
        ),
        # Azure connection strings and shared access signatures: the key only
        Rule(
            PROVIDER, re.compile(r"(?i:AccountKey)=(?P<s>[A-Za-z0-9+/]{40,100}={0,2})"), whole("azure_storage_key"),
            anchors=("accountkey=",), folded=True,
        ),
        Rule(
            PROVIDER, re.compile(r"(?i:SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{30,100}={0,2})"), whole("azure_key"),
            anchors=("sharedaccesskey=",), folded=True,
        ),
        Rule(
            PROVIDER, re.compile(r"(?<=[?&;])sig=(?P<s>[A-Za-z0-9%+/]{20,200}(?:=|%3[Dd]){0,2})"), whole("azure_key"),
            anchors=("sig=",),
        ),
    ]  # fmt: skip


# -- private keys --------------------------------------------------------------------------------

_PEM_GAP = r"(?:\s|\\[nr]){1,8}"  # real line breaks, or a JSON string's escaped ones
_PEM_HEADER = r"(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\n\\]{0,200}"
# A block: BEGIN, then anything but the five dashes of its END line, then END; or, when no
# END follows (the key was cut short), BEGIN and the header and base64 lines after it.
_PEM = Lazy(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[^-]*(?:-(?!----)[^-]*)*-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    rf"|(?:{_PEM_GAP}(?:[A-Za-z0-9+/=]{{16,}}|{_PEM_HEADER}))+)"
)
_PEM_BODY = Lazy(r"[A-Za-z0-9+/=]{16,}")
_PEM_END = Lazy(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_LINE = Lazy(rf"[A-Za-z0-9+/=]{{16,}}|{_PEM_HEADER}")
_PEM_LAST_LINE = Lazy(r"[A-Za-z0-9+/=]+")  # the line above END may be short
_PUTTY = Lazy(
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


def _private_key_rules() -> list[Rule]:
    jwk_private = ('"d"', '"p"', '"q"', '"dp"', '"dq"', '"qi"', '"k"')  # a JSON Web Key's private members
    return [
        Rule(
            PRIVATE_KEY,
            re.compile(r'"(?:d|p|q|dp|dq|qi|k)"[ \t]*:[ \t]*"(?P<s>[A-Za-z0-9_-]{20,})"'),
            whole("private_key"),
            anchors=jwk_private,
            requires='"kty"',
        ),
        Rule(PRIVATE_KEY, _PEM.compiled, _pem, anchors=("-----BEGIN",)),
        Rule(PRIVATE_KEY, _PEM_END.compiled, _orphan_end, anchors=("-----END",)),
        Rule(PRIVATE_KEY, _PUTTY.compiled, whole("private_key"), anchors=("PuTTY-User-Key-File-",)),
    ]


# -- passwords in URLs -----------------------------------------------------------------------------

# After "://": a user (maybe empty), ":", the password up to the last "@" before the host.
# The password may hold "#" and "?" (written unescaped, as people do): a port followed by
# a query or a fragment is not one ("host:8080?to=a@b").
_URL = Lazy(r"://[^\s:/?#@\"'<>\[\]`]{0,128}:(?P<s>[^\s/\"<>`]{1,256})@(?=[A-Za-z0-9\[_.-])")
_PORT = Lazy(r"[0-9]{1,5}(?:[?#]|$)")


def _url_password(match: re.Match[str], text: str) -> Span | None:
    start, end = match.span("s")
    if placeholder(text[start:end]) or _PORT.match(text[start:end]):
        return None
    return start, end, "url_password"


def rules() -> list[Rule]:
    return [
        *_private_key_rules(),
        *_provider_rules(),
        *_other_token_rules(),
        Rule(URL, _URL.compiled, _url_password, anchors=("://",)),
    ]
