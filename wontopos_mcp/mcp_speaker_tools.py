# mypy: disable-error-code="valid-type"
"""The MCP tools that fix who said it after the fact: ``speaker_rename`` and
``speaker_merge`` (SPEC "Time and identity"), registered by ``mcp_tools.tools`` with the
same adapter as every other tool. (No ``from __future__ import annotations``: the SDK
reads these signatures' annotations as objects.)"""

from typing import TYPE_CHECKING, Annotated

from mcp.types import CallToolResult
from pydantic import Field

from .contract import operation
from .mcp_params import UserId, given, required_text
from .models import SpeakerMergeAnswer, SpeakerRenameAnswer

if TYPE_CHECKING:
    from .mcp_tools import _Tools
    from .service import MemoryService


def identity_tools(tool: "_Tools", service: "MemoryService") -> None:
    from .mcp_tools import _call

    confirm = operation("speaker_merge").param("confirm_records")

    @tool(SpeakerRenameAnswer, title="Rename a speaker", idempotent=True)
    async def speaker_rename(
        speaker: required_text("speaker_rename", "speaker"),
        new_name: required_text("speaker_rename", "new_name"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Change a registered person's name everywhere; call it to fix a misspelt
        registration or when someone should go by another name.

        Every memory of `speaker` (superseded ones included) is re-tagged `new_name` and
        the registration renamed, at once. If `new_name` is already registered the answer
        is 409: use speaker_merge to make the two one person. "me" cannot be renamed.

        {errors}
        """
        return await _call(service.speaker_rename, speaker=speaker, new_name=new_name, user_id=user_id)

    @tool(SpeakerMergeAnswer, title="Merge two speakers", destructive=True)
    async def speaker_merge(
        speaker: required_text("speaker_merge", "speaker"),
        into: required_text("speaker_merge", "into"),
        confirm_records: Annotated[
            int, Field(strict=True, ge=confirm.low, description=given("speaker_merge", "confirm_records"))
        ],
        user_id: UserId = None,
    ) -> CallToolResult:
        """Make one person of two registered names; call it when someone was registered
        twice (say "Bob" and "Robert").

        `speaker`'s memories (superseded ones included) are re-tagged `into`, and
        `speaker`'s registration ends. Pass as confirm_records the `records_to_delete`
        by_speaker just reported for `speaker`; if it changed since, the answer is 409 with
        the current number and nothing changes. Memories that now restate each other stay
        two memories.

        {errors}
        """
        return await _call(
            service.speaker_merge, speaker=speaker, into=into, confirm_records=confirm_records, user_id=user_id
        )
