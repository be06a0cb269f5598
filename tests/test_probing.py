from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from kdflow.probing.encodings import SPLITS
from kdflow.probing.probe import ProbeGrid, ProbeSettings, probe, probe_encodings
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
    assert len(result["configs"]) == 3 * 3 * 4
    assert [(c["hidden_size"], c["dropout"], c["l2"]) for c in result["configs"]] == FAST.grid


def test_probe_is_near_chance_on_shuffled_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 8)).astype(np.float32)
    y = rng.integers(2, size=700)
    result = probe(X[:300], y[:300], X[300:400], y[300:400], X[400:], y[400:], FAST)
    assert 0.4 <= result["test_accuracy"] <= 0.6


def test_selection_uses_dev_only():
    """Test = dev with flipped binary labels, so each config's test accuracy is 1 - its dev accuracy:
    the dev-best config (over width, dropout and L2) is the test-worst one, and it must still be the one reported."""
    rng = np.random.default_rng(2)
    w = rng.normal(size=16)
    X = rng.normal(size=(500, 16)).astype(np.float32)
    y = (X @ w + 2 * rng.normal(size=500) > 0).astype(np.int64)
    result = probe(X[:300], y[:300], X[300:], y[300:], X[300:], 1 - y[300:], FAST)
    dev = [c["dev_accuracy"] for c in result["configs"]]
    test = [c["test_accuracy"] for c in result["configs"]]
    by_l2 = {}
    for c in result["configs"]:
        by_l2.setdefault((c["hidden_size"], c["dropout"]), set()).add(c["dev_accuracy"])
    assert any(len(accuracies) > 1 for accuracies in by_l2.values())  # the L2 search changes dev accuracy
    assert np.allclose(test, 1 - np.array(dev))
    best = result["configs"][int(np.argmax(dev))]
    assert result["selected"] == {"hidden_size": best["hidden_size"], "dropout": best["dropout"], "l2": best["l2"]}
    assert result["dev_accuracy"] == max(dev)
    assert result["test_accuracy"] == best["test_accuracy"] == min(test) < max(test)


@pytest.fixture
def scripted_dev(monkeypatch):
    """Make the probe's dev checks return given accuracy rows in turn (the last one repeated); records the calls
    (the final test evaluation included)."""
    calls = []

    def install(rows: list[list[float]]) -> list:
        def accuracies(model, x, y):
            calls.append(len(x))
            return np.array(rows[min(len(calls), len(rows)) - 1], dtype=float)
        monkeypatch.setattr(ProbeGrid, "accuracies", accuracies)
        return calls
    return install


TINY = (np.eye(4, 3, dtype=np.float32), np.array([0, 1, 0, 1]))  # one mini-batch per epoch: cheap epochs
TWO_CONFIGS = ProbeSettings(hidden_sizes=(5,), dropouts=(0.0, 0.1), l2_penalties=(0.0,), tenacity=2)
# dev accuracy at checks after 4, 8, ... epochs: config A improves between misses, config B never after its first
A_AND_B = [[.5, .5], [.6, .5], [.6, .5], [.7, .5], [.65, .5], [.8, .5], [.7, .5], [.7, .5], [.7, .5]]


def test_senteval_stopping_checks_every_4_epochs_and_stops_at_the_miss_after_tenacity(scripted_dev):
    calls = scripted_dev(A_AND_B)
    result = probe(*TINY, *TINY, *TINY, TWO_CONFIGS)
    a, b = result["configs"]
    # A: misses at 12, 20 (count never reset by the improvements at 16 and 24), 28: the third miss stops it
    assert (a["dev_accuracy"], a["best_epoch"], a["epochs_trained"]) == (.8, 24, 28)
    # B: improves at 4, misses at 8, 12, 16: stopped at the third miss
    assert (b["dev_accuracy"], b["best_epoch"], b["epochs_trained"]) == (.5, 4, 16)
    assert len(calls) == 28 // 4 + 1  # one dev check per 4 epochs, then the test split


