# Stage analysis (kdflow.analysis): prediction analysis (thesis §6.2, Tables 6.1-6.2, Figs. 6.5, 6.6 and
# C.2): per task, the teacher and its students on dev: confidences, extreme hits and mistakes, the examples
# of P4, P5, P7 and P8, mistake overlap, confidence correlations; the sentence probes of Table C.1; the
# students recomputed for the papers' figures: their attention over the teacher's layers (Universal-KD Fig. 3,
# ALP-KD Fig. 3) and their layers' outputs beside the teacher's (ALP-KD Fig. 4), which
# rules/reporting_figures.smk draws. The model sizes and CPU speeds of thesis Table 5.2 are export's
# (rules/export.smk): ONNX Runtime's beside PyTorch's.


use rule kdflow_job as analyse_predictions with:
    """The thesis's prediction analysis of one task's teacher and students (dev)."""
    input:
        unpack(lambda w: analysis_inputs(config, w.task)),
    output:
        json=paths.ANALYSIS_JSON,
        csv=report(
            paths.ANALYSIS_CSV,
            caption="../report/analysis.rst",
            **paper_place("thesis_sucik2020", "Table 6.2"),
            labels={"task": "{task}", "result": "tables (Tables 6.1-6.2)", "format": "raw CSV"},
        ),
        markdown=paths.ANALYSIS_MD,
        html=report(
            paths.ANALYSIS_PAGE,
            caption="../report/analysis.rst",
            **paper_place("thesis_sucik2020", "Table 6.2"),
            labels={"task": "{task}", "result": "tables (Tables 6.1-6.2)", "format": "page"},
        ),
    log:
        "logs/analyse_predictions/{task}.log",
    benchmark:
        paths.benchmark("analyse_predictions/{task}")
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        **runs("analyse_predictions.py"),
        models=lambda w: {name: model_params(config, name) for name in analysis_models(config, w.task)},
        teacher=lambda w: config["analysis"][w.task]["teacher"],
        examples=lambda w: config["analysis"][w.task].get("examples", 10),
        seed=lambda w: config["analysis"][w.task].get("seed", 42),


use rule kdflow_device_job as classify_sentences with:
    """Thesis Tables 6.3 and C.1: every listed model's prediction and confidence on a list of sentences (by
    default the thesis's Table C.1: CoLA sentences and hand-perturbed variants), beside the predictions the
    list reports (the thesis's, for Table 6.3's sentences)."""
    input:
        unpack(lambda w: sentence_probe_inputs(config, w.task)),
    output:
        csv=report(
            paths.SENTENCE_PROBES_CSV,
            caption="../report/sentence_probes.rst",
            **paper_place("thesis_sucik2020", "Table 6.3"),
            labels={"task": "{task}", "result": "sentences and variants (Tables 6.3, C.1)", "format": "raw CSV"},
        ),
        markdown=paths.SENTENCE_PROBES_MD,
        html=report(
            paths.SENTENCE_PROBES_PAGE,
            caption="../report/sentence_probes.rst",
            **paper_place("thesis_sucik2020", "Table 6.3"),
            labels={"task": "{task}", "result": "sentences and variants (Tables 6.3, C.1)", "format": "page"},
        ),
    log:
        "logs/classify_sentences/{task}.log",
    benchmark:
        paths.benchmark("classify_sentences/{task}")
    resources:
        mem_mb=8000,
        runtime=15,
    params:
        **runs("classify_sentences.py"),
        models=lambda w: {name: model_params(config, name) for name in config["sentence_probes"][w.task]["models"]},
        reported=lambda w: config["sentence_probes"][w.task].get("reported", {}),


use rule kdflow_device_job as compute_attention_maps with:
    """Universal-KD Fig. 3 (middle, right) and ALP-KD Fig. 3's numbers: one student layer's attention over the
    teacher's layers on random dev examples, recomputed for each of the figure's students (e.g. Universal-KD(IL)
    and ALP, or ALP students of 2, 4 and 6 layers), with the pseudo-heads' distance to the gold label on the same
    examples (Universal-KD Fig. 3, left). Rule figure_attention_maps draws them."""
    input:
        unpack(
            lambda w: recomputed_student_inputs(
                config,
                config["attention_maps"][w.figure]["task"],
                config["attention_maps"][w.figure]["models"],
            )
        ),
    output:
        paths.ATTENTION_JSON,
    log:
        "logs/compute_attention_maps/{figure}.log",
    benchmark:
        paths.benchmark("compute_attention_maps/{figure}")
    wildcard_constraints:
        figure="|".join(config.get("attention_maps", {})) or "no-figures",
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        **runs("compute_attention_maps.py"),
        spec=lambda w: canonical(config["attention_maps"][w.figure]),
        models=lambda w: {name: model_params(config, name) for name in config["attention_maps"][w.figure]["models"]},


use rule kdflow_device_job as compute_layer_outputs with:
    """ALP-KD Fig. 4's numbers: the first two principal components of student layers' outputs, recomputed and
    fitted jointly with the teacher layer each is compared with, and every example's cosine distance to it. Rule
    layer_outputs draws them."""
    input:
        unpack(lambda w: recomputed_student_inputs(config, w.task, config["layer_outputs"][w.task]["models"])),
    output:
        json=paths.LAYER_OUTPUTS_JSON,
        csv=paths.LAYER_OUTPUTS_CSV,
    log:
        "logs/compute_layer_outputs/{task}.log",
    benchmark:
        paths.benchmark("compute_layer_outputs/{task}")
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        **runs("compute_layer_outputs.py"),
        spec=lambda w: canonical(config["layer_outputs"][w.task]),
        models=lambda w: {name: model_params(config, name) for name in config["layer_outputs"][w.task]["models"]},
