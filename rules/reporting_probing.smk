# Stage reporting (kdflow.reporting), probing: the table of every probed model and layer, the thesis's scores beside
# kdflow's, and thesis Figs. 6.1-6.2 (probing per layer) and 6.1-6.3, C.1 (beside the thesis's numbers).


THESIS_PROBING = PROBING_CONFIG.get("thesis", {})


use rule kdflow_job as probing_table with:
    """Every probed model and layer, with baselines, as CSV and Markdown."""
    input:
        expand(
            paths.PROBING_SCORES,
            model=PROBING_CONFIG.get("models", []),
            probing_task=PROBING_CONFIG.get("tasks", []),
        ),
    output:
        **page_and_csv(
            caption="../report/probing_table.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per model, task and layer (table)"},
            csv=paths.PROBING_TABLE_CSV,
            markdown=paths.PROBING_TABLE_MD,
            html=paths.PROBING_TABLE_PAGE,
        ),
    log:
        "logs/probing_table.log",
    benchmark:
        paths.benchmark("probing_table")
    params:
        **runs("probing_table.py"),
        models=PROBING_CONFIG.get("models", []),


use rule kdflow_job as probing_thesis_table with:
    """The thesis's probing scores (reference/thesis_probing_scores.csv) beside kdflow's, per model, task and
    layer, with the ledger's entries about probing."""
    input:
        probing=paths.PROBING_TABLE_CSV,
        scores=THESIS_PROBING.get("scores", []),
        deviations=deviations_file("probing"),
    output:
        **page_and_csv(
            caption="../report/probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "kdflow beside the thesis (table)"},
            csv=paths.PROBING_THESIS_CSV,
            markdown=paths.PROBING_THESIS_MD,
            html=paths.PROBING_THESIS_PAGE,
        ),
    log:
        "logs/probing_thesis_table.log",
    benchmark:
        paths.benchmark("probing_thesis_table")
    params:
        **runs("probing_thesis_table.py"),
        models=canonical(THESIS_PROBING.get("models", {})),
        missing=canonical(THESIS_PROBING.get("missing", {})),
        pooling=probing_settings(config)["pooling"] if PROBING_CONFIG else None,


use rule kdflow_job as figure_probing with:
    """Thesis Figs. 6.1-6.2: probing accuracy per layer, by layer index and by relative depth."""
    input:
        paths.PROBING_TABLE_CSV,
    output:
        layers=report(
            paths.PROBING_PNG,
            caption="../report/figure_probing.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per layer"},
        ),
        depth=report(
            paths.PROBING_DEPTH_PNG,
            caption="../report/figure_probing.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per relative depth"},
        ),
    log:
        "logs/figure_probing.log",
    benchmark:
        paths.benchmark("figure_probing")
    params:
        **runs("figure_probing.py"),
        scale_note=RUN_SCALE_NOTE,


use rule kdflow_job as figure_probing_thesis with:
    """Thesis Figs. 6.1, 6.2, 6.3 and C.1 as the thesis drew them, with kdflow's probing results beside the
    thesis's and the thesis's reference lines (probing.thesis.baselines)."""
    input:
        comparison=paths.PROBING_THESIS_CSV,
        probing=paths.PROBING_TABLE_CSV,
        baselines=THESIS_PROBING.get("baselines", []),
    output:
        fig6_1=report(
            paths.PROBING_THESIS_PNG.format(figure="6_1"),
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.1"),
            labels={"result": "teachers beside the thesis"},
        ),
        fig6_2=report(
            paths.PROBING_THESIS_PNG.format(figure="6_2"),
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.2"),
            labels={"result": "students, embed. beside the thesis"},
        ),
        fig6_3=report(
            paths.PROBING_THESIS_PNG.format(figure="6_3"),
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.3"),
            labels={"result": "from scratch beside the thesis"},
        ),
        figC_1=report(
            paths.PROBING_THESIS_PNG.format(figure="C_1"),
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure C.1"),
            labels={"result": "from scratch, all tasks, beside the thesis"},
        ),
    log:
        "logs/figure_probing_thesis.log",
    benchmark:
        paths.benchmark("figure_probing_thesis")
    params:
        **runs("figure_probing_thesis.py"),
        scale_note=RUN_SCALE_NOTE,
        figures={"fig6_1": "6.1", "fig6_2": "6.2", "fig6_3": "6.3", "figC_1": "C.1"},
