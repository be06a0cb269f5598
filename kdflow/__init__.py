"""kdflow: knowledge distillation from BERT-family teachers, as one reproducible Snakemake workflow.

The package mirrors the DAG. Its subpackages are stages in the order data flows, and a module imports only from
its own stage and earlier ones (tests/test_package.py checks it), so a rule's code fingerprint holds only the
code its script runs:

    core          tasks, prepared data, metrics, atomic outputs, errors, hyperparameters, process set-up
    workflow      config -> job settings, code fingerprints, the methods/students catalog (torch-free)
    training      the one training loop, batches, checkpoints, the task loss, predictions, multi-GPU launch
    teachers      fine-tuning, per-layer pseudo-heads
    transfer      transfer sets (train, GPT-2 augmented) and the teacher's signals on them
    students      the student registry and architectures
    distillation  the method registry and methods, the student job, TAKD assistants, selection, named models
    probing       SentEval's tasks, per-layer encodings, the probe
    analysis      prediction analysis, inference cost, layer attention
    reporting     tables, paper tables, figures, GLUE submission files, report pages
"""

__version__ = "0.1.0"
