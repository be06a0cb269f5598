"""Write small synthetic stand-ins for SentEval's 10 probing tasks (Conneau et al. 2018; thesis §3.3).

The real probing data (120k sentences per task, drawn from the Toronto Book Corpus and parsed) is not available
offline, so the demo and the tests use sentences generated here from a tiny phrase-structure grammar. Every file
has SentEval's name and format (``tr|va|te<TAB>label<TAB>tokenised sentence``, train block then dev then test)
and SentEval's label names; labels are balanced and every label occurs in every split. Labels that describe
syntax (Depth, TopConstituents) are computed from the generated tree, not assumed.

    python tools/make_probing_fixtures.py --out demo/data/probing

The output is deterministic. Needs only the standard library and numpy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SEED = 0
SIZES = {"tr": 60, "va": 20, "te": 20}

SUBJECTS = [("man", "men"), ("woman", "women"), ("child", "children"), ("dog", "dogs"), ("teacher", "teachers"),
            ("farmer", "farmers"), ("girl", "girls"), ("boy", "boys"), ("doctor", "doctors"), ("cat", "cats")]
OBJECTS = [("book", "books"), ("letter", "letters"), ("box", "boxes"), ("car", "cars"), ("house", "houses"),
           ("key", "keys"), ("song", "songs"), ("apple", "apples"), ("mouse", "mice"), ("glass", "glasses")]
VERBS = [("see", "sees", "saw"), ("take", "takes", "took"), ("find", "finds", "found"),
         ("watch", "watches", "watched"), ("carry", "carries", "carried"), ("open", "opens", "opened"),
         ("move", "moves", "moved"), ("hold", "holds", "held"), ("bring", "brings", "brought"),
         ("push", "pushes", "pushed")]
ADJECTIVES = ["old", "small", "red", "quiet", "heavy", "strange", "bright", "wet"]
PREPOSITIONS = ["in", "near", "behind", "under", "beside"]
PLACES = ["park", "garden", "kitchen", "station", "market", "river", "forest", "street"]
ADVERBS = ["suddenly", "slowly", "often", "finally", "quietly"]
CONJUNCTIONS = ["and", "but", "so", "yet"]
TARGET_WORDS = ["violin", "harbor", "blanket", "lantern", "meadow", "pepper", "ladder", "saddle", "tunnel", "wallet"]
ODD_NOUNS = [("theorem", "theorems"), ("volcano", "volcanoes"), ("democracy", "democracies"),
             ("galaxy", "galaxies"), ("syllable", "syllables")]
ODD_VERBS = [("evaporate", "evaporates", "evaporated"), ("pronounce", "pronounces", "pronounced"),
             ("dissolve", "dissolves", "dissolved"), ("melt", "melts", "melted")]
TOP_CONSTITUENTS = ["NP_VP_.", "PP_NP_VP_.", "ADVP_NP_VP_.", "CC_NP_VP_.", "SBAR_,_NP_VP_.", "VP_.", "S_CC_S_."]

# A tree is (label, [children]) for a phrase or (tag, word) for a pre-terminal.
Tree = tuple


def words(tree: Tree) -> list[str]:
    _, content = tree
    return [content] if isinstance(content, str) else [w for child in content for w in words(child)]


def depth(tree: Tree) -> int:
    """Nodes on the longest path from the root to a word, the word included."""
    _, content = tree
    return 2 if isinstance(content, str) else 1 + max(depth(child) for child in content)


def text(tokens: list[str]) -> str:
    return " ".join([tokens[0][:1].upper() + tokens[0][1:], *tokens[1:]])


class Grammar:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, options: list):
        return options[int(self.rng.integers(len(options)))]

    def coin(self) -> bool:
        return bool(self.rng.integers(2))

    def noun_phrase(self, nouns: list, plural: bool, adjective: bool = False, noun: str | None = None) -> Tree:
        head = ("NNS" if plural else "NN", noun or self.pick(nouns)[plural])
        return "NP", [("DT", "the"), *([("JJ", self.pick(ADJECTIVES))] if adjective else []), head]

    def place(self, adjective: bool = False) -> Tree:
        return "PP", [("IN", self.pick(PREPOSITIONS)), self.noun_phrase([(p, p) for p in PLACES], False, adjective)]

    def verb_phrase(self, past: bool, plural_subject: bool, obj: Tree, modal: bool = False) -> Tree:
        base, third, past_form = self.pick(VERBS)
        if modal:
            return "VP", [("MD", "will"), ("VP", [("VB", base), obj])]
        verb = ("VBD", past_form) if past else ("VBP", base) if plural_subject else ("VBZ", third)
        return "VP", [verb, obj]

    def clause(self, past: bool | None = None, plural_subject: bool | None = None,
               plural_object: bool | None = None, places: int = 0, adjectives: int = 0) -> Tree:
        """S -> NP VP, with the subject and object NPs optionally taking one adjective each."""
        past = self.coin() if past is None else past
        plural_subject = self.coin() if plural_subject is None else plural_subject
        plural_object = self.coin() if plural_object is None else plural_object
        subject = self.noun_phrase(SUBJECTS, plural_subject, adjectives >= 1)
        obj = self.noun_phrase(OBJECTS, plural_object, adjectives >= 2)
        vp = self.verb_phrase(past, plural_subject, obj)
        vp = (vp[0], [*vp[1], *(self.place() for _ in range(places))])
        return "S", [subject, vp]

    def sentence(self, *constituents: Tree) -> list[str]:
        return words(("S", [*constituents, (".", ".")]))


def length(g: Grammar, label: str) -> str:
    """6 equal-width bins of the token count (6-29 tokens here)."""
    n_tokens = 6 + 4 * int(label) + int(g.rng.integers(4))
    places, adjectives = divmod(n_tokens - 6, 3)
    return text(g.sentence(*g.clause(places=places, adjectives=adjectives)[1]))


def word_content(g: Grammar, label: str) -> str:
    """Exactly one of the target words (the label), as the object or in a trailing PP."""
    in_object = g.coin()
    plural_subject = g.coin()
    subject = g.noun_phrase(SUBJECTS, plural_subject, g.coin())
    obj = g.noun_phrase(OBJECTS, False, noun=label if in_object else None)
    place = g.place() if in_object else ("PP", [("IN", g.pick(PREPOSITIONS)), g.noun_phrase([], False, noun=label)])
    vp = g.verb_phrase(g.coin(), plural_subject, obj)
    return text(g.sentence(subject, (vp[0], [*vp[1], place])))


def tree_depth(g: Grammar, label: str) -> str:
    """Depth 5 + 2k + m: k PPs nested inside the object, m = 1 with a modal's extra VP level."""
    nested, modal = divmod(int(label) - 5, 2)
    obj = g.noun_phrase(OBJECTS, g.coin(), g.coin())
    for _ in range(nested):
        obj = "NP", [g.noun_phrase(OBJECTS, g.coin()), ("PP", [("IN", g.pick(PREPOSITIONS)), obj])]
    plural_subject = g.coin()
    tree = ("S", [g.noun_phrase(SUBJECTS, plural_subject, g.coin()),
                  g.verb_phrase(g.coin(), plural_subject, obj, modal=bool(modal)), (".", ".")])
    assert depth(tree) == int(label), (depth(tree), label)
    return text(words(tree))