def test_consecutive_stopping_resets_on_improvement(scripted_dev):
    scripted_dev(A_AND_B)
    result = probe(*TINY, *TINY, *TINY, replace(TWO_CONFIGS, early_stopping="consecutive"))
    a, b = result["configs"]
    assert (a["best_epoch"], a["epochs_trained"]) == (24, 32)  # misses at 28 and 32 are the first consecutive two
    assert (b["best_epoch"], b["epochs_trained"]) == (4, 12)


def test_max_epochs_bounds_the_epochs_before_a_check(scripted_dev):
    """As SentEval's ``while nepoch <= max_epoch``: a chunk of 4 epochs starts while at most max_epochs are done."""
    scripted_dev([[0.1 * check] * 2 for check in range(1, 10)])
    result = probe(*TINY, *TINY, *TINY, replace(TWO_CONFIGS, max_epochs=10))
    assert [(c["best_epoch"], c["epochs_trained"]) for c in result["configs"]] == [(12, 12)] * 2


def test_selection_takes_the_first_dev_best_of_width_dropout_l2(scripted_dev):
    settings = ProbeSettings(max_epochs=1)
    grid = settings.grid
    dev = np.full(len(grid), 0.5)
    dev[grid.index((100, 0.1, 1e-3))] = dev[grid.index((200, 0.0, 1e-5))] = dev[grid.index((200, 0.2, 1e-2))] = 0.9
    scripted_dev([list(dev)])
    result = probe(*TINY, *TINY, *TINY, settings)
    assert result["selected"] == {"hidden_size": 100, "dropout": 0.1, "l2": 1e-3}
    assert result["dev_accuracy"] == 0.9


