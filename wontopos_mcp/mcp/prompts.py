"""The MCP prompts (``contract.PROMPTS``): texts a person or a host puts into a session so
the agent reaches for its memory without being told each time.

``recall_first`` and ``remember_conversation`` are fixed texts; ``about_person`` asks what
the store holds from one person and carries their latest memories already, by_speaker's
first page from the same service method the tool calls. Each text is at most
:data:`MAX_PROMPT_CHARS`: the memories that do not fit are left out, newest kept, and the
text says how to read on. A refusal (an unknown store or speaker, a missing or unknown
argument) is a JSON-RPC error carrying the error body, as a resource's is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.types import GetPromptResult, PromptArgument, PromptMessage, TextContent
from mcp.types import Prompt as MCPPrompt

from wontopos_mcp.contract import PROMPTS, Prompt
from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules.budget import fit

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["MAX_PROMPT_CHARS", "TEXTS", "listed", "render"]

MAX_PROMPT_CHARS = 2000

TEXTS = {
    "recall_first": """\
You have a long-term memory (the wontopos-mcp tools). Use it on every turn:

- Before answering anything that may depend on an earlier conversation (a person, a \
preference, a decision, a date, something said before), look first: memory_recall with the \
topic, or memory_search (with speaker to hear one person only). Say what you found, or that \
nothing was found; never guess a remembered fact.
- When something worth keeping comes up (a fact, a preference, a decision, a plan, who \
said what), store it with memory_add, one statement per memory, under who said it.
- "me" is you, the assistant: never register it. Every other person must be registered once \
per store with speaker_register before their words are stored; speakers_list shows the \
exact spellings ("Bob" and "bob" are two people). A fact nobody in particular said has no \
speaker.
- When a stored fact changes, replace it (memory_supersede) instead of adding a \
contradiction. After each write read `status`: "stored" or "duplicate" (already known).""",
    "remember_conversation": """\
Store the conversation so far in the long-term memory, turn by turn, each under its speaker:

1. Call speakers_list. Register with speaker_register each person who spoke and is not \
listed yet (exact spelling). Never register "me": that is you, the assistant.
2. Store the turns in order, oldest first, as they were said (no summary). With \
memory_add_messages: one call, role "assistant" for your turns, role "user" for the \
user's, and `name` for any other registered person. Without it: memory_add for each turn, \
with speaker ("me" for yours) and one conversation_id for all of them.
3. Read each answer's `status`: "stored", or "duplicate" (already remembered). A refusal \
names the field at fault and how to fix it; fix that and send the rest again.""",
}


def listed() -> list[MCPPrompt]:
    """``prompts/list``: every prompt of the contract table, with its arguments."""
    return [
        MCPPrompt(
            name=prompt.name,
            title=prompt.title,
            description=prompt.description,
            arguments=[
                PromptArgument(name=p.name, description=p.description, required=p.required) for p in prompt.params
            ],
        )
        for prompt in PROMPTS
    ]


def _prompt(name: str) -> Prompt:
    for prompt in PROMPTS:
        if prompt.name == name:
            return prompt
    names = ", ".join(p.name for p in PROMPTS)
    raise InvalidRequestError(f"unknown prompt {name!r}; the prompts are: {names}", field="name", prompt=name)


def _arguments(prompt: Prompt, given: Mapping[str, Any]) -> dict[str, str]:
    """``given`` checked against the prompt's arguments (names only: the service checks the values)."""
    known = {p.name for p in prompt.params}
    for name in given:
        if name not in known:
            takes = ", ".join(known) or "no arguments"
            raise InvalidRequestError(f"unknown argument {name!r}: {prompt.name} takes {takes}", field=name)
    for param in prompt.params:
        if param.required and not given.get(param.name):
            raise InvalidRequestError(f"{param.name} is required", field=param.name)
    return {name: str(value) for name, value in given.items() if value is not None}


def _about_person(answer: Mapping[str, Any]) -> str:
    """The question about one person with their latest memories, as many as fit."""
    speaker, user_id = answer["speaker"], answer["user_id"]
    head = f'What does the memory (store "{user_id}") hold from {speaker}? Their latest memories, newest first:\n'
    more = (
        f'\n(Older ones: by_speaker with speaker="{speaker}", before and skip_ids from the last page; '
        "memory_search with speaker to search them.)"
    )
    lines = []
    for memory in answer["memories"]:
        flag = " (replaced since)" if memory.get("is_superseded") else ""
        lines.append(f"- {memory['created_at'][:10]}: {memory['content']}{flag}")
    if not lines:
        return head + "(none stored yet)"
    text = head + "\n".join(lines) + (more if answer["has_more"] else "")
    if len(text) <= MAX_PROMPT_CHARS:
        return text
    # The newest that fit, one line break each but the last (the older ones: ``more``).
    kept, _ = fit(lines, lambda line: len(line) + 1, MAX_PROMPT_CHARS - len(head) - len(more) + 1, at_least_one=False)
    shown = "\n".join(kept) if kept else "(the latest is longer than this prompt holds)"
    return (head + shown + more)[:MAX_PROMPT_CHARS]


async def render(service: MemoryService, name: str, arguments: Mapping[str, Any] | None) -> GetPromptResult:
    """``prompts/get``: the prompt's one user message. Raises the refusal of a bad name or argument."""
    prompt = _prompt(name)
    given = _arguments(prompt, arguments or {})
    if prompt.name == "about_person":
        answer = await anyio.to_thread.run_sync(
            lambda: service.by_speaker(speaker=given["speaker"], user_id=given.get("user_id"))
        )
        text = _about_person(answer)
    else:
        text = TEXTS[prompt.name]
    message = PromptMessage(role="user", content=TextContent(type="text", text=text))
    return GetPromptResult(description=prompt.description, messages=[message])
