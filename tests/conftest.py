from pathlib import Path

import pytest

from kdflow.data import TaskData, prepare_task
from kdflow.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
DEMO_DATA = REPO / "demo" / "data"
DEMO_VOCAB = REPO / "demo" / "vocab.txt"


def demo_task_dir(task_name: str) -> Path:
    task = get_task(task_name)
    return DEMO_DATA / "sara" if task.source == "sara" else DEMO_DATA / "glue" / task.tsv_dir


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """Prepare a demo task once per session: prepared("sst2") -> TaskData."""
    cache = {}

    def get(task_name: str) -> TaskData:
        if task_name not in cache:
            out = tmp_path_factory.mktemp("data") / task_name
            prepare_task(get_task(task_name), demo_task_dir(task_name), out)
            cache[task_name] = TaskData.load(out)
        return cache[task_name]

    return get


TINY_BERT = {
    "architecture": {
        "model_type": "bert",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
    },
    "tokenizer": str(DEMO_VOCAB),
}