def test_a_probe_steps_as_sentevals_mlp_with_adam_weight_decay():
    """SentEval's nn.Sequential(Linear, Sigmoid, Linear) (dropout 0), batch-mean cross-entropy and
    Adam(weight_decay=l2) take the same steps as the probe grid's model with its L2 gradients."""
    l2 = 0.5  # large, so that any other way of applying it (none, decoupled, summed loss) shows
    grid = ProbeGrid(5, 3, ProbeSettings(hidden_sizes=(7,), dropouts=(0.0,), l2_penalties=(l2,)),
                     np.random.SeedSequence(0))
    group = grid.groups[0]
    reference = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Sigmoid(), torch.nn.Linear(7, 3))
    with torch.no_grad():
        for layer, weight, bias in ((reference[0], group.w1, group.b1), (reference[2], group.w2, group.b2)):
            layer.weight.copy_(weight[0].T)
            layer.bias.copy_(bias[0])
    ours = torch.optim.Adam(grid.parameters(), lr=1e-2)
    senteval = torch.optim.Adam(reference.parameters(), lr=1e-2, weight_decay=l2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        x, y = torch.randn(16, 5, generator=generator), torch.randint(3, (16,), generator=generator)
        ours.zero_grad()
        torch.nn.functional.cross_entropy(grid(x)[0], y).backward()
        grid.add_l2_gradients()
        ours.step()
        senteval.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        senteval.step()
    assert torch.allclose(group.w1[0].T, reference[0].weight, atol=1e-6)
    assert torch.allclose(grid(x)[0], reference(x), atol=1e-6)


def test_dropout_acts_before_the_sigmoid():
    """As SentEval's Linear -> Dropout -> Sigmoid: a dropped unit outputs sigmoid(0) = 0.5."""
    grid = ProbeGrid(4, 2, ProbeSettings(hidden_sizes=(6,), dropouts=(0.5,), l2_penalties=(0.0,)),
                     np.random.SeedSequence(0))
    group = grid.groups[0]
    x = torch.randn(3, 4)
    all_dropped = grid(x, dropout_noise=torch.zeros(3, 6))[0]
    assert torch.allclose(all_dropped, (0.5 * group.w2[0].sum(0) + group.b2[0]).expand(3, 2))


@pytest.fixture(scope="module")
def noisy_problem():
    rng = np.random.default_rng(3)
    means = rng.normal(size=(3, 12))
    return [part for n in (300, 100, 100) for part in gaussian_classes(rng, n, means, 1.5)]


WITH_LOGISTIC_REGRESSION = ProbeSettings(max_epochs=40, hidden_sizes=(0, 50, 100, 200))


@pytest.fixture(scope="module")
def batched_grid(noisy_problem):
    return probe(*noisy_problem, WITH_LOGISTIC_REGRESSION)


@pytest.mark.parametrize("hidden_size, dropout, l2", [(0, 0.0, 1e-3), (50, 0.2, 1e-5), (100, 0.0, 1e-2),
                                                      (200, 0.1, 1e-4)])
def test_a_config_trained_alone_matches_the_batched_grid(noisy_problem, batched_grid, hidden_size, dropout, l2):
    alone = probe(*noisy_problem, replace(WITH_LOGISTIC_REGRESSION, hidden_sizes=(hidden_size,), dropouts=(dropout,),
                                          l2_penalties=(l2,)))
    batched = next(c for c in batched_grid["configs"] if (c["hidden_size"], c["dropout"], c["l2"]) == (hidden_size,
                                                                                                         dropout, l2))
    assert alone["configs"] == [batched]
    assert batched["epochs_trained"] % 4 == 0 and batched["best_epoch"] % 4 == 0


def test_word_content_is_probed_by_logistic_regression(tmp_path):
    rng = np.random.default_rng(4)
    means = 3 * np.eye(2, 6)
    splits = [gaussian_classes(rng, n, means, 0.5) for n in (60, 20, 20)]
    path = tmp_path / "encodings.safetensors"
    save_file({f"layer0.{split}": torch.from_numpy(X) for split, (X, _) in zip(SPLITS, splits)}, str(path),
              metadata={"layers": "1", "first_layer": "0", "pooling": "mean"})
    data = ProbingData(("A", "B"), *(ProbingSplit(["x ."] * len(y), y) for _, y in splits))
    settings = ProbeSettings(max_epochs=8)
    word_content = probe_encodings(path, "WordContent", data, settings)["layers"][0]
    assert [(c["hidden_size"], c["dropout"], c["l2"]) for c in word_content["configs"]] == [
        (0, 0.0, l2) for l2 in settings.l2_penalties]
    assert word_content["selected"]["hidden_size"] == 0 and word_content["test_accuracy"] >= 0.9
    depth = probe_encodings(path, "Depth", data, settings)["layers"][0]
    assert [(c["hidden_size"], c["dropout"], c["l2"]) for c in depth["configs"]] == settings.grid
    as_mlp = probe_encodings(path, "WordContent", data, replace(settings, logistic_regression_tasks=()))
    assert len(as_mlp["layers"][0]["configs"]) == len(settings.grid)


def test_probe_is_deterministic(noisy_problem):
    settings = ProbeSettings(max_epochs=5, hidden_sizes=(50,))
    assert probe(*noisy_problem, settings) == probe(*noisy_problem, settings)


def test_probe_rejects_mismatched_inputs():
    X, y = np.zeros((4, 3)), np.zeros(4, dtype=int)
    with pytest.raises(ValueError, match="expected encodings"):
        probe(X, y, np.zeros((2, 5)), np.zeros(2, dtype=int), X, y)
    with pytest.raises(ValueError, match="dropout rates"):
        ProbeSettings(dropouts=(1.0,))
    with pytest.raises(ValueError, match="L2 penalties"):
        ProbeSettings(l2_penalties=(-1e-4,))
    with pytest.raises(ValueError, match="early_stopping must be one of"):
        ProbeSettings(early_stopping="patience")


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
