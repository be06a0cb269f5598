"""Where the Snakemake report files each page (issue 32): one category per work, in a fixed order after the status
page, and in a work's category its tables first, then its figures, in the paper's order and named as the paper
names them; then kdflow's own pages about that work.

The report's menus sort their entries alphabetically (Snakemake's report template), so each category and
subcategory starts with its position: "1 ALP-KD (Passban et al. 2021)", "02 Table 2".
"""

from __future__ import annotations

import functools

from kdflow.reporting.works import PAPERS, read_artifacts

# The categories in the report's order; a work's category is named by PAPERS.
CATEGORIES = ["Status", *PAPERS.values(), "Evidence on real data", "Experiments", "Teachers", "Deviation ledger",
              "Cost plan"]
# kdflow's pages about a work that are none of its numbered items, after them, in this order.
OWN_PAGES = {
    "thesis_sucik2020": ["Augmented transfer sets (§3.2)", "Probing, every model (§6.1)"],
}


def category(name: str) -> str:
    """A category of :data:`CATEGORIES`, numbered by its place."""
    if name not in CATEGORIES:
        raise ValueError(f"unknown report category {name!r}; known: {CATEGORIES}")
    return f"{CATEGORIES.index(name)} {name}"


def shown_name(name: str) -> str:
    """A category's or subcategory's name as the report shows it: without the number that sorts it in the menus
    (report/search.js strips it in the menus, results and breadcrumbs)."""
    return name.split(" ", 1)[1] if name.split(" ", 1)[0].isdigit() and " " in name else name


@functools.cache
def paper_items(paper: str) -> tuple[str, ...]:
    """A work's subcategories: its tables, then its figures, in the paper's order, then kdflow's own pages."""
    artifacts = read_artifacts()
    rows = artifacts[artifacts.paper == paper]
    items = [f"{kind.capitalize()} {number}" for kind in ("table", "figure")
             for number in rows[rows.kind == kind].number]
    return (*items, *OWN_PAGES.get(paper, []))


def paper_place(paper: str, item: str) -> dict[str, str]:
    """The category and subcategory of a work's ``item`` ("Table 2", "Figure B.10", or one of :data:`OWN_PAGES`)."""
    items = paper_items(paper)
    if item not in items:
        raise ValueError(f"{paper} has no {item!r} (reference/paper_artifacts.csv); known: {list(items)}")
    return {"category": category(PAPERS[paper]), "subcategory": f"{items.index(item) + 1:02d} {item}"}


def paper_table_place(paper_tables: dict, name: str) -> dict[str, str]:
    """The place of a paper table of the config (``paper_tables.tables.<name>``): its paper's table."""
    spec = paper_tables["tables"][name]
    return paper_place(spec["source"], f"Table {spec['table']}")


def attention_report_entry(config: dict, figure: str) -> dict:
    """Where the report files an attention figure (config ``attention_maps``): its paper's category, the paper's
    figure and its labels."""
    spec = config["attention_maps"][figure]
    return {**paper_place(spec["paper"], f"Figure {spec['figure']}"),
            "labels": {"figure": "attention over teacher layers", "task": spec["task"],
                       "student layer": str(spec["student_layer"] or "top attending")}}
