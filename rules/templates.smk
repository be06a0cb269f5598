# The templates every rule is made from (`use rule kdflow_job as <rule> with:`), so that a rule states only what is
# its own. A rule made from one runs in kdflow's conda environment, on one thread, with a small CPU job's memory
# (MB) and time (minutes) unless it says otherwise, and runs the script its `**runs("<script>.py")` params name.
# kdflow_device_job adds the config's device and precision, params of every rule that runs a model. Neither is a
# job: they have no output. `runs` is in common.smk; the resources a rule reads from the config, in
# kdflow.workflow.job_resources.


rule kdflow_job:
    log:
        "logs/templates/kdflow_job.log",  # every rule names its own; Snakemake's lint asks the templates for one
    conda:
        "../envs/kdflow.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/{params.script}"


use rule kdflow_job as kdflow_device_job with:
    params:
        device=config["device"],
        precision=config["precision"],
