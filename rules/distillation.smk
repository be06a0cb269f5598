# Stage distillation (kdflow.distillation): one job per student run (experiment, task, student, method,
# grid point, seed), and the signals of TAKD's teacher assistant.


rule distill_student:
    """Train one student with one method at one grid point and seed, from cached teacher signals."""
    input:
        unpack(
            lambda w: student_inputs(
                config, w.experiment, w.task, w.student, w.method, w.point, w.seed
            )
        ),
    output:
        metrics="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/metrics.json",
        model="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/model.safetensors",
        predictions="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/predictions.parquet",
        curves="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/curves.parquet",
    log:
        "logs/distill_student/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.log",
    benchmark:
        "results/benchmarks/distill_student/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "experiments.{experiment}")
    resources:
        gpu=configured_resource("gpu", "experiments.{experiment}"),
        mem_mb=configured_resource("mem_mb", "experiments.{experiment}"),
        runtime=configured_resource("runtime", "experiments.{experiment}"),
    params:
        settings=lambda w: student_settings(
            config, w.experiment, w.task, w.student, w.method, w.point, w.seed
        ),
        device=config["device"],
        precision=config["precision"],
        code=code_of("distill_student.py"),
    script:
        "../scripts/distill_student.py"


rule compute_assistant_signals:
    """TAKD: a distilled teacher assistant's logits on the transfer set, which its student learns from."""
    input:
        unpack(
            lambda w: transfer_set_file(
                transfer_of(config["experiments"][w.experiment]), w.task
            )
        ),
        data="results/data/{task}",
        teacher=lambda w: f"results/teachers/{config['experiments'][w.experiment]['teacher']}/{w.task}/model",
        metrics="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/metrics.json",
        model="results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/model.safetensors",
    output:
        "results/students/{experiment}/{task}/{student}/{method}/{point}/seed{seed}/signals.safetensors",
    log:
        "logs/compute_assistant_signals/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.log",
    benchmark:
        "results/benchmarks/compute_assistant_signals/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "experiments.{experiment}")
    resources:
        gpu=configured_resource("gpu", "experiments.{experiment}"),
        mem_mb=configured_resource("mem_mb", "experiments.{experiment}"),
        runtime=configured_resource("runtime", "experiments.{experiment}"),
    params:
        settings=lambda w: student_settings(
            config, w.experiment, w.task, w.student, w.method, w.point, w.seed
        ),
        device=config["device"],
        precision=config["precision"],
        code=code_of("compute_assistant_signals.py"),
    script:
        "../scripts/compute_assistant_signals.py"
