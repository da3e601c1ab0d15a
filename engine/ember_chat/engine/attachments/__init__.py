"""Files attached to a chat: reading them (extract), keeping them (store), planning how a turn's
attachments reach the prompt (planning) and the plan it makes (turn_plan). No Qt; the heavy readers
load only when a file is read."""

from ember_chat.engine.attachments.extract import read_attachment, read_attachment_bytes
from ember_chat.engine.attachments.isolated import FileReader, read_attachment_isolated, read_bytes_isolated
from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, AttachmentKind, Extracted, Limits, human_size
from ember_chat.engine.attachments.planning import apply_plan, conversation_refs, plan_turn
from ember_chat.engine.attachments.store import AttachmentStore, StoredAttachment
from ember_chat.engine.attachments.turn_plan import RETRIEVAL, WHOLE, PlannedAttachment, Source, TurnPlan

__all__ = [
    "DEFAULT_LIMITS",
    "RETRIEVAL",
    "WHOLE",
    "AttachmentKind",
    "AttachmentStore",
    "Extracted",
    "FileReader",
    "Limits",
    "PlannedAttachment",
    "Source",
    "StoredAttachment",
    "TurnPlan",
    "apply_plan",
    "conversation_refs",
    "human_size",
    "plan_turn",
    "read_attachment",
    "read_attachment_bytes",
    "read_attachment_isolated",
    "read_bytes_isolated",
]
