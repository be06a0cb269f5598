# Stage probing (kdflow.probing): SentEval probing (thesis §3.3, §4.3.6, §6.1) of the models named in
# `probing.models`: every layer's encodings are computed once per model and task, then the whole
# nhid x dropout x L2 grid probes each layer.


use rule kdflow_job as download_probing_task with:
    """SentEval's probing file, when `probing.data_dir` is null (a local copy is read in place)."""
    output:
        "resources/senteval_probing/{filename}",
    log:
        "logs/download_probing_task/{filename}.log",
    benchmark:
        paths.benchmark("download_probing_task/{filename}")
    wildcard_constraints:
        filename="|".join(PROBING_TASKS.values()),
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **runs("download_probing_task.py"),


use rule kdflow_device_job as encode_probing_tasks with:
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
    threads: configured_resource(config, "threads", "probing")
    resources:
        **configured_resources(config, "probing"),
    params:
        **runs("encode_probing_tasks.py"),
        model=lambda w: model_params(config, w.model),
        settings=probing_settings(config) if PROBING_CONFIG else {},


use rule kdflow_device_job as probe_model with:
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
    threads: configured_resource(config, "threads", "probing")
    resources:
        **configured_resources(config, "probing"),
    params:
        **runs("probe_model.py"),
        probe=probing_settings(config)["probe"] if PROBING_CONFIG else {},
