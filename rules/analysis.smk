# Stage analysis (kdflow.analysis): prediction analysis (thesis §6.2, Tables 6.1-6.2, Figs. 6.5, 6.6 and
# C.2): per task, the teacher and its students on dev: confidences, extreme hits and mistakes, the examples
# of P4, P5, P7 and P8, mistake overlap, confidence correlations; the sentence probes of Table C.1. The model
# sizes and CPU speeds of thesis Table 5.2 are export's (rules/export.smk): ONNX Runtime's beside PyTorch's.


rule analyse_predictions:
    """The thesis's prediction analysis of one task's teacher and students (dev)."""
    input:
        unpack(lambda w: analysis_inputs(config, w.task)),
    output:
        json=paths.ANALYSIS_JSON,
        csv=report(
            paths.ANALYSIS_CSV,
            caption="../report/analysis.rst",
            **paper_place("thesis_sucik2020", "Table 6.2"),
            labels={
                "task": "{task}",
                "result": "tables (Tables 6.1-6.2)",
                "format": "raw CSV",
            },
        ),
        markdown=paths.ANALYSIS_MD,
        html=report(
            paths.ANALYSIS_PAGE,
            caption="../report/analysis.rst",
            **paper_place("thesis_sucik2020", "Table 6.2"),
            labels={
                "task": "{task}",
                "result": "tables (Tables 6.1-6.2)",
                "format": "page",
            },
        ),
    log:
        "logs/analyse_predictions/{task}.log",
    benchmark:
        paths.benchmark("analyse_predictions/{task}")
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        models=lambda w: {
            name: model_params(config, name)
            for name in analysis_models(config, w.task)
        },
        teacher=lambda w: config["analysis"][w.task]["teacher"],
        examples=lambda w: config["analysis"][w.task].get("examples", 10),
        seed=lambda w: config["analysis"][w.task].get("seed", 42),
        code=code_of("analyse_predictions.py"),
    script:
        "../scripts/analyse_predictions.py"


rule classify_sentences:
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
            labels={
                "task": "{task}",
                "result": "sentences and variants (Tables 6.3, C.1)",
                "format": "raw CSV",
            },
        ),
        markdown=paths.SENTENCE_PROBES_MD,
        html=report(
            paths.SENTENCE_PROBES_PAGE,
            caption="../report/sentence_probes.rst",
            **paper_place("thesis_sucik2020", "Table 6.3"),
            labels={
                "task": "{task}",
                "result": "sentences and variants (Tables 6.3, C.1)",
                "format": "page",
            },
        ),
    log:
        "logs/classify_sentences/{task}.log",
    benchmark:
        paths.benchmark("classify_sentences/{task}")
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=15,
    params:
        models=lambda w: {
            name: model_params(config, name)
            for name in config["sentence_probes"][w.task]["models"]
        },
        reported=lambda w: config["sentence_probes"][w.task].get("reported", {}),
        device=config["device"],
        precision=config["precision"],
        code=code_of("classify_sentences.py"),
    script:
        "../scripts/classify_sentences.py"
