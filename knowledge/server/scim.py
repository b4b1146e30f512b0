"""SCIM 2.0 provisioning over HTTP (RFC 7644 protocol, RFC 7643 resources via ``scim2-models``):
``/scim/v2/Users`` and ``/scim/v2/Groups`` (list with ``filter``, ``startIndex``, ``count``,
``attributes``, ``excludedAttributes``; ``POST .search``; get, create, replace, PATCH, delete),
``/ServiceProviderConfig``, ``/ResourceTypes`` and ``/Schemas``.

Authenticated by a provisioning token (``knowledge scim token``; :mod:`knowledge.people.provisioning`),
never by an API key: without a token configured every ``/scim/v2`` path answers 404 (SCIM is off);
with one, a request without it or with another answers 401. Every answer is ``application/scim+json``
and every error RFC 7644 §3.12's body (``urn:ietf:params:scim:api:messages:2.0:Error``, ``status``,
``scimType``, ``detail``). Users map to accounts (``userName`` -> username by
:func:`~knowledge.people.accounts.normal_username`, fixed at creation), groups to groups; the
published schemas name only the attributes kept (userName, displayName, emails.value/primary,
active, groups; displayName, members). The filter is evaluated by ``scim2-models`` over the
accounts read from the catalog (a team's size, not a directory's). ``active: false`` ends the
account's app sessions and revokes its API keys at once (:meth:`Accounts.set_active`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    Context,
    Email,
    Error,
    ETag,
    Filter,
    Group,
    GroupMember,
    GroupMembership,
    ListResponse,
    Meta,
    Patch,
    PatchOp,
    ResourceType,
    ResponseParameters,
    Schema,
    SCIMException,
    ScimFilter,
    ServiceProviderConfig,
    Sort,
    User,
)

from knowledge.errors import AuthenticationFailed, InvalidArgument, KnowledgeError
from knowledge.people.provisioning import ProvisionedGroup, ProvisionedUser, Provisioning

log = logging.getLogger(__name__)

PREFIX = "/scim/v2"
MEDIA = "application/scim+json"
#: The most resources one list answers (RFC 7644 §3.4.2.4: ``count`` is capped by the server).
MAX_RESULTS = 200
#: The attributes of each schema this server keeps (the others are not published).
USER_ATTRIBUTES = {"userName": None, "displayName": None, "emails": {"value"}, "active": None, "groups": None}
GROUP_ATTRIBUTES = {"displayName": None, "members": {"value", "$ref", "type"}}

router = APIRouter(prefix=PREFIX, include_in_schema=False)


class ScimProblem(Exception):
    """An error answered with RFC 7644 §3.12's body."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.scim_type = status, detail, scim_type


def answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, default=str, ensure_ascii=False), status_code=status, media_type=MEDIA, headers=headers)


def problem(status: int, detail: str, scim_type: str | None = None, headers: dict[str, str] | None = None) -> Response:
    """The SCIM error response (RFC 7644 §3.12)."""
    err = Error(status=status, detail=detail, scim_type=scim_type)
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="SCIM"'}
    return answer(err.model_dump(), status, headers)


def _provisioning(request: Request) -> Provisioning:
    people = request.app.state.api.system.people
    return people.provisioning


