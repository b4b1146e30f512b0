"""The offline assistant answers a question about a table's row with that row, read under its
header (issue 43: "a question about them needs the row and its header together"): a table's body
rows are candidate sentences, scored and quoted as "header: value; ..."."""

from __future__ import annotations

import json

import pytest

from knowledge.cli import main
from knowledge.text.sentences import sentences, table_rows

PASSAGE = (
    "Loans by type, in thousands of dollars.\n\n"
    "| Loan type | 12/31/2009 | 6/30/2011 |\n|-|-|-|\n"
    "| 1-4 family residential mortgage | 4,151,000 | 3,925,000 |\n"
    "| Commercial mortgage | 361,000 |  |\n\n"
    "The figures are not audited."
)


def test_each_body_row_is_read_under_its_header_and_keeps_its_offsets():
    rows = table_rows(PASSAGE)
    assert [(PASSAGE[s.start : s.end], read) for s, read in rows] == [
        (
            "| 1-4 family residential mortgage | 4,151,000 | 3,925,000 |",
            "Loan type: 1-4 family residential mortgage; 12/31/2009: 4,151,000; 6/30/2011: 3,925,000",
        ),
        ("| Commercial mortgage | 361,000 |  |", "Loan type: Commercial mortgage; 12/31/2009: 361,000"),
    ]
    assert [s.text for s in sentences(PASSAGE)] == [
        "Loans by type, in thousands of dollars.",
        "The figures are not audited.",
    ]


def test_a_multi_row_header_names_each_column_with_all_its_rows_and_rows_without_a_header_give_none():
    text = "| | Male | Male |\n| Faculty | Sample | Population |\n| --- | --- | --- |\n| Sciences | 38 | 672 |"
    [(_, read)] = table_rows(text)
    assert read == "Faculty: Sciences; Male Sample: 38; Male Population: 672"
    assert table_rows("| a | b |\n| c | d |") == []  # no delimiter row: not known to be a table's body


@pytest.mark.model
def test_a_question_about_a_row_is_answered_with_the_row_under_its_header(tmp_path, capsys):
    """A PDF with a loans table and prose, ingested with the real bundled model: asked for one
    loan type's amount, the offline assistant quotes that row with its header (before, a table row
    was never a candidate: "Nothing in ... answers")."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 6, "The bank's loan book at the end of each period is shown below. Amounts are in thousands.")
    pdf.ln(4)
    rows = [
        ["Loan type", "12/31/2009", "12/31/2010", "6/30/2011"],
        ["1-4 family residential mortgage", "4,151,000", "4,090,000", "3,925,000"],
        ["Commercial mortgage", "361,000", "331,000", "284,000"],
        ["Construction loans", "173,000", "148,000", "170,000"],
        ["Consumer loans", "63,000", "69,000", "66,000"],
    ]
    with pdf.table(first_row_as_headings=True) as table:
        for values in rows:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.ln(4)
    pdf.multi_cell(0, 6, "The board reviews the loan book every quarter and reports to the regulator in July.")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loans.pdf").write_bytes(bytes(pdf.output()))
    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "ingest", "loans", str(docs), "--json"]) == 0
    capsys.readouterr()
    question = "What was the construction loans amount on 6/30/2011?"
    assert main(["--data-dir", data, "chat", "--store", "loans", question, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)["answer"]
    quoted = [line for line in answer.splitlines() if line.startswith("> ")]
    assert quoted and quoted[0].startswith(
        "> Loan type: Construction loans; 12/31/2009: 173,000; 12/31/2010: 148,000; 6/30/2011: 170,000"
    ), answer


def test_the_best_score_under_the_bar_never_reads_as_the_bar():
    """'no sentence scores 0.42 or more (the best, 0.42)' read as a contradiction: the best is
    written with the decimals that show it below the bar."""
    from knowledge.llm.providers import shown_under

    assert shown_under(0.31, 0.42) == "0.31"
    assert shown_under(0.4183, 0.42) == "0.418"
    assert shown_under(0.41996, 0.42) == "0.41996"