def top_constituents(g: Grammar, label: str) -> str:
    """The sequence of constituents just below the root S (7 of SentEval's classes)."""
    subject, vp = g.clause()[1]
    top = {
        "NP_VP_.": lambda: [subject, vp],
        "PP_NP_VP_.": lambda: [g.place(), subject, vp],
        "ADVP_NP_VP_.": lambda: [("ADVP", [("RB", g.pick(ADVERBS))]), subject, vp],
        "CC_NP_VP_.": lambda: [("CC", g.pick(["but", "and", "yet"])), subject, vp],
        "SBAR_,_NP_VP_.": lambda: [("SBAR", [("IN", g.pick(["when", "because", "although"])), g.clause()]),
                                   (",", ","), subject, vp],
        "VP_.": lambda: [("VP", [("VB", g.pick(VERBS)[0]), g.noun_phrase(OBJECTS, g.coin())])],
        "S_CC_S_.": lambda: [g.clause(), ("CC", g.pick(CONJUNCTIONS)), g.clause()],
    }[label]()
    tree = ("S", [*top, (".", ".")])
    assert "_".join(child[0] for child in tree[1]) == label
    return text(words(tree))


def bigram_shift(g: Grammar, label: str) -> str:
    """I: two adjacent words swapped (the final period stays; words keep their case, as in SentEval)."""
    tokens = text(g.sentence(*g.clause(places=int(g.rng.integers(2)), adjectives=int(g.rng.integers(3)))[1])).split()
    if label == "I":
        i = int(g.rng.integers(len(tokens) - 2))
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    return " ".join(tokens)


def relative_clause(g: Grammar, head: Tree) -> Tree:
    plural = head[1][-1][0] == "NNS"
    return "NP", [head, ("SBAR", [("WDT", "that"), g.verb_phrase(g.coin(), plural, g.noun_phrase(OBJECTS, g.coin()))])]


