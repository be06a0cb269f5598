"""Distillation methods: each module registers its methods in :mod:`kdflow.distillation.methods.registry`.

Adding a method is one ``@register("name")`` class in a module here, imported below, plus a config entry.
Importing anything of this package imports every member, so the registry is always full; a student job's code
fingerprint (:func:`kdflow.workflow.provenance.job_fingerprint`) counts the module of its own method alone.
"""

from kdflow.distillation.methods import hidden_methods, logit_methods, output_methods  # noqa: F401  (they register themselves)
