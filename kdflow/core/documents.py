"""Result pages for people, built once as data and rendered twice: Markdown beside the CSVs, and HTML for the
Snakemake report (whose viewer shows HTML inline and offers anything else only as a download).

A :class:`Document` is a title and a list of blocks (:class:`Heading`, :class:`Paragraph`, :class:`Bullets`,
:class:`Table`); text is plain, with :class:`Emphasis` and :class:`Code` spans where a producer wants them. Each
renderer escapes text for its own format, so a sentence or a cell holding ``|``, ``*``, ``_``, backticks or
``<script>`` shows literally in both. HTML tables come from pandas' ``to_html``. Markdown tables are written here:
tabulate (behind ``to_markdown``) neither escapes ``|`` nor leaves number-like text alone ("40.00" becomes 40), so
the cells would need this module's formatting and escaping anyway, and a pipe table is a few lines more.

Both formats style a column by what its cells hold: numbers right-aligned, text left-aligned. In HTML, numbers keep
to one line and text wraps where the page is too narrow for it: at spaces, after the ``_ . / , = :`` of identifiers
and inside camelCase words (``<wbr>``, which a copied name does not carry), so that a table fits the report's frame
at 1400 px. In a narrower frame tables get a smaller font, and one that still cannot fit (too many number columns)
scrolls inside its box with its first column kept in view, or in a phone's frame shows each row as a card of
"column: value" lines (:data:`FIT_SCRIPT`). Headings carry anchors (GitHub's, so that the Markdown's links agree), and
a long page gets a list of its sections (:data:`CONTENTS_FROM`), or links the one it has.

This module is in ``core`` because the transfer and analysis stages write pages too, and precede ``reporting``.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Emphasis:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Link:
    """Text that opens another result of the run (``target``: its path as the workflow writes it, as the report
    keys its entries): in the report, that entry; in Markdown the text and the path, which a reader opens beside."""
    text: str
    target: str


Span = str | Emphasis | Code | Link
Text = Span | Sequence[Span]


@dataclass(frozen=True)
class Heading:
    text: Text
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: Text


@dataclass(frozen=True)
class Bullets:
    items: Sequence[Text]


@dataclass(frozen=True)
class Table:
    """A DataFrame shown without its index; floats get ``digits`` decimals and missing values an em dash."""

    frame: pd.DataFrame
    digits: int = 1


@dataclass(frozen=True)
class Fold:
    """Blocks a reader opens when wanted: in HTML a closed ``<details>`` under its ``summary``; in Markdown, which
    cannot fold, a heading (of ``level``) and the blocks."""

    summary: Text
    blocks: Sequence[Block]
    level: int = 2


Block = Heading | Paragraph | Bullets | Table | Fold

MISSING = "—"
# A number cell: a (signed) number first, as in "40.00 (29.2)", "+1.2", "85.3 ± 1.2", or a missing value.
NUMBER = re.compile(r"$|[-+−]?\.?\d|—")
PROSE = 40  # characters: a column with a longer cell holds sentences, which keep a readable width when wrapped
NUMBER_STYLE = "text-align: right; font-variant-numeric: tabular-nums;"
PROSE_WIDTH = 42  # em: the sentence columns of a table share this minimum width, at most 14em each
# Where an identifier may break in HTML: after the punctuation of settings.paths, file_names, a/b, k=v and
# model:field, and inside a camelCase word (SentEval's task names head columns of numbers).
IDENTIFIER_BREAK = re.compile(r"(?<=[_./,=:])(?=\w)|(?<=[a-z])(?=[A-Z])")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
.table { overflow-x: auto; margin: 0.8em 0 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.4em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr:nth-child(even) td { background: #fafafa; }
code { background: #f4f4f4; padding: 0 0.2em; }
@media (max-width: 900px) {
  body { margin: 0.8em; }
  table { font-size: 0.8em; }
  th, td { padding: 0.2em 0.3em; }
}
/* a table wider than its box scrolls there, its first column kept in view */
.table th:first-child, .table td:first-child { position: sticky; left: 0; background: #fff; z-index: 1; }
.table th:first-child { background: #f0f0f0; }
.table tr:nth-child(even) td:first-child { background: #fafafa; }
nav.contents { margin: 0.6em 0 1.2em; }
nav.contents ul { margin: 0.2em 0; padding-left: 1.4em; columns: 2 18em; }
table.cards thead { display: none; }
table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; }
table.cards tr { border: 1px solid #ccc; margin-bottom: 0.5em; }
table.cards td { border: none; min-width: 0 !important; white-space: normal !important; text-align: left !important; }
table.cards td::before { content: attr(data-label) ": "; font-weight: 600; }
"""
# A table wider than its box scrolls inside it, its first column sticky, so a row keeps its name. Only in a frame
# narrower than CARDS_BELOW (a phone; the report's frame is about 680 px in a 1024-px window) does such a table show
# each row as a card of "column: value" lines: cards made the claims page 3.6 times as tall at 1024 px (issue 69).
# CSS alone cannot tell that a table overflows. Checked again when the frame is resized.
CARDS_BELOW = 480  # px
FIT_SCRIPT = """<script>
function fitTables() {
  for (const box of document.querySelectorAll('div.table')) {
    const table = box.querySelector('table');
    table.classList.remove('cards');
    if (innerWidth < CARDS_BELOW && table.scrollWidth > box.clientWidth + 1) {
      const names = Array.from(table.querySelectorAll('thead th'), th => th.textContent);
      for (const row of table.querySelectorAll('tbody tr')) {
        Array.from(row.children).forEach((cell, j) => { cell.dataset.label = names[j]; });
      }
      table.classList.add('cards');
    }
  }
}
addEventListener('load', fitTables);
addEventListener('resize', fitTables);
</script>""".replace("CARDS_BELOW", str(CARDS_BELOW))
# The page's own links to its sections scroll there, opening the fold that holds one: the report shows a page in an
# iframe of a data: URL, where a fragment is not a navigation a reader can rely on. A link to another result
# (:class:`Link`) asks the report to show it (report/search.js listens): the frame's data: URL has an origin of its
# own, from which a page reaches its parent by a message only.
LINK_SCRIPT = """<script>
document.addEventListener('click', event => {
  const result = event.target.closest('a[data-result]');
  if (result && window.parent !== window) {
    event.preventDefault();
    window.parent.postMessage({kdflowResult: result.dataset.result}, '*');
    return;
  }
  const link = event.target.closest('a[href^="#"]');
  const target = link && document.getElementById(decodeURIComponent(link.getAttribute('href').slice(1)));
  if (!target) return;
  event.preventDefault();
  for (let fold = target.closest('details'); fold; fold = fold.parentElement.closest('details')) fold.open = true;
  target.scrollIntoView();
});
</script>"""
CONTENTS = "Contents"  # a heading of that name over a list: the page's own contents, each item linked
CONTENTS_FROM = 4  # sections: a page with fewer and no contents of its own gets none made
# Inline Markdown syntax: escaped wherever it occurs. An underscore between two letters or digits starts no
# emphasis, so it stays bare (names like bert_4 read as written in the .md files).
MARKDOWN_SPECIAL = set("\\`*[]<>|#&~")
# Text that would open a list or a thematic break when it starts a paragraph or a list item: its marker character.
BLOCK_START = re.compile(r"^\d{1,9}(?=[.)])|^(?=[-+])")


