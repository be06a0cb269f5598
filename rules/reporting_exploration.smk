# Stage reporting (kdflow.reporting), Sučík (2020) Chapter 5 and Appendix B: the students' hyperparameter exploration
# (Table 5.1, Figs. B.1-B.7) and student sizes (Figs. B.8-B.12), drawn from the learning curves of the exploration's
# runs. The runs themselves are distill_student jobs of the experiments the `exploration` section expands into
# (kdflow.workflow.exploration).


EXPLORATION = config.get("exploration", {})  # the thesis's Chapter 5 and Appendix B: figures and Table 5.1


use rule kdflow_job as figure_exploration_curves with:
    """Thesis Figs. B.1-B.7: per explored value, the mean dev curve over repeats (sliding average over 2 epochs)
    and the best single evaluation."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            paths.THESIS_FIGURE_PNG,
            caption="../report/figure_exploration.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place("thesis_sucik2020", f"Figure {w.figure}")["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data=paths.THESIS_FIGURE_CSV,
    log:
        "logs/figure_exploration_curves/{figure}.log",
    benchmark:
        paths.benchmark("figure_exploration_curves/{figure}")
    wildcard_constraints:
        figure=figure_constraint(config, "curves"),
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        **runs("figure_exploration_curves.py"),
        scale_note=RUN_SCALE_NOTE,
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        labels=lambda w: figure_labels(config, w.figure),
        spec=lambda w: canonical(EXPLORATION["figures"][w.figure]),
        title=lambda w: figure_title(config, w.figure),


use rule kdflow_job as figure_gradient_explosion with:
    """Thesis Fig. B.8 (a BERT_S's gradient explosion) and Fig. B.9 (the learning rate where its learning slows),
    from one run's learning curves smoothed over 0.1 epoch."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            paths.THESIS_FIGURE_PNG,
            caption="../report/figure_gradient_explosion.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place("thesis_sucik2020", f"Figure {w.figure}")["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data=paths.THESIS_FIGURE_CSV,
    log:
        "logs/figure_gradient_explosion/{figure}.log",
    benchmark:
        paths.benchmark("figure_gradient_explosion/{figure}")
    wildcard_constraints:
        figure=figure_constraint(config, "explosion", "learning_rate"),
    params:
        **runs("figure_gradient_explosion.py"),
        scale_note=RUN_SCALE_NOTE,
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        kind=lambda w: figure_kind(config, w.figure),
        title=lambda w: figure_title(config, w.figure),


use rule kdflow_job as figure_student_sizes with:
    """Thesis Figs. B.10-B.12: the best dev score of every student size (width x depth), per student and task."""
    input:
        unpack(lambda w: run_files(drawn_runs(config, w.figure))),
    output:
        figure=report(
            paths.THESIS_FIGURE_PNG,
            caption="../report/figure_student_sizes.rst",
            category=category("Sučík (2020)"),
            subcategory=lambda w: paper_place("thesis_sucik2020", f"Figure {w.figure}")["subcategory"],
            labels=lambda w: {
                "figure": f"Fig. {w.figure}",
                "result": figure_title(config, w.figure),
            },
        ),
        data=paths.THESIS_FIGURE_CSV,
    log:
        "logs/figure_student_sizes/{figure}.log",
    benchmark:
        paths.benchmark("figure_student_sizes/{figure}")
    wildcard_constraints:
        figure=figure_constraint(config, "sizes"),
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        **runs("figure_student_sizes.py"),
        scale_note=RUN_SCALE_NOTE,
        runs=lambda w: run_records(drawn_runs(config, w.figure)),
        sizes=lambda w: figure_sizes(config, w.figure),
        title=lambda w: figure_title(config, w.figure),


use rule kdflow_job as exploration_table with:
    """Thesis Table 5.1: the values explored one at a time, the thesis's initial and chosen values and kdflow's
    best (the best mean over repeats of each run's best dev score)."""
    input:
        unpack(lambda w: run_files(table_runs(config))),
        reference=EXPLORATION.get("table", []),
        deviations=deviations_file("hyperparameter_exploration"),
    output:
        **page_and_csv(
            caption="../report/exploration_table.rst",
            **paper_place("thesis_sucik2020", "Table 5.1"),
            labels={"table": "Table 5.1", "result": "values explored, chosen and kdflow's best"},
            csv=paths.THESIS_TABLE51_CSV,
            markdown=paths.THESIS_TABLE51_MD,
            html=paths.THESIS_TABLE51_PAGE,
        ),
    log:
        "logs/exploration_table.log",
    benchmark:
        paths.benchmark("exploration_table")
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        **runs("exploration_table.py"),
        runs=lambda w: run_records(table_runs(config)),
        studies=lambda w: table_studies(config),
