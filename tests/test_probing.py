from pathlib import Path

import numpy as np
import pytest
import torch

from kdflow.probing.probe import ProbeSettings, probe
from kdflow.probing.senteval import (
    PROBING_TASKS,
    ProbingData,
    ProbingDataError,
    ProbingSplit,
    load_probing_task,
    majority_baseline,
    morphology_baseline,
    morphology_guess,
    read_probing_file,
)

DEMO_PROBING = Path(__file__).resolve().parents[1] / "demo" / "data" / "probing"
FAST = ProbeSettings(max_epochs=40)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: one thread avoids oversubscription on shared CPUs (and gives the same numbers)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "task.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gaussian_classes(rng, n: int, means: np.ndarray, noise: float) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(len(means), size=n)
    return (means[labels] + noise * rng.normal(size=(n, means.shape[1]))).astype(np.float32), labels


# --- reader -----------------------------------------------------------------------------------------------------

def test_registry_names_the_ten_senteval_files():
    assert list(PROBING_TASKS) == ["Length", "WordContent", "Depth", "TopConstituents", "BigramShift", "Tense",
                                   "SubjNumber", "ObjNumber", "OddManOut", "CoordinationInversion"]
    assert PROBING_TASKS["Tense"] == "past_present.txt" and PROBING_TASKS["Depth"] == "tree_depth.txt"


def test_reader_splits_sentences_and_sorts_labels(tmp_path):
    path = write(tmp_path, ["tr\tPRES\tShe walks  home .", "te\tPAST\tHe ran .", "tr\tPAST\tThey  sang .",
                            "va\tPRES\tIt rains .", "tr\tPRES\tWe sit .\r"])
    data = read_probing_file(path)
    assert data.label_names == ("PAST", "PRES")
    assert data.train.sentences == ["She walks home .", "They sang .", "We sit ."]
    assert data.train.labels.tolist() == [1, 0, 1] and data.train.labels.dtype == np.int64
    assert (data.dev.sentences, data.dev.labels.tolist()) == (["It rains ."], [1])
    assert (data.test.sentences, data.test.labels.tolist()) == (["He ran ."], [0])


@pytest.mark.parametrize("lines, line_number, message", [
    (["tr\tA\tfine .", "tr\tA only two fields", "va\tA\tx .", "te\tA\ty ."], 2, "expected 3 tab-separated"),
    (["tr\tA\tfine .", "va\tA\tx .", "te\tA\ty .\textra"], 3, "expected 3 tab-separated"),
    (["tr\tA\tfine .", "dev\tA\tx .", "te\tA\ty ."], 2, "unknown split tag 'dev'"),
    (["tr\tA\tfine .", "va\tA\t  ", "te\tA\ty ."], 2, "empty label or sentence"),
    (["tr\tA\tfine .", "va\tA\tx .", "te\tB\ty ."], 3, "test label 'B' does not occur in training"),
    (["tr\tA\tfine .", "", "va\tA\tx .", "te\tA\ty ."], 2, "expected 3 tab-separated"),
])
def test_reader_rejects_malformed_lines_with_file_and_line(tmp_path, lines, line_number, message):
    path = write(tmp_path, lines)
    with pytest.raises(ProbingDataError, match=rf"{path}:{line_number}: {message}"):
        read_probing_file(path)


def test_reader_rejects_an_empty_split(tmp_path):
    path = write(tmp_path, ["tr\tA\tfine .", "te\tA\ty ."])
    with pytest.raises(ProbingDataError, match=rf"{path}: the dev split is empty"):
        read_probing_file(path)


@pytest.mark.parametrize("task", list(PROBING_TASKS))
def test_demo_fixtures_load(task):
    data = load_probing_task(task, DEMO_PROBING)
    assert (len(data.train.sentences), len(data.dev.sentences), len(data.test.sentences)) == (60, 20, 20)
    assert len(data.label_names) >= 2


def test_unknown_task_is_rejected():
    with pytest.raises(ValueError, match="unknown probing task 'Voice'"):
        load_probing_task("Voice", DEMO_PROBING)


# --- probe ------------------------------------------------------------------------------------------------------

def test_probe_learns_a_separable_problem():
    rng = np.random.default_rng(0)
    means = 3 * np.eye(3, 8)
    result = probe(*gaussian_classes(rng, 240, means, 0.5), *gaussian_classes(rng, 60, means, 0.5),
                   *gaussian_classes(rng, 60, means, 0.5), FAST)
    assert result["test_accuracy"] >= 0.95
    assert len(result["configs"]) == 9
    assert {(c["hidden_size"], c["dropout"]) for c in result["configs"]} == set(FAST.grid)


