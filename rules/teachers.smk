# Stage teachers (kdflow.teachers): fine-tuned teachers and their pseudo classifiers on every layer
# (Universal-KD §4.1).


rule finetune_teacher:
    """Fine-tune a teacher on a task and keep the best dev epoch's model, with its training record
    (model/training.json). The model alone: what describes it is evaluate_teacher's, so that losing a
    description re-evaluates the teacher instead of fine-tuning it again and re-distilling its students.
    """
    input:
        data="results/data/{task}",
    output:
        model=directory("results/teachers/{teacher}/{task}/model"),
    log:
        "logs/finetune_teacher/{teacher}/{task}.log",
    benchmark:
        "results/benchmarks/finetune_teacher/{teacher}/{task}.tsv"
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
        data="results/data/{task}",
        model="results/teachers/{teacher}/{task}/model",
    output:
        predictions="results/teachers/{teacher}/{task}/predictions.parquet",
        metrics="results/teachers/{teacher}/{task}/metrics.json",
        curves="results/teachers/{teacher}/{task}/curves.parquet",
    log:
        "logs/evaluate_teacher/{teacher}/{task}.log",
    benchmark:
        "results/benchmarks/evaluate_teacher/{teacher}/{task}.tsv"
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
        data="results/data/{task}",
        model="results/teachers/{teacher}/{task}/model",
    output:
        heads="results/pseudo_heads/{teacher}/{task}/heads.safetensors",
    log:
        "logs/train_pseudo_heads/{teacher}/{task}.log",
    benchmark:
        "results/benchmarks/train_pseudo_heads/{teacher}/{task}.tsv"
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
        data="results/data/{task}",
        model="results/teachers/{teacher}/{task}/model",
        heads="results/pseudo_heads/{teacher}/{task}/heads.safetensors",
    output:
        predictions="results/pseudo_heads/{teacher}/{task}/dev_predictions.parquet",
        metrics="results/pseudo_heads/{teacher}/{task}/metrics.json",
        curves="results/pseudo_heads/{teacher}/{task}/curves.parquet",
    log:
        "logs/evaluate_pseudo_heads/{teacher}/{task}.log",
    benchmark:
        "results/benchmarks/evaluate_pseudo_heads/{teacher}/{task}.tsv"
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
