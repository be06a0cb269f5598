rule compute_teacher_signals:
    """The frozen teacher's logits, pseudo-head outputs (and layers, if a method needs them) on the
    transfer set, computed once and shared by every student distilled from it."""
    input:
        unpack(teacher_signal_inputs),
    output:
        "results/signals/{teacher}/{task}/{transfer}.safetensors",
    log:
        "logs/compute_teacher_signals/{teacher}/{task}/{transfer}.log",
    benchmark:
        "results/benchmarks/compute_teacher_signals/{teacher}/{task}/{transfer}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: teacher_resource("threads")
    resources:
        gpu=one_process_gpu(teacher_resource("gpu")),
        mem_mb=teacher_resource("mem_mb"),
        runtime=teacher_resource("runtime"),
    params:
        include_layers=signal_layers_param,
        settings=teacher_params,
        device=config["device"],
        precision=config["precision"],
        code=code_of("compute_teacher_signals.py"),
    script:
        "../scripts/compute_teacher_signals.py"


rule distill_student:
    """Train one student with one method at one grid point and seed, from cached teacher signals."""
    input:
        unpack(student_inputs),
    output:
        metrics="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/metrics.json",
        model="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/model.safetensors",
        predictions="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/predictions.parquet",
        curves="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/curves.parquet",
    log:
        "logs/distill_student/{experiment}/{task}/{student}/{method}/{config}/seed{seed}.log",
    benchmark:
        "results/benchmarks/distill_student/{experiment}/{task}/{student}/{method}/{config}/seed{seed}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: student_resource("threads")
    resources:
        gpu=student_resource("gpu"),
        mem_mb=student_resource("mem_mb"),
        runtime=student_resource("runtime"),
    params:
        settings=student_params,
        device=config["device"],
        precision=config["precision"],
        code=code_of("distill_student.py"),
    script:
        "../scripts/distill_student.py"


rule compute_assistant_signals:
    """TAKD: a distilled teacher assistant's logits on the transfer set, which its student learns from."""
    input:
        unpack(lambda w: transfer_inputs(experiment_transfer(w), w.task)),
        data="results/data/{task}",
        teacher=lambda w: f"results/teachers/{experiment_of(w)['teacher']}/{w.task}/model",
        metrics="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/metrics.json",
        model="results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/model.safetensors",
    output:
        "results/students/{experiment}/{task}/{student}/{method}/{config}/seed{seed}/signals.safetensors",
    log:
        "logs/compute_assistant_signals/{experiment}/{task}/{student}/{method}/{config}/seed{seed}.log",
    benchmark:
        "results/benchmarks/compute_assistant_signals/{experiment}/{task}/{student}/{method}/{config}/seed{seed}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: student_resource("threads")
    resources:
        gpu=student_resource("gpu"),
        mem_mb=student_resource("mem_mb"),
        runtime=student_resource("runtime"),
    params:
        settings=student_params,
        device=config["device"],
        precision=config["precision"],
        code=code_of("compute_assistant_signals.py"),
    script:
        "../scripts/compute_assistant_signals.py"


rule select_students:
    """Per task, student and method of an experiment, the grid point with the best mean dev score over
    seeds (dev only, never test), recorded with the whole grid; and the experiment's table of the selected
    students (mean ± sample std over seeds, and the tests against the experiment's ``compare_to``).
    """
    input:
        unpack(selection_inputs),
    output:
        selection="results/selection/{experiment}.json",
        csv="results/tables/experiments/{experiment}.csv",
        markdown="results/tables/experiments/{experiment}.md",
        html=report(
            "results/report/experiment_{experiment}.html",
            caption="../report/experiment.rst",
            category="Experiments",
            labels={"experiment": "{experiment}"},
        ),
    log:
        "logs/select_students/{experiment}.log",
    benchmark:
        "results/benchmarks/select_students/{experiment}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        runs=experiment_runs_param,
        code=code_of("select_students.py"),
    script:
        "../scripts/select_students.py"


rule glue_submission:
    """GLUE test-server files (index, prediction) of the selected students of an experiment: the selected
    grid point's best-dev seed (Universal-KD Table 3 reports GLUE test scores)."""
    input:
        selection="results/selection/{experiment}.json",
        predictions=lambda w: experiment_runs(w, "predictions.parquet"),
    output:
        directory("results/glue_submission/{experiment}"),
    log:
        "logs/glue_submission/{experiment}.log",
    benchmark:
        "results/benchmarks/glue_submission/{experiment}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        run_dir=lambda w: student_file(
            "",
            experiment=w.experiment,
            task="{task}",
            student="{student}",
            method="{method}",
            config="{config}",
            seed="{seed}",
        ),
        code=code_of("glue_submission.py"),
    script:
        "../scripts/glue_submission.py"
