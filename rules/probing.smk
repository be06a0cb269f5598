# Stage probing (kdflow.probing): SentEval probing (thesis §3.3, §4.3.6, §6.1) of the models named in
# `probing.models`: every layer's encodings are computed once per model and task, then the whole
# nhid x dropout x L2 grid probes each layer.


rule download_probing_task:
    """SentEval's probing file, when `probing.data_dir` is null (a local copy is read in place)."""
    output:
        "resources/senteval_probing/{filename}",
    log:
        "logs/download_probing_task/{filename}.log",
    benchmark:
        paths.benchmark("download_probing_task/{filename}")
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
        unpack(lambda w: model_files(config, w.model)),
        probing=[probing_file(task) for task in PROBING_CONFIG.get("tasks", [])],
    output:
        expand(
            paths.PROBING_ENCODINGS,
            probing_task=PROBING_CONFIG.get("tasks", []),
            allow_missing=True,
        ),
    log:
        "logs/encode_probing_tasks/{model}.log",
    benchmark:
        paths.benchmark("encode_probing_tasks/{model}")
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "probing")
    resources:
        gpu=configured_resource("gpu", "probing"),
        mem_mb=configured_resource("mem_mb", "probing"),
        runtime=configured_resource("runtime", "probing"),
    params:
        model=lambda w: model_params(config, w.model),
        settings=probing_settings(config) if PROBING_CONFIG else {},
        device=config["device"],
        precision=config["precision"],
        code=code_of("encode_probing_tasks.py"),
    script:
        "../scripts/encode_probing_tasks.py"


rule probe_model:
    """Probe every layer of a model's encodings (the width x dropout x L2 grid, 36 configurations by default,
    trained as one batched model; WordContent by logistic regression), with the task's majority and morphology
    baselines."""
    input:
        encodings=paths.PROBING_ENCODINGS,
        probing=lambda w: probing_file(w.probing_task),
    output:
        paths.PROBING_SCORES,
    log:
        "logs/probe_model/{model}/{probing_task}.log",
    benchmark:
        paths.benchmark("probe_model/{model}/{probing_task}")
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "probing")
    resources:
        gpu=configured_resource("gpu", "probing"),
        mem_mb=configured_resource("mem_mb", "probing"),
        runtime=configured_resource("runtime", "probing"),
    params:
        probe=probing_settings(config)["probe"] if PROBING_CONFIG else {},
        device=config["device"],
        precision=config["precision"],
        code=code_of("probe_model.py"),
    script:
        "../scripts/probe_model.py"
