"""Documents the tests make."""

from __future__ import annotations


def encrypted_pdf(password: str, repeat: int = 5) -> bytes:
    """A one-page PDF whose text (one sentence ``repeat`` times) opens only with ``password``."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "The lighthouse keeper counts seagulls every morning. " * repeat)
    pdf.set_encryption(owner_password="owner", user_password=password)
    return bytes(pdf.output())


__all__ = ["encrypted_pdf"]
