"""Result pages (kdflow.core.documents): one document, rendered to Markdown and to HTML with text escaped."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from kdflow.core.documents import (MISSING, Bullets, Code, Document, Emphasis, Fold, Heading, Paragraph, Table, number,
                                   slug)

NASTY = "a|b *c* _d_ `e` <script>alert(1)</script> & [x](y)"


def test_a_cell_with_markdown_and_html_syntax_shows_literally_in_both_formats():
    page = Document("T", [Table(pd.DataFrame({"text": [NASTY], "score": [1.0]}))])
    assert r"| a\|b \*c\* \_d\_ \`e\` \<script\>alert(1)\</script\> \& \[x\](y) | 1.0 |" in page.markdown()
    assert "<td>a|b *c* _d_ `e` &lt;script&gt;alert(1)&lt;/script&gt; &amp; [x](y)</td>" in page.html().replace("<wbr>", "")
    assert "<script>alert" not in page.html()


def test_generated_sentences_are_escaped_in_paragraphs_lists_and_headings():
    page = Document("Title <b>", [Heading("# of *runs*", 3), Paragraph(NASTY), Bullets(["- not a sublist", "1. nor this"])])
    markdown, html = page.markdown(), page.html()
    assert markdown.startswith(r"# Title \<b\>" + "\n")
    assert r"### \# of \*runs\*" in markdown and r"a\|b \*c\* \_d\_ \`e\`" in markdown
    assert "- \\- not a sublist\n- 1\\. nor this" in markdown
    assert "<title>Title &lt;b&gt;</title>" in html and '<h3 id="-of-runs"># of *runs*</h3>' in html
    assert "<p>a|b *c* _d_ `e` &lt;script&gt;alert(1)&lt;/script&gt; &amp; [x](y)</p>" in html


def test_underscores_inside_names_stay_bare_in_markdown():
    assert "| bert_4 | f1_micro |" in Document("T", [Table(pd.DataFrame({"a": ["bert_4"], "b": ["f1_micro"]}))]).markdown()


def test_emphasis_and_code_spans_are_the_only_formatting():
    page = Document("T", [Paragraph(["Teacher: ", Code("tiny_bert"), ", odd ", Code("a`b"), "."]),
                          Bullets([["a *good* film — ", Emphasis("positive"), " (0.93)"]])])
    assert "Teacher: `tiny_bert`, odd ``a`b``." in page.markdown()
    assert r"- a \*good\* film — *positive* (0.93)" in page.markdown()
    assert "<p>Teacher: <code>tiny_bert</code>, odd <code>a`b</code>.</p>" in page.html()
    assert "<li>a *good* film — <em>positive</em> (0.93)</li>" in page.html()


def test_tables_format_numbers_and_missing_values():
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1.234, float("nan")], "n": pd.array([3, None], dtype="Int64")})
    assert Document("T", [Table(frame)]).markdown() == (
        "# T\n\n| a | b | n |\n|---|---:|---:|\n| x | 1.2 | 3 |\n| y | — | — |\n"
    )
    assert "<td>1.234</td>" in Document("T", [Table(frame, digits=3)]).html()


def test_tables_align_numbers_right_keep_them_on_one_line_and_let_text_wrap_also_inside_identifiers():
    frame = pd.DataFrame({
        "model": ["bert_4", "lstm_s"],
        "text": ["2 hours of a good film, then two of a bad one", "bad, *bad* film"],
        "score": ["40.00 (29.2)", "— (31)"],
        "paper": ["-1.5 ± 0.2", "0.123* (p=0.04)"],
        "setting": ["experiments.a_b.seeds", "CoordinationInversion"],
    })
    page = Document("T", [Paragraph("first"), Table(frame)])
    html = page.html()
    assert '<div class="table">\n<table class="dataframe" id="table0">' in html and ".table { overflow-x: auto;" in html
    assert "#table0 td:nth-child(1)" not in html  # short text: left-aligned, wraps only where the page is narrow
    assert "#table0 td:nth-child(2) { min-width: 14em; }" in html  # sentences keep a readable width
    for column in (3, 4):
        assert (f"#table0 td:nth-child({column}), #table0 th:nth-child({column}) "
                "{ text-align: right; font-variant-numeric: tabular-nums; }") in html
        assert f"#table0 td:nth-child({column}) {{ white-space: nowrap; }}" in html
    assert "<td>bert_<wbr>4</td>" in html and "<td>bad, *bad* film</td>" in html
    assert "<td>experiments.<wbr>a_<wbr>b.<wbr>seeds</td>" in html and "<td>Coordination<wbr>Inversion</td>" in html
    assert "<td>0.123* (p=0.04)</td>" in html  # numbers break nowhere
    assert "| model | text | score | paper | setting |\n|---|---|---:|---:|---|" in page.markdown()


def test_the_sentence_columns_of_a_table_share_a_minimum_width():
    frame = pd.DataFrame({name: ["a sentence long enough to count as prose, not a name"] for name in "abcdef"})
    html = Document("T", [Table(frame)]).html()
    assert "#table0 td:nth-child(6) { min-width: 7em; }" in html  # 42em over six


def test_each_table_of_a_page_is_styled_on_its_own():
    numbers, words = pd.DataFrame({"a": [1.0]}), pd.DataFrame({"a": ["x"]})
    html = Document("T", [Table(numbers), Table(words)]).html()
    assert "#table0 td:nth-child(1)" in html and "#table1 td:nth-child(1)" not in html


@pytest.mark.parametrize("with_html", [True, False])
def test_write_puts_both_formats_beside_each_other(tmp_path, with_html):
    page = Document("T", [Paragraph("p")])
    page.write(tmp_path / "t.md", tmp_path / "t.html" if with_html else None)
    assert (tmp_path / "t.md").read_text() == "# T\n\np\n"
    assert (tmp_path / "t.html").exists() == with_html


def test_a_number_shows_its_form_and_a_missing_one_the_missing_mark():
    assert number(1.2345, "{:.3f}") == "1.234" and number(2.0) == "2.00"
    assert number(None) == number(math.nan) == number(math.inf) == MISSING


def test_the_csv_beside_a_page_holds_every_cell_of_its_tables_unrounded_under_their_headings(tmp_path):
    """Issue 52: a page with tables of different columns has one CSV, one row per cell."""
    document = Document("Claims", [
        Table(pd.DataFrame({"link": ["a > b"], "p": [0.012345]})),
        Heading(["Seeds ", Code("planner")]),
        Table(pd.DataFrame({"task": ["sst2", "stsb"], "seeds": [7, None]})),
        Paragraph("between"),
        Table(pd.DataFrame({"x": [1.5]})),
    ])
    document.write(tmp_path / "page.md", tmp_path / "page.html", tmp_path / "page.csv")
    cells = pd.read_csv(tmp_path / "page.csv")
    assert cells.columns.tolist() == ["table", "row", "column", "value"]
    assert cells.values.tolist() == [
        ["Claims", 0, "link", "a > b"], ["Claims", 0, "p", "0.012345"],
        ["Seeds planner", 0, "task", "sst2"], ["Seeds planner", 0, "seeds", "7.0"],
        ["Seeds planner", 1, "task", "stsb"], ["Seeds planner", 1, "seeds", np.nan],
        ["Seeds planner (2)", 0, "x", "1.5"]]


def test_a_fold_is_a_closed_details_in_html_and_a_heading_in_markdown():
    page = Document("T", [Table(pd.DataFrame({"a": [1.0]})),
                          Fold(["Entries by ", Code("result")], [Paragraph("inside"), Table(pd.DataFrame({"b": ["x"]}))])])
    html = page.html()
    details = html[html.index("<details"):html.index("</details>")]
    assert details.startswith('<details id="entries-by-result"><summary><h2 style="display: inline">Entries by '
                              '<code>result</code></h2>')
    assert "<p>inside</p>" in details and 'id="table1"' in details and 'id="table1"' not in html.replace(details, "")
    assert page.markdown() == "# T\n\n| a |\n|---:|\n| 1.0 |\n\n## Entries by `result`\n\ninside\n\n| b |\n|---|\n| x |\n"
    assert page.cells().table.tolist() == ["T", "Entries by result"]


def long_page(own_contents: bool) -> Document:
    contents = [Heading("Contents"), Bullets(["ALP-KD: 2 entries", "Several works: 1 entry", "not a section"])]
    return Document("Ledger", [*(contents if own_contents else []), Heading("ALP-KD"), Paragraph("a"),
                               Heading("Several works"), Heading("ALP-KD"), Heading("minor", 3),
                               Fold("Entries by result", [Heading("ALP-KD", 3)])])


def test_headings_carry_githubs_anchors_each_once_and_a_long_page_lists_its_sections():
    """Issue 69: the ledger's 20,000 px had nothing to jump with. Anchors are GitHub's (its Markdown links agree),
    a repeated heading numbered; a page of four sections or more gets a contents list, level-2 sections only."""
    html = long_page(own_contents=False).html()
    ids = re.findall(r' id="([^"]+)"', html.split('<div class="table">')[0])
    assert ids == ["alp-kd", "several-works", "alp-kd-1", "minor", "entries-by-result", "alp-kd-2"]
    nav = html[html.index('<nav class="contents">'):html.index("</nav>")]
    assert re.findall(r'<a href="#([^"]+)">([^<]+)</a>', nav) == [
        ("alp-kd", "ALP-KD"), ("several-works", "Several works"), ("alp-kd-1", "ALP-KD"),
        ("entries-by-result", "Entries by result")]
    assert html.index("</nav>") < html.index('<h2 id="alp-kd">') and "scrollIntoView" in html
    short = Document("T", [Heading("a"), Heading("b"), Heading("c")]).html()
    assert "<nav" not in short and "scrollIntoView" not in short
    assert slug("Universal-KD (Wu et al. 2021): Table 4") == "universal-kd-wu-et-al-2021-table-4"


def test_a_pages_own_contents_list_links_the_sections_it_names_and_gets_no_second_one():
    html = long_page(own_contents=True).html()
    assert "<nav" not in html
    assert '<li><a href="#alp-kd">ALP-KD</a>: 2 entries</li>' in html
    assert '<li><a href="#several-works">Several works</a>: 1 entry</li>' in html
    assert "<li>not a section</li>" in html


def test_a_wide_table_scrolls_in_its_box_with_its_first_column_in_view_and_turns_to_cards_only_on_a_phone():
    """Cards made the claims page 3.6 times as tall in a 1024-px window (issue 69): the report's frame is about
    680 px there, so only a frame under 480 px shows them."""
    html = Document("T", [Table(pd.DataFrame({"a": [1.0]})), Table(pd.DataFrame({"b": [2.0]}))]).html()
    assert "innerWidth < 480 && table.scrollWidth > box.clientWidth + 1" in html
    assert ".table th:first-child, .table td:first-child { position: sticky; left: 0;" in html


@pytest.mark.slow  # a browser: about 3 s
def test_in_a_browser_a_contents_link_opens_the_fold_it_points_into_and_scrolls_there_inside_a_data_url_frame():
    """As the report shows a page: in an iframe whose src is a data: URL."""
    import base64

    from report_browser import chromium

    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's)")
    from playwright.sync_api import sync_playwright

    tall = [Paragraph("filler " * 400)] * 6
    page_html = Document("T", [Heading("A"), *tall, Heading("B"), *tall, Heading("C"),
                               Fold("Entries by result", [*tall, Heading("deep", 3), *tall])]).html()
    page_html = page_html.replace("<ul>", '<ul><li><a href="#deep">deep</a></li>', 1)  # a link into the fold
    uri = "data:text/html;base64," + base64.b64encode(page_html.encode()).decode()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 900, "height": 700})
        page.set_content(f'<iframe src="{uri}" style="width: 800px; height: 600px"></iframe>')
        frame = page.wait_for_selector("iframe").content_frame()
        frame.wait_for_selector("nav.contents")
        assert frame.evaluate("() => scrollY") == 0
        frame.click('nav.contents a[href="#b"]')
        frame.wait_for_function("() => scrollY > 0")
        top = frame.evaluate("() => document.getElementById('b').getBoundingClientRect().top")
        assert abs(top) < 2 and frame.url == uri  # scrolled, not navigated
        assert not frame.evaluate("() => document.querySelector('details').open")
        frame.click('a[href="#deep"]')
        frame.wait_for_function("() => document.querySelector('details').open")
        assert abs(frame.evaluate("() => document.getElementById('deep').getBoundingClientRect().top")) < 2
        browser.close()