def test_probe_is_near_chance_on_shuffled_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 8)).astype(np.float32)
    y = rng.integers(2, size=700)
    result = probe(X[:300], y[:300], X[300:400], y[300:400], X[400:], y[400:], FAST)
    assert 0.4 <= result["test_accuracy"] <= 0.6


def test_selection_uses_dev_only():
    """Test = dev with flipped binary labels, so each config's test accuracy is 1 - its dev accuracy:
    the dev-best config is the test-worst one, and it must still be the one reported."""
    rng = np.random.default_rng(2)
    w = rng.normal(size=16)
    X = rng.normal(size=(500, 16)).astype(np.float32)
    y = (X @ w + 2 * rng.normal(size=500) > 0).astype(np.int64)
    result = probe(X[:300], y[:300], X[300:], y[300:], X[300:], 1 - y[300:], FAST)
    dev = [c["dev_accuracy"] for c in result["configs"]]
    test = [c["test_accuracy"] for c in result["configs"]]
    assert len(set(dev)) > 1  # the construction only discriminates when configs differ on dev
    assert np.allclose(test, 1 - np.array(dev))
    best = result["configs"][int(np.argmax(dev))]
    assert result["selected"] == {"hidden_size": best["hidden_size"], "dropout": best["dropout"]}
    assert result["dev_accuracy"] == max(dev)
    assert result["test_accuracy"] == best["test_accuracy"] == min(test) < max(test)


@pytest.fixture(scope="module")
def noisy_problem():
    rng = np.random.default_rng(3)
    means = rng.normal(size=(3, 12))
    return [part for n in (300, 100, 100) for part in gaussian_classes(rng, n, means, 1.5)]


@pytest.mark.parametrize("hidden_size, dropout", [(50, 0.2), (100, 0.0), (200, 0.1)])
def test_a_config_trained_alone_matches_the_batched_grid(noisy_problem, hidden_size, dropout):
    grid = probe(*noisy_problem, FAST)
    alone = probe(*noisy_problem, ProbeSettings(max_epochs=40, hidden_sizes=(hidden_size,), dropouts=(dropout,)))
    batched = next(c for c in grid["configs"] if (c["hidden_size"], c["dropout"]) == (hidden_size, dropout))
    assert alone["configs"] == [batched]


def test_early_stopping_counts_consecutive_checks_without_improvement(noisy_problem):
    result = probe(*noisy_problem, ProbeSettings(max_epochs=200, tenacity=3))
    for config in result["configs"]:
        assert config["epochs_trained"] - config["best_epoch"] == 3
    capped = probe(*noisy_problem, ProbeSettings(max_epochs=6, epochs_per_check=4, tenacity=50))
    for config in capped["configs"]:
        assert config["epochs_trained"] == 6 and config["best_epoch"] in (4, 6)


def test_probe_is_deterministic(noisy_problem):
    settings = ProbeSettings(max_epochs=5, hidden_sizes=(50,))
    assert probe(*noisy_problem, settings) == probe(*noisy_problem, settings)


def test_probe_rejects_mismatched_inputs():
    X, y = np.zeros((4, 3)), np.zeros(4, dtype=int)
    with pytest.raises(ValueError, match="expected encodings"):
        probe(X, y, np.zeros((2, 5)), np.zeros(2, dtype=int), X, y)
    with pytest.raises(ValueError, match="dropout rates"):
        ProbeSettings(dropouts=(1.0,))


# --- baselines --------------------------------------------------------------------------------------------------

def test_majority_baseline():
    assert majority_baseline(np.array([0, 1, 1, 2]), np.array([1, 1, 0, 2, 1])) == pytest.approx(3 / 5)
    assert majority_baseline(np.array([2, 1, 2, 1]), np.array([1, 2, 2])) == pytest.approx(1 / 3)  # tie -> id 1


def test_morphology_guess_looks_at_any_word():
    sentences = ["He walked home .", "She sees the cats .", "The men and the child sit .", "Children sing ."]
    assert morphology_guess(sentences, "Tense") == ["PAST", "PRES", "PAST", "PRES"]  # "and" ends in d
    assert morphology_guess(sentences, "SubjNumber") == ["NN", "NNS", "NN", "NN"]
    with pytest.raises(ValueError, match="no morphology guess for 'Length'"):
        morphology_guess(sentences, "Length")


def test_morphology_baseline_scores_the_test_split():
    unused = ProbingSplit(["x ."], np.array([0]))
    test = ProbingSplit(["The dogs bark .", "A dog barks .", "The men sleep .", "A cat sleeps ."],
                        np.array([1, 0, 1, 0]))  # NN, NNS as in SentEval's subj_number.txt
    data = ProbingData(("NN", "NNS"), unused, unused, test)
    # guesses: NNS (right), NNS (wrong), NN (wrong), NNS (wrong)
    assert morphology_baseline("SubjNumber", data) == pytest.approx(1 / 4)