def _authorise(request: Request) -> Provisioning:
    prov = _provisioning(request)
    if not prov.enabled():
        raise ScimProblem(404, "SCIM provisioning is off on this server (an admin turns it on: knowledge scim token).")
    auth = request.headers.get("authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    if not prov.token_valid(token):
        raise ScimProblem(401, "A valid SCIM provisioning token is required (Authorization: Bearer kscim-...).")
    return prov


def _run(request: Request, fn: Callable[[Provisioning], Response]) -> Response:
    """Authorise the request, run ``fn``, and word every error as SCIM does."""
    try:
        return fn(_authorise(request))
    except ScimProblem as exc:
        return problem(exc.status, exc.detail, exc.scim_type)
    except SCIMException as exc:
        return problem(exc.status, str(exc), exc.scim_type or None)
    except ValidationError as exc:
        return problem(400, _first_error(exc), "invalidValue")
    except AuthenticationFailed as exc:
        return problem(401, str(exc))
    except InvalidArgument as exc:
        text = str(exc)
        taken = "taken" in text or "exists" in text or "another account" in text
        return problem(409 if taken else 400, text, "uniqueness" if taken else "invalidValue")
    except KnowledgeError as exc:
        log.warning("SCIM %s %s: %s", request.method, request.url.path, exc)
        return problem(503, f"The catalog cannot be used now: {exc}")


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    e = errors[0]
    where = ".".join(str(p) for p in e.get("loc", ()))
    return f"{where}: {e.get('msg')}" if where else str(e.get("msg"))


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise ScimProblem(400, "The body is not JSON.", "invalidSyntax") from None
    if not isinstance(data, dict):
        raise ScimProblem(400, "The body must be a JSON object.", "invalidSyntax")
    return data


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/") + PREFIX


def _version(*parts: Any) -> str:
    return 'W/"' + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16] + '"'


# -- resources ------------------------------------------------------------------------------------
def user_resource(u: ProvisionedUser, base: str) -> User:
    """An account as RFC 7643 §4.1's User."""
    return User(
        id=u.scim_id,
        external_id=u.external_id,
        user_name=u.user_name,
        display_name=u.display_name,
        emails=[Email(value=u.email)] if u.email else None,
        active=u.active,
        groups=[GroupMembership(value=gid, ref=f"{base}/Groups/{gid}", display=name) for gid, name in u.groups] or None,
        meta=Meta(
            resource_type="User",
            created=u.created,
            last_modified=u.modified,
            location=f"{base}/Users/{u.scim_id}",
            version=_version(u),
        ),
    )


def group_resource(g: ProvisionedGroup, base: str) -> Group:
    """A group as RFC 7643 §4.2's Group."""
    return Group(
        id=g.scim_id,
        external_id=g.external_id,
        display_name=g.name,
        members=[GroupMember(value=uid, ref=f"{base}/Users/{uid}", type="User") for uid, _ in g.members] or None,
        meta=Meta(
            resource_type="Group",
            created=g.created,
            last_modified=g.modified,
            location=f"{base}/Groups/{g.scim_id}",
            version=_version(g),
        ),
    )


def _params(model: Any, params: Any) -> Any:
    """RFC 7644 §3.9's ``attributes`` / ``excludedAttributes`` (a query's comma lists or a search body's
    lists) as scim2-models' ``ResponseParameters``, or ``None`` when neither is given."""
    given = {k: params.get(k) for k in ("attributes", "excludedAttributes") if params and params.get(k)}
    if not given:
        return None
    return ResponseParameters[model].model_validate(given)


def _dump(resource: Any, ctx: Context, params: Any = None) -> dict[str, Any]:
    return resource.model_dump(scim_ctx=ctx, response_parameters=_params(type(resource), params))


def _listing(items: list[Any], model: Any, params: dict[str, Any]) -> Response:
    """RFC 7644 §3.4.2: ``filter`` (evaluated by scim2-models; over several resource types, each
    resource by its own type's attributes), then ``startIndex`` (1-based) and ``count``."""
    text = params.get("filter")
    if text:
        try:
            types = {type(r) for r in items} or {model}
            filters = {t: ScimFilter[t](str(text)) for t in types}  # type: ignore[valid-type]
            items = [r for r in items if filters[type(r)].match(r)]
        except SCIMException:
            raise
        except (ValueError, TypeError) as exc:
            raise ScimProblem(400, f"The filter {text!r} cannot be read: {exc}", "invalidFilter") from None
    try:
        start = max(1, int(params.get("startIndex") or 1))
        count = min(MAX_RESULTS, max(0, int(params["count"]))) if params.get("count") not in (None, "") else MAX_RESULTS
    except (TypeError, ValueError):
        raise ScimProblem(400, "startIndex and count are integers.", "invalidValue") from None
    page = items[start - 1 : start - 1 + count]
    listed = ListResponse[model](
        total_results=len(items), start_index=start, items_per_page=len(page), resources=page or None
    )
    return answer(listed.model_dump(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=_params(model, params)))


