"""Sources: stores kept in sync with the places a team's files live (see :mod:`knowledge.sources.engine`).

A feature (floor 5, beside ``sync``): it may import the service layer, the parts, ``text`` and the
ground, never the workbench, ``chat``, ``tools``, ``server``, ``cli`` or ``pages``. A source plugin
(``smb.py``, ``git.py``, ...) imports only :mod:`knowledge.sources.base` and the ground.
"""

from knowledge.sources.base import (
    Entry,
    EntryGone,
    Field,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.engine import RunItem, RunRecord, RunReport, SourcePlan, SourceRecord, Sources, origin_of

__all__ = [
    "Entry",
    "EntryGone",
    "Field",
    "RunItem",
    "RunRecord",
    "RunReport",
    "Source",
    "SourceAuthFailed",
    "SourceContext",
    "SourceError",
    "SourceNotFound",
    "SourcePlan",
    "SourceRecord",
    "SourceUnavailable",
    "Sources",
    "origin_of",
]
