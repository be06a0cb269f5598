# Stage teachers (kdflow.teachers): fine-tuned teachers and their pseudo classifiers on every layer
# (Universal-KD §4.1).


rule finetune_teacher:
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
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "teachers.{teacher}")
    resources:
        gpu=configured_resource("gpu", "teachers.{teacher}"),
        mem_mb=configured_resource("mem_mb", "teachers.{teacher}"),
        runtime=configured_resource("runtime", "teachers.{teacher}"),
    params:
        settings=teacher_params,
        device=config["device"],
        precision=config["precision"],
        code=code_of("finetune_teacher.py"),
    script:
        "../scripts/finetune_teacher.py"


rule evaluate_teacher:
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
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "teachers.{teacher}")
    resources:
        gpu=one_process_gpu(configured_resource("gpu", "teachers.{teacher}")),
        mem_mb=configured_resource("mem_mb", "teachers.{teacher}"),
        runtime=configured_resource("runtime", "teachers.{teacher}"),
    params:
        device=config["device"],
        precision=config["precision"],
        code=code_of("evaluate_teacher.py"),
    script:
        "../scripts/evaluate_teacher.py"


rule train_pseudo_heads:
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
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "teachers.{teacher}")
    resources:
        gpu=one_process_gpu(configured_resource("gpu", "teachers.{teacher}")),
        mem_mb=configured_resource("mem_mb", "teachers.{teacher}"),
        runtime=configured_resource("runtime", "teachers.{teacher}"),
    params:
        settings=lambda w: pseudo_head_job_settings(config, w.teacher, w.task),
        device=config["device"],
        precision=config["precision"],
        code=code_of("train_pseudo_heads.py"),
    script:
        "../scripts/train_pseudo_heads.py"


rule evaluate_pseudo_heads:
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
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "teachers.{teacher}")
    resources:
        gpu=one_process_gpu(configured_resource("gpu", "teachers.{teacher}")),
        mem_mb=configured_resource("mem_mb", "teachers.{teacher}"),
        runtime=configured_resource("runtime", "teachers.{teacher}"),
    params:
        device=config["device"],
        precision=config["precision"],
        code=code_of("evaluate_pseudo_heads.py"),
    script:
        "../scripts/evaluate_pseudo_heads.py"
