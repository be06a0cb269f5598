# Stage export (kdflow.export): models as people run them. A selected student as a folder that transformers loads
# without kdflow, with its tokenizer and model card (docs/export.md): those the config's `export` lists are default
# targets, any other is asked for by path, results/export/{experiment}/{task}/{student}/{method}. And a model's
# inference cost in PyTorch and ONNX Runtime (thesis Table 5.2), which the paper tables read.


use rule kdflow_job as export_student with:
    """The student an experiment selected for a task, student and method (the selected grid point's best-dev
    seed, as glue_submission takes it) as a save_pretrained folder with its tokenizer, a model card and
    kdflow.json, checked on every dev example against kdflow's own predictions before it is written.
    """
    input:
        unpack(lambda w: export_inputs(config, w.experiment, w.task, w.student, w.method)),
    output:
        folder=directory(paths.EXPORT),
        card=report(
            paths.EXPORT_CARD,
            caption="../report/model_card.rst",
            category=category("Experiments"),
            subcategory="{experiment}",
            labels={
                "experiment": "{experiment}",
                "result": "model card: {student} {method} on {task}",
                "format": "Markdown",
            },
        ),
    log:
        "logs/export_student/{experiment}/{task}/{student}/{method}.log",
    benchmark:
        paths.benchmark("export_student/{experiment}/{task}/{student}/{method}")
    conda:
        "../envs/onnx.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        **runs("export_student.py"),
        export=lambda w: export_params(config, w.experiment, w.task, w.student, w.method),
        config_files=[os.path.relpath(path) for path in workflow.config_settings.configfiles],
        replace_config=workflow.config_settings.replace_workflow_config,
        config_overrides=dict(workflow.config_settings.config),


use rule kdflow_job as measure_inference with:
    """Non-embedding parameters and CPU milliseconds per example of a named model on its task's dev split, in
    batches of 256 (thesis Table 5.2), in PyTorch and, exported to ONNX, in ONNX Runtime on the same batches and
    threads (null with the reason where onnxruntime is not installed)."""
    input:
        unpack(lambda w: model_files(config, w.model)),
    output:
        paths.INFERENCE,
    log:
        "logs/measure_inference/{model}.log",
    benchmark:
        paths.benchmark("measure_inference/{model}")
    conda:
        "../envs/onnx.yaml"
    threads: 4
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        **runs("measure_inference.py"),
        model=lambda w: model_params(config, w.model),
        batch_size=256,
