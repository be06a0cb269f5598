"""Result documents for people: Markdown files beside the CSVs, and the same text as HTML for the Snakemake report
(whose viewer displays HTML and images inline, and offers anything else only as a download).

The Markdown kdflow writes is a small subset: ``#`` headings, paragraphs, ``-`` bullet lists and pipe tables
(:func:`kdflow.reporting.tables.markdown`), so a few lines convert it; no Markdown package is needed. Tables scroll
sideways inside their own box when wider than the page; columns of numbers are right-aligned, text left-aligned,
and only columns of sentences wrap.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
.table { overflow-x: auto; margin: 0.8em 0 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; white-space: nowrap; }
th { background: #f0f0f0; }
.number { text-align: right; font-variant-numeric: tabular-nums; }
.prose { white-space: normal; min-width: 24em; }
tr:nth-child(even) td { background: #fafafa; }
code { background: #f4f4f4; padding: 0 0.2em; }
</style>"""


# A number cell: a (signed) number first, as in "40.00 (29.2)", "+1.2", "85.3 ± 1.2", or a missing value.
NUMBER = re.compile(r"$|[-+−]?\.?\d|—")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
BULLET = re.compile(r"^-\s+(.*)$")
TABLE_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
PROSE = 40  # characters: a column with a longer cell holds sentences, which wrap; other cells keep to one line


def _inline(text: str) -> str:
    """Escape HTML, then render `code`, **bold** and *italics*."""
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"\*(\S[^*]*?)(?<=\S)\*", r"<em>\1</em>", text)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _column_class(cells: list[str]) -> str:
    if cells and all(NUMBER.match(cell) for cell in cells):
        return "number"
    return "prose" if any(len(cell) > PROSE for cell in cells) else ""


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table in a box that scrolls sideways, each column styled by what its cells hold."""
    classes = [_column_class([row[j] for row in rows if j < len(row)]) for j in range(len(header))]

    def html_row(cells: list[str], tag: str) -> str:
        tags = [f'{tag} class="{name}"' if name else tag for name in classes]
        return "<tr>" + "".join(f"<{t}>{_inline(cell)}</{tag}>" for cell, t in zip(cells, tags)) + "</tr>"

    lines = [html_row(header, "th"), *(html_row(cells, "td") for cells in rows)]
    return '<div class="table"><table>\n' + "\n".join(lines) + "\n</table></div>"


def markdown_to_html(text: str, title: str = "kdflow") -> str:
    """A standalone HTML page of kdflow's Markdown subset."""
    body, paragraph, items, lines = [], [], [], text.splitlines()

    def flush() -> None:
        if paragraph:
            body.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            body.append("<ul>\n" + "\n".join(f"<li>{_inline(item)}</li>" for item in items) + "\n</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        heading, bullet = HEADING.match(line), BULLET.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            body.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif line.startswith("|") and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1]):
            flush()
            header, rows, i = _cells(line), [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            body.append(_table(header, rows))
            continue
        elif bullet:
            if paragraph:
                flush()
            items.append(bullet.group(1))
        elif line.strip():
            if items:
                flush()
            paragraph.append(line.strip())
        else:
            flush()
        i += 1
    flush()
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>{STYLE}"
            f"</head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_document(markdown_text: str, markdown_path, html_path=None) -> None:
    """Write a Markdown document, and its HTML rendering when ``html_path`` is given."""
    Path(markdown_path).write_text(markdown_text)
    if html_path is not None:
        title = next((line.lstrip("# ") for line in markdown_text.splitlines() if line.startswith("#")), "kdflow")
        Path(html_path).write_text(markdown_to_html(markdown_text, title))
