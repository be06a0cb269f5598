"""Students: one module per architecture, each registering a builder in :mod:`kdflow.students.registry`.

Adding a student is one module here with a ``@register("name")`` builder, imported below, plus a config entry.
Importing anything of this package imports every member, so the registry is always full, and a rule's code
fingerprint (:mod:`kdflow.workflow.provenance`) covers every student its script could build, but a student job's
(:func:`kdflow.workflow.provenance.job_fingerprint`), which counts its own student type's module alone.
"""

from kdflow.students import convolutional, recurrent, transformer  # noqa: F401  (they register themselves)
