# Stage reporting (kdflow.reporting): each experiment's selection and table, GLUE submissions, the teacher,
# claims, ledger, paper, runtime and probing tables, the papers' figures, the thesis's exploration and the
# cost plan.


THESIS_PROBING = PROBING_CONFIG.get("thesis", {})


PAPER_TABLES = config.get("paper_tables", {})


REFERENCE = read_reference(PAPER_TABLES["reference"]) if PAPER_TABLES else None


SELECTED = (
    read_reference(PAPER_TABLES["selected_hyperparameters"])
    if any(map(is_hyperparameter_table, PAPER_TABLES.get("tables", {}).values()))
    else None
)


# Thesis Table 4.5: the jobs of the pipeline up to the thesis's students, whose benchmark files it sums.
RUNTIME_TABLE = config.get("runtime_table", {})


RUNTIME_JOBS = runtime_jobs(config) if RUNTIME_TABLE else []


EXPLORATION = config.get(
    "exploration", {}
)  # the thesis's Chapter 5 and Appendix B: figures and Table 5.1


# What the status page accounts for: everything the default target asks for.
STATUS_TARGETS = default_targets(config, EXPLORATION_EXPERIMENTS)


rule select_students:
    """Per task, student and method of an experiment, the grid point with the best mean dev score over
    seeds (dev only, never test), recorded with the whole grid; and the experiment's table of the selected
    students (mean ± sample std over seeds, and the tests against the experiment's ``compare_to``) and of
    every grid point and seed.
    """
    input:
        unpack(lambda w: selection_inputs(config, w.experiment)),
    output:
        selection="results/selection/{experiment}.json",
        csv=report(
            "results/tables/experiments/{experiment}.csv",
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "selected points",
                "format": "raw CSV",
            },
        ),
        grid=report(
            "results/tables/experiments/{experiment}_grid.csv",
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "every grid point and seed",
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/experiments/{experiment}.md",
        html=report(
            "results/report/experiment_{experiment}.html",
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "selected points and grid",
                "format": "page",
            },
        ),
    log:
        "logs/select_students/{experiment}.log",
    benchmark:
        "results/benchmarks/select_students/{experiment}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        runs=lambda w: selection_params(config, w.experiment),
        code=code_of("select_students.py"),
    script:
        "../scripts/select_students.py"


rule figure_experiment_curves:
    """The dev learning curve of every run of an experiment (every grid point and seed), a panel per task and
    student, the selected points bold, and the data behind it."""
    input:
        selection="results/selection/{experiment}.json",
        curves=lambda w: experiment_run_files(config, w.experiment, "curves.parquet"),
        metrics=lambda w: experiment_run_files(config, w.experiment),
    output:
        data=report(
            "results/figures/experiments/{experiment}_curves.csv",
            caption="../report/figure_experiment_curves.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "learning curves",
                "format": "raw CSV",
            },
        ),
        figure=report(
            "results/figures/experiments/{experiment}_curves.png",
            caption="../report/figure_experiment_curves.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "learning curves",
                "format": "figure",
            },
        ),
    log:
        "logs/figure_experiment_curves/{experiment}.log",
    benchmark:
        "results/benchmarks/figure_experiment_curves/{experiment}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=lambda w: selection_params(config, w.experiment)["runs"],
        code=code_of("figure_experiment_curves.py"),
    script:
        "../scripts/figure_experiment_curves.py"


rule glue_submission:
    """GLUE test-server files (index, prediction) of the selected students of an experiment: the selected
    grid point's best-dev seed (Universal-KD Table 3 reports GLUE test scores)."""
    input:
        selection="results/selection/{experiment}.json",
        predictions=lambda w: experiment_run_files(
            config, w.experiment, "predictions.parquet"
        ),
    output:
        directory("results/glue_submission/{experiment}"),
    log:
        "logs/glue_submission/{experiment}.log",
    benchmark:
        "results/benchmarks/glue_submission/{experiment}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        run_dir=lambda w: student_run_file(
            "",
            experiment=w.experiment,
            task="{task}",
            student="{student}",
            method="{method}",
            point="{point}",
            seed="{seed}",
        ),
        code=code_of("glue_submission.py"),
    script:
        "../scripts/glue_submission.py"


