"""RTF: the text Word shows, read by our own tokenizer (RTF 1.9.1 specification).

The RTF packages on PyPI were checked (striprtf, rtfparse, RTFDE, pyth, rtf-converter): none keeps
headers, footnotes, annotations and table cells apart while decoding code pages and ``\\u``
surrogate pairs, so this module reads the groups and control words itself. Read: the body with
paragraphs, line breaks and tabs; tables (cells separated by a tab, one line per row); fields by their
result (a hyperlink's text); text boxes (``\\shptxt``); footnotes and endnotes after the paragraph
citing them; annotations (comments) in place with their author; headers and footers once (headers
first, footers last). ``\\'hh`` bytes are decoded with the code page of the current font's
``\\fcharset`` (or ``\\cpg``), else the document's ``\\ansicpg`` (Japanese ``cp932`` included);
``\\uN`` skips its ``\\ucN`` fallback and pairs of surrogates become one character. Left out: font,
colour and style tables, document properties (``\\info``; its ``\\title`` is the document's title),
pictures, embedded objects' data, field instructions, shape results (duplicates of ``\\shptxt``),
hidden (``\\v``) and deleted text, every ``\\*`` destination this reader does not know.
Outline levels (``\\outlinelevelN``, or a style called "heading N") give the heading path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from knowledge.errors import UnsupportedFile
from knowledge.ingest._text import Builder, one_line
from knowledge.ingest.document import Document

_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?"  # control word, optional parameter, its delimiting space
    rb"|\\'([0-9a-fA-F]{2})"  # hex byte
    rb"|\\([^a-zA-Z'])"  # control symbol (\\ \{ \} \~ \- \_ \* \<newline> ...)
    rb"|([{}])"
    rb"|[\r\n]+"  # ignored
    rb"|([^\\{}\r\n]+)",  # text
    re.S,
)

#: ``\fcharsetN`` -> Python codec ("ansi": the document's ``\ansicpg``; "symbol": Symbol font).
_CHARSETS = {
    0: "ansi",
    1: "ansi",
    2: "symbol",
    77: "mac_roman",
    78: "shift_jis",
    128: "cp932",
    129: "cp949",
    130: "johab",
    134: "gbk",
    136: "cp950",
    161: "cp1253",
    162: "cp1254",
    163: "cp1258",
    177: "cp1255",
    178: "cp1256",
    186: "cp1257",
    204: "cp1251",
    222: "cp874",
    238: "cp1250",
    254: "cp437",
    255: "cp850",
}
_CODEPAGES = {
    437: "cp437",
    850: "cp850",
    852: "cp852",
    866: "cp866",
    874: "cp874",
    932: "cp932",
    936: "gbk",
    949: "cp949",
    950: "cp950",
    1250: "cp1250",
    1251: "cp1251",
    1252: "cp1252",
    1253: "cp1253",
    1254: "cp1254",
    1255: "cp1255",
    1256: "cp1256",
    1257: "cp1257",
    1258: "cp1258",
    10000: "mac_roman",
    10001: "shift_jis",
    20932: "euc_jp",
    65001: "utf-8",
}
#: The Symbol font's bullet (``\'b7``), which list numbers use; other Symbol bytes read as cp1252.
_SYMBOL = {0xB7: "\u2022", 0xA7: "\u25aa"}

#: Destinations whose text is not the document's (``\*`` destinations are skipped unless in _READ).
_SKIP = frozenset(
    {
        "colortbl",
        "pict",
        "fldinst",
        "sp",
        "sn",
        "sv",
        "shprslt",
        "nonshppict",
        "listtable",
        "listoverridetable",
        "themedata",
        "xe",
        "tc",
        "tcn",
        "bkmkstart",
        "bkmkend",
        "ftnsep",
        "ftnsepc",
        "aftnsep",
        "aftnsepc",
        "ftncn",
        "aftncn",
        "objdata",
        "objclass",
        "objname",
        "datafield",
        "template",
        "filetbl",
        "revtbl",
        "rsidtbl",
        "private",
        "userprops",
        "docvar",
        "falt",
        "panose",
        "pgdsctbl",
        "latentstyles",
        "xmlnstbl",
        "mmathPr",
        "generator",
        "bin",
        "atnref",
        "atndate",
        "atnparent",
        "atnicn",
        "atrfstart",
        "atrfend",
        "atnauthorid",
        "blipuid",
        "picprop",
        "datastore",
        "passwordhash",
        "colorschememapping",
        "formfield",
        "author",
        "operator",
        "subject",
        "keywords",
        "comment",
        "doccomm",
        "company",
        "manager",
        "category",
        "hlinkbase",
        "creatim",
        "revtim",
        "printim",
        "buptim",
    }
)
#: ``\*`` destinations whose text is read.
_READ = frozenset(
    {
        "shpinst",
        "shptxt",
        "annotation",
        "atnid",
        "atnauthor",
        "footnote",
        "do",
        "dptxbxtext",
        "fldrslt",
        "listtext",
        "pntext",
    }
)
_HEADERS = frozenset({"header", "headerl", "headerr", "headerf"})
_FOOTERS = frozenset({"footer", "footerl", "footerr", "footerf"})
_INLINE = frozenset({"annotation", "atnid", "atnauthor"})
#: Control words that stand for one character.
_CHARS = {
    "emdash": "\u2014",
    "endash": "\u2013",
    "bullet": "\u2022",
    "lquote": "\u2018",
    "rquote": "\u2019",
    "ldblquote": "\u201c",
    "rdblquote": "\u201d",
    "emspace": "\u2003",
    "enspace": "\u2002",
    "qmspace": "\u2005",
    "zwj": "\u200d",
    "zwnj": "\u200c",
    "zwbo": "",
    "zwnbo": "\u2060",
    "ltrmark": "",
    "rtlmark": "",
}
_SYMBOLS = {"\\": "\\", "{": "{", "}": "}", "~": "\u00a0", "_": "\u2011", "-": "", "|": "", ":": ""}
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.I)
#: Groups nested deeper than this are skipped (a malformed file cannot make the state stack grow).
MAX_NESTING = 512


@dataclass
class _State:
    """What a group inherits: where its text goes, how bytes decode, character and paragraph props."""

    sink: _Sink | None
    font: int | None = None
    uc: int = 1
    hidden: bool = False
    deleted: bool = False  # \deleted (a tracked deletion); hidden too, named apart in the warnings
    inline: bool = False  # inside an annotation: paragraph ends become spaces
    in_table: bool = False
    outline: int | None = None
    style: int = 0
    dest: str = "body"  # body, fonttbl, stylesheet, info, title


@dataclass
class _Sink:
    """Paragraphs of one stream (the body, a header, a footnote): ``blocks`` of ``(text, level)``."""

    blocks: list[tuple[str, int | None, bool]] = field(default_factory=list)  # (text, level, is_table)
    para: list[str] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # footnotes cited by the paragraph being read
    table: list[str] = field(default_factory=list)  # the rows read so far of the table being read

    def text(self, s: str) -> None:
        self.para.append(s)

    def end_paragraph(self, state: _State, level: int | None) -> None:
        text = "".join(self.para)
        self.para = []
        if state.in_table:
            self.cells.append(text)  # a paragraph inside a cell: the cell goes on
            self.cells.append(" ")
            return
        self._flush_table()
        self.blocks.append((text, level, False))
        self._flush_notes()

    def cell(self) -> None:
        self.cells.append("".join(self.para))
        self.para = []
        self.rows.append(one_line("".join(self.cells)))
        self.cells = []

    def row(self) -> None:
        if "".join(self.para).strip() or self.cells:
            self.cell()
        self.para = []
        line = "\t".join(self.rows)
        self.rows = []
        if line.strip():
            self.table.append(line)

    def _flush_table(self) -> None:
        if self.rows or self.cells:
            self.row()
        if self.table:
            self.blocks.append(("\n".join(self.table), None, True))
            self.table = []
            self._flush_notes()

    def _flush_notes(self) -> None:
        for note in self.notes:
            self.blocks.append((note, None, False))
        self.notes = []

    def finish(self) -> None:
        if self.para:
            text = "".join(self.para)
            self.para = []
            self._flush_table()
            self.blocks.append((text, None, False))
        self._flush_table()
        self._flush_notes()

    def plain(self) -> str:
        self.finish()
        return "\n".join(t for t, _, _ in self.blocks)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.body = _Sink()
        self.state = _State(sink=None)
        self.stack: list[_State] = []
        self.ansi = "cp1252"
        self.default_font: int | None = None
        self.fonts: dict[int, str] = {}
        self.font_def: int | None = None  # the font being defined in the font table
        self.styles: dict[int, int] = {}  # style number -> outline level (from its name)
        self.style_def: tuple[int, list[str]] | None = None
        self.title: list[str] = []
        self.headers: list[str] = []
        self.footers: list[str] = []
        self.pending = bytearray()
        self.pending_codec = "cp1252"
        self.skip = 0  # \uc fallback characters still to skip
        self.high: str | None = None  # a high surrogate waiting for its low half
        self.footnotes = 0
        self.cited = False  # a \chftn in the body waits for its \footnote
        self.group_start = False  # the next control word is the first of a group (a destination?)
        self.starred = False
        self.pictures = 0
        self.objects = 0
        #: passages left out because Word does not show them: {"hidden": n, "deleted": n}
        self.left_out = {"hidden": 0, "deleted": 0}
        self.in_left_out = False  # the last text written was left out (one passage until text shows)
        self.unclosed = 0
        self.group_kind: list[str] = []

    # -- text ---------------------------------------------------------------------------------

    def codec(self) -> str:
        cs = self.fonts.get(self.state.font if self.state.font is not None else self.default_font or 0)
        if cs is None or cs == "ansi":
            return self.ansi
        return cs

    def emit(self, s: str) -> None:
        self.flush_bytes()
        self._out(s)

    def _out(self, s: str) -> None:
        if self.high is not None:
            s = self.high + s  # a high surrogate not followed by its low half: clean() drops it
            self.high = None
        st = self.state
        if st.hidden:
            if st.dest == "body" and st.sink is not None and s.strip() and not self.in_left_out:
                self.left_out["deleted" if st.deleted else "hidden"] += 1
                self.in_left_out = True
            return
        if s.strip():
            self.in_left_out = False
        if st.dest == "title":
            self.title.append(s)
        elif st.dest == "stylesheet" and self.style_def is not None:
            self.style_def[1].append(s)
        elif st.dest == "body" and st.sink is not None:
            st.sink.text(s)

    def add_bytes(self, b: bytes) -> None:
        codec = self.codec()
        if self.pending and codec != self.pending_codec:
            self.flush_bytes()
        self.pending_codec = codec
        self.pending += b

    def flush_bytes(self) -> None:
        if not self.pending:
            return
        raw, self.pending = bytes(self.pending), bytearray()
        if self.pending_codec == "symbol":
            text = "".join(_SYMBOL.get(b) or bytes([b]).decode("cp1252", "replace") for b in raw)
        else:
            try:
                text = raw.decode(self.pending_codec, "replace")
            except LookupError:
                text = raw.decode("cp1252", "replace")
        self._out(text)

    # -- parsing ------------------------------------------------------------------------------

    def read(self) -> None:
        data, pos, end = self.data, 0, len(self.data)
        self.state = _State(sink=None, dest="prolog")
        while pos < end:
            m = _TOKEN.match(data, pos)
            if m is None:  # pragma: no cover - the pattern matches any byte
                pos += 1
                continue
            pos = m.end()
            word, param, hexbyte, symbol, brace, text = m.groups()
            if text is not None:
                self.group_start = False
                if self.skip:
                    n = min(self.skip, len(text))
                    self.skip -= n
                    text = text[n:]
                if text and (self.state.sink is not None or self.state.dest in ("title", "stylesheet")):
                    self.add_bytes(text)
            elif hexbyte is not None:
                self.group_start = False
                if self.skip:
                    self.skip -= 1
                    continue
                self.add_bytes(bytes([int(hexbyte, 16)]))
            elif brace is not None:
                self.flush_bytes()
                self.skip = 0
                if brace == b"{":
                    self.open_group()
                else:
                    self.close_group()
            elif word is not None:
                name = word.decode("ascii")
                value = int(param) if param is not None else None
                if name == "bin" and value:
                    pos += max(value, 0)  # raw binary data
                    self.group_start = False
                    continue
                if self.skip and name not in ("u", "uc"):
                    self.skip -= 1  # a control word in the fallback counts as one character
                    continue
                if name != "u":
                    self.flush_bytes()
                self.control(name, value)
            elif symbol is not None:
                self.flush_bytes()
                sym = symbol.decode("latin-1")
                if sym == "*":
                    self.starred = True
                    continue
                self.group_start = False
                if self.skip:
                    self.skip -= 1
                    continue
                if sym in ("\n", "\r"):
                    self.paragraph()
                elif sym in _SYMBOLS:
                    self.emit(_SYMBOLS[sym])
        self.flush_bytes()
        while self.stack:
            self.unclosed += 1
            self.close_group()

    def open_group(self) -> None:
        if len(self.stack) >= MAX_NESTING:
            self.stack.append(self.state)
            self.state = replace(self.state, sink=None, dest="skip")
            self.group_kind.append("")
            return
        self.stack.append(self.state)
        self.state = replace(self.state)
        self.group_kind.append("")
        self.group_start = True
        self.starred = False

    def close_group(self) -> None:
        if not self.stack:
            return  # an unbalanced '}': ignored
        kind = self.group_kind.pop()
        inner = self.state
        self.state = self.stack.pop()
        self.group_start = False
        self.starred = False
        if kind in ("header", "footer") and inner.sink is not None:
            text = inner.sink.plain().strip()
            target = self.headers if kind == "header" else self.footers
            if text and text not in target:
                target.append(text)
        elif kind == "footnote" and inner.sink is not None:
            text = inner.sink.plain().strip()
            if text:
                mark = self.footnote_mark()
                host = self.state.sink or self.body
                host.notes.append(f"[{mark}] {text}" if mark else f"Footnote: {text}")
        elif kind == "annotation-inline" and self.state.sink is not None:
            self.state.sink.text(" ")
        elif kind == "fontdef":
            self.font_def = None
        elif kind == "styledef" and self.style_def is not None:
            number, parts = self.style_def
            match = _HEADING_STYLE.match(one_line("".join(parts)).rstrip(";").strip())
            if match:
                self.styles[number] = int(match.group(1)) - 1
            self.style_def = None

    def footnote_mark(self) -> str | None:
        if self.cited:
            self.cited = False
            return str(self.footnotes)
        return None

    def destination(self, name: str) -> bool:
        """The first control word of a group: switch the group's destination; True when it did."""
        st = self.state
        if st.dest == "skip":
            return True
        if name == "rtf":
            st.dest, st.sink = "body", self.body
            return True
        if name == "fonttbl":
            st.dest, st.sink = "fonttbl", None
            return True
        if name == "stylesheet":
            st.dest, st.sink = "stylesheet", None
            return True
        if name == "info":
            st.dest, st.sink = "info", None
            return True
        if name == "title" and st.dest == "info":
            st.dest = "title"
            return True
        if st.dest == "fonttbl":
            if self.starred:
                st.dest = "skip"
                return True
            if name == "f":
                self.group_kind[-1] = "fontdef"
            return False
        if st.dest == "stylesheet":
            if self.style_def is None and (not self.starred or name in ("cs", "ds", "ts")):
                self.group_kind[-1] = "styledef"
                self.style_def = (0, [])
                return False
            if self.starred:
                st.dest = "skip"
                return True
            return False
        if name in _HEADERS or name in _FOOTERS:
            self.group_kind[-1] = "header" if name in _HEADERS else "footer"
            st.dest, st.sink, st.inline, st.in_table = "body", _Sink(), False, False
            return True
        if name in ("footnote",):
            self.group_kind[-1] = "footnote"
            st.dest, st.sink, st.inline, st.in_table = "body", _Sink(), False, False
            return True
        if name in _INLINE and st.sink is not None:
            self.group_kind[-1] = "annotation-inline"
            st.sink.text(" ")
            st.inline = True
            return True
        if name == "pict":
            self.pictures += 1
        if name == "object":
            self.objects += 1
        if name in _SKIP or (self.starred and name not in _READ):
            st.dest, st.sink = "skip", None
            return True
        return False

    def control(self, name: str, value: int | None) -> None:
        st = self.state
        if self.group_start:
            self.group_start = False
            handled = self.destination(name)
            self.starred = False
            if handled:
                return
        if st.dest in ("skip", "prolog"):
            return
        if st.dest == "fonttbl":
            if name == "f" and value is not None:
                self.font_def = value
                self.fonts.setdefault(value, "ansi")
            elif name == "fcharset" and self.font_def is not None and value is not None:
                self.fonts[self.font_def] = _CHARSETS.get(value, "ansi")
            elif name == "cpg" and self.font_def is not None and value in _CODEPAGES:
                self.fonts[self.font_def] = _CODEPAGES[value]
            return
        if st.dest == "stylesheet":
            if name in ("s", "cs", "ds", "ts") and self.style_def is not None and value is not None:
                self.style_def = (value if name == "s" else -1 - value, self.style_def[1])
            return
        if name == "ansicpg" and value in _CODEPAGES:
            self.ansi = _CODEPAGES[value]
        elif name == "mac":
            self.ansi = "mac_roman"
        elif name == "pc":
            self.ansi = "cp437"
        elif name == "pca":
            self.ansi = "cp850"
        elif name == "deff":
            self.default_font = value
        elif name == "f":
            st.font = value
        elif name == "plain":
            st.font, st.hidden, st.deleted = None, False, False
        elif name == "uc":
            st.uc = max(value or 0, 0)
        elif name == "u" and value is not None:
            self.unicode(value)
        elif name in ("v", "deleted"):
            if name == "deleted":
                st.deleted = value != 0
            st.hidden = value != 0
        elif name == "pard":
            st.in_table, st.outline, st.style = False, None, 0
        elif name == "intbl":
            st.in_table = True
        elif name == "outlinelevel":
            st.outline = value if value is not None and 0 <= value < 9 else None
        elif name == "s" and value is not None:
            st.style = value
        elif st.dest not in ("body", "title"):
            return
        elif name in ("par", "sect", "page"):
            self.paragraph()
        elif name == "line":
            self.emit("\n")
        elif name == "tab":
            self.emit("\t")
        elif name in ("cell", "nestcell"):
            if st.sink is not None and not st.inline:
                st.sink.cell()
            else:
                self.emit(" ")
        elif name in ("row", "nestrow"):
            if st.sink is not None and not st.inline:
                st.sink.row()
        elif name == "chftn":
            if st.sink is self.body and not st.hidden:
                self.footnotes += 1
                self.cited = True
                self.emit(f"[{self.footnotes}]")
        elif name in _CHARS:
            self.emit(_CHARS[name])

    def unicode(self, value: int) -> None:
        self.flush_bytes()
        cp = value + 65536 if value < 0 else value
        self.skip = self.state.uc
        if 0xD800 <= cp < 0xDC00:
            if self.high is not None:
                self.high = None
            self.high = chr(cp)
            return
        if 0xDC00 <= cp < 0xE000 and self.high is not None:
            pair = ((ord(self.high) - 0xD800) << 10) + (cp - 0xDC00) + 0x10000
            self.high = None
            self._out(chr(pair))
            return
        self._out(chr(cp))

    def paragraph(self) -> None:
        self.flush_bytes()
        st = self.state
        if st.dest == "title":
            self.title.append(" ")
            return
        if st.sink is None or st.hidden:
            return
        if st.inline:
            st.sink.text(" ")
            return
        level = st.outline if st.outline is not None else self.styles.get(st.style)
        st.sink.end_paragraph(st, level)


