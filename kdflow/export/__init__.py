"""Stage export: a distilled student leaves kdflow as a folder people load with ``transformers`` alone, with a
model card (rule export_student, docs/export.md).

- :mod:`kdflow.export.conversion`: which ``transformers`` class each student becomes, its tokenizer, and the check
  that the two predict what kdflow's student does;
- :mod:`kdflow.students.modeling_kdflow_student` (beside the students it is built of, :mod:`kdflow.students.layers`):
  the class of the students ``transformers`` has none for, copied with those layers into their folders (the two
  import nothing of kdflow);
- :mod:`kdflow.export.model_card`: the card;
- :mod:`kdflow.export.student_export`: the rule's job.
"""