rule teacher_table:
    """Teachers and their per-layer pseudo-heads, per task, as CSV and Markdown."""
    input:
        teachers=expand(
            "results/teachers/{pair[0]}/{pair[1]}/metrics.json",
            pair=teacher_jobs(config),
        ),
        heads=expand(
            "results/pseudo_heads/{pair[0]}/{pair[1]}/metrics.json",
            pair=teacher_jobs(config),
        ),
    output:
        csv=report(
            "results/tables/teachers.csv",
            caption="../report/teachers.rst",
            category=category("Teachers"),
            labels={
                "table": "teachers and their per-layer pseudo-heads",
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/teachers.md",
        html=report(
            "results/report/teachers.html",
            caption="../report/teachers.rst",
            category=category("Teachers"),
            labels={
                "table": "teachers and their per-layer pseudo-heads",
                "format": "page",
            },
        ),
    log:
        "logs/teacher_table.log",
    benchmark:
        "results/benchmarks/teacher_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        jobs=teacher_jobs(config),
        code=code_of("teacher_table.py"),
    script:
        "../scripts/teacher_table.py"


rule claims_table:
    """The papers' central claims on real data, a verdict per link, from the committed record of
    benchmarks/quality_claims.py (config `evidence`; kdflow.reporting.claims)."""
    input:
        runs=config.get("evidence", {}).get("runs", []),
        dev_labels=config.get("evidence", {}).get("dev_labels", []),
        config=config.get("evidence", {}).get("config", []),
        reference=config.get("paper_tables", {}).get("reference", []),
    output:
        csv=report(
            "results/tables/claims.csv",
            caption="../report/claims.rst",
            category=category("Evidence on real data"),
            labels={"table": "the papers' claims, tested", "format": "raw CSV"},
        ),
        markdown="results/tables/claims.md",
        html=report(
            "results/report/claims.html",
            caption="../report/claims.rst",
            category=category("Evidence on real data"),
            labels={"table": "the papers' claims, tested", "format": "page"},
        ),
    log:
        "logs/claims_table.log",
    benchmark:
        "results/benchmarks/claims_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("claims_table.py"),
    script:
        "../scripts/claims_table.py"


rule status_page:
    """The report's status page: every numbered table and figure of the three works (reference/paper_artifacts.csv),
    what this run has of it and its place in the report's sidebar, and each paper table's cells, filled or why not;
    built last from the config's default targets (kdflow.reporting.status).
    """
    input:
        artifacts="reference/paper_artifacts.csv",
        made=status_inputs(STATUS_TARGETS),
    output:
        table=report(
            "results/tables/status.csv",
            caption="../report/status.rst",
            category=category("Status"),
            labels={"page": "the works' tables and figures", "format": "raw CSV"},
        ),
        markdown="results/tables/status.md",
        html=report(
            "results/report/status.html",
            caption="../report/status.rst",
            category=category("Status"),
            labels={"page": "the works' tables and figures", "format": "page"},
        ),
    log:
        "logs/status_page.log",
    benchmark:
        "results/benchmarks/status_page.tsv"
    localrule: True
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        targets=STATUS_TARGETS,
        code=code_of("status_page.py"),
    script:
        "../scripts/status_page.py"


rule ledger_table:
    """The deviation ledger as a page of its own: every difference from the papers' protocols and every setting
    they leave silent, with the paper's value, kdflow's, why and the effect (kdflow.reporting.ledger).
    """
    input:
        ledger=PAPER_TABLES.get("deviations", []),
        artifacts="reference/paper_artifacts.csv",
    output:
        table=report(
            "results/tables/ledger.csv",
            caption="../report/ledger.rst",
            category=category("Deviation ledger"),
            labels={
                "table": "kdflow against the papers' protocols",
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/ledger.md",
        html=report(
            "results/report/ledger.html",
            caption="../report/ledger.rst",
            category=category("Deviation ledger"),
            labels={"table": "kdflow against the papers' protocols", "format": "page"},
        ),
    log:
        "logs/ledger_table.log",
    benchmark:
        "results/benchmarks/ledger_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        targets=sorted(STATUS_TARGETS),  # a stable order: the exploration experiments are a set
        code=code_of("ledger_table.py"),
    script:
        "../scripts/ledger_table.py"


# The papers' tables with kdflow's numbers beside them (reference/paper_results.csv; kdflow.reporting.paper_tables),
# the model sizes and CPU speeds thesis Table 5.2 reports, and the runtimes of thesis Table 4.5.


rule paper_table:
    """One paper table: every number the paper reports, kdflow's value and, for scores, the difference; or
    the paper's selected hyperparameters beside kdflow's (CSV, Markdown, LaTeX)."""
    input:
        unpack(lambda w: table_inputs(PAPER_TABLES, w.paper_table, REFERENCE)),
        deviations=PAPER_TABLES.get("deviations", []),
        artifacts="reference/paper_artifacts.csv",
    output:
        csv=report(
            "results/tables/papers/{paper_table}.csv",
            caption="../report/paper_table.rst",
            category=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)[
                "category"
            ],
            subcategory=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)[
                "subcategory"
            ],
            labels=lambda w: {
                "table": title_of(PAPER_TABLES["tables"][w.paper_table]),
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/papers/{paper_table}.md",
        latex="results/tables/papers/{paper_table}.tex",
        html=report(
            "results/report/paper_{paper_table}.html",
            caption="../report/paper_table.rst",
            category=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)[
                "category"
            ],
            subcategory=lambda w: paper_table_place(PAPER_TABLES, w.paper_table)[
                "subcategory"
            ],
            labels=lambda w: {
                "table": title_of(PAPER_TABLES["tables"][w.paper_table]),
                "format": "page",
            },
        ),
    log:
        "logs/paper_table/{paper_table}.log",
    benchmark:
        "results/benchmarks/paper_table/{paper_table}.tsv"
    wildcard_constraints:
        paper_table="|".join(PAPER_TABLES.get("tables", {})) or "no-tables",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        spec=lambda w: canonical(PAPER_TABLES["tables"][w.paper_table]),
        title=lambda w: title_of(PAPER_TABLES["tables"][w.paper_table]),
        values=lambda w: selected_values(config, w.paper_table, SELECTED),
        code=code_of("paper_table.py"),
    script:
        "../scripts/paper_table.py"


rule runtime_table:
    """Thesis Table 4.5: the wall-clock hours of every step of the pipeline up to the thesis's students, from the
    benchmark files of their jobs, beside the thesis's (CSV, Markdown, LaTeX)."""
    input:
        reference=RUNTIME_TABLE.get("reference", []),
        benchmarks=[job["benchmark"] for job in RUNTIME_JOBS],
    output:
        csv=report(
            "results/tables/runtimes.csv",
            caption="../report/runtime_table.rst",
            **paper_place("thesis_sucik2020", "Table 4.5"),
            labels={"table": "runtimes of the pipeline's steps", "format": "raw CSV"},
        ),
        markdown="results/tables/runtimes.md",
        latex="results/tables/runtimes.tex",
        html=report(
            "results/report/runtimes.html",
            caption="../report/runtime_table.rst",
            **paper_place("thesis_sucik2020", "Table 4.5"),
            labels={"table": "runtimes of the pipeline's steps", "format": "page"},
        ),
    log:
        "logs/runtime_table.log",
    benchmark:
        "results/benchmarks/runtime_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        jobs=RUNTIME_JOBS,
        code=code_of("runtime_table.py"),
    script:
        "../scripts/runtime_table.py"


rule probing_table:
    """Every probed model and layer, with baselines, as CSV and Markdown."""
    input:
        expand(
            "results/probing/scores/{model}/{probing_task}.json",
            model=PROBING_CONFIG.get("models", []),
            probing_task=PROBING_CONFIG.get("tasks", []),
        ),
    output:
        csv=report(
            "results/tables/probing.csv",
            caption="../report/probing_table.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={
                "result": "accuracy per model, task and layer (table)",
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/probing.md",
        html=report(
            "results/report/probing.html",
            caption="../report/probing_table.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={
                "result": "accuracy per model, task and layer (table)",
                "format": "page",
            },
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
        csv=report(
            "results/tables/probing_thesis.csv",
            caption="../report/probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "kdflow beside the thesis (table)", "format": "raw CSV"},
        ),
        markdown="results/tables/probing_thesis.md",
        html=report(
            "results/report/probing_thesis.html",
            caption="../report/probing_thesis.rst",
            **paper_place("thesis_sucik2020", "Probing, every model (§6.1)"),
            labels={"result": "kdflow beside the thesis (table)", "format": "page"},
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


# The papers' figures: Universal-KD Fig. 3 (pseudo-head distance to the gold label per teacher layer; a student
# layer's attention over the teacher's layers), ALP-KD Figs. 3-4 (the first student layer's attention; layer
# outputs' principal components and cosine distances), thesis Fig. 4.2 (teachers' fine-tuning), Figs. 6.1-6.2
# (probing per layer; and 6.1-6.3, C.1 beside the thesis's numbers), 6.5, 6.6, C.2 and A.1 (class distribution).


rule figure_teacher_curves:
    """Thesis Fig. 4.2: a teacher's dev score and learning rate over fine-tuning, one panel per task, and the
    data behind it."""
    input:
        lambda w: expand(
            "results/teachers/{teacher}/{task}/curves.parquet",
            teacher=w.teacher,
            task=config["teachers"][w.teacher]["tasks"],
        ),
    output:
        data="results/figures/teacher_curves_{teacher}.csv",
        figure=report(
            "results/figures/teacher_curves_{teacher}.png",
            caption="../report/figure_teacher_curves.rst",
            **paper_place("thesis_sucik2020", "Figure 4.2"),
            labels={
                "teacher": "{teacher}",
                "figure": "dev score and η over fine-tuning",
            },
        ),
    log:
        "logs/figure_teacher_curves/{teacher}.log",
    benchmark:
        "results/benchmarks/figure_teacher_curves/{teacher}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        tasks=lambda w: config["teachers"][w.teacher]["tasks"],
        code=code_of("figure_teacher_curves.py"),
    script:
        "../scripts/figure_teacher_curves.py"


rule figure_class_distribution:
    """Thesis Fig. A.1: the class distribution of every labelled split of each classification task the workflow
    prepares (regression tasks have no classes), and the counts behind it."""
    input:
        expand("results/data/{task}", task=class_distribution_tasks(config)),
    output:
        data="results/figures/class_distribution.csv",
        figure=report(
            "results/figures/class_distribution.png",
            caption="../report/figure_class_distribution.rst",
            **paper_place("thesis_sucik2020", "Figure A.1"),
            labels={"figure": "class distribution per task and split"},
        ),
    log:
        "logs/figure_class_distribution.log",
    benchmark:
        "results/benchmarks/figure_class_distribution.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        tasks=class_distribution_tasks(config),
        code=code_of("figure_class_distribution.py"),
    script:
        "../scripts/figure_class_distribution.py"


rule figure_pseudo_heads:
    """Universal-KD Fig. 3 (left), per teacher and task."""
    input:
        "results/tables/teachers.csv",
    output:
        report(
            "results/figures/pseudo_heads.png",
            caption="../report/figure_pseudo_heads.rst",
            **paper_place("universal_kd_wu2021", "Figure 3"),
            labels={"figure": "pseudo-heads' distance to the gold label (left)"},
        ),
    log:
        "logs/figure_pseudo_heads.log",
    benchmark:
        "results/benchmarks/figure_pseudo_heads.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_pseudo_heads.py"),
    script:
        "../scripts/figure_pseudo_heads.py"


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


rule figure_analysis:
    """Thesis Fig. 6.5 (confidence correlations), Fig. 6.6 (average confidence overall, on hits and on
    mistakes; with its numbers as CSV) and Fig. C.2 (mistake overlap) of one task."""
    input:
        "results/analysis/{task}.json",
    output:
        confidence=report(
            "results/figures/confidence_correlation_{task}.png",
            caption="../report/figure_confidence.rst",
            **paper_place("thesis_sucik2020", "Figure 6.5"),
            labels={"task": "{task}", "result": "confidence correlation"},
        ),
        mistakes=report(
            "results/figures/mistake_overlap_{task}.png",
            caption="../report/figure_mistakes.rst",
            **paper_place("thesis_sucik2020", "Figure C.2"),
            labels={"task": "{task}", "result": "mistake overlap"},
        ),
        average=report(
            "results/figures/average_confidence_{task}.png",
            caption="../report/figure_average_confidence.rst",
            **paper_place("thesis_sucik2020", "Figure 6.6"),
            labels={"task": "{task}", "result": "average confidence"},
        ),
        average_data="results/figures/average_confidence_{task}.csv",
    log:
        "logs/figure_analysis/{task}.log",
    benchmark:
        "results/benchmarks/figure_analysis/{task}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_analysis.py"),
    script:
        "../scripts/figure_analysis.py"


rule attention_maps:
    """Universal-KD Fig. 3 (middle, right) and ALP-KD Fig. 3: one student layer's attention over the teacher's
    layers on random dev examples, for each of the figure's students (e.g. Universal-KD(IL) and ALP, or ALP
    students of 2, 4 and 6 layers), optionally beside the pseudo-heads' distance to the gold label on the same
    examples (Universal-KD Fig. 3, left)."""
    input:
        unpack(
            lambda w: recomputed_student_inputs(
                config,
                config["attention_maps"][w.figure]["task"],
                config["attention_maps"][w.figure]["models"],
            )
        ),
    output:
        json="results/figures/attention_{figure}.json",
        figure=report(
            "results/figures/attention_{figure}.png",
            caption="../report/figure_attention.rst",
            category=lambda w: attention_report_entry(config, w.figure)["category"],
            subcategory=lambda w: attention_report_entry(config, w.figure)[
                "subcategory"
            ],
            labels=lambda w: attention_report_entry(config, w.figure)["labels"],
        ),
    log:
        "logs/attention_maps/{figure}.log",
    benchmark:
        "results/benchmarks/attention_maps/{figure}.tsv"
    wildcard_constraints:
        figure="|".join(config.get("attention_maps", {})) or "no-figures",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        spec=lambda w: canonical(config["attention_maps"][w.figure]),
        models=lambda w: {
            name: model_params(config, name)
            for name in config["attention_maps"][w.figure]["models"]
        },
        device=config["device"],
        precision=config["precision"],
        code=code_of("attention_maps.py"),
    script:
        "../scripts/attention_maps.py"


rule layer_outputs:
    """ALP-KD Fig. 4: the first two principal components of student layers' outputs fitted jointly with the
    teacher layer each is compared with (4a, 4b), and every example's cosine distance to it (4c, 4d).
    """
    input:
        unpack(
            lambda w: recomputed_student_inputs(
                config, w.task, config["layer_outputs"][w.task]["models"]
            )
        ),
    output:
        json="results/figures/layer_outputs_{task}.json",
        csv="results/figures/layer_outputs_{task}.csv",
        figure=report(
            "results/figures/layer_outputs_{task}.png",
            caption="../report/figure_layer_outputs.rst",
            **paper_place("alp_kd_passban2021", "Figure 4"),
            labels={
                "figure": "layer outputs: principal components, cosine distance",
                "task": "{task}",
            },
        ),
    log:
        "logs/layer_outputs/{task}.log",
    benchmark:
        "results/benchmarks/layer_outputs/{task}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        spec=lambda w: canonical(config["layer_outputs"][w.task]),
        models=lambda w: {
            name: model_params(config, name)
            for name in config["layer_outputs"][w.task]["models"]
        },
        device=config["device"],
        precision=config["precision"],
        code=code_of("layer_outputs.py"),
    script:
        "../scripts/layer_outputs.py"


# Sučík (2020) Chapter 5 and Appendix B: the students' hyperparameter exploration (Table 5.1, Figs. B.1-B.7) and
# student sizes (Figs. B.8-B.12), drawn from the learning curves of the exploration's runs. The runs themselves are
# distill_student jobs of the experiments the `exploration` section expands into (kdflow.workflow.exploration).


rule figure_exploration_curves:
    """Thesis Figs. B.1-B.7: per explored value, the mean dev curve over repeats (sliding average over 2 epochs)
    and the best single evaluation."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            "results/figures/thesis_{figure}.png",
            caption="../report/figure_exploration.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place(
                "thesis_sucik2020", f"Figure {w.figure}"
            )["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data="results/figures/thesis_{figure}.csv",
    log:
        "logs/figure_exploration_curves/{figure}.log",
    benchmark:
        "results/benchmarks/figure_exploration_curves/{figure}.tsv"
    wildcard_constraints:
        figure=figure_constraint(config, "curves"),
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        labels=lambda w: figure_labels(config, w.figure),
        spec=lambda w: canonical(EXPLORATION["figures"][w.figure]),
        title=lambda w: figure_title(config, w.figure),
        code=code_of("figure_exploration_curves.py"),
    script:
        "../scripts/figure_exploration_curves.py"


rule figure_gradient_explosion:
    """Thesis Fig. B.8 (a BERT_S's gradient explosion) and Fig. B.9 (the learning rate where its learning slows),
    from one run's learning curves smoothed over 0.1 epoch."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            "results/figures/thesis_{figure}.png",
            caption="../report/figure_gradient_explosion.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place(
                "thesis_sucik2020", f"Figure {w.figure}"
            )["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data="results/figures/thesis_{figure}.csv",
    log:
        "logs/figure_gradient_explosion/{figure}.log",
    benchmark:
        "results/benchmarks/figure_gradient_explosion/{figure}.tsv"
    wildcard_constraints:
        figure=figure_constraint(config, "explosion", "learning_rate"),
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        kind=lambda w: figure_kind(config, w.figure),
        title=lambda w: figure_title(config, w.figure),
        code=code_of("figure_gradient_explosion.py"),
    script:
        "../scripts/figure_gradient_explosion.py"


rule figure_student_sizes:
    """Thesis Figs. B.10-B.12: the best dev score of every student size (width x depth), per student and task."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            "results/figures/thesis_{figure}.png",
            caption="../report/figure_student_sizes.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place(
                "thesis_sucik2020", f"Figure {w.figure}"
            )["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data="results/figures/thesis_{figure}.csv",
    log:
        "logs/figure_student_sizes/{figure}.log",
    benchmark:
        "results/benchmarks/figure_student_sizes/{figure}.tsv"
    wildcard_constraints:
        figure=figure_constraint(config, "sizes"),
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        sizes=lambda w: figure_sizes(config, w.figure),
        title=lambda w: figure_title(config, w.figure),
        code=code_of("figure_student_sizes.py"),
    script:
        "../scripts/figure_student_sizes.py"


rule exploration_table:
    """Thesis Table 5.1: the values explored one at a time, the thesis's initial and chosen values and kdflow's
    best (the best mean over repeats of each run's best dev score)."""
    input:
        unpack(lambda w: run_files(table_runs(config))),
        reference=EXPLORATION.get("table", []),
        deviations=PAPER_TABLES.get("deviations", []),
    output:
        csv=report(
            "results/tables/thesis_table51.csv",
            caption="../report/exploration_table.rst",
            **paper_place("thesis_sucik2020", "Table 5.1"),
            labels={
                "table": "Table 5.1",
                "result": "values explored, chosen and kdflow's best",
                "format": "raw CSV",
            },
        ),
        markdown="results/tables/thesis_table51.md",
        html=report(
            "results/report/thesis_table51.html",
            caption="../report/exploration_table.rst",
            **paper_place("thesis_sucik2020", "Table 5.1"),
            labels={
                "table": "Table 5.1",
                "result": "values explored, chosen and kdflow's best",
                "format": "page",
            },
        ),
    log:
        "logs/exploration_table.log",
    benchmark:
        "results/benchmarks/exploration_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        runs=lambda w: run_records(table_runs(config)),
        studies=lambda w: table_studies(config),
        code=code_of("exploration_table.py"),
    script:
        "../scripts/exploration_table.py"


# The cost plan before the run (kdflow.workflow.cost_plan): `snakemake --cores 1 results/plan.csv` (`make plan`) asks
# Snakemake for this workflow's DAG under the same config, prices each job from the throughput tables, runs no model
# and needs no GPU.


rule plan:
    """The cost plan: per experiment (or stage) and rule, the jobs, the examples x epochs and the estimated hours
    on the config's `plan.gpu` for the jobs that ask for a GPU (CPU-hours for the others), with where every
    throughput comes from (measured on a CPU, or scaled); and the pilot, the fewest jobs that calibrate it
    (results/pilot.csv, kdflow.reporting.pilot: `make pilot` runs them)."""
    input:
        sizes="reference/task_sizes.csv",
        throughput="reference/throughput.csv",
        startup="reference/startup.csv",
        counted=counted_files(
            config,
            [probing_file(task) for task in PROBING_CONFIG.get("tasks", [])],
        ),
    output:
        csv="results/plan.csv",
        jobs="results/plan_jobs.csv",
        pilot="results/pilot.csv",
        markdown="results/plan.md",
        html=report(
            "results/report/plan.html",
            caption="../report/plan.rst",
            category=category("Cost plan"),
            labels={"table": "jobs and estimated hours before the run"},
        ),
    log:
        "logs/plan.log",
    benchmark:
        "results/benchmarks/plan.tsv"
    localrule: True
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        config=config_digest(config),
        rules=workflow_fingerprint(workflow.basedir),
        snakemake_config={
            "configfiles": [
                str(path) for path in workflow.config_settings.configfiles
            ],
            "config": dict(workflow.config_settings.config),
            "replace_workflow_config": workflow.config_settings.replace_workflow_config,
        },
        gpu=config.get("plan", {}).get("gpu", "H100"),
        probing_files={
            task: probing_file(task) for task in PROBING_CONFIG.get("tasks", [])
        },
        code=code_of("plan.py"),
    script:
        "../scripts/plan.py"


rule plan_measured:
    """The cost plan against the run: per section and rule, the planned hours beside the hours Snakemake's
    benchmark files measured for the jobs that ran, built last from the config's default targets
    (kdflow.reporting.plan_pages).
    """
    input:
        jobs="results/plan_jobs.csv",
        made=STATUS_TARGETS,
    output:
        table=report(
            "results/tables/plan_measured.csv",
            caption="../report/plan_measured.rst",
            category=category("Cost plan"),
            labels={"table": "planned against measured hours", "format": "raw CSV"},
        ),
        markdown="results/tables/plan_measured.md",
        html=report(
            "results/report/plan_measured.html",
            caption="../report/plan_measured.rst",
            category=category("Cost plan"),
            labels={"table": "planned against measured hours", "format": "page"},
        ),
    log:
        "logs/plan_measured.log",
    benchmark:
        "results/benchmarks/plan_measured.tsv"
    localrule: True
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("plan_measured.py"),
    script:
        "../scripts/plan_measured.py"


rule plan_calibrated:
    """The cost plan calibrated on the jobs that ran (kdflow.reporting.calibration): the plan's figures refit per
    group of jobs from the benchmark files that exist, the remaining jobs priced with them, per paper table the
    jobs done, the hours spent and left, with an interval. Not a default target: `make plan` builds it, during a
    run or after the pilot."""
    input:
        jobs="results/plan_jobs.csv",
        measured=lambda wildcards: finished_benchmarks(),
    output:
        progress="results/plan_calibrated.csv",
        figures="results/plan_figures.csv",
        jobs="results/plan_calibrated_jobs.csv",
        markdown="results/plan_calibrated.md",
        html="results/report/plan_calibrated.html",
    log:
        "logs/plan_calibrated.log",
    benchmark:
        "results/benchmarks/plan_calibrated.tsv"
    localrule: True
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        sections=paper_table_experiments(config),
        code=code_of("plan_calibrated.py"),
    script:
        "../scripts/plan_calibrated.py"
