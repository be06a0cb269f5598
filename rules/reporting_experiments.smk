# Stage reporting (kdflow.reporting), the runs' own results: each experiment's table of its selected students, its
# learning curves and GLUE submission files, and the teachers' table. The other rule files of the stage
# (rules/reporting_*.smk): the papers' tables, probing, figures, the thesis's exploration and the cost plan.


use rule kdflow_job as experiment_table with:
    """The experiment's table of the selected students (mean ± sample std over seeds, and the tests against the
    experiment's ``compare_to``) and of every grid point and seed, from its dev selection; and the model cards of
    the students the config exports.
    """
    input:
        selection=paths.SELECTION,
        cards=lambda w: exported_cards(config, w.experiment),
    output:
        csv=report(
            paths.EXPERIMENT_TABLE_CSV,
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={"experiment": "{experiment}", "result": "selected points", "format": "raw CSV"},
        ),
        grid=report(
            paths.EXPERIMENT_GRID_CSV,
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={"experiment": "{experiment}", "result": "every grid point and seed", "format": "raw CSV"},
        ),
        markdown=paths.EXPERIMENT_TABLE_MD,
        html=report(
            paths.EXPERIMENT_TABLE_PAGE,
            caption="../report/experiment.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={"experiment": "{experiment}", "result": "selected points and grid", "format": "page"},
        ),
    log:
        "logs/experiment_table/{experiment}.log",
    benchmark:
        paths.benchmark("experiment_table/{experiment}")
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        **runs("experiment_table.py"),
        exported=lambda w: exported_students(config, w.experiment),


use rule kdflow_job as figure_experiment_curves with:
    """The dev learning curve of every run of an experiment (every grid point and seed), a panel per task and
    student, the selected points bold, and the data behind it."""
    input:
        selection=paths.SELECTION,
        curves=lambda w: experiment_run_files(config, w.experiment, run_file_names.CURVES),
        metrics=lambda w: experiment_run_files(config, w.experiment),
    output:
        data=report(
            paths.EXPERIMENT_CURVES_CSV,
            caption="../report/figure_experiment_curves.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={"experiment": "{experiment}", "result": "learning curves", "format": "raw CSV"},
        ),
        figure=report(
            paths.EXPERIMENT_CURVES_PNG,
            caption="../report/figure_experiment_curves.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={"experiment": "{experiment}", "result": "learning curves", "format": "figure"},
        ),
    log:
        "logs/figure_experiment_curves/{experiment}.log",
    benchmark:
        paths.benchmark("figure_experiment_curves/{experiment}")
    params:
        **runs("figure_experiment_curves.py"),
        scale_note=RUN_SCALE_NOTE,
        runs=lambda w: selection_params(config, w.experiment)["runs"],


use rule kdflow_job as glue_submission with:
    """GLUE test-server files (index, prediction) of the selected students of an experiment: the selected
    grid point's best-dev seed (Universal-KD Table 3 reports GLUE test scores)."""
    input:
        selection=paths.SELECTION,
        predictions=lambda w: experiment_run_files(config, w.experiment, run_file_names.PREDICTIONS),
    output:
        directory(paths.GLUE_SUBMISSION),
    log:
        "logs/glue_submission/{experiment}.log",
    benchmark:
        paths.benchmark("glue_submission/{experiment}")
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        **runs("glue_submission.py"),
        run_dir=lambda w: student_run_file(
            "",
            experiment=w.experiment,
            task="{task}",
            student="{student}",
            method="{method}",
            point="{point}",
            seed="{seed}",
        ),


use rule kdflow_job as teacher_table with:
    """Teachers and their per-layer pseudo-heads, per task, as CSV and Markdown."""
    input:
        teachers=[paths.TEACHER_METRICS.format(teacher=teacher, task=task) for teacher, task in teacher_jobs(config)],
        heads=[paths.PSEUDO_HEADS_METRICS.format(teacher=teacher, task=task) for teacher, task in teacher_jobs(config)],
    output:
        **page_and_csv(
            caption="../report/teachers.rst",
            category=category("Teachers"),
            labels={"table": "teachers and their per-layer pseudo-heads"},
            csv=paths.TEACHER_TABLE_CSV,
            markdown=paths.TEACHER_TABLE_MD,
            html=paths.TEACHER_TABLE_PAGE,
        ),
    log:
        "logs/teacher_table.log",
    benchmark:
        paths.benchmark("teacher_table")
    params:
        **runs("teacher_table.py"),
        jobs=teacher_jobs(config),
