"""What a person probably meant by a command that does not exist.

People guess a command line before they read its help: ``wontopos-mcp list``,
``wontopos-mcp forget ID``, ``wontopos-mcp memories delete ID``. argparse answers such a
guess with every choice it has; this module finds the one spelling the person was
reaching for, so the refusal can say ``did you mean `wontopos-mcp memories list`?``.

Two ways, in order:

- **Synonyms.** Words with the same meaning as a real verb (``delete``/``remove``/``rm``
  for ``forget``, ``show``/``get`` for a single memory, ``ls`` for ``list``). At the top
  level, where the grammar wants a noun first, a bare verb is taken as being about
  memories (what a store holds), the one noun every such guess was about when tried.
- **Typos.** The closest real spelling by ``difflib`` (``serach`` -> ``search``,
  ``speaker`` -> ``speakers``).

Nothing is guessed when neither finds a spelling: the refusal then lists the choices,
as argparse does.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")

# A guessed word -> the verbs it may stand for, most likely first; a command offers the first it has.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "forget": ("forget", "remove", "delete"),
    "delete": ("forget", "delete", "remove"),
    "del": ("forget", "delete", "remove"),
    "remove": ("forget", "remove", "delete"),
    "rm": ("forget", "remove", "delete"),
    "erase": ("forget", "delete", "remove"),
    "list": ("list",),
    "ls": ("list",),
    "show": ("get", "list"),
    "get": ("get",),
    "view": ("get",),
    "cat": ("get",),
    "new": ("add", "create"),
    "create": ("create", "add"),
    "register": ("add", "create"),
    "add": ("add", "create"),
    "find": ("search",),
    "query": ("search",),
    "recall": ("search",),
}

# At the top level a bare verb is about memories: the full spelling each guess leads to.
_TOP_LEVEL: dict[str, str] = {
    "list": "memories list",
    "forget": "memories forget ID",
    "get": "memories get ID",
}


def parse_invalid_choice(message: str) -> tuple[str, list[str]] | None:
    """The word given and the choices offered, from argparse's invalid-choice message."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return None
    choices = [c.strip().strip("'\"") for c in found["choices"].split(",")]
    return found["given"], [c for c in choices if c]


def suggestion(command: str, given: str, choices: Sequence[str]) -> str | None:
    """The full command line the person probably meant, or None.

    ``command`` is the command line so far (``"wontopos-mcp"``, ``"wontopos-mcp memories"``),
    ``given`` the word that is not a choice, ``choices`` the words that are."""
    word = given.strip().lower()
    for verb in _SYNONYMS.get(word, ()):
        if verb in choices:
            return f"{command} {verb}"
    at_top = " " not in command.strip()
    if at_top and word in _SYNONYMS:
        for verb in _SYNONYMS[word]:
            if verb in _TOP_LEVEL:
                return f"{command} {_TOP_LEVEL[verb]}"
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f"{command} {close[0]}" if close else None
