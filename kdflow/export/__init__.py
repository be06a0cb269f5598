"""Stage export: a distilled student leaves kdflow as a folder people load with ``transformers`` alone, with a
model card (rule export_student, docs/export.md).

- :mod:`kdflow.export.conversion`: which ``transformers`` class each student becomes, its tokenizer, and the check
  that the two predict what kdflow's student does;
- :mod:`kdflow.export.modeling_kdflow_student`: the class of the students ``transformers`` has none for, copied
  into their folders (it imports nothing of kdflow);
- :mod:`kdflow.export.model_card`: the card;
- :mod:`kdflow.export.student_export`: the rule's job.
"""
