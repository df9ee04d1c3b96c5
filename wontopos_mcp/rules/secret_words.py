"""Secrets known by the words around them: assignments (``DB_PASSWORD=...``,
``"token": "..."``), headers and command lines (``Authorization: Bearer``, ``curl -u``,
``mysql -pPW``), and sentences ("the password is ...", "Das Passwort lautet ..."). The
rules ``redaction`` runs; ``secret_shapes`` finds those known by their own shape.
"""

from __future__ import annotations

import re

from .secret_matching import (
    ASSIGNMENT,
    CODE,
    COMMAND,
    HEADER,
    LETTERS,
    PROSE,
    WORDS,
    Judge,
    Lazy,
    Rule,
    Span,
    cased,
    is_code,
    is_path,
    literals,
    mixed,
    placeholder,
    value_span,
    whole,
)

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
_ASSIGNMENT = Lazy(
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
_UI_TEXT = Lazy(r"(?i:enter|please|type|bitte|veuillez|introduzca|digite)\b|.*(?:\.\.\.|…|:)$")


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
    start, end, group = value_span(match) or (0, 0, "")
    value = text[start:end]
    if group == "bare":
        trimmed = value.rstrip(".)]}:")
        end -= len(value) - len(trimmed)
        value = trimmed
        if len(value) < 4 or value[0] in "([{" or placeholder(value) or not _bare_secret(match, text, value, end):
            return None  # "(see the vault)", a tuple, a list, an object
    elif placeholder(value) or _UI_TEXT.match(value.strip()):
        return None
    return start, end, _kind_of(text[start_of_name : match.end("kw")])


def _bare_secret(match: re.Match[str], text: str, value: str, end: int) -> bool:
    """An unquoted value: code (a call, a subscript, a dotted or snake_case name) is not
    a secret; a name with a digit is (``q8w7e6r5t4y3``, ``hunter2``); a plain word is a
    password only when it ends its line after ``password: word`` or ``password=word``
    (a YAML or .env line): ``password = expected`` is code, "secret: tomorrow" prose."""
    if is_path(value):
        return False
    if not CODE.fullmatch(value) or any(ch.isdigit() for ch in value) and not is_code(value):
        return True
    if is_code(value) or match.group("gap") or match.group("sep") == "==":
        return False
    if _kind_of(match.group("kw")) != "password":
        return False
    after = text[end : end + 1]
    return len(value) >= 6 and (not after or after in "\r\n") and value.lower() not in _COMMON


def _xml(match: re.Match[str], text: str) -> Span | None:
    start, end = match.span("s")
    if placeholder(text[start:end]):
        return None
    return start, end, _kind_of(match.group("tag"))


def _named_value(match: re.Match[str], text: str) -> Span | None:
    """A value whose name was matched with it (``define('AUTH_KEY', '...')``)."""
    start, end, _ = value_span(match) or (0, 0, "")
    if placeholder(text[start:end]):
        return None
    return start, end, _kind_of(match.group("name"))


def _assignment_rules() -> list[Rule]:
    return [
        Rule(ASSIGNMENT, _ASSIGNMENT.compiled, _assignment, anchors=literals(_LONG_WORDS, _SHORT_WORDS), folded=True),
        Rule(
            ASSIGNMENT,
            re.compile(
                r"<(?P<tag>[A-Za-z0-9_:.-]{0,40}?(?i:password|passwd|secret|token|api[_-]?key|apikey))>"
                r"(?P<s>[^<\n]{1,500})</(?P=tag)>"
            ),
            _xml, anchors=("<",), requires="</",
        ),
        Rule(
            ASSIGNMENT,
            re.compile(
                r"(?i:define)\([ \t]*['\"](?P<name>[A-Za-z0-9_]{0,60}(?i:PASSWORD|SECRET|KEY|TOKEN|SALT))['\"]"
                r"[ \t]*,[ \t]*(?:'(?P<sq>[^'\n]{1,500})'|\"(?P<dq>[^\"\n]{1,500})\")"
            ),
            _named_value, anchors=("define(",), folded=True,
        ),
        Rule(
            ASSIGNMENT,
            re.compile(
                r"(?<![\w])(?i:auth|basic_?auth|httpbasicauth|authenticate|login)(?:[ \t]*=[ \t]*)?\([ \t]*"
                r"[\"'][^\"'\n]{0,100}[\"'][ \t]*,[ \t]*(?:'(?P<sq>[^'\n]{1,500})'|\"(?P<dq>[^\"\n]{1,500})\")[ \t]*\)"
            ),
            _argument("password"), anchors=("auth", "basic", "httpbasicauth", "login"), folded=True,
        ),
    ]  # fmt: skip


# -- headers and command lines ---------------------------------------------------------------------

_ARG = r"""(?:"(?P<dq>[^"\n]{1,500})"|'(?P<sq>[^'\n]{1,500})'|(?P<bare>[^\s'"|;&<>-][^\s'"|;&<>]{0,500}))"""
# The command line's words up to the option (a dozen at most, each tried once).
_BEFORE = r"(?:[ \t]+[^\s]{1,100}){0,12}?[ \t]+"


def _argument(kind: str | None = None) -> Judge:
    """A command line's value (``-p VALUE``, ``--password=VALUE``), unless a placeholder,
    code, a path or a word of a sentence about the option ("--password is deprecated");
    named ``kind``, or by the option's name (group ``name``) when None."""

    def judge(match: re.Match[str], text: str) -> Span | None:
        start, end, group = value_span(match) or (0, 0, "")
        value = text[start:end]
        if (
            placeholder(value)
            or group == "bare"
            and (is_code(value) or is_path(value) or _in_a_sentence(value, text, end))
        ):
            return None
        return start, end, kind or _kind_of(match.group("name"))

    return judge


_SENTENCE_GOES_ON = Lazy(r"[ \t]+[^\W\d_]+(?=[ \t.,;:!?]|$)", re.MULTILINE)


def _in_a_sentence(value: str, text: str, end: int) -> bool:
    """A word followed by another word on its line: prose, not a command's argument."""
    return bool(LETTERS.fullmatch(value)) and _SENTENCE_GOES_ON.match(text, end) is not None


def _command_rules() -> list[Rule]:
    password = _argument("password")
    options = (
        r"password|passwd|passphrase|pass|token|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
        r"|client[_-]?secret"
    )
    return [
        Rule(
            HEADER,
            re.compile(
                r"(?i:(?:proxy-)?authorization)[\"']?(?:[ \t]{0,4}(?P<sep>[:=])[ \t]{0,4}|[ \t]{1,4})[\"']?"
                r"(?:(?P<scheme>(?i:bearer|basic|token|bot|digest|negotiate|apikey|sso-key|ssws))[ \t]+)?"
                r"(?P<s>[A-Za-z0-9._~+/=:-]{8,})"
            ),
            _authorization, anchors=("authorization", "proxy-authorization"), folded=True,
        ),
        Rule(
            COMMAND, re.compile(r"(?<![\w-])(?i:bearer)[ \t]+(?:(?i:token)[ \t]+)?(?P<s>[A-Za-z0-9._~+/-]{16,}=*)"),
            whole("bearer_token", lambda value: any(ch.isdigit() for ch in value)), anchors=("bearer",), folded=True,
        ),
        Rule(
            COMMAND,
            re.compile(
                rf"\b(?i:curl|wget|httpie|xh|https?(?=[ \t]))\b{_BEFORE}(?:-u|--user|--http-user|-a|--auth)"
                r"(?:[ \t]*=|[ \t]+)?[\"']?[^\s:'\"]{0,100}:(?P<s>[^\s'\"]{1,500})"
            ),
            password, anchors=("curl", "wget", "httpie", "xh", "http"), folded=True,
        ),
        Rule(
            COMMAND,
            re.compile(
                r"\b(?i:docker|podman|nerdctl|buildah|skopeo|oras|helm|az|oc|crane|regctl)\b[^\n]{0,40}?\blogin\b"
                rf"{_BEFORE}(?:-p|--password)(?:[ \t]*=[ \t]*|[ \t]+){_ARG}"
            ),
            password, anchors=("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "az", "oc",
                               "crane", "regctl"), folded=True, requires="login",
        ),
        Rule(
            COMMAND,
            re.compile(
                r"\b(?:mysql(?:dump|admin|import|sh|check|binlog)?|mariadb(?:-dump|-admin|dump)?|mycli"
                r"|mongo(?:sh|dump|restore|export|import)?)\b"
                rf"{_BEFORE}(?:-p(?=[^\s-])|-p[ \t]+|--password(?:[ \t]*=[ \t]*|[ \t]+)){_ARG}"
            ),
            _mysql_password, anchors=("mysql", "mariadb", "mycli", "mongo"),
        ),
        Rule(COMMAND, re.compile(rf"\bsshpass\b[^\n]{{0,100}}?[ \t]-p[ \t]*{_ARG}"), password, anchors=("sshpass",)),
        Rule(
            COMMAND, re.compile(rf"\bredis-cli\b{_BEFORE}(?:-a|--pass)[ \t]+{_ARG}"), password, anchors=("redis-cli",),
        ),
        Rule(
            COMMAND,
            re.compile(
                rf"(?<![\w-])--(?P<name>(?:[A-Za-z0-9]+[-_])*(?i:{options}))(?![\w-])(?:[ \t]*=[ \t]*|[ \t]+){_ARG}"
            ),
            _argument(), anchors=("--",),
        ),
        Rule(COMMAND, re.compile(rf"(?<![\w-])-pass(?:in|out)[ \t]+pass:{_ARG}"), password, anchors=("-pass",)),
        Rule(
            COMMAND, re.compile(rf"(?<![\w-])-(?:store|key|srcstore|deststore|srckey|destkey|new)pass[ \t]+{_ARG}"),
            password, anchors=("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass",
                               "-destkeypass", "-newpass"),
        ),
        Rule(
            COMMAND, re.compile(rf"\b(?i:net[ \t]+use)\b[^\n]{{0,200}}?[ \t]/(?i:user|u):[^\s]{{1,100}}[ \t]+{_ARG}"),
            password, anchors=("net",), folded=True,
        ),
        Rule(  # SQL: CREATE USER ... WITH PASSWORD 'PW', ALTER USER ... IDENTIFIED BY PW
            COMMAND, re.compile(rf"\b(?i:with(?:[ \t]+encrypted)?[ \t]+password|identified[ \t]+by)[ \t]+{_ARG}"),
            _not_a_word, anchors=("with", "identified"), folded=True,
        ),
        Rule(  # sqlplus USER/PW@DB, connect USER/PW@DB
            COMMAND,
            re.compile(
                r"\b(?i:sqlplus|rman|expdp|impdp|conn|connect)\b(?:[ \t]+-[A-Za-z]+){0,4}[ \t]+"
                r"[A-Za-z0-9_$#]{1,64}/(?P<bare>[^\s@'\"/]{1,128})@"
            ),
            password, anchors=("sqlplus", "rman", "expdp", "impdp", "conn"), folded=True,
        ),
        Rule(
            COMMAND,
            re.compile(rf"\bldap(?:search|modify|add|delete|passwd|whoami|compare|modrdn)\b{_BEFORE}-w[ \t]+{_ARG}"),
            password, anchors=("ldap",),
        ),
        Rule(
            COMMAND, re.compile(r"\bngrok\b[^\n]{0,40}?\b(?:add-)?authtoken[ \t]+(?P<bare>[A-Za-z0-9_]{20,})"),
            whole("ngrok_token"), anchors=("ngrok",),
        ),
        Rule(  # a .pgpass line: HOST:PORT:DATABASE:USER:PASSWORD
            COMMAND,
            re.compile(
                r"pgpass\b[^\n]{0,20}?(?<![\w.-])[\w.*-]{1,253}:(?:[0-9]{1,5}|\*):[^\s:]{1,63}:[^\s:]{1,63}"
                r":(?P<bare>\S{1,128})"
            ),
            whole("password", lambda value: not placeholder(value)), anchors=("pgpass",),
        ),
        Rule(  # .netrc: machine HOST login USER password PW
            COMMAND, re.compile(r"\blogin[ \t]+[^\s]{1,100}[ \t]+password[ \t]+(?P<bare>[^\s]{1,500})"),
            password, anchors=("login",),
        ),
    ]  # fmt: skip


def _not_a_word(match: re.Match[str], text: str) -> Span | None:
    """A command's password, quoted, or bare with a digit or a sign ("... with password
    reset" is a sentence)."""
    span = _argument("password")(match, text)
    if span is None or match.group("bare") is None:
        return span
    return None if WORDS.fullmatch(text[span[0] : span[1]]) else span


def _mysql_password(match: re.Match[str], text: str) -> Span | None:
    """``-pPW``, ``-p PW``, ``--password PW``; but ``mysql -p shop``: a plain word after
    ``-p`` and a blank is the database, the password is asked for."""
    span = _argument("password")(match, text)
    if span is None or match.group("bare") is None or text[span[0] - 1] not in " \t":
        return span
    return None if LETTERS.fullmatch(text[span[0] : span[1]]) else span


def _authorization(match: re.Match[str], text: str) -> Span | None:
    """The credentials of an Authorization header: after a scheme, any; without one,
    only a value shaped like a token ("Authorization: required" is a sentence)."""
    start, end = match.span("s")
    value = text[start:end]
    scheme = match.group("scheme")
    if placeholder(value) or scheme is None and (match.group("sep") is None or not mixed(value)):
        return None  # "Authorization header", "Authorization: required"
    return start, end, "authorization"


# -- prose -----------------------------------------------------------------------------------------

_PROSE_PASSWORD = (
    r"password|passwd|passphrase|passcode|pw|pwd|passwort|kennwort|mot de passe|mdp|contraseña|contrasena"
    r"|senha|wachtwoord|hasło|haslo|lösenordet|lösenord|salasana|adgangskode|şifre|пароль"
    r"|wi-?fi[ -]key|wlan[ -]key|wpa[ -]key|network key"
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
_PROSE = Lazy(
    rf"(?:(?<!\w)(?:(?P<pw>{_PROSE_PASSWORD})|(?P<tok>{_PROSE_TOKEN}))(?:[ \t]+[^\s:=：]{{1,30}}){{0,4}}?{_COPULA}"
    rf"|(?P<cjk>{_CJK})[ \t]*(?:は|是|为|為|는|은|:|：|=)[ \t]*){_PROSE_VALUE}",
    re.IGNORECASE,
)
# "I set the wifi password to ...", "changed my password to ..."
_PROSE_SET = Lazy(
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
    if not value or placeholder(value) or value.startswith("//"):
        return None  # "password at https://...": the colon was the URL's
    if groups.get("cjk") and group == "bare" and not value.isascii():
        return None  # "パスワードは管理者に聞いて": the sentence goes on
    token = groups.get("tok") is not None
    if group == "bare" and not (_token_like(value) if token else _password_like(value, text, end)):
        return None
    return start, end, _prose_kind(groups["tok"]) if token else "password"


def _token_like(value: str) -> bool:
    return len(value) >= 12 and mixed(value)


def _password_like(value: str, text: str, end: int) -> bool:
    """A password said in a sentence: anything with a digit or a sign (``hunter2``,
    ``P@ss``), a mixed-case word, or a plain word of 6 letters or more that ends the
    sentence and is no common word ("the password is swordfish." but not "is wrong")."""
    if len(value) < 4 or value.lower() in _COMMON or is_code(value) or is_path(value):
        return False
    if not WORDS.fullmatch(value):
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


# -- user and password together, and passwords said without "is" -----------------------------------

_VERSION = Lazy(r"v?[0-9]+(?:\.[0-9]+)+")


def strong(value: str) -> bool:
    """A password by its look alone: 8 characters or more, a letter, a digit, and a sign
    or both cases (``Winter2024!Snow``, ``P@ssw0rd123``), not a version, path or name."""
    has_sign = any(not ch.isalnum() for ch in value)
    both_cases = any(ch.isupper() for ch in value) and any(ch.islower() for ch in value)
    return (
        len(value) >= 8
        and any(ch.isalpha() for ch in value)
        and any(ch.isdigit() for ch in value)
        and (has_sign or both_cases)
        and not _VERSION.match(value)
        and not is_path(value)
        and not is_code(value)
        and not placeholder(value)
    )


def _trimmed(match: re.Match[str], group: str = "bare") -> tuple[int, int, str]:
    """A bare value without the punctuation that ends its sentence."""
    start, end = match.span(group)
    value = match.group(group).rstrip(".,;:)]}»”\"'")
    return start, start + len(value), value


def _strong_value(match: re.Match[str], text: str) -> Span | None:
    start, end, value = _trimmed(match)
    return (start, end, "password") if strong(value) else None


_USERS = r"admin|administrator|root|sa|pi|ubuntu|guest|postgres|deploy|user|test|demo|operator|support|ec2-user"
_USER = Lazy(rf"(?i:{_USERS})|[\w.+-]{{1,64}}@[\w-]{{1,63}}(?:\.[\w-]{{1,63}})+")
_CREDENTIAL_WORDS = (
    "creds", "credential", "login", "log in", "sign in", "zugang", "anmeld", "identifiant", "usuario", "utente",
    "gebruiker", "benutzer", "account",
)  # fmt: skip


def _slash_pair(match: re.Match[str], text: str) -> Span | None:
    """``admin / P@ssw0rd123``, ``ops@example.com / Blue-Sky-42``: a user name or an
    address, " / ", a password (by its look, or any word not common after "creds",
    "login", ...). "read / write", "Admin / Security" are other pairs."""
    before = text[max(0, match.start() - 80) : match.start()]
    user = before.rsplit(None, 1)[-1] if before.strip() else ""
    if not _USER.fullmatch(user):
        return None
    start, end, value = _trimmed(match)
    if strong(value):
        return start, end, "password"
    near = text[max(0, match.start() - len(user) - 60) : match.start()].lower()
    plain = WORDS.fullmatch(value) and len(value) >= 4 and value.lower() not in _COMMON
    if plain and any(word in near for word in _CREDENTIAL_WORDS):
        return start, end, "password"
    return None


# "login is root with PW", "log in as admin with password PW", "sign in as bob with PW"
_LOGIN = Lazy(
    r"(?<!\w)(?i:login|log[ -]?in|sign[ -]?in|logon)(?:[ \t]*:|[ \t]+(?i:is|as))?[ \t]+[^\s,;]{1,64}(?:[ \t]*,)?"
    r"[ \t]+(?i:with|and|using|/)(?:[ \t]+(?i:the[ \t]+)?(?i:password|pass|pw))?[ \t]*:?[ \t]+(?P<bare>\S{1,128})"
)
# "password Tr1cky-Pass", "Kennwort Sommer2025!", "пароль Moskva2024!": no "is", so by its look
_PLAIN = Lazy(rf"(?<!\w)(?i:{_PROSE_PASSWORD}|clave|{_CJK})[ \t]+(?P<bare>\S{{8,128}})(?!\S)")
# a user:password pair of a common user name: "use admin:S3cure!Pass to log in"
_COLON_PAIR = Lazy(rf"(?<![\w@.:/-])(?i:{_USERS}):(?P<bare>[^\s:/]{{8,128}})(?!\S)")
# a token said without "is": "the Hetzner token <64 characters> can delete servers"
_TOKEN_SAID = Lazy(
    r"(?<![\w-])(?P<tok>(?i:token|key|secret|api[ -]?key))[ \t]+(?P<bare>[A-Za-z0-9_.\-]{32,200})(?![\w.-])"
)


def _token_said(match: re.Match[str], text: str) -> Span | None:
    """A random token (both cases and digits) right after "token", "key" or "secret";
    a public or publishable key is not one."""
    start, end = match.span("bare")
    if not cased(match.group("bare")) or "publi" in text[max(0, match.start() - 14) : match.start()].lower():
        return None
    return start, end, _prose_kind(match.group("tok"))


def _pair_rules() -> list[Rule]:
    return [
        Rule(PROSE, re.compile(r" / [ \t]*(?P<bare>\S{1,128})"), _slash_pair, anchors=(" / ",)),
        Rule(PROSE, _LOGIN.compiled, _strong_value, anchors=("login", "log", "sign", "logon"), folded=True),
        Rule(PROSE, _PLAIN.compiled, _strong_value, anchors=literals(_PROSE_PASSWORD, "clave", _CJK), folded=True),
        Rule(PROSE, _COLON_PAIR.compiled, _strong_value, anchors=literals(_USERS), folded=True),
        Rule(PROSE, _TOKEN_SAID.compiled, _token_said, anchors=("token", "key", "secret", "api"), folded=True),
    ]


def _prose_rules() -> list[Rule]:
    return [
        Rule(PROSE, _PROSE.compiled, _prose, anchors=literals(_PROSE_PASSWORD, _PROSE_TOKEN, _CJK), folded=True),
        Rule(PROSE, _PROSE_SET.compiled, _prose, anchors=("set", "change", "reset", "update"), folded=True),
        *_pair_rules(),
    ]


def rules() -> list[Rule]:
    return [*_assignment_rules(), *_command_rules(), *_prose_rules()]