def _user_values(u: User) -> dict[str, Any]:
    email = None
    if u.emails:
        chosen = next((e for e in u.emails if e.primary), u.emails[0])
        email = str(chosen.value) if chosen.value else None
    if not u.user_name:
        raise ScimProblem(400, "userName is required.", "invalidValue")
    return {
        "user_name": u.user_name,
        "display_name": u.display_name,
        "email": email,
        "external_id": u.external_id,
        "active": u.active,
    }


def _members(g: Group) -> list[str]:
    out = []
    for m in g.members or []:
        if m.type not in (None, "User"):
            raise ScimProblem(400, "A group's members are users (nested groups are not kept).", "invalidValue")
        if not m.value:
            raise ScimProblem(400, "A member needs a value (the user's id).", "invalidValue")
        out.append(str(m.value))
    return out


def _user_or_404(prov: Provisioning, scim_id: str) -> ProvisionedUser:
    u = prov.user(scim_id)
    if u is None:
        raise ScimProblem(404, f"There is no User {scim_id!r}.")
    return u


def _group_or_404(prov: Provisioning, scim_id: str) -> ProvisionedGroup:
    g = prov.group(scim_id)
    if g is None:
        raise ScimProblem(404, f"There is no Group {scim_id!r}.")
    return g


# -- discovery (RFC 7644 §4) ----------------------------------------------------------------------
def _schema(model: Any, keep: dict[str, Any]) -> Schema:
    schema = model.to_schema()
    attrs = []
    for a in schema.attributes or []:
        if a.name not in keep:
            continue
        subs = keep[a.name]
        if subs is not None and a.sub_attributes:
            a = a.model_copy(update={"sub_attributes": [s for s in a.sub_attributes if s.name in subs]})
            if a.name == "members":
                a = a.model_copy(
                    update={
                        "sub_attributes": [
                            s.model_copy(update={"reference_types": ["User"]}) if s.name == "$ref" else s
                            for s in a.sub_attributes
                        ]
                    }
                )
        attrs.append(a)
    return schema.model_copy(update={"attributes": attrs})


def schemas(base: str) -> list[Schema]:
    out = []
    for model, keep in ((User, USER_ATTRIBUTES), (Group, GROUP_ATTRIBUTES)):
        s = _schema(model, keep)
        s.meta = Meta(resource_type="Schema", location=f"{base}/Schemas/{s.id}")
        out.append(s)
    return out


def resource_types(base: str) -> list[ResourceType]:
    out = []
    for model in (User, Group):
        rt = ResourceType.from_resource(model)
        rt.meta = Meta(resource_type="ResourceType", location=f"{base}/ResourceTypes/{rt.id}")
        out.append(rt)
    return out


def service_provider_config(base: str) -> ServiceProviderConfig:
    return ServiceProviderConfig(
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_RESULTS),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        authentication_schemes=[
            AuthenticationScheme(
                type="oauthbearertoken",
                name="SCIM provisioning token",
                description="A bearer token made by an admin with `knowledge scim token`.",
                primary=True,
            )
        ],
        meta=Meta(resource_type="ServiceProviderConfig", location=f"{base}/ServiceProviderConfig"),
    )


@router.get("/ServiceProviderConfig")
def get_service_provider_config(request: Request) -> Response:
    return _run(request, lambda prov: answer(service_provider_config(_base(request)).model_dump()))


@router.get("/ResourceTypes")
def list_resource_types(request: Request) -> Response:
    def run(prov: Provisioning) -> Response:
        items = resource_types(_base(request))
        listed = ListResponse[ResourceType](
            total_results=len(items), start_index=1, items_per_page=len(items), resources=items
        )
        return answer(listed.model_dump())

    return _run(request, run)