def _spans(text: Text) -> Sequence[Span]:
    return [text] if isinstance(text, (str, Emphasis, Code, Link)) else text


def _plain(text: Text) -> str:
    return "".join(span if isinstance(span, str) else span.text for span in _spans(text))


def _one_line(text) -> str:
    """Newlines end a table row or a paragraph in Markdown and are mere spaces in HTML: fold all whitespace."""
    return re.sub(r"\s+", " ", str(text))


def escape_markdown(text) -> str:
    text = _one_line(text)

    def escaped(i: int, char: str) -> str:
        if char in MARKDOWN_SPECIAL:
            return "\\" + char
        if char == "_" and not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()):
            return "\\_"
        return char

    return "".join(escaped(i, char) for i, char in enumerate(text))


def _code_markdown(text: str) -> str:
    """A code span fenced by more backticks than it holds in a row (its content is literal, no escapes)."""
    text = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inline_markdown(text: Text, starts_block: bool = False) -> str:
    parts = []
    for span in _spans(text):
        if isinstance(span, Emphasis):
            emphasised = escape_markdown(span.text).strip()  # emphasis must not start or end with a space
            parts.append(f"*{emphasised}*" if emphasised else "")
        elif isinstance(span, Code):
            parts.append(_code_markdown(span.text))
        elif isinstance(span, Link):
            parts.append(f"{escape_markdown(span.text)} ({_code_markdown(span.target)})")
        else:
            parts.append(escape_markdown(span))
    line = "".join(parts).strip()  # leading spaces could make a code block
    return BLOCK_START.sub(lambda start: start.group() + "\\", line, count=1) if starts_block else line


def _inline_html(text: Text) -> str:
    parts = []
    for span in _spans(text):
        if isinstance(span, Emphasis):
            parts.append(f"<em>{html.escape(span.text)}</em>")
        elif isinstance(span, Code):
            parts.append(f"<code>{html.escape(span.text)}</code>")
        elif isinstance(span, Link):
            target = html.escape(span.target)
            parts.append(f'<a href="{target}" data-result="{target}">{html.escape(span.text)}</a>')
        else:
            parts.append(html.escape(str(span)))
    return "".join(parts)


