# Stage reporting (kdflow.reporting), the papers' figures: Universal-KD Fig. 3 (pseudo-head distance to the gold
# label per teacher layer; a student layer's attention over the teacher's layers), ALP-KD Figs. 3-4 (the first student
# layer's attention; layer outputs' principal components and cosine distances; the students' attention and layer
# outputs recomputed by rules/analysis.smk), thesis Fig. 4.2 (teachers' fine-tuning), 6.5, 6.6, C.2 and A.1 (class
# distribution). Probing's figures: rules/reporting_probing.smk.


use rule kdflow_job as figure_teacher_curves with:
    """Thesis Fig. 4.2: a teacher's dev score and learning rate over fine-tuning, one panel per task, and the
    data behind it."""
    input:
        lambda w: expand(
            paths.TEACHER_CURVES,
            teacher=w.teacher,
            task=config["teachers"][w.teacher]["tasks"],
        ),
    output:
        data=paths.TEACHER_CURVES_CSV,
        figure=report(
            paths.TEACHER_CURVES_PNG,
            caption="../report/figure_teacher_curves.rst",
            **paper_place("thesis_sucik2020", "Figure 4.2"),
            labels={"teacher": "{teacher}", "figure": "dev score and η over fine-tuning"},
        ),
    log:
        "logs/figure_teacher_curves/{teacher}.log",
    benchmark:
        paths.benchmark("figure_teacher_curves/{teacher}")
    params:
        **runs("figure_teacher_curves.py"),
        scale_note=RUN_SCALE_NOTE,
        tasks=lambda w: config["teachers"][w.teacher]["tasks"],


use rule kdflow_job as figure_class_distribution with:
    """Thesis Fig. A.1: the class distribution of every labelled split of each classification task the workflow
    prepares (regression tasks have no classes), and the counts behind it."""
    input:
        expand(paths.DATA, task=class_distribution_tasks(config)),
    output:
        data=paths.CLASS_DISTRIBUTION_CSV,
        figure=report(
            paths.CLASS_DISTRIBUTION_PNG,
            caption="../report/figure_class_distribution.rst",
            **paper_place("thesis_sucik2020", "Figure A.1"),
            labels={"figure": "class distribution per task and split"},
        ),
    log:
        "logs/figure_class_distribution.log",
    benchmark:
        paths.benchmark("figure_class_distribution")
    params:
        **runs("figure_class_distribution.py"),
        scale_note=RUN_SCALE_NOTE,
        tasks=class_distribution_tasks(config),


use rule kdflow_job as figure_pseudo_heads with:
    """Universal-KD Fig. 3 (left), per teacher and task."""
    input:
        paths.TEACHER_TABLE_CSV,
    output:
        report(
            paths.PSEUDO_HEADS_PNG,
            caption="../report/figure_pseudo_heads.rst",
            **paper_place("universal_kd_wu2021", "Figure 3"),
            labels={"figure": "pseudo-heads' distance to the gold label (left)"},
        ),
    log:
        "logs/figure_pseudo_heads.log",
    benchmark:
        paths.benchmark("figure_pseudo_heads")
    params:
        **runs("figure_pseudo_heads.py"),
        scale_note=RUN_SCALE_NOTE,


use rule kdflow_job as figure_analysis with:
    """Thesis Fig. 6.5 (confidence correlations), Fig. 6.6 (average confidence overall, on hits and on
    mistakes; with its numbers as CSV) and Fig. C.2 (mistake overlap) of one task."""
    input:
        paths.ANALYSIS_JSON,
    output:
        confidence=report(
            paths.CONFIDENCE_CORRELATION_PNG,
            caption="../report/figure_confidence.rst",
            **paper_place("thesis_sucik2020", "Figure 6.5"),
            labels={"task": "{task}", "result": "confidence correlation"},
        ),
        mistakes=report(
            paths.MISTAKE_OVERLAP_PNG,
            caption="../report/figure_mistakes.rst",
            **paper_place("thesis_sucik2020", "Figure C.2"),
            labels={"task": "{task}", "result": "mistake overlap"},
        ),
        average=report(
            paths.AVERAGE_CONFIDENCE_PNG,
            caption="../report/figure_average_confidence.rst",
            **paper_place("thesis_sucik2020", "Figure 6.6"),
            labels={"task": "{task}", "result": "average confidence"},
        ),
        average_data=paths.AVERAGE_CONFIDENCE_CSV,
    log:
        "logs/figure_analysis/{task}.log",
    benchmark:
        paths.benchmark("figure_analysis/{task}")
    params:
        **runs("figure_analysis.py"),
        scale_note=RUN_SCALE_NOTE,


use rule kdflow_job as figure_attention_maps with:
    """Universal-KD Fig. 3 (middle, right) and ALP-KD Fig. 3, drawn from rule compute_attention_maps' numbers: one
    student layer's attention over the teacher's layers on random dev examples, for each of the figure's students,
    optionally beside the pseudo-heads' distance to the gold label on the same examples (Universal-KD Fig. 3,
    left)."""
    input:
        paths.ATTENTION_JSON,
    output:
        report(
            paths.ATTENTION_PNG,
            caption="../report/figure_attention.rst",
            category=lambda w: attention_report_entry(config, w.figure)["category"],
            subcategory=lambda w: attention_report_entry(config, w.figure)["subcategory"],
            labels=lambda w: attention_report_entry(config, w.figure)["labels"],
        ),
    log:
        "logs/figure_attention_maps/{figure}.log",
    benchmark:
        paths.benchmark("figure_attention_maps/{figure}")
    wildcard_constraints:
        figure="|".join(config.get("attention_maps", {})) or "no-figures",
    params:
        **runs("figure_attention_maps.py"),
        scale_note=RUN_SCALE_NOTE,
        spec=lambda w: canonical(config["attention_maps"][w.figure]),


use rule kdflow_job as figure_layer_outputs with:
    """ALP-KD Fig. 4, drawn from rule compute_layer_outputs' numbers: the first two principal components of student
    layers' outputs fitted jointly with the teacher layer each is compared with (4a, 4b), and every example's
    cosine distance to it (4c, 4d)."""
    input:
        paths.LAYER_OUTPUTS_JSON,
    output:
        report(
            paths.LAYER_OUTPUTS_PNG,
            caption="../report/figure_layer_outputs.rst",
            **paper_place("alp_kd_passban2021", "Figure 4"),
            labels={"figure": "layer outputs: principal components, cosine distance", "task": "{task}"},
        ),
    log:
        "logs/figure_layer_outputs/{task}.log",
    benchmark:
        paths.benchmark("figure_layer_outputs/{task}")
    params:
        **runs("figure_layer_outputs.py"),
        scale_note=RUN_SCALE_NOTE,
        spec=lambda w: canonical(config["layer_outputs"][w.task]),