@router.get("/ResourceTypes/{name}")
def get_resource_type(request: Request, name: str) -> Response:
    def run(prov: Provisioning) -> Response:
        for rt in resource_types(_base(request)):
            if rt.id == name:
                return answer(rt.model_dump())
        raise ScimProblem(404, f"There is no resource type {name!r}.")

    return _run(request, run)


@router.get("/Schemas")
def list_schemas(request: Request) -> Response:
    def run(prov: Provisioning) -> Response:
        items = schemas(_base(request))
        listed = ListResponse[Schema](total_results=len(items), start_index=1, items_per_page=len(items), resources=items)
        return answer(listed.model_dump())

    return _run(request, run)


@router.get("/Schemas/{urn}")
def get_schema(request: Request, urn: str) -> Response:
    def run(prov: Provisioning) -> Response:
        for s in schemas(_base(request)):
            if s.id == urn:
                return answer(s.model_dump())
        raise ScimProblem(404, f"There is no schema {urn!r}.")

    return _run(request, run)


# -- Users (RFC 7644 §3) --------------------------------------------------------------------------
@router.get("/Users")
def list_users(request: Request) -> Response:
    return _run(
        request,
        lambda prov: _listing([user_resource(u, _base(request)) for u in prov.users()], User, dict(request.query_params)),
    )


@router.post("/Users/.search")
async def search_users(request: Request) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body
    return _run(request, lambda prov: _listing([user_resource(u, _base(request)) for u in prov.users()], User, body))


async def _body_or_problem(request: Request) -> dict[str, Any] | Response:
    try:
        return await _body(request)
    except ScimProblem as exc:
        return problem(exc.status, exc.detail, exc.scim_type)


@router.get("/Users/{scim_id}")
def get_user(request: Request, scim_id: str) -> Response:
    return _run(
        request,
        lambda prov: answer(
            _dump(
                user_resource(_user_or_404(prov, scim_id), _base(request)),
                Context.RESOURCE_QUERY_RESPONSE,
                request.query_params,
            )
        ),
    )


@router.post("/Users")
async def create_user(request: Request) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        u: User = User.model_validate(body, scim_ctx=Context.RESOURCE_CREATION_REQUEST)
        made = prov.create_user(**_user_values(u))
        res = user_resource(made, _base(request))
        return answer(
            _dump(res, Context.RESOURCE_CREATION_RESPONSE),
            201,
            {"Location": str(res.meta.location) if res.meta else ""},
        )

    return _run(request, run)


@router.put("/Users/{scim_id}")
async def replace_user(request: Request, scim_id: str) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        before = _user_or_404(prov, scim_id)
        u: User = User.model_validate(body, scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)
        after = prov.update_user(before, **_user_values(u))
        return answer(_dump(user_resource(after, _base(request)), Context.RESOURCE_REPLACEMENT_RESPONSE))

    return _run(request, run)


@router.patch("/Users/{scim_id}")
async def patch_user(request: Request, scim_id: str) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        before = _user_or_404(prov, scim_id)
        op = PatchOp[User].model_validate(body, scim_ctx=Context.RESOURCE_PATCH_REQUEST)
        res = user_resource(before, _base(request))
        op.patch(res)
        after = prov.update_user(before, **_user_values(res))
        return answer(_dump(user_resource(after, _base(request)), Context.RESOURCE_PATCH_RESPONSE))

    return _run(request, run)


@router.delete("/Users/{scim_id}")
def delete_user(request: Request, scim_id: str) -> Response:
    def run(prov: Provisioning) -> Response:
        u = _user_or_404(prov, scim_id)
        request.app.state.api.system.people.delete_user(u.username, "scim")
        return Response(status_code=204)

    return _run(request, run)


# -- Groups ---------------------------------------------------------------------------------------
@router.get("/Groups")
def list_groups(request: Request) -> Response:
    return _run(
        request,
        lambda prov: _listing([group_resource(g, _base(request)) for g in prov.groups()], Group, dict(request.query_params)),
    )


