"""kdflow's search in Snakemake's report (kdflow.reporting.report_search, report/search.js; issue 52)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import snakemake
from report_browser import chromium, listing, search

from kdflow.core.documents import Document, Link, Paragraph
from kdflow.reporting.report_search import add_search

SNAKEMAKE_MARKERS = ("<html><body><script>class SearchResults extends AbstractResults {}\n"
                     "class Breadcrumbs extends React.Component { renderSearch() {} }\n"
                     "class AbstractMenu extends React.Component { getMenuItem(label, iconName, onClick) {} }\n"
                     "class Navbar extends React.Component { getCategoryBreadcrumb() {} getSubcategoryBreadcrumb() {} }\n"
                     "class AbstractViewManager { handleSelectedResult(resultPath) {} }\n"
                     "class ToggleViewManager extends AbstractViewManager {}\n"
                     "var results = {};\n"
                     "var categories = {};\nconst tag = '</body>';</script>\n</body></html>\n")


def test_the_script_goes_in_once_before_the_end_of_the_body(tmp_path):
    report = tmp_path / "report.html"
    report.write_text(SNAKEMAKE_MARKERS)
    add_search(report)
    add_search(report)  # again, e.g. after editing report/search.js: the copy is replaced, not doubled
    html = report.read_text()
    assert html.count('<script id="kdflow-search">') == 1
    assert html.index("const tag") < html.index('<script id="kdflow-search">') < html.rindex("</body>") < html.index("</html>")
    assert "SearchResults.prototype.getResults" in html


@pytest.mark.parametrize("name, text, message", [
    ("report.zip", SNAKEMAKE_MARKERS, "a .zip report is not supported"),
    ("report.html", "<html><body>a page of one's own</body></html>", "lacks ['class SearchResults"),
    ("report.html", SNAKEMAKE_MARKERS.replace("</html>", ""), "does not end with </body></html>"),
])
def test_a_file_that_is_not_a_snakemake_html_report_is_refused_and_left_as_it_was(tmp_path, name, text, message):
    report = tmp_path / name
    report.write_text(text)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        add_search(report)
    assert report.read_text() == text


WORKFLOW = """
rule all:
    input: "a/paper_alp_kd_table2.html", "a/paper_alp_kd_table2.csv", "a/paper_universal_kd_table3.html"

rule alp:
    input: "src/alp.html"
    output:
        page=report("a/paper_alp_kd_table2.html", category="1 ALP-KD (Passban et al. 2021)",
                    subcategory="02 Table 2", labels={"table": "Table 2", "format": "page"}),
        csv=report("a/paper_alp_kd_table2.csv", category="1 ALP-KD (Passban et al. 2021)",
                   subcategory="02 Table 2", labels={"table": "Table 2", "format": "raw CSV"}),
    shell: "cp {input} {output.page}; echo 'a,b' > {output.csv}"

rule universal:
    output:
        report("a/paper_universal_kd_table3.html", category="2 Universal-KD (Wu et al. 2021)",
               subcategory="03 Table 3", labels={"table": "Table 3", "format": "page"}),
    shell: "echo '<p>Universal</p>' > {output}"
