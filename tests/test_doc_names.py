"""Every command and setting the deployment docs name exists (issue 39: docs/api.md asked for a
setting a team must not use): the ``python -m knowledge ...`` commands of docs/team.md, docs/api.md
and docs/container.md are parsed by the CLI's own parser (command, action, options), and every setting they name
(``section.key`` in code, ``[section]`` keys of their TOML blocks, ``KNOWLEDGE_SECTION__KEY``) is a
field of :class:`knowledge.config.Settings`."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from knowledge.cli import build_parser
from knowledge.cli.files import alias as files_alias
from knowledge.config import Settings

DOCS = [Path(__file__).resolve().parents[1] / "docs" / name for name in ("team.md", "api.md", "container.md")]
#: Names written like settings that are none: Streamlit's options, OpenAI's object types, a Python
#: attribute, a file name, the variable naming the settings file.
FOREIGN = {
    "server.maxUploadSize",
    "server.address",
    "server.port",
    "chat.completion.chunk",
    "vector_store.files_batch",
    "app.state.api",
    "mcp.json",
    "settings_file",
}


def code_spans(text: str) -> list[str]:
    """The code of ``text``: fenced blocks' lines and inline spans."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S))
    return [line for block in fenced for line in block.splitlines()] + inline


def commands(text: str) -> list[list[str]]:
    """``python -m knowledge ...`` invocations (to the end of the span or a shell operator), as words."""
    found = []
    for span in code_spans(text):
        for m in re.finditer(r"(?:python -m |^)knowledge ([^#|;&<>]*)", span):
            words = m.group(1).split()
            if words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
                found.append(words)
    return found


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def check_command(words: list[str]) -> str | None:
    """Why ``words`` is not a command of the CLI, or ``None``."""
    parser = build_parser()
    words = files_alias(words)  # as main() reads them: "files move" is "file-store move"
    path = []
    while words and (choices := subparsers(parser)):
        word = words.pop(0)
        if word not in choices:
            return f"{' '.join([*path, word])!r} is not a command (known: {', '.join(sorted(choices))})"
        path.append(word)
        parser = choices[word]
    known = {o for a in parser._actions for o in a.option_strings}
    for word in words:
        option = word.split("=")[0]
        if option.startswith("--") and option not in known:
            return f"{' '.join(path)!r} has no option {option}"
    return None


def setting_exists(path: list[str]) -> bool:
    model: type[BaseModel] = Settings
    for i, part in enumerate(path):
        field = model.model_fields.get(part)
        if field is None:
            return False
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return i == len(path) - 1 or "dict" in str(ann)  # a dict's keys are free (plugin options)
    return True


def settings_named(text: str) -> set[str]:
    names = set()
    sections = set(Settings.model_fields)
    for span in code_spans(text):
        for m in re.finditer(r"\b([a-z_]+(?:\.[a-z_A-Z]+)+)\b", span):
            if m.group(1).split(".")[0] in sections and not m.group(1).endswith((".py", ".md", ".toml")):
                names.add(m.group(1))
        for m in re.finditer(r"\bKNOWLEDGE_([A-Z0-9_]+)", span):
            names.add(m.group(1).lower().replace("__", "."))
    for block in re.findall(r"```toml\n(.*?)```", text, re.S):
        for section, table in tomllib.loads(block).items():
            names |= {f"{section}.{key}" for key in table}
    return names - FOREIGN


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_commands_the_docs_name_exist(doc):
    found = commands(doc.read_text(encoding="utf-8"))
    assert found, "the extractor found no command"
    problems = [p for words in found if (p := check_command(list(words)))]
    assert not problems, problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_settings_the_docs_name_exist(doc):
    names = settings_named(doc.read_text(encoding="utf-8"))
    assert names, "the extractor found no setting"
    assert not sorted(n for n in names if not setting_exists(n.split("."))), "settings that do not exist"


def test_the_checks_catch_a_wrong_name():
    assert check_command(["users", "setup-tokens"]) and check_command(["worker", "--concurency", "1"])
    assert check_command(["users", "add", "ana", "--role", "admin"]) is None
    assert not setting_exists(["file_store", "dirs"]) and setting_exists(["file_store", "backend"])
    assert setting_exists(["vector_store", "options", "pgvector", "pool_max_size"])
    assert "ingest.worker_threads" in settings_named("```toml\n[ingest]\nworker_threads = 0\n```")
