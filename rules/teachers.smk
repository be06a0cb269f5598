# Stage teachers (kdflow.teachers): fine-tuned teachers and their pseudo classifiers on every layer
# (Universal-KD §4.1).


use rule kdflow_device_job as finetune_teacher with:
    """Fine-tune a teacher on a task and keep the best dev epoch's model, with its training record
    (model/training.json). The model alone: what describes it is evaluate_teacher's, so that losing a
    description re-evaluates the teacher instead of fine-tuning it again and re-distilling its students.
    """
    input:
        data=paths.DATA,
    output:
        model=directory(paths.TEACHER_MODEL),
    log:
        "logs/finetune_teacher/{teacher}/{task}.log",
    benchmark:
        paths.benchmark("finetune_teacher/{teacher}/{task}")
    threads: configured_resource(config, "threads", "teachers.{teacher}")
    resources:
        **configured_resources(config, "teachers.{teacher}"),
    params:
        **runs("finetune_teacher.py"),
        settings=teacher_params,


use rule kdflow_device_job as evaluate_teacher with:
    """Score a fine-tuned teacher on dev and test: its metrics (with the training record), dev logits and test
    predictions, and its learning curves."""
    input:
        data=paths.DATA,
        model=paths.TEACHER_MODEL,
    output:
        predictions=paths.TEACHER_PREDICTIONS,
        metrics=paths.TEACHER_METRICS,
        curves=paths.TEACHER_CURVES,
    log:
        "logs/evaluate_teacher/{teacher}/{task}.log",
    benchmark:
        paths.benchmark("evaluate_teacher/{teacher}/{task}")
    threads: configured_resource(config, "threads", "teachers.{teacher}")
    resources:
        **configured_resources(config, "teachers.{teacher}", one_process=True),
    params:
        **runs("evaluate_teacher.py"),


use rule kdflow_device_job as train_pseudo_heads with:
    """Train one classifier per teacher layer on the frozen teacher (Universal-KD §4.1, §5.2). The heads
    alone: what describes them is evaluate_pseudo_heads', so that losing a description re-evaluates the heads
    instead of retraining them and re-distilling every student that learns from them."""
    input:
        data=paths.DATA,
        model=paths.TEACHER_MODEL,
    output:
        heads=paths.PSEUDO_HEADS,
    log:
        "logs/train_pseudo_heads/{teacher}/{task}.log",
    benchmark:
        paths.benchmark("train_pseudo_heads/{teacher}/{task}")
    threads: configured_resource(config, "threads", "teachers.{teacher}")
    resources:
        **configured_resources(config, "teachers.{teacher}", one_process=True),
    params:
        **runs("train_pseudo_heads.py"),
        settings=lambda w: pseudo_head_job_settings(config, w.teacher, w.task),


use rule kdflow_device_job as evaluate_pseudo_heads with:
    """Score the pseudo-heads on dev layer by layer (Universal-KD Fig. 3, left), with their training record."""
    input:
        data=paths.DATA,
        model=paths.TEACHER_MODEL,
        heads=paths.PSEUDO_HEADS,
    output:
        predictions=paths.PSEUDO_HEADS_PREDICTIONS,
        metrics=paths.PSEUDO_HEADS_METRICS,
        curves=paths.PSEUDO_HEADS_CURVES,
    log:
        "logs/evaluate_pseudo_heads/{teacher}/{task}.log",
    benchmark:
        paths.benchmark("evaluate_pseudo_heads/{teacher}/{task}")
    threads: configured_resource(config, "threads", "teachers.{teacher}")
    resources:
        **configured_resources(config, "teachers.{teacher}", one_process=True),
    params:
        **runs("evaluate_pseudo_heads.py"),
