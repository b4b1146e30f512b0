"""``/v1/usage``: what people, groups and stores hold against their quotas (ours; OpenAI has none).

``GET /v1/usage`` is the caller's own use (stored bytes, files and chunks of the stores they own)
and limits, with ``exempt`` true when none of them holds the caller (an admin,
``quotas.admins_exempt``); ``?username=``, ``?group=`` or ``?store=`` another's, and ``?by=store`` / ``?by=user``
everyone's -- an admin's only (403 ``permission_denied`` otherwise). ``POST /v1/usage/limits``
(an admin's) sets one quota: ``{"scope": "user"|"group"|"store", "name", "measure":
"bytes"|"files"|"chunks"|"requests_per_minute", "limit": n}`` (``0``: unlimited; ``null``: back to
the setting). A limit of ``null`` in an answer is unlimited. Each call is one workbench method
(:meth:`~knowledge.workbench.Workbench.usage`, ``usage_by_store``, ``usage_by_user``, ``set_quota``).
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from knowledge.people.quotas import STORAGE, UsageReport
from knowledge.server.http import bad
from knowledge.server.objects import Api

router = APIRouter(prefix="/v1/usage", tags=["usage"])


def _usage(report: UsageReport) -> dict:
    return {"object": "knowledge.usage", **report.as_dict()}


@router.get("", summary="Stored bytes, files and chunks against the quotas: one's own, or (an admin) anyone's")
def usage(
    api: Api, username: str | None = None, group: str | None = None, store: str | None = None, by: str | None = None
) -> dict:
    asked = [(s, n) for s, n in (("user", username), ("group", group), ("store", store)) if n]
    if len(asked) + (by is not None) > 1:
        raise bad("Ask for one of username, group, store or by.")
    if by is not None:
        if by == "store":
            rows = [
                {
                    "object": "knowledge.usage",
                    "scope": "store",
                    "name": name,
                    "owner": owner,
                    **{m: use.of(m) for m in STORAGE},
                    "limits": {m: lim.amount for m, lim in limits.items()},
                }
                for name, owner, use, limits in api.wb.usage_by_store()
            ]
        elif by == "user":
            rows = [_usage(r) for r in api.wb.usage_by_user()]
        else:
            raise bad(f"by is 'store' or 'user', got {by!r}.", "by")
        return {"object": "list", "data": rows}
    scope, name = asked[0] if asked else ("user", None)
    report = _usage(api.wb.usage(scope, name))
    if scope == "user" and name in (None, api.wb.actor.username):
        report["exempt"] = api.wb.usage_exempt()  # an admin held to none of the limits listed
    return report


class NewLimit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scope: str
    name: str
    measure: str
    limit: int | None = None


@router.post("/limits", summary="Set a person's, group's or store's quota (an admin's)")
def set_limit(api: Api, body: NewLimit) -> dict:
    got = api.wb.set_quota(body.scope, body.name, body.measure, body.limit)
    return {
        "object": "knowledge.quota",
        "scope": got.scope,
        "name": got.name,
        "measure": got.measure,
        "limit": got.amount,
        "own": got.own,
    }