def number(value: float | None, form: str = "{:.2f}") -> str:
    """A number as a table shows it: ``form``, or MISSING where there is none (None, NaN, infinite)."""
    return MISSING if value is None or not math.isfinite(value) else form.format(value)


def joined(spans: Sequence[Span], separator: str) -> list[Span]:
    """``spans`` with ``separator`` between each two, as the parts of one text (links in a line)."""
    return [part for index, span in enumerate(spans) for part in ([separator] if index else []) + [span]]


def signed(value: float | None, digits: int = 2) -> str:
    """A difference as a table shows it: its sign always, a minus sign (U+2212) rather than a hyphen, or MISSING."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value:+.{digits}f}".replace("-", "\u2212")


def _cell(value, digits: int) -> str:
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return MISSING
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _cells(table: Table) -> pd.DataFrame:
    """The table's text: one string per cell, columns named by strings, a plain index."""
    frame = table.frame.astype(object).map(lambda value: _cell(value, table.digits))
    frame.columns = [str(name) for name in table.frame.columns]
    return frame.reset_index(drop=True)


def column_kinds(cells: pd.DataFrame) -> list[str]:
    """Per column "number" (every cell starts with a number or is missing), "prose" (some cell is a sentence) or
    "" (short text)."""
    kinds = []
    for _, column in cells.items():
        if len(column) and all(NUMBER.match(cell) for cell in column):
            kinds.append("number")
        else:
            kinds.append("prose" if any(len(cell) > PROSE for cell in column) else "")
    return kinds


def _table_markdown(cells: pd.DataFrame) -> str:
    def row(texts) -> str:
        return "| " + " | ".join(escape_markdown(text).strip() for text in texts) + " |"

    rule = "|" + "".join("---:|" if kind == "number" else "---|" for kind in column_kinds(cells))
    return "\n".join([row(cells.columns), rule, *(row(texts) for texts in cells.itertuples(index=False))])


