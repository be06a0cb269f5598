"""A search that finds what a researcher types, added to Snakemake's report (issue 52).

Snakemake 9.27's report matches the search box against result paths only, case by case: "Table 2" or "ALP" finds no
paper table, and only on Enter. ``report/search.js`` replaces that matching (every word, any case, in the path,
name, labels, category or subcategory), searches as the query is typed, says when nothing matches, and names each
result by its place in the report and its labels. The menus and breadcrumbs name categories and subcategories
without the numbers that order them (kdflow.reporting.report_menu), and a page's links to other results
(kdflow.core.documents.Link) open them in the report. Snakemake's html reporter takes a stylesheet but no script,
and a reporter plugin of kdflow's own would not be found from an editable install (Snakemake discovers plugins by
top-level module name), so the script is added to the written report:

    snakemake --report report.html && python -m kdflow.reporting.report_search report.html

``make report`` does both. Adding it again replaces the earlier copy.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "report" / "search.js"
# What the script relies on in Snakemake's report: the search component it patches and the globals it reads.
EXPECTED = ("class SearchResults extends AbstractResults", "class Breadcrumbs extends React.Component",
            "renderSearch()", "class AbstractMenu extends React.Component", "getMenuItem(label, iconName, onClick)",
            "class Navbar extends React.Component", "getCategoryBreadcrumb()", "getSubcategoryBreadcrumb()",
            "class ToggleViewManager extends AbstractViewManager", "handleSelectedResult(resultPath)",
            "var results = ", "var categories = ")
BLOCK = re.compile(r'\n?<script id="kdflow-search">.*?</script>\n?', re.DOTALL)


def add_search(report: Path, script: Path = SCRIPT) -> None:
    """Add kdflow's search to ``report`` (a Snakemake html report, in place), or replace the copy it has."""
    report = Path(report)
    if report.suffix != ".html":
        raise ValueError(f"{report}: kdflow's search is added to an html report (snakemake --report report.html); "
                         "a .zip report is not supported")
    html = BLOCK.sub("\n", report.read_text(encoding="utf-8"))
    missing = [marker for marker in EXPECTED if marker not in html]
    if missing:
        raise ValueError(f"{report} is not a Snakemake html report kdflow's search knows: it lacks {missing} "
                         "(report/search.js follows Snakemake 9.27's report; a newer Snakemake may have changed it)")
    end = html.rfind("</body>")  # the page's own; scripts inlined before it may spell the tag in strings
    if end < 0 or not re.fullmatch(r"</body>\s*</html>\s*", html[end:]):
        raise ValueError(f"{report}: the page does not end with </body></html>")
    code = script.read_text(encoding="utf-8")
    if "</script" in code:
        raise ValueError(f"{script} must not contain '</script': it is inlined in a <script> element")
    html = f'{html[:end]}<script id="kdflow-search">\n{code}</script>\n{html[end:]}'
    report.write_text(html, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the html report snakemake --report wrote")
    add_search(parser.parse_args(argv).report)


if __name__ == "__main__":
    main()
