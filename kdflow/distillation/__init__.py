"""Stage 6 (after students), distillation: the methods, the student job, TAKD assistants, dev-only selection and
the named models of the DAG."""
