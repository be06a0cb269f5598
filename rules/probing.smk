# SentEval probing (thesis §3.3, §4.3.6, §6.1) of the models named in `probing.models`: every layer's
# encodings are computed once per model and task, then the whole nhid x dropout x L2 grid probes each layer.


rule download_probing_task:
    """SentEval's probing file, when `probing.data_dir` is null (a local copy is read in place)."""
    output:
        "resources/senteval_probing/{filename}",
    log:
        "logs/download_probing_task/{filename}.log",
    wildcard_constraints:
        filename="|".join(PROBING_TASKS.values()),
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        code=code_of("download_probing_task.py"),
    script:
        "../scripts/download_probing_task.py"


rule encode_probing_tasks:
    """One model's sentence vector of every layer for the train/dev/test sentences of every probing task (the
    model is loaded once)."""
    input:
        unpack(lambda w: model_files(w.model)),
        probing=[probing_file(task) for task in PROBING_CONFIG.get("tasks", [])],
    output:
        expand(
            "results/probing/encodings/{{model}}/{probing_task}.safetensors",
            probing_task=PROBING_CONFIG.get("tasks", []),
        ),
    log:
        "logs/encode_probing_tasks/{model}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: probing_resource("threads")
    resources:
        gpu=probing_resource("gpu"),
        mem_mb=probing_resource("mem_mb"),
        runtime=probing_resource("runtime"),
    params:
        model=lambda w: model_params(w.model),
        settings=probing_settings(config) if PROBING_CONFIG else {},
        device=config["device"],
        code=code_of("encode_probing_tasks.py"),
    script:
        "../scripts/encode_probing_tasks.py"


rule probe_model:
    """Probe every layer of a model's encodings (the width x dropout x L2 grid, 36 configurations by default,
    trained as one batched model; WordContent by logistic regression), with the task's majority and morphology
    baselines."""
    input:
        encodings="results/probing/encodings/{model}/{probing_task}.safetensors",
        probing=lambda w: probing_file(w.probing_task),
    output:
        "results/probing/scores/{model}/{probing_task}.json",
    log:
        "logs/probe_model/{model}/{probing_task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: probing_resource("threads")
    resources:
        gpu=probing_resource("gpu"),
        mem_mb=probing_resource("mem_mb"),
        runtime=probing_resource("runtime"),
    params:
        probe=probing_settings(config)["probe"] if PROBING_CONFIG else {},
        device=config["device"],
        code=code_of("probe_model.py"),
    script:
        "../scripts/probe_model.py"


rule probing_table:
    """Every probed model and layer, with baselines, as CSV and Markdown."""
    input:
        expand(
            "results/probing/scores/{model}/{probing_task}.json",
            model=PROBING_CONFIG.get("models", []),
            probing_task=PROBING_CONFIG.get("tasks", []),
        ),
    output:
        csv="results/tables/probing.csv",
        markdown="results/tables/probing.md",
        html=report(
            "results/report/probing.html",
            caption="../report/probing_table.rst",
            category="Sučík (2020)",
            subcategory="Probing (§6.1)",
            labels={"result": "accuracy per model, task and layer (table)"},
        ),
    log:
        "logs/probing_table.log",
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
        csv="results/tables/probing_thesis.csv",
        markdown="results/tables/probing_thesis.md",
        html=report(
            "results/report/probing_thesis.html",
            caption="../report/probing_thesis.rst",
            category="Sučík (2020)",
            subcategory="Probing (§6.1)",
            labels={"result": "kdflow beside the thesis (table)"},
        ),
    log:
        "logs/probing_thesis_table.log",
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
