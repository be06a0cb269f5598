# Stage reporting (kdflow.reporting), probing: the table of every probed model and layer, the thesis's scores beside
# kdflow's, and thesis Figs. 6.1-6.2 (probing per layer) and 6.1-6.3, C.1 (beside the thesis's numbers).


THESIS_PROBING = PROBING_CONFIG.get("thesis", {})


rule probing_table:
    """Every probed model and layer, with baselines, as CSV and Markdown."""
    input:
        expand(
            "results/probing/scores/{model}/{probing_task}.json",
            model=PROBING_CONFIG.get("models", []),
            probing_task=PROBING_CONFIG.get("tasks", []),
        ),
    output:
        **page_and_csv(
            caption="../report/probing_table.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per model, task and layer (table)"},
            csv="results/tables/probing.csv",
            markdown="results/tables/probing.md",
            html="results/report/probing.html",
        ),
    log:
        "logs/probing_table.log",
    benchmark:
        "results/benchmarks/probing_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        models=PROBING_CONFIG.get("models", []),
        code=code_of("probing_table.py"),
    script:
        "../scripts/probing_table.py"


rule probing_thesis_table:
    """The thesis's probing scores (reference/thesis_probing_scores.csv) beside kdflow's, per model, task and
    layer, with the ledger's entries about probing."""
    input:
        probing="results/tables/probing.csv",
        scores=THESIS_PROBING.get("scores", []),
        deviations=PAPER_TABLES.get("deviations", []),
    output:
        **page_and_csv(
            caption="../report/probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "kdflow beside the thesis (table)"},
            csv="results/tables/probing_thesis.csv",
            markdown="results/tables/probing_thesis.md",
            html="results/report/probing_thesis.html",
        ),
    log:
        "logs/probing_thesis_table.log",
    benchmark:
        "results/benchmarks/probing_thesis_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        models=canonical(THESIS_PROBING.get("models", {})),
        missing=canonical(THESIS_PROBING.get("missing", {})),
        pooling=probing_settings(config)["pooling"] if PROBING_CONFIG else None,
        code=code_of("probing_thesis_table.py"),
    script:
        "../scripts/probing_thesis_table.py"


rule figure_probing:
    """Thesis Figs. 6.1-6.2: probing accuracy per layer, by layer index and by relative depth."""
    input:
        "results/tables/probing.csv",
    output:
        layers=report(
            "results/figures/probing.png",
            caption="../report/figure_probing.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per layer"},
        ),
        depth=report(
            "results/figures/probing_relative_depth.png",
            caption="../report/figure_probing.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "accuracy per relative depth"},
        ),
    log:
        "logs/figure_probing.log",
    benchmark:
        "results/benchmarks/figure_probing.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_probing.py"),
    script:
        "../scripts/figure_probing.py"


rule figure_probing_thesis:
    """Thesis Figs. 6.1, 6.2, 6.3 and C.1 as the thesis drew them, with kdflow's probing results beside the
    thesis's and the thesis's reference lines (probing.thesis.baselines)."""
    input:
        comparison="results/tables/probing_thesis.csv",
        probing="results/tables/probing.csv",
        baselines=THESIS_PROBING.get("baselines", []),
    output:
        fig6_1=report(
            "results/figures/probing_thesis_6_1.png",
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.1"),
            labels={"result": "teachers beside the thesis"},
        ),
        fig6_2=report(
            "results/figures/probing_thesis_6_2.png",
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.2"),
            labels={"result": "students, embed. beside the thesis"},
        ),
        fig6_3=report(
            "results/figures/probing_thesis_6_3.png",
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure 6.3"),
            labels={"result": "from scratch beside the thesis"},
        ),
        figC_1=report(
            "results/figures/probing_thesis_C_1.png",
            caption="../report/figure_probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Figure C.1"),
            labels={"result": "from scratch, all tasks, beside the thesis"},
        ),
    log:
        "logs/figure_probing_thesis.log",
    benchmark:
        "results/benchmarks/figure_probing_thesis.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        figures={"fig6_1": "6.1", "fig6_2": "6.2", "fig6_3": "6.3", "figC_1": "C.1"},
        code=code_of("figure_probing_thesis.py"),
    script:
        "../scripts/figure_probing_thesis.py"