def _table_html(cells: pd.DataFrame, table_id: str) -> tuple[str, str]:
    """The table in a box that scrolls sideways, and the CSS that styles its columns by kind."""
    def breakable(text: str) -> str:
        return "<wbr>".join(html.escape(part) for part in IDENTIFIER_BREAK.split(text))

    kinds = column_kinds(cells)
    shown = pd.DataFrame({j: column.map(html.escape if kind == "number" else breakable)
                          for j, ((_, column), kind) in enumerate(zip(cells.items(), kinds))})
    shown.columns = [breakable(name) for name in cells.columns]
    table = shown.to_html(index=False, escape=False, border=0, table_id=table_id, justify="left")
    prose_width = min(14, PROSE_WIDTH // max(1, kinds.count("prose")))
    rules = []
    for j, kind in enumerate(kinds, start=1):
        column = f"#{table_id} td:nth-child({j})"
        if kind == "number":  # a number keeps to one line; its header may wrap
            rules.append(f"{column}, #{table_id} th:nth-child({j}) {{ {NUMBER_STYLE} }}")
            rules.append(f"{column} {{ white-space: nowrap; }}")
        elif kind == "prose":
            rules.append(f"{column} {{ min-width: {prose_width}em; }}")
    return f'<div class="table">\n{table}\n</div>', "\n".join(rules)


def _markdown_parts(blocks: Sequence[Block]) -> list[str]:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {_inline_markdown(block.text)}")
        elif isinstance(block, Fold):
            parts += [f"{'#' * block.level} {_inline_markdown(block.summary)}", *_markdown_parts(block.blocks)]
        elif isinstance(block, Paragraph):
            parts.append(_inline_markdown(block.text, starts_block=True))
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {_inline_markdown(item, starts_block=True)}" for item in block.items))
        else:
            parts.append(_table_markdown(_cells(block)))
    return parts


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, spaces to hyphens, other punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _anchors(blocks: Sequence[Block]) -> dict[int, str]:
    """Each heading's and fold's anchor (by the block's id()), in page order, a repeated one numbered as GitHub
    does ("-1", "-2")."""
    anchors, seen = {}, {}

    def walk(blocks: Sequence[Block]) -> None:
        for block in blocks:
            if isinstance(block, (Heading, Fold)):
                base = slug(_plain(block.text if isinstance(block, Heading) else block.summary))
                anchors[id(block)] = base if base not in seen else f"{base}-{seen[base]}"
                seen[base] = seen.get(base, 0) + 1
                if isinstance(block, Fold):
                    walk(block.blocks)

    walk(blocks)
    return anchors


def _sections(blocks: Sequence[Block], anchors: dict[int, str]) -> list[tuple[str, str]]:
    """(name, anchor) of the page's sections: its level-2 headings and folds, but a contents heading."""
    return [(name, anchors[id(block)]) for block in blocks if isinstance(block, (Heading, Fold)) and block.level == 2
            and (name := _plain(block.text if isinstance(block, Heading) else block.summary)) != CONTENTS]


def _linked_item(item: Text, sections: list[tuple[str, str]]) -> str:
    """A contents item, its leading section name ("ALP-KD: 12 entries") linked to that section."""
    text = _plain(item)
    for name, anchor in sorted(sections, key=lambda section: -len(section[0])):
        if text == name or text.startswith(name + ":"):
            return f'<a href="#{anchor}">{html.escape(name)}</a>{html.escape(text[len(name):])}'
    return _inline_html(item)


def _html_parts(blocks: Sequence[Block], body: list[str], styles: list[str], numbers: Iterator[int],
                anchors: dict[int, str], sections: list[tuple[str, str]]) -> None:
    """Append the blocks' HTML to ``body`` and their tables' CSS to ``styles``; tables are numbered page-wide,
    headings carry their anchors, and the list under a contents heading links the sections it names."""
    after_contents = False
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f'<h{block.level} id="{anchors[id(block)]}">{_inline_html(block.text)}</h{block.level}>')
        elif isinstance(block, Fold):
            body.append(f'<details id="{anchors[id(block)]}"><summary><h{block.level} style="display: inline">'
                        f"{_inline_html(block.summary)}</h{block.level}></summary>")
            _html_parts(block.blocks, body, styles, numbers, anchors, sections)
            body.append("</details>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline_html(block.text)}</p>")
        elif isinstance(block, Bullets):
            items = [_linked_item(item, sections) if after_contents else _inline_html(item) for item in block.items]
            body.append("<ul>\n" + "\n".join(f"<li>{item}</li>" for item in items) + "\n</ul>")
        else:
            table, style = _table_html(_cells(block), f"table{next(numbers)}")
            body.append(table)
            styles.append(style)
        after_contents = isinstance(block, Heading) and _plain(block.text) == CONTENTS


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def markdown(self) -> str:
        return "\n\n".join([f"# {_inline_markdown(self.title)}", *_markdown_parts(self.blocks)]) + "\n"

    def html(self) -> str:
        """A standalone page; one of :data:`CONTENTS_FROM` sections or more without contents of its own gets a
        list of them after its title."""
        anchors = _anchors(self.blocks)
        sections = _sections(self.blocks, anchors)
        body, styles = [f"<h1>{_inline_html(self.title)}</h1>"], [STYLE]
        own = any(isinstance(block, Heading) and _plain(block.text) == CONTENTS for block in self.blocks)
        if not own and len(sections) >= CONTENTS_FROM:
            links = "\n".join(f'<li><a href="#{anchor}">{html.escape(name)}</a></li>' for name, anchor in sections)
            body.append(f'<nav class="contents"><strong>{CONTENTS}</strong>\n<ul>\n{links}\n</ul></nav>')
        _html_parts(self.blocks, body, styles, itertools.count(), anchors, sections)
        return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>\n'
                "<style>" + "\n".join(styles) + "\n</style></head>\n<body>\n" + "\n".join(body) + "\n"
                + FIT_SCRIPT * (len(styles) > 1) + LINK_SCRIPT * any(link in "".join(body)
                                                                     for link in ('href="#', "data-result="))
                + "\n</body></html>\n")

    def cells(self) -> pd.DataFrame:
        """Every table of the page in long form, one row per cell: ``table`` (the heading or fold above it, else the
        title; numbered where one heading has several), ``row``, ``column`` and ``value`` as the table holds it,
        before rounding. One CSV for a page whose tables have different columns."""
        rows, seen = [], {}

        def walk(blocks: Sequence[Block], heading: str) -> str:
            for block in blocks:
                if isinstance(block, Heading):
                    heading = _plain(block.text)
                elif isinstance(block, Fold):
                    walk(block.blocks, _plain(block.summary))
                elif isinstance(block, Table):
                    seen[heading] = seen.get(heading, 0) + 1
                    name = heading if seen[heading] == 1 else f"{heading} ({seen[heading]})"
                    rows.extend({"table": name, "row": number, "column": str(column), "value": value}
                                for number, values in enumerate(block.frame.itertuples(index=False))
                                for column, value in zip(block.frame.columns, values))
            return heading

        walk(self.blocks, _plain(self.title))
        return pd.DataFrame(rows, columns=["table", "row", "column", "value"])

    def write(self, markdown_path, html_path=None, csv_path=None) -> None:
        """Write the Markdown page, the HTML page when ``html_path`` is given and the page's tables
        (:meth:`cells`) when ``csv_path`` is."""
        Path(markdown_path).write_text(self.markdown())
        if html_path is not None:
            Path(html_path).write_text(self.html())
        if csv_path is not None:
            self.cells().to_csv(csv_path, index=False)
