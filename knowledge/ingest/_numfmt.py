"""Excel number formats: a cell's value rendered as Excel shows it (ECMA-376 Part 1 §18.8.30-31).

``format_number(value, code, date1904=False)`` renders a number with a format code ("0.00%",
``#,##0``, "dd-mm-yyyy", "# ?/?", "0.00E+00", "[h]:mm:ss", ``"$"#,##0_);("$"#,##0)``, "General",
...): up to four sections (positive; negative; zero; text) and conditions (``[>=100]``), literals
(quoted, ``\\x``), padding (``_x`` as a space), fills (``*x``, dropped), colours (dropped), currency
and locale tags (``[$€-407]``: the symbol), thousands separators and scaling, percentages, scientific
and engineering notation, fractions, dates and times (elapsed ``[h]``, ``AM/PM``, fractional
seconds). Rounding is half away from zero on the decimal value, as Excel's. ``format_text`` applies
a format's text section (``@``). ``BUILTIN_FORMATS`` are the built-in ids (§18.8.30, en-US).

No well-kept Python package renders them (checked on PyPI: ssf 0.2.2, a port of SheetJS SSF last
released in 2020 with seven dependencies; xlfmt 0.1.0 and q2numfmt 0.1.1, single early releases).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

#: Built-in number formats by id (ECMA-376 Part 1 §18.8.30, the en-US rendering Excel uses).
BUILTIN_FORMATS: dict[int, str] = {
    0: "General",
    1: "0",
    2: "0.00",
    3: "#,##0",
    4: "#,##0.00",
    5: '"$"#,##0_);("$"#,##0)',
    6: '"$"#,##0_);[Red]("$"#,##0)',
    7: '"$"#,##0.00_);("$"#,##0.00)',
    8: '"$"#,##0.00_);[Red]("$"#,##0.00)',
    9: "0%",
    10: "0.00%",
    11: "0.00E+00",
    12: "# ?/?",
    13: "# ??/??",
    14: "m/d/yy",
    15: "d-mmm-yy",
    16: "d-mmm",
    17: "mmm-yy",
    18: "h:mm AM/PM",
    19: "h:mm:ss AM/PM",
    20: "h:mm",
    21: "h:mm:ss",
    22: "m/d/yy h:mm",
    27: "yyyy/m/d",
    28: "m/d",
    29: "m/d",
    30: "m/d/yy",
    31: "yyyy/m/d",
    32: "h:mm",
    33: "h:mm:ss",
    34: "h:mm",
    35: "h:mm:ss",
    36: "yyyy/m/d",
    37: "#,##0_);(#,##0)",
    38: "#,##0_);[Red](#,##0)",
    39: "#,##0.00_);(#,##0.00)",
    40: "#,##0.00_);[Red](#,##0.00)",
    41: '_(* #,##0_);_(* \\(#,##0\\);_(* "-"_);_(@_)',
    42: '_("$"* #,##0_);_("$"* \\(#,##0\\);_("$"* "-"_);_(@_)',
    43: '_(* #,##0.00_);_(* \\(#,##0.00\\);_(* "-"??_);_(@_)',
    44: '_("$"* #,##0.00_);_("$"* \\(#,##0.00\\);_("$"* "-"??_);_(@_)',
    45: "mm:ss",
    46: "[h]:mm:ss",
    47: "mm:ss.0",
    48: "##0.0E+0",
    49: "@",
    50: "yyyy/m/d",
    51: "m/d",
    52: "yyyy/m/d",
    53: "m/d",
    54: "m/d",
    55: "yyyy/m/d",
    56: "yyyy/m/d",
    57: "yyyy/m/d",
    58: "m/d",
    59: "t0",
    60: "t0.00",
    61: "t#,##0",
    62: "t#,##0.00",
    67: "t0%",
    68: "t0.00%",
    69: "t# ?/?",
    70: "t# ??/??",
    81: "d/m/bb",
}

#: Windows' system long date and time (``[$-F800]``, ``[$-F400]``), in en-US.
_SYSTEM_FORMATS = {"F800": "dddd, mmmm d, yyyy", "F400": "h:mm:ss AM/PM"}

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_SYSTEM_TAG = re.compile(r"\[\$-(F800|F400)\]", re.I)
_CONDITION = re.compile(r"\[(<=|>=|<>|<|>|=)\s*(-?[\d.]+(?:[eE][+-]?\d+)?)\]")
_DATE_CODE = re.compile(r"(?i)yy|y|mm|m|dd|d|hh|h|ss|s|e|am/pm|a/p|\[h+\]|\[m+\]|\[s+\]")
#: Numbers Excel's General format shows in scientific notation: from 1E+11 up, below 1E-9.
_GENERAL_LARGE = 1e11
_GENERAL_SMALL = 1e-9


def format_number(value: float, code: str | None, *, date1904: bool = False) -> str:
    """``value`` as Excel displays it under the number format ``code`` (``None`` or "" = General).

    Never raises: a code this renderer cannot parse gives the General rendering. A date outside
    Excel's range (negative, past 9999) gives the General rendering too, as Excel shows ``#####``.
    """
    if math.isnan(value) or math.isinf(value):
        return "#NUM!"
    try:
        return _format(value, code or "General", date1904)
    except (ValueError, OverflowError, ArithmeticError, IndexError):
        return general(value)


def format_text(text: str, code: str | None) -> str:
    """``text`` under the format ``code``: its text section (the fourth, or a single one with ``@``)
    with its literals; the text itself otherwise."""
    if not code:
        return text
    sections = _split_sections(code)
    section = sections[3] if len(sections) >= 4 else sections[0] if len(sections) == 1 else None
    if section is None or "@" not in _strip_quoted(section):
        return text
    out = []
    for kind, tok in _tokens(section):
        if kind == "@":
            out.append(text)
        elif kind == "lit":
            out.append(tok)
    return "".join(out)


def is_date_format(code: str | None) -> bool:
    """True when ``code`` formats a number as a date or time."""
    if not code:
        return False
    section = _split_sections(code)[0]
    return any(kind == "date" for kind, _ in _tokens(section))


def general(value: float) -> str:
    """Excel's General format (a standard-width column): integers without ``.0``, up to 11
    characters, scientific notation ("1.23457E+11") for numbers too long for that."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= _GENERAL_LARGE or magnitude < _GENERAL_SMALL:
        mantissa, exponent = f"{value:.5E}".split("E")
        mantissa = mantissa.rstrip("0").rstrip(".")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}E{sign}{abs(int(exponent)):02d}"
    if value == int(value):
        return str(int(value))
    digits_before = max(1, math.floor(math.log10(magnitude)) + 1)
    decimals = max(0, 10 - digits_before) if magnitude >= 1 else 9
    text = _round_fixed(magnitude, decimals)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


