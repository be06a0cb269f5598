"""The names of the files inside a run's folder (a teacher's, its pseudo-heads', a generator's, a student's, an
export's), each spelled once: kdflow.workflow.results_paths composes its templates from them, and the stages that
write or read a run folder name its files with them, so that renaming one is an edit here
(tests/test_results_paths.py finds any spelled elsewhere).

Here, not in kdflow.workflow, because the training stages may not import the workflow layer (their modules are in
the training jobs' code fingerprints). Torch-free and importing nothing.
"""

METRICS = "metrics.json"  # a run's scores, with what it ran with (its settings and training record)
PREDICTIONS = "predictions.parquet"  # dev logits and test predictions (kdflow.training.predictions)
CURVES = "curves.parquet"  # learning curves (kdflow.training.curves)
STUDENT_WEIGHTS = "model.safetensors"  # a student's trained weights, its method's trainable parts with them
PSEUDO_HEADS = "heads.safetensors"  # a teacher's classifier per layer (kdflow.teachers.pseudo_heads)
PSEUDO_HEADS_PREDICTIONS = "dev_predictions.parquet"  # each pseudo-head's dev predictions
ASSISTANT_SIGNALS = "signals.safetensors"  # TAKD: a teacher assistant's logits, for its student
TRAINING_RECORD = "training.json"  # in a saved model's folder: how the weights beside it were trained
DATA_META = "meta.json"  # beside a task's prepared splits: label names, split sizes, source files
EXPORT_RECORD = "kdflow.json"  # beside an exported model: what its card says, for programs
MODEL_CARD = "README.md"  # an exported model's card, where the Hugging Face hub reads it
ONNX_MODEL = "model.onnx"  # an exported model for ONNX Runtime
