# Stage export (kdflow.export): models as people run them. A selected student as a folder that transformers loads
# without kdflow, with its tokenizer and model card (docs/export.md): those the config's `export` lists are default
# targets, any other is asked for by path, results/export/{experiment}/{task}/{student}/{method}. And a model's
# inference cost in PyTorch and ONNX Runtime (thesis Table 5.2), which the paper tables read.


rule export_student:
    """The student an experiment selected for a task, student and method (the selected grid point's best-dev
    seed, as glue_submission takes it) as a save_pretrained folder with its tokenizer, a model card and
    kdflow.json, checked on every dev example against kdflow's own predictions before it is written.
    """
    input:
        unpack(
            lambda w: export_inputs(config, w.experiment, w.task, w.student, w.method)
        ),
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
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        export=lambda w: export_params(
            config, w.experiment, w.task, w.student, w.method
        ),
        config_files=[
            os.path.relpath(path) for path in workflow.config_settings.configfiles
        ],
        replace_config=workflow.config_settings.replace_workflow_config,
        config_overrides=dict(workflow.config_settings.config),
        code=code_of("export_student.py"),
    script:
        "../scripts/export_student.py"


rule measure_inference:
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
        model=lambda w: model_params(config, w.model),
        batch_size=256,
        code=code_of("measure_inference.py"),
    script:
        "../scripts/measure_inference.py"