def read_rtf(data: bytes) -> Document:
    """Read an RTF document: sections carry the heading path from outline levels; no pages.

    Raises:
        UnsupportedFile: the bytes do not start with ``{\\rtf`` (``"damaged: ..."``).
        EmptyDocument: no text.
    """
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{\\rtf"):
        raise UnsupportedFile("damaged: not an RTF document (it does not start with {\\rtf)")
    reader = _Reader(head)
    reader.read()
    body = reader.body
    body.finish()
    builder = Builder()
    for text in reader.headers:
        builder.add(text)
    path: list[tuple[int, str]] = []
    for text, level, is_table in body.blocks:
        if level is not None and text.strip():
            heading = one_line(text)
            path = [p for p in path if p[0] < level] + [(level, heading)]
            builder.add(text, heading=" > ".join(h for _, h in path))
            continue
        builder.add(text, heading=" > ".join(h for _, h in path) or None, table_header=1 if is_table else 0)
    for text in reader.footers:
        builder.add(text)
    warnings = []
    if reader.pictures:
        warnings.append(f"{reader.pictures} picture{'s' if reader.pictures > 1 else ''} not read")
    if reader.objects:
        warnings.append(
            f"{reader.objects} embedded object{'s' if reader.objects > 1 else ''} not read (their shown text is kept)"
        )
    for kind, what in (
        ("hidden", "formatted as hidden text (\\v, not shown in Word)"),
        ("deleted", "deleted in tracked changes (\\deleted; insertions are read)"),
    ):
        n = reader.left_out[kind]
        if n:
            warnings.append(f"{n} passage{'' if n == 1 else 's'} {what} left out")
    if reader.unclosed:
        warnings.append("the document ends inside an open group (truncated?); the text up to there is read")
    title = one_line("".join(reader.title)) or None
    return builder.build("rtf", empty="no text: the RTF document has no text", title=title, warnings=warnings)
