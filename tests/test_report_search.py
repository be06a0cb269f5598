"""kdflow's search in Snakemake's report (kdflow.reporting.report_search, report/search.js; issue 52)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import snakemake
from report_browser import chromium, search

from kdflow.reporting.report_search import add_search

SNAKEMAKE_MARKERS = ("<html><body><script>class SearchResults extends AbstractResults {}\nvar results = {};\n"
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
    output:
        page=report("a/paper_alp_kd_table2.html", category="1 ALP-KD (Passban et al. 2021)",
                    subcategory="02 Table 2", labels={"table": "Table 2", "format": "page"}),
        csv=report("a/paper_alp_kd_table2.csv", category="1 ALP-KD (Passban et al. 2021)",
                   subcategory="02 Table 2", labels={"table": "Table 2", "format": "raw CSV"}),
    shell: "echo '<p>ALP</p>' > {output.page}; echo 'a,b' > {output.csv}"

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
        browser.close()
    assert errors == []
    assert {term: sorted(shown["paths"]) for term, shown in found.items()} == {
        term: sorted(paths) for term, paths in expected.items()}
    # the sidebar lists what the search found, one row a result, its labels in one line
    assert found["alp"]["rows"] == ["Table 2 · page", "Table 2 · raw CSV"]
    assert found["table"]["rows"] == ["Table 2 · page", "Table 2 · raw CSV", "Table 3 · page"]
    assert found["table 4"]["rows"] == []
    assert first["rows"] == ["Table 2 · page", "Table 2 · raw CSV"] and second["rows"] == ["Table 3 · page"]
