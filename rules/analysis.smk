# Prediction analysis (thesis §6.2, Tables 6.1-6.2, Figs. 6.5 and C.2): per task, the teacher and its
# students on dev: confidences, extreme hits and mistakes, mistake overlap, confidence correlations.


rule analyse_predictions:
    """The thesis's prediction analysis of one task's teacher and students (dev)."""
    input:
        unpack(analysis_inputs),
    output:
        json="results/analysis/{task}.json",
        markdown="results/analysis/{task}.md",
        html=report(
            "results/report/analysis_{task}.html",
            caption="../report/analysis.rst",
            category="Sučík (2020)",
            subcategory="Prediction analysis (§6.2)",
            labels={"task": "{task}", "result": "tables (Tables 6.1-6.2)"},
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
        models=lambda w: {name: model_params(name) for name in analysis_models(w.task)},
        teacher=lambda w: config["analysis"][w.task]["teacher"],
        examples=lambda w: config["analysis"][w.task].get("examples", 10),
        code=code_of("analyse_predictions.py"),
    script:
        "../scripts/analyse_predictions.py"
