"""A zoo card's ``chance_level`` follows the rule ``pareto.csv`` and the zoo's export follow:
the accuracy the search chose the model on, with the split it judged named."""

from __future__ import annotations

from hwnas.engine.loop import TrialRecord
from hwnas.zoo.card import card_for, render_readme
from hwnas.zoo.write import _trained_accuracy, benchmark_preprocessing, zoo_columns

VALIDATION = "measured:digits:validation split (60 images), inherited supernet weights"
TEST = "measured:digits:test split (60 images), inherited supernet weights; never used to choose"


def _card(r: TrialRecord) -> dict:
    return card_for(
        name="00-x", space="fbnet", arch=r.arch, benchmark_dataset="cifar100", params=10,
        flops=100, input_shape=(1, 3, 16, 16), dataset="digits", num_classes=10,
        labels=[str(i) for i in range(10)], label_order="output i is labels[i]",
        preprocessing=benchmark_preprocessing("cifar100", (1, 3, 16, 16), (3, 32, 32)),
        accuracy=_trained_accuracy(r),
        weights={"kind": "trained", "note": "supernet (oneshot)", "file": "weights.pt"},
        devices={}, devices_note="",
    )  # fmt: skip


def test_a_subnets_card_judges_chance_on_the_split_pareto_csv_judged():
    """A fine-tuned OFA subnet at 18.33% on the validation split (chosen on it, exported:
    pareto.csv's chance_level false) had a card that judged its test accuracy instead:
    ``"chance_level": {"value": true}`` and a README saying "Do not ship it"."""
    exported = TrialRecord(0, "a", 18.33, {}, {"accuracy_source": VALIDATION,
                                               "test_accuracy": 13.0,
                                               "test_accuracy_source": TEST})  # fmt: skip
    kept_out = TrialRecord(1, "b", 12.0, {}, {"accuracy_source": VALIDATION,
                                              "test_accuracy": 40.0,
                                              "test_accuracy_source": TEST})  # fmt: skip
    columns = zoo_columns([exported, kept_out], 10)
    assert columns["a"]["chance_level"] == "false" and columns["a"]["zoo"]
    assert columns["b"]["chance_level"] == "true" and not columns["b"]["zoo"]
    card = _card(exported)
    assert card["accuracy"]["value"] == 13.0 and card["accuracy"]["split"] == "test"
    assert card["chance_level"]["value"] is False
    assert card["chance_level"]["judged"] == {"value": 18.33, "split": "validation"}
    assert "Do not ship it" not in render_readme(card)
    card = _card(kept_out)
    assert card["chance_level"]["value"] is True
    assert card["chance_level"]["judged"] == {"value": 12.0, "split": "validation"}
    assert (
        "**Chance-level:** its accuracy on the validation split (12.00%) is at most "
        "1.5 x 100/num_classes % (chance = 10%). Do not ship it." in render_readme(card)
    )