# -- parsing --------------------------------------------------------------------------------------


def _split_sections(code: str) -> list[str]:
    sections, current, i = [], [], 0
    while i < len(code):
        ch = code[i]
        if ch == '"':
            end = code.find('"', i + 1)
            end = len(code) if end < 0 else end + 1
            current.append(code[i:end])
            i = end
            continue
        if ch in "\\_*" and i + 1 < len(code):
            current.append(code[i : i + 2])
            i += 2
            continue
        if ch == "[":
            end = code.find("]", i)
            end = len(code) if end < 0 else end + 1
            current.append(code[i:end])
            i = end
            continue
        if ch == ";":
            sections.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    sections.append("".join(current))
    return sections


def _strip_quoted(section: str) -> str:
    return re.sub(r'"[^"]*"|\\.|_.|\*.|\[[^\]]*\]', "", section)


def _tokens(section: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pairs: ``lit`` (text shown as is), ``digit`` (0 # ?), ``.``, ``,``, ``%``,
    ``exp`` (E+ E-), ``/``, ``@``, ``general``, ``date`` (a date/time code, lower case but AM/PM)."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(section)
    while i < n:
        ch = section[i]
        rest = section[i:]
        if ch == '"':
            end = section.find('"', i + 1)
            end = n if end < 0 else end
            out.append(("lit", section[i + 1 : end]))
            i = end + 1
        elif ch == "\\" and i + 1 < n:
            out.append(("lit", section[i + 1]))
            i += 2
        elif ch == "_" and i + 1 < n:
            out.append(("lit", " "))
            i += 2
        elif ch == "*" and i + 1 < n:
            i += 2
        elif ch == "[":
            end = section.find("]", i)
            end = n if end < 0 else end
            inner = section[i + 1 : end]
            low = inner.lower()
            if re.fullmatch(r"h+|m+|s+", low):
                out.append(("date", f"[{low}]"))
            elif inner.startswith("$"):
                symbol, _, locale = inner[1:].partition("-")
                if symbol:
                    out.append(("lit", symbol))
                elif locale.upper() in _SYSTEM_FORMATS:
                    out.extend(_tokens(_SYSTEM_FORMATS[locale.upper()]))
            i = end + 1
        elif rest[:7].lower() == "general":
            out.append(("general", "General"))
            i += 7
        elif ch in "0#?":
            out.append(("digit", ch))
            i += 1
        elif ch in ".,%/@":
            out.append((ch, ch))
            i += 1
        elif ch in "eE" and i + 1 < n and section[i + 1] in "+-":
            out.append(("exp", section[i : i + 2]))
            i += 2
        elif rest[:5].upper() == "AM/PM":
            out.append(("date", "am/pm"))
            i += 5
        elif rest[:3].upper() == "A/P":
            out.append(("date", "a/p"))
            i += 3
        elif ch.lower() in "ymdhse":
            j = i
            while j < n and section[j].lower() == ch.lower():
                j += 1
            out.append(("date", section[i:j].lower()))
            i = j
        elif ch.lower() in "bg" and i + 1 < n and section[i + 1].lower() == ch.lower():
            j = i
            while j < n and section[j].lower() == ch.lower():
                j += 1
            out.append(("date", "yyyy" if ch.lower() == "b" else ""))  # Buddhist era / era: as years
            i = j
        else:
            out.append(("lit", ch))
            i += 1
    return out


def _choose(value: float, sections: list[str]) -> tuple[str, float, bool]:
    """The section for ``value``, the value to render with it, and whether a minus sign is due."""
    conditions = [_CONDITION.search(s) for s in sections]
    if any(conditions[:2]):
        for i, match in enumerate(conditions[:3]):
            if match is None:
                # Excel: the section after conditional ones is "everything else".
                return _CONDITION.sub("", sections[i]), abs(value), value < 0 and i == 0
            if _compare(value, match.group(1), float(match.group(2))):
                section = _CONDITION.sub("", sections[i])
                return section, abs(value) if i > 0 else value, False
        return sections[0], value, value < 0
    numeric = list(sections[:3])
    if len(numeric) >= 3 and value == 0:
        return numeric[2], 0.0, False
    if len(numeric) >= 2 and value < 0:
        return numeric[1], -value, False
    return numeric[0], abs(value), value < 0


def _compare(value: float, op: str, limit: float) -> bool:
    return {
        "<": value < limit,
        ">": value > limit,
        "=": value == limit,
        "<=": value <= limit,
        ">=": value >= limit,
        "<>": value != limit,
    }[op]


def _format(value: float, code: str, date1904: bool) -> str:
    sections = _split_sections(code)
    if len(sections) >= 4 and sections[3] == "" and len(sections) > 4:
        sections = sections[:4]
    section, shown, minus = _choose(value, sections[:3] if len(sections) > 3 else sections)
    system = _SYSTEM_TAG.search(section)
    if system:  # Windows' system long date / time replaces the rest of the code
        section = _SYSTEM_FORMATS[system.group(1).upper()]
    tokens = _tokens(section)
    if not tokens:
        return ""
    kinds = {k for k, _ in tokens}
    if "date" in kinds:
        return _format_date(value, tokens, date1904)  # a negative date raises: General
    if "digit" not in kinds:
        shown_kinds = ("lit", "general", "%", ",", ".", "/")
        text = "".join(general(shown) if k == "general" else tok for k, tok in tokens if k in shown_kinds)
        if "general" in kinds:
            return ("-" if minus else "") + text
        return text
    if "/" in kinds and _fraction_shape(tokens):
        return ("-" if minus else "") + _format_fraction(shown, tokens)
    return ("-" if minus and shown != 0 else "") + _format_decimal(shown, tokens)


# -- numbers --------------------------------------------------------------------------------------


def _round_fixed(value: float, decimals: int) -> str:
    quantum = Decimal(1).scaleb(-decimals)
    return str(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))


def _format_decimal(value: float, tokens: list[tuple[str, str]]) -> str:
    exp_at = next((i for i, (k, _) in enumerate(tokens) if k == "exp"), None)
    mantissa_tokens = tokens if exp_at is None else tokens[:exp_at]
    exponent_tokens = [] if exp_at is None else tokens[exp_at + 1 :]
    dot = next((i for i, (k, _) in enumerate(mantissa_tokens) if k == "."), None)
    int_tokens = mantissa_tokens if dot is None else mantissa_tokens[:dot]
    frac_tokens = [] if dot is None else mantissa_tokens[dot + 1 :]
    # Commas: between digits, a thousands separator; right after the last digit placeholder (before
    # or after the decimal point), a division by 1000 each.
    last_any = max((i for i, (k, _) in enumerate(mantissa_tokens) if k == "digit"), default=-1)
    scale = 0
    i = last_any + 1
    while i < len(mantissa_tokens) and mantissa_tokens[i][0] == ",":
        scale += 1
        i += 1
    if scale:
        mantissa_tokens = mantissa_tokens[: last_any + 1] + mantissa_tokens[last_any + 1 + scale :]
        dot = next((i for i, (k, _) in enumerate(mantissa_tokens) if k == "."), None)
        int_tokens = mantissa_tokens if dot is None else mantissa_tokens[:dot]
        frac_tokens = [] if dot is None else mantissa_tokens[dot + 1 :]
    last_digit = max((i for i, (k, _) in enumerate(int_tokens) if k == "digit"), default=-1)
    first_digit = next((i for i, (k, _) in enumerate(int_tokens) if k == "digit"), 0)
    grouping = any(k == "," for k, _ in int_tokens[first_digit:last_digit])
    int_tokens = [t for j, t in enumerate(int_tokens) if t[0] != "," or j < first_digit]
    percent = sum(1 for k, _ in tokens if k == "%")
    value = value * (100**percent) / (1000**scale)
    frac_places = [tok for k, tok in frac_tokens if k == "digit"]
    if exp_at is not None:
        int_places = [tok for k, tok in int_tokens if k == "digit"]
        value, exponent = _scientific(value, int_places, len(frac_places))
    rounded = _round_fixed(value, len(frac_places))
    int_text, _, frac_text = rounded.partition(".")
    out = _fill_integer(int_text, int_tokens, grouping)
    if dot is not None:
        out += "." + _fill_fraction(frac_text, frac_tokens)
        if not frac_places and out.endswith("."):
            pass
    if exp_at is not None:
        sign_code = tokens[exp_at][1][1]
        exp_digits = [tok for k, tok in exponent_tokens if k == "digit"]
        width = sum(1 for d in exp_digits if d == "0")
        sign = "-" if exponent < 0 else ("+" if sign_code == "+" else "")
        out += "E" + sign + str(abs(exponent)).rjust(width, "0")
        out += "".join(tok for k, tok in exponent_tokens if k == "lit")
    return out


def _scientific(value: float, int_places: list[str], decimals: int) -> tuple[float, int]:
    if value == 0:
        return 0.0, 0
    exponent = math.floor(math.log10(abs(value)))
    step = len(int_places) if len(int_places) > 1 and "#" in int_places else 1
    exponent -= exponent % step if step > 1 else 0
    if step == 1:
        exponent -= max(0, len(int_places) - 1)
    mantissa = value / (10**exponent)
    if abs(float(_round_fixed(mantissa, decimals))) >= 10 ** (step if step > 1 else max(1, len(int_places))):
        exponent += step
        mantissa = value / (10**exponent)
    return mantissa, exponent


def _fill_integer(digits: str, int_tokens: list[tuple[str, str]], grouping: bool) -> str:
    """The integer digits spread over the placeholders right to left (extra digits go to the
    leftmost one); ``0`` pads with zeros, ``?`` with spaces, ``#`` with nothing."""
    places = [i for i, (k, _) in enumerate(int_tokens) if k == "digit"]
    if digits == "0":
        digits = ""  # a leading zero only where a 0 placeholder asks for it
    if not places:
        return "".join(tok for k, tok in int_tokens) + digits
    out = [tok if k != "digit" else "" for k, tok in int_tokens]
    chars = list(digits)
    for pos in reversed(places):
        kind = int_tokens[pos][1]
        if chars:
            out[pos] = chars.pop() if pos != places[0] else "".join(chars)
            if pos == places[0]:
                chars = []
        else:
            out[pos] = "0" if kind == "0" else " " if kind == "?" else ""
    if grouping:
        span = "".join(out[places[0] : places[-1] + 1])
        if span.strip().isdigit():
            padded = span.strip()
            lead = span[: len(span) - len(span.lstrip())]
            out[places[0] : places[-1] + 1] = [lead + _group(padded)]
    return "".join(out)


def _group(digits: str) -> str:
    """``digits`` with a comma every three from the right, leading zeros kept."""
    head = len(digits) % 3
    groups = [digits[:head]] if head else []
    groups += [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return ",".join(groups)


def _fill_fraction(digits: str, frac_tokens: list[tuple[str, str]]) -> str:
    places = [tok for k, tok in frac_tokens if k == "digit"]
    chars = list(digits.ljust(len(places), "0"))
    # Optional places (# ?) at the end drop their trailing zeros.
    keep = len(chars)
    while keep > 0 and places[keep - 1] != "0" and chars[keep - 1] == "0":
        keep -= 1
    out, d = [], 0
    for kind, tok in frac_tokens:
        if kind == "digit":
            if d < keep:
                out.append(chars[d])
            elif tok == "?":
                out.append(" ")
            d += 1
        elif kind in ("lit", "%"):
            out.append(tok)
    return "".join(out)


def _fraction_shape(tokens: list[tuple[str, str]]) -> bool:
    slash = next(i for i, (k, _) in enumerate(tokens) if k == "/")
    return any(k == "digit" for k, _ in tokens[:slash]) and (
        any(k == "digit" for k, _ in tokens[slash + 1 :])
        or any(k == "lit" and tok.isdigit() for k, tok in tokens[slash + 1 :])
    )


def _format_fraction(value: float, tokens: list[tuple[str, str]]) -> str:
    slash = next(i for i, (k, _) in enumerate(tokens) if k == "/")
    before, after = tokens[:slash], tokens[slash + 1 :]
    # The numerator is the last run of digit placeholders before the slash; digits before a
    # literal gap are the integer part ("# ?/?": integer, numerator).
    num_start = slash
    while num_start > 0 and before[num_start - 1][0] == "digit":
        num_start -= 1
    int_tokens, num_tokens = before[:num_start], before[num_start:]
    has_int = any(k == "digit" for k, _ in int_tokens)
    den_digits = "".join(tok for k, tok in after if k in ("digit", "lit") and (k == "digit" or tok.isdigit()))
    den_fixed = den_digits.isdigit() and den_digits != ""
    suffix = "".join(tok for k, tok in after if k == "lit" and not tok.isdigit())
    whole = math.floor(value) if has_int else 0
    rest = value - whole
    if den_fixed:
        den = int(den_digits)
        num = int(Decimal(repr(rest * den)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    else:
        limit = 10 ** max(1, len([t for k, t in after if k == "digit"])) - 1
        frac = Fraction(rest).limit_denominator(limit)
        num, den = frac.numerator, frac.denominator
    if has_int and num == den:
        whole, num = whole + 1, 0
    parts = []
    if has_int:
        int_text = str(whole) if whole or num == 0 else ""
        lead = "".join(
            tok
            for k, tok in int_tokens
            if k == "lit" and int_tokens.index((k, tok)) < next(i for i, (kk, _) in enumerate(int_tokens) if kk == "digit")
        )
        parts.append(lead + int_text)
        if num == 0:
            return (lead + str(whole)).strip() if whole else (lead + "0")
        if int_text:
            parts.append(" ")
    num_lit = "".join(tok for k, tok in num_tokens if k == "lit")
    parts.append(f"{num_lit}{num}/{den}{suffix}")
    return "".join(parts).strip()


# -- dates ----------------------------------------------------------------------------------------


def _to_datetime(serial: float, date1904: bool) -> datetime:
    if serial < 0 or serial >= 2958466:
        raise ValueError("out of Excel's date range")
    base = datetime(1904, 1, 1) if date1904 else datetime(1899, 12, 31) if serial < 60 else datetime(1899, 12, 30)
    return base + timedelta(days=serial)


def _format_date(value: float, tokens: list[tuple[str, str]], date1904: bool) -> str:
    # Fractional seconds: "ss.0", "ss.00": the digits after a "." that follows a seconds code.
    frac_digits = 0
    for i, (kind, _) in enumerate(tokens):
        if kind == "." and i > 0 and tokens[i - 1][0] == "date" and tokens[i - 1][1].startswith(("s", "[s")):
            j = i + 1
            while j < len(tokens) and tokens[j] == ("digit", "0"):
                j += 1
            frac_digits = max(frac_digits, j - i - 1)
    unit = 86400 * 10**frac_digits
    ticks = int(Decimal(repr(value * unit)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    serial = ticks / unit
    leap_bug = not date1904 and 60 <= serial < 61  # Excel's 29 February 1900, a day that never was
    moment = _to_datetime(serial - 1 if leap_bug else serial, date1904)
    twelve = any(tok in ("am/pm", "a/p") for kind, tok in tokens if kind == "date")
    # Which "m" are minutes: right after an hour code or right before a seconds code.
    dates = [i for i, (k, _) in enumerate(tokens) if k == "date" and tokens[i][1]]
    minute_at: set[int] = set()
    for n, i in enumerate(dates):
        tok = tokens[i][1]
        if tok in ("m", "mm"):
            prev = tokens[dates[n - 1]][1] if n > 0 else ""
            nxt = tokens[dates[n + 1]][1] if n + 1 < len(dates) else ""
            if prev.startswith(("h", "[h")) or nxt.startswith(("s", "[s")):
                minute_at.add(i)
    out: list[str] = []
    skip_digits = 0
    total_seconds = ticks / 10**frac_digits
    for i, (kind, tok) in enumerate(tokens):
        if skip_digits and kind == "digit":
            skip_digits -= 1
            continue
        if kind == "date":
            part = _date_part(tok, i in minute_at, moment, twelve, total_seconds)
            if leap_bug and tok in ("d", "dd") and part.lstrip("0") == "28":
                part = "29"
            out.append(part)
        elif kind == "." and frac_digits and i > 0 and tokens[i - 1][0] == "date":
            fraction = ticks % (10**frac_digits)
            width = 0
            j = i + 1
            while j < len(tokens) and tokens[j] == ("digit", "0"):
                width += 1
                j += 1
            out.append("." + str(fraction).rjust(frac_digits, "0")[:width])
            skip_digits = width
        elif kind in ("lit", ".", ",", "/", "%"):
            out.append(tok)
        elif kind == "digit":
            out.append("0" if tok == "0" else "")
        elif kind == "general":
            out.append(general(value))
    return "".join(out)


def _date_part(tok: str, minute: bool, moment: datetime, twelve: bool, total_seconds: float) -> str:
    whole_seconds = int(total_seconds)
    if tok.startswith("["):
        letter, width = tok[1], len(tok) - 2
        amount = {"h": whole_seconds // 3600, "m": whole_seconds // 60, "s": whole_seconds}[letter]
        return str(amount).rjust(width, "0")
    if tok in ("am/pm", "a/p"):
        pm = moment.hour >= 12
        return ("PM" if pm else "AM") if tok == "am/pm" else ("P" if pm else "A")
    if tok[0] == "y" or tok[0] == "e":
        return f"{moment.year % 100:02d}" if tok in ("y", "yy") else str(moment.year)
    if tok[0] == "m":
        if minute:
            return f"{moment.minute:02d}" if tok == "mm" else str(moment.minute)
        if tok == "m":
            return str(moment.month)
        if tok == "mm":
            return f"{moment.month:02d}"
        name = _MONTHS[moment.month - 1]
        return name[:3] if tok == "mmm" else name[0] if len(tok) == 5 else name
    if tok[0] == "d":
        if tok == "d":
            return str(moment.day)
        if tok == "dd":
            return f"{moment.day:02d}"
        name = _DAYS[moment.weekday()]
        return name[:3] if tok == "ddd" else name
    if tok[0] == "h":
        hour = moment.hour
        if twelve:
            hour = hour % 12 or 12
        return f"{hour:02d}" if len(tok) >= 2 else str(hour)
    if tok[0] == "s":
        return f"{moment.second:02d}" if len(tok) >= 2 else str(moment.second)
    return ""