def past_present(g: Grammar, label: str) -> str:
    """The main verb's tense; half of the subjects carry a relative clause of random tense as a distractor."""
    subject, vp = g.clause(past=label == "PAST", places=int(g.rng.integers(2)))[1]
    return text(g.sentence(relative_clause(g, subject) if g.coin() else subject, vp))


def subj_number(g: Grammar, label: str) -> str:
    """The subject's number (irregular plurals and -s verbs make suffixes an imperfect cue)."""
    return text(g.sentence(*g.clause(plural_subject=label == "NNS", adjectives=int(g.rng.integers(3)))[1]))


def obj_number(g: Grammar, label: str) -> str:
    """The direct object's number (irregular plurals, singular "glass")."""
    return text(g.sentence(*g.clause(plural_object=label == "NNS", places=int(g.rng.integers(2)))[1]))


def odd_man_out(g: Grammar, label: str) -> str:
    """C: one noun or verb replaced by an unrelated word of the same inflection."""
    leaves = leaves_of(g.clause(places=int(g.rng.integers(2))))
    if label == "C":
        i = g.pick([i for i, (tag, _) in enumerate(leaves) if tag in ("NN", "NNS", "VBD", "VBZ", "VBP")])
        tag = leaves[i][0]
        form = g.pick(ODD_NOUNS)[tag == "NNS"] if tag.startswith("NN") else g.pick(ODD_VERBS)[
            {"VBP": 0, "VBZ": 1, "VBD": 2}[tag]]
        leaves[i] = (tag, form)
    return text([word for _, word in leaves] + ["."])


def leaves_of(tree: Tree) -> list[tuple[str, str]]:
    _, content = tree
    return [tree] if isinstance(content, str) else [leaf for child in content for leaf in leaves_of(child)]


def coordination_inversion(g: Grammar, label: str) -> str:
    """Two coordinated clauses; I: their order swapped around the comma and conjunction."""
    first, second = words(g.clause()), words(g.clause())
    if label == "I":
        first, second = second, first
    return text([*first, ",", g.pick(CONJUNCTIONS), *second, "."])


TASKS = {  # task -> (file name, labels, generator)
    "Length": ("sentence_length.txt", [str(b) for b in range(6)], length),
    "WordContent": ("word_content.txt", TARGET_WORDS, word_content),
    "Depth": ("tree_depth.txt", [str(d) for d in range(5, 13)], tree_depth),
    "TopConstituents": ("top_constituents.txt", TOP_CONSTITUENTS, top_constituents),
    "BigramShift": ("bigram_shift.txt", ["O", "I"], bigram_shift),
    "Tense": ("past_present.txt", ["PAST", "PRES"], past_present),
    "SubjNumber": ("subj_number.txt", ["NN", "NNS"], subj_number),
    "ObjNumber": ("obj_number.txt", ["NN", "NNS"], obj_number),
    "OddManOut": ("odd_man_out.txt", ["O", "C"], odd_man_out),
    "CoordinationInversion": ("coordination_inversion.txt", ["O", "I"], coordination_inversion),
}

SOURCES = """# Probing fixtures: synthetic stand-ins

These files are **synthetic stand-ins** for SentEval's probing data (Conneau et al. 2018,
github.com/facebookresearch/SentEval, `data/probing/`), **not** the real data. They use SentEval's file names,
line format (`tr|va|te<TAB>label<TAB>tokenised sentence`, train then dev then test block) and label names, so
that the probing code runs offline; the sentences come from a tiny phrase-structure grammar in
`tools/make_probing_fixtures.py` (seed {seed}). Scores on them say nothing about a model's linguistic knowledge.

Regenerate (from the repository root):

    python tools/make_probing_fixtures.py --out demo/data/probing

| task | file | labels | train / dev / test | how the sentences are made |
|---|---|---|---|---|
{rows}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "demo" / "data" / "probing")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, (task, (file_name, labels, generate)) in enumerate(TASKS.items()):
        rng = np.random.default_rng([args.seed, index])
        grammar = Grammar(rng)
        lines = []
        for tag, size in SIZES.items():
            split_labels = [labels[i % len(labels)] for i in range(size)]
            for i in rng.permutation(size):
                lines.append(f"{tag}\t{split_labels[i]}\t{generate(grammar, split_labels[i])}")
        (args.out / file_name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        summary = generate.__doc__.split("\n")[0].strip()
        rows.append(f"| {task} | `{file_name}` | {', '.join(f'`{label}`' for label in labels)} | "
                    f"{' / '.join(str(n) for n in SIZES.values())} | {summary} |")
    (args.out / "SOURCES.md").write_text(SOURCES.format(seed=args.seed, rows="\n".join(rows)), encoding="utf-8")


if __name__ == "__main__":
    main()
