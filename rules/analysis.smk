# Stage analysis (kdflow.analysis): prediction analysis (thesis §6.2, Tables 6.1-6.2, Figs. 6.5, 6.6 and
# C.2): per task, the teacher and its students on dev: confidences, extreme hits and mistakes, the examples
# of P4, P5, P7 and P8, mistake overlap, confidence correlations; the sentence probes of Table C.1; the
# model sizes and CPU speeds of thesis Table 5.2.


rule analyse_predictions:
    """The thesis's prediction analysis of one task's teacher and students (dev)."""
    input:
        unpack(lambda w: analysis_inputs(config, w.task)),
    output:
        json="results/analysis/{task}.json",
        csv=report(
            "results/analysis/{task}.csv",
            caption="../report/analysis.rst",
            **paper_place("thesis_sucik2020", "Table 6.2"),
            labels={
                "task": "{task}",
                "result": "tables (Tables 6.1-6.2)",
                "format": "raw CSV",
            },
        ),
        markdown="results/analysis/{task}.md",
        html=report(
            "results/report/analysis_{task}.html",
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
        "results/benchmarks/analyse_predictions/{task}.tsv"
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
            "results/sentence_probes/{task}.csv",
            caption="../report/sentence_probes.rst",
            **paper_place("thesis_sucik2020", "Table 6.3"),
            labels={
                "task": "{task}",
                "result": "sentences and variants (Tables 6.3, C.1)",
                "format": "raw CSV",
            },
        ),
        markdown="results/sentence_probes/{task}.md",
        html=report(
            "results/report/sentence_probes_{task}.html",
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
        "results/benchmarks/classify_sentences/{task}.tsv"
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


rule measure_inference:
    """Non-embedding parameters and CPU milliseconds per example of a named model on its task's dev split, in
    batches of 256 (thesis Table 5.2)."""
    input:
        unpack(lambda w: model_files(config, w.model)),
    output:
        "results/inference/{model}.json",
    log:
        "logs/measure_inference/{model}.log",
    benchmark:
        "results/benchmarks/measure_inference/{model}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 4
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        model=lambda w: model_params(config, w.model),
        batch_size=256,
        code=code_of("measure_inference.py"),
    script:
        "../scripts/measure_inference.py"
