"""Chat with attachments: sessions and messages made of parts (``model``), their storage in the
catalog (``store``), the message mapper (``mapper``) and the engine with the tool loop (``service``).

Sits above the workbench: may import ``knowledge.workbench``, ``tools``, the service layer, the
parts and the ground; never the surfaces (``server``, ``cli``, ``pagemodels``) or ``pages/``.
"""

from knowledge.chat.model import Attachment, Message, Part, Session
from knowledge.chat.service import AttachFailed, ChatReply, Chats, ChatService, ToolRun
from knowledge.chat.store import ChatStore, SessionNotFound, redact

__all__ = [
    "AttachFailed",
    "Attachment",
    "ChatReply",
    "ChatService",
    "ChatStore",
    "Chats",
    "Message",
    "Part",
    "Session",
    "SessionNotFound",
    "ToolRun",
    "redact",
]