@router.post("/Groups/.search")
async def search_groups(request: Request) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body
    return _run(request, lambda prov: _listing([group_resource(g, _base(request)) for g in prov.groups()], Group, body))


@router.get("/Groups/{scim_id}")
def get_group(request: Request, scim_id: str) -> Response:
    return _run(
        request,
        lambda prov: answer(
            _dump(
                group_resource(_group_or_404(prov, scim_id), _base(request)),
                Context.RESOURCE_QUERY_RESPONSE,
                request.query_params,
            )
        ),
    )


@router.post("/Groups")
async def create_group(request: Request) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        g = Group.model_validate(body, scim_ctx=Context.RESOURCE_CREATION_REQUEST)
        if not g.display_name:
            raise ScimProblem(400, "displayName is required.", "invalidValue")
        made = prov.create_group(g.display_name, external_id=g.external_id, members=_members(g))
        res = group_resource(made, _base(request))
        return answer(
            _dump(res, Context.RESOURCE_CREATION_RESPONSE), 201, {"Location": str(res.meta.location) if res.meta else ""}
        )

    return _run(request, run)


@router.put("/Groups/{scim_id}")
async def replace_group(request: Request, scim_id: str) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        before = _group_or_404(prov, scim_id)
        g = Group.model_validate(body, scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)
        after = prov.update_group(before, name=g.display_name or before.name, external_id=g.external_id, members=_members(g))
        return answer(_dump(group_resource(after, _base(request)), Context.RESOURCE_REPLACEMENT_RESPONSE))

    return _run(request, run)


@router.patch("/Groups/{scim_id}")
async def patch_group(request: Request, scim_id: str) -> Response:
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        before = _group_or_404(prov, scim_id)
        op = PatchOp[Group].model_validate(body, scim_ctx=Context.RESOURCE_PATCH_REQUEST)
        res = group_resource(before, _base(request))
        op.patch(res)
        after = prov.update_group(
            before, name=res.display_name or before.name, external_id=res.external_id, members=_members(res)
        )
        return answer(_dump(group_resource(after, _base(request)), Context.RESOURCE_PATCH_RESPONSE))

    return _run(request, run)


@router.delete("/Groups/{scim_id}")
def delete_group(request: Request, scim_id: str) -> Response:
    def run(prov: Provisioning) -> Response:
        prov.delete_group(_group_or_404(prov, scim_id))
        return Response(status_code=204)

    return _run(request, run)


@router.post("/.search")
async def search_all(request: Request) -> Response:
    """RFC 7644 §3.4.3: a search over every resource type (Users, then Groups)."""
    body = await _body_or_problem(request)
    if isinstance(body, Response):
        return body

    def run(prov: Provisioning) -> Response:
        base = _base(request)
        items: list[Any] = [user_resource(u, base) for u in prov.users()]
        items += [group_resource(g, base) for g in prov.groups()]
        return _listing(items, User | Group, body)

    return _run(request, run)


#: The endpoints' methods, for 405 (RFC 7644 §4: the discovery endpoints are read only).
_METHODS = {"ServiceProviderConfig": "GET", "ResourceTypes": "GET", "Schemas": "GET"}
_COLLECTION, _ONE = "GET, POST", "GET, PUT, PATCH, DELETE"


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def unknown(request: Request, rest: str) -> Response:
    def run(prov: Provisioning) -> Response:
        first = rest.split("/", 1)[0]
        if first in _METHODS or (first in ("Users", "Groups") and rest.count("/") <= 1):
            allow = _METHODS.get(first) or (_ONE if "/" in rest.strip("/") else _COLLECTION)
            return problem(405, f"{request.method} is not allowed on {PREFIX}/{rest}.", headers={"Allow": allow})
        raise ScimProblem(404, f"There is no SCIM endpoint {PREFIX}/{rest}.")

    return _run(request, run)


__all__ = ["MEDIA", "PREFIX", "ScimProblem", "problem", "router", "schemas", "service_provider_config"]
