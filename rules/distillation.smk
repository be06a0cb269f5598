# Stage distillation (kdflow.distillation): one job per student run (experiment, task, student, method,
# grid point, seed), the signals of TAKD's teacher assistant, and each experiment's dev selection.


use rule kdflow_device_job as distill_student with:
    """Train one student with one method at one grid point and seed, from cached teacher signals; a student a pack
    trains (config student_packs) takes its files from the pack's folder."""
    input:
        unpack(lambda w: packs.distill_inputs(config, w.experiment, w.task, w.student, w.method, w.point, w.seed)),
    output:
        metrics=paths.STUDENT_METRICS,
        model=paths.STUDENT_MODEL,
        predictions=paths.STUDENT_PREDICTIONS,
        curves=paths.STUDENT_CURVES,
    log:
        "logs/distill_student/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.log",
    benchmark:
        paths.benchmark("distill_student/{experiment}/{task}/{student}/{method}/{point}/seed{seed}")
    threads: configured_resource(config, "threads", "experiments.{experiment}")
    resources:
        gpu=packs.unless_packed(config, configured_resource(config, "gpu", "experiments.{experiment}"), 0),
        mem_mb=packs.unless_packed(config, configured_resource(config, "mem_mb", "experiments.{experiment}"), 1000),
        runtime=packs.unless_packed(config, configured_resource(config, "runtime", "experiments.{experiment}"), 5),
    params:
        **runs(
            "distill_student.py",
            members_of=lambda w: student_code_members(
                student_settings(config, w.experiment, w.task, w.student, w.method, w.point, w.seed)
            ),
        ),
        settings=lambda w: student_settings(config, w.experiment, w.task, w.student, w.method, w.point, w.seed),
        compile_step=config["compile_step"],
        pack_member=lambda w: packs.member_dir(w.point, w.seed),


use rule kdflow_device_job as distill_pack with:
    """Train a pack of students of one type and method that differ in seed, learning rate, weight decay and loss
    weights, as one computation (config student_packs, kdflow.workflow.student_packs), each into its own folder of
    the pack's."""
    input:
        unpack(lambda w: packs.pack_inputs(config, w.experiment, w.task, w.student, w.method, w.pack)),
    output:
        directory(paths.STUDENT_PACK_DIR),
    log:
        "logs/distill_pack/{experiment}/{task}/{student}/{method}/pack{pack}.log",
    benchmark:
        paths.benchmark("distill_pack/{experiment}/{task}/{student}/{method}/pack{pack}")
    threads: configured_resource(config, "threads", "experiments.{experiment}")
    resources:
        gpu=configured_resource(config, "gpu", "experiments.{experiment}"),
        mem_mb=configured_resource(config, "mem_mb", "experiments.{experiment}"),
        runtime=packs.pack_runtime(config, configured_resource(config, "runtime", "experiments.{experiment}")),
    params:
        **runs(
            "distill_pack.py",
            members_of=lambda w: student_code_members(
                packs.pack_members(config, w.experiment, w.task, w.student, w.method, w.pack)[0]["settings"]
            ),
        ),
        members=lambda w: packs.pack_members(config, w.experiment, w.task, w.student, w.method, w.pack),


use rule kdflow_device_job as compute_assistant_signals with:
    """TAKD: a distilled teacher assistant's logits on the transfer set, which its student learns from."""
    input:
        unpack(lambda w: transfer_set_file(transfer_of(config["experiments"][w.experiment]), w.task)),
        data=paths.DATA,
        teacher=lambda w: paths.TEACHER_MODEL.format(
            teacher=config["experiments"][w.experiment]["teacher"], task=w.task
        ),
        metrics=paths.STUDENT_METRICS,
        model=paths.STUDENT_MODEL,
    output:
        paths.ASSISTANT_SIGNALS,
    log:
        "logs/compute_assistant_signals/{experiment}/{task}/{student}/{method}/{point}/seed{seed}.log",
    benchmark:
        paths.benchmark("compute_assistant_signals/{experiment}/{task}/{student}/{method}/{point}/seed{seed}")
    threads: configured_resource(config, "threads", "experiments.{experiment}")
    resources:
        **configured_resources(config, "experiments.{experiment}"),
    params:
        **runs("compute_assistant_signals.py"),
        settings=lambda w: student_settings(config, w.experiment, w.task, w.student, w.method, w.point, w.seed),


use rule kdflow_job as select_students with:
    """Per task, student and method of an experiment, the grid point with the best mean dev score over the
    selection seeds (dev only, never test), recorded with the whole grid: what probing, analysis, export and the
    experiment's table read."""
    input:
        unpack(lambda w: selection_inputs(config, w.experiment)),
    output:
        paths.SELECTION,
    log:
        "logs/select_students/{experiment}.log",
    benchmark:
        paths.benchmark("select_students/{experiment}")
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        **runs("select_students.py"),
        runs=lambda w: selection_params(config, w.experiment),
