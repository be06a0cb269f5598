# Stage reporting (kdflow.reporting), the runs' own results: each experiment's selected students and table, its
# learning curves and GLUE submission files, and the teachers' table. The other rule files of the stage
# (rules/reporting_*.smk): the papers' tables, probing, figures, the thesis's exploration and the cost plan.


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
        **page_and_csv(
            caption="../report/teachers.rst",
            category=category("Teachers"),
            labels={"table": "teachers and their per-layer pseudo-heads"},
            csv="results/tables/teachers.csv",
            markdown="results/tables/teachers.md",
            html="results/report/teachers.html",
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
