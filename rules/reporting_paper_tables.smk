# Stage reporting (kdflow.reporting), kdflow beside the papers: the claims tested on real data, the status page of
# the works' tables and figures, the deviation ledger, the papers' tables with kdflow's numbers beside them and the
# runtimes of thesis Table 4.5.


REFERENCE = read_reference(PAPER_TABLES["reference"]) if PAPER_TABLES else None


SELECTED = (
    read_reference(PAPER_TABLES["selected_hyperparameters"])
    if any(map(is_hyperparameter_table, PAPER_TABLES.get("tables", {}).values()))
    else None
)


# [paper, item, template]: which files make the works' tables and figures, for the status page and the ledger.
PAPER_FILES = paper_files(config)


# Thesis Table 4.5: the jobs of the pipeline up to the thesis's students, whose benchmark files it sums.
RUNTIME_TABLE = config.get("runtime_table", {})


RUNTIME_JOBS = runtime_jobs(config) if RUNTIME_TABLE else []


use rule kdflow_job as claims_table with:
    """The papers' central claims on real data, a verdict per link, from the committed record of
    benchmarks/quality_claims.py (config `evidence`; kdflow.reporting.claims)."""
    input:
        runs=config.get("evidence", {}).get("runs", []),
        dev_labels=config.get("evidence", {}).get("dev_labels", []),
        config=config.get("evidence", {}).get("config", []),
        margins=config.get("evidence", {}).get("margins", []),
        reference=config.get("paper_tables", {}).get("reference", []),
    output:
        **page_and_csv(
            caption="../report/claims.rst",
            category=category("Evidence on real data"),
            labels={"table": "the papers' claims, tested"},
            csv=paths.CLAIMS_TABLE_CSV,
            markdown=paths.CLAIMS_TABLE_MD,
            html=paths.CLAIMS_TABLE_PAGE,
        ),
    log:
        "logs/claims_table.log",
    benchmark:
        paths.benchmark("claims_table")
    params:
        **runs("claims_table.py"),


use rule kdflow_job as status_page with:
    """The report's status page: every numbered table and figure of the three works (reference/paper_artifacts.csv),
    what this run has of it and its place in the report's sidebar, and each paper table's cells, filled or why not;
    built last from the config's default targets (kdflow.reporting.status).
    """
    input:
        artifacts="reference/paper_artifacts.csv",
        made=status_inputs(DEFAULT_TARGETS, PAPER_FILES),
    output:
        **page_and_csv(
            caption="../report/status.rst",
            category=category("Status"),
            labels={"page": "the works' tables and figures"},
            table=paths.STATUS_CSV,
            markdown=paths.STATUS_MD,
            html=paths.STATUS_PAGE,
        ),
    log:
        "logs/status_page.log",
    benchmark:
        paths.benchmark("status_page")
    localrule: True
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **runs("status_page.py"),
        targets=DEFAULT_TARGETS,
        paper_files=PAPER_FILES,


use rule kdflow_job as ledger_table with:
    """The deviation ledger as a page of its own: every difference from the papers' protocols and every setting
    they leave silent, with the paper's value, kdflow's, why and the effect (kdflow.reporting.ledger).
    """
    input:
        ledger=PAPER_TABLES.get("deviations", []),
        artifacts="reference/paper_artifacts.csv",
    output:
        **page_and_csv(
            caption="../report/ledger.rst",
            category=category("Deviation ledger"),
            labels={"table": "kdflow against the papers' protocols"},
            table=paths.LEDGER_CSV,
            markdown=paths.LEDGER_MD,
            html=paths.LEDGER_PAGE,
        ),
    log:
        "logs/ledger_table.log",
    benchmark:
        paths.benchmark("ledger_table")
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **runs("ledger_table.py"),
        targets=sorted(DEFAULT_TARGETS),  # a stable order: the exploration experiments are a set
        paper_files=PAPER_FILES,


# The papers' tables with kdflow's numbers beside them (reference/paper_results.csv; kdflow.reporting.paper_tables),
# the model sizes and CPU speeds thesis Table 5.2 reports, and the runtimes of thesis Table 4.5.


use rule kdflow_job as paper_table with:
    """One paper table: every number the paper reports, kdflow's value and, for scores, the difference; or
    the paper's selected hyperparameters beside kdflow's (CSV, Markdown, LaTeX)."""
    input:
        unpack(lambda w: table_inputs(PAPER_TABLES, w.paper_table, REFERENCE)),
        deviations=lambda w: deviations_file(w.paper_table),
        artifacts="reference/paper_artifacts.csv",
    output:
        **page_and_csv(
            caption="../report/paper_table.rst",
            category=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)["category"],
            subcategory=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)["subcategory"],
            labels=lambda w: {"table": title_of(PAPER_TABLES["tables"][w.paper_table])},
            csv=paths.PAPER_TABLE_CSV,
            markdown=paths.PAPER_TABLE_MD,
            latex=paths.PAPER_TABLE_TEX,
            html=paths.PAPER_TABLE_PAGE,
        ),
    log:
        "logs/paper_table/{paper_table}.log",
    benchmark:
        paths.benchmark("paper_table/{paper_table}")
    wildcard_constraints:
        paper_table="|".join(PAPER_TABLES.get("tables", {})) or "no-tables",
    params:
        **runs("paper_table.py"),
        spec=lambda w: canonical(PAPER_TABLES["tables"][w.paper_table]),
        title=lambda w: title_of(PAPER_TABLES["tables"][w.paper_table]),
        values=lambda w: selected_values(config, w.paper_table, SELECTED),
        scale_note=lambda w: scale_note(config, **paper_table_models(config, w.paper_table)),


use rule kdflow_job as run_deviations with:
    """The ledger's entries of one paper result (a paper table, or the thesis's probing or hyperparameter
    exploration) as they hold for this run's own config (kdflow.reporting.protocols.run_deviations), for its page
    (JSON)."""
    input:
        ledger=PAPER_TABLES.get("deviations", []),
        protocols="reference/protocols.yaml",
    output:
        paths.RUN_DEVIATIONS,
    log:
        "logs/run_deviations/{result}.log",
    benchmark:
        paths.benchmark("run_deviations/{result}")
    wildcard_constraints:
        result="|".join([*PAPER_TABLES.get("tables", {}), "probing", "hyperparameter_exploration"]),
    params:
        **runs("run_deviations.py"),
        spec=lambda w: canonical(PAPER_TABLES.get("tables", {}).get(w.result)),
        run_config=lambda w: result_config(config, w.result),


use rule kdflow_job as runtime_table with:
    """Thesis Table 4.5: the wall-clock hours of every step of the pipeline up to the thesis's students, from the
    benchmark files of their jobs, beside the thesis's (CSV, Markdown, LaTeX)."""
    input:
        reference=RUNTIME_TABLE.get("reference", []),
        benchmarks=[job["benchmark"] for job in RUNTIME_JOBS],
    output:
        **page_and_csv(
            caption="../report/runtime_table.rst",
            **paper_place("thesis_sucik2020", "Table 4.5"),
            labels={"table": "runtimes of the pipeline's steps"},
            csv=paths.RUNTIME_TABLE_CSV,
            markdown=paths.RUNTIME_TABLE_MD,
            latex=paths.RUNTIME_TABLE_TEX,
            html=paths.RUNTIME_TABLE_PAGE,
        ),
    log:
        "logs/runtime_table.log",
    benchmark:
        paths.benchmark("runtime_table")
    params:
        **runs("runtime_table.py"),
        jobs=RUNTIME_JOBS,