"""


@pytest.mark.slow  # Snakemake twice and a browser: 11 s
def test_the_search_finds_a_table_by_its_label_in_any_case_in_a_real_snakemake_report(tmp_path):
    """Snakemake writes the report of a two-rule workflow filed as kdflow files its paper tables; with kdflow's search
    added, what a researcher types finds the table, in any case: the results with the whole phrase, else with every
    word."""
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's)")
    pytest.importorskip("playwright", reason="Playwright for Python drives the browser (the test extra has it)")
    from playwright.sync_api import sync_playwright

    (tmp_path / "Snakefile").write_text(textwrap.dedent(WORKFLOW))
    (tmp_path / "src").mkdir()
    (tmp_path / "src/alp.html").write_text(Document("ALP", [Paragraph(
        ["Read beside ", Link("Universal-KD's Table 3", "a/paper_universal_kd_table3.html"), "."])]).html())
    snakemake("--cores", "1", cwd=tmp_path)
    snakemake("--report", "report.html", cwd=tmp_path)
    add_search(tmp_path / "report.html")
    alp = ["a/paper_alp_kd_table2.html", "a/paper_alp_kd_table2.csv"]
    universal = ["a/paper_universal_kd_table3.html"]
    # "table 2" is a phrase of the ALP entries only, though Universal-KD's has both words ("2 Universal-KD",
    # "Table 3"): a phrase that some result has lists those results alone
    expected = {"alp": alp, "ALP": alp, "table 2": alp, "ALP-KD Table 2": alp, "alp-kd  TABLE 2": alp,
                "passban": alp, "raw csv": alp[1:], "table": [*alp, *universal], "universal table 3": universal,
                "universal 2": universal, "re:table\\s+3$": universal, "re:table (": [], "table 4": [], "   ": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((tmp_path / "report.html").as_uri())
        page.wait_for_function("typeof app !== 'undefined' && typeof categories !== 'undefined'")
        found = {term: search(page, term) for term in expected}
        first = search(page, "alp", back_to_menu=False)
        second = search(page, "universal", back_to_menu=False)  # typed over the first query's results
        typed = type_without_enter(page)
        names = menu_and_trail(page)
        followed = follow_link(page, "a/paper_alp_kd_table2.html", "a/paper_universal_kd_table3.html")
        browser.close()
    assert errors == []
    assert {term: sorted(shown["paths"]) for term, shown in found.items()} == {
        term: sorted(paths) for term, paths in expected.items()}
    # the sidebar lists what the search found, one row a result: its work (the category, without the number that
    # orders the menu), then its labels in one line; the subcategory "02 Table 2" is left out, the label names it
    alp_rows = ["ALP-KD (Passban et al. 2021) · Table 2 · page", "ALP-KD (Passban et al. 2021) · Table 2 · raw CSV"]
    universal_rows = ["Universal-KD (Wu et al. 2021) · Table 3 · page"]
    assert found["alp"]["rows"] == alp_rows
    assert found["table"]["rows"] == [*alp_rows, *universal_rows]
    assert found["table 4"]["rows"] == []
    assert first["rows"] == alp_rows and second["rows"] == universal_rows
    # typed key by key, no Enter: the results follow each key, the box keeps the focus, a query that finds nothing
    # says so, and an emptied box shows the menu again
    assert typed["after_alp"] == {"mode": "searchresults", "rows": alp_rows, "focused": True}
    assert typed["after_universal"]["rows"] == universal_rows and typed["after_universal"]["focused"]
    assert typed["nothing"] == "No result matches \u201ctable 4\u201d."
    assert typed["cleared"] == "menu"
    # the menu and the breadcrumbs name the works and items without the numbers that order them
    assert "ALP-KD (Passban et al. 2021)\n" in names["menu"] and "Universal-KD (Wu et al. 2021)" in names["menu"]
    assert "1 ALP-KD" not in names["menu"] and "2 Universal-KD" not in names["menu"]
    assert names["trail"] == ["ALP-KD (Passban et al. 2021)"], names  # a lone subcategory has no crumb of its own
    # a page's link to another result opens that result in the report, with its information in the sidebar
    assert followed == {"shown": True, "resultPath": "a/paper_universal_kd_table3.html", "navbarMode": "resultinfo"}


def follow_link(page, source: str, target: str) -> dict:
    """Show ``source``'s page as its menu entry does, click its link to ``target`` in the frame, and say whether the
    frame then shows ``target`` and what the report's state names."""
    page.evaluate("path => new ToggleViewManager(app).handleSelectedResult(path)", source)
    page.wait_for_function("path => document.querySelector('iframe')?.src === results[path].data_uri", arg=source)
    frame = page.query_selector("iframe").content_frame()
    frame.click(f'a[data-result="{target}"]')
    page.wait_for_function("path => document.querySelector('iframe')?.src === results[path].data_uri", arg=target)
    state = page.evaluate("() => ({resultPath: app.state.resultPath, navbarMode: app.state.navbarMode})")
    return {"shown": True, **state}


def menu_and_trail(page) -> dict:
    """The sidebar's text as the menu, and the breadcrumbs' names (past the home icon) in ALP-KD's category."""
    listing(page, "menu", category=None, subcategory=None)
    menu = page.inner_text("nav.transition-all")
    page.evaluate("() => app.showCategory('1 ALP-KD (Passban et al. 2021)')")
    page.wait_for_function("() => app.state.navbarMode === 'subcategory'")
    trail = page.evaluate("() => [...document.querySelectorAll('nav nav ol > li')].map(li => li.innerText.trim())"
                          ".filter(name => name !== '' && name !== 'Results')")
    return {"menu": menu, "trail": trail}


def type_without_enter(page) -> dict:
    """Type into the report's search box key by key, never pressing Enter: what the sidebar shows after "alp" and,
    the box emptied, after "universal", the line a query with no result shows, and the sidebar's mode once the box is
    emptied."""
    box = page.locator("nav nav input[type=text]")
    settled = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
    seen = "() => ({mode: app.state.navbarMode, focused: document.activeElement === " \
           "document.querySelector('nav nav input[type=text]'), rows: [...document.querySelectorAll(" \
           "'nav.transition-all table tbody tr')].map(row => row.cells[0].innerText.trim())})"

    def after(keys: str, term: str) -> dict:
        box.press_sequentially(keys)
        page.wait_for_function("term => app.state.searchTerm === term", arg=term)
        page.evaluate(settled)
        return page.evaluate(seen)

    box.fill("")
    box.focus()
    typed = {"after_alp": after("alp", "alp")}
    box.fill("")
    typed["after_universal"] = after("universal", "universal")
    box.fill("table 4")
    page.wait_for_selector("#kdflow-no-results")
    typed["nothing"] = page.inner_text("#kdflow-no-results")
    box.fill("")
    page.wait_for_function("() => app.state.navbarMode === 'menu'")
    typed["cleared"] = page.evaluate("() => app.state.navbarMode")
    return typed
