"""An invitation link is the same on every surface (issue 40's trial: the People page gave a whole URL,
REST only ``?invite=...``, the CLI guessed ``http://localhost:8501``): all build it with
:func:`knowledge.people.invite_link` on the setting ``app.public_url``, and without it give the link's
own part, ``?invite=TOKEN`` (the page: on the address its browser opened)."""

from __future__ import annotations

import json

import httpx
import pytest

from knowledge.cli import main
from knowledge.config import ConfigError, load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.people import invite_link
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served

PW = "correct horse battery"


def test_invite_link_is_built_on_the_public_address_else_on_what_was_seen_else_relative():
    assert invite_link("T", "https://kb.example.org/team") == "https://kb.example.org/team/?invite=T"
    assert invite_link("T", "https://kb.example.org", "http://10.0.0.5:8501") == "https://kb.example.org/?invite=T"
    assert invite_link("T", None, "http://10.0.0.5:8501/") == "http://10.0.0.5:8501/?invite=T"
    assert invite_link("T", None) == "?invite=T"


@pytest.mark.parametrize("bad", ["kb.example.org", "ftp://kb.example.org", "https://kb.example.org/?x=1", "https://"])
def test_a_public_address_that_is_no_http_url_is_refused(bad, monkeypatch, tmp_path):
    monkeypatch.setenv("KNOWLEDGE_APP__PUBLIC_URL", bad)
    with pytest.raises(ConfigError, match="public_url"):
        load_settings(data_dir=tmp_path / "data")


@pytest.mark.parametrize("public", [None, "https://kb.example.org/team/"])
def test_the_cli_and_the_rest_api_give_the_same_link(public, monkeypatch, tmp_path, capsys):
    if public:
        monkeypatch.setenv("KNOWLEDGE_APP__PUBLIC_URL", public)
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    system = System(load_settings(), embedder_factory=lambda model: HashEmbedder(dimension=16, max_tokens=256))
    try:
        wb = Workbench(system)
        wb.accounts.set_up_admin("root", PW)
        _, secret = wb.as_user(wb.actor_of("root")).accounts.create_key("root", "test")
        with Served(create_app(system)) as base:
            r = httpx.post(
                f"{base}/v1/knowledge/invites", json={"role": "member"}, headers={"Authorization": f"Bearer {secret}"}
            )
        assert r.status_code == 200, r.text
        rest = r.json()
    finally:
        system.close()
    assert main(["--user", "root", "users", "invite", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(["--user", "root", "users", "invite"]) == 0
    said = capsys.readouterr().out
    for made in (rest, cli):
        assert made["link"] == (
            f"https://kb.example.org/team/?invite={made['token']}" if public else f"?invite={made['token']}"
        )
    assert "localhost" not in said
    assert ("Send them this link: https://kb.example.org/team/?invite=" in said) == bool(public), said
