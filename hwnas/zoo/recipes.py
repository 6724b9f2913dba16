"""Training recipes of the search spaces' papers, by space name (:data:`RECIPES`).

A recipe is what the space's paper trained its networks with; ``hwnas train`` applies it and
records every deviation (fewer epochs for a CPU, another batch size with the learning rate
scaled linearly, augmentation not applied) in the zoo entry's card.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hwnas.registry import Registry


@dataclass(frozen=True)
class Recipe:
    """How a space's paper trains one network from scratch.

    Attributes:
        name: the recipe's name (the space's).
        source: the paper and code the values come from.
        epochs: training epochs of the full recipe.
        batch_size: mini-batch size the learning rate is given for.
        lr: initial learning rate at ``batch_size`` (scaled linearly for other batch sizes).
        momentum: SGD momentum.
        nesterov: Nesterov momentum.
        weight_decay: L2 weight decay.
        schedule: learning-rate schedule over all steps (``cosine``: to 0, Loshchilov &
            Hutter, ICLR 2017).
        warmup_epochs: linear warm-up epochs before the schedule.
        label_smoothing: label smoothing of the cross-entropy loss.
        no_decay_bn_bias: no weight decay on batch-norm parameters and biases.
        augmentation: the paper's data augmentation (hwnas applies none and says so).
    """

    name: str
    source: str
    epochs: int
    batch_size: int
    lr: float
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    schedule: str = "cosine"
    warmup_epochs: int = 0
    label_smoothing: float = 0.0
    no_decay_bn_bias: bool = False
    augmentation: str = ""

    def lr_for(self, batch_size: int) -> float:
        """Initial learning rate at ``batch_size``: linear scaling (Goyal et al., 2017)."""
        return self.lr * batch_size / self.batch_size

    def describe(self) -> dict[str, object]:
        """The recipe as a card section."""
        return asdict(self)


RECIPES: Registry[Recipe] = Registry("training recipe")
RECIPES.register(
    "nasbench201",
    Recipe(
        name="nasbench201",
        source=(
            "NAS-Bench-201 (Dong & Yang, ICLR 2020), Sec. 2.3 and AutoDL-Projects "
            "configs/nas-benchmark/hyper-opts/200E.config: SGD, Nesterov momentum 0.9, lr 0.1, "
            "cosine to 0, weight decay 5e-4, batch 256, 200 epochs"
        ),
        epochs=200,
        batch_size=256,
        lr=0.1,
        momentum=0.9,
        nesterov=True,
        weight_decay=5e-4,
        augmentation="random crop (padding 4) and horizontal flip (CIFAR)",
    ),
)
RECIPES.register(
    "fbnet",
    Recipe(
        name="fbnet",
        source=(
            "FBNet (Wu et al., CVPR 2019): 360 training epochs of the searched networks; "
            "SGD momentum 0.9, lr 0.1 at batch 256, weight decay 5e-4 as recorded for FBNet-C "
            "(fbnetc_100) in timm's model index; cosine schedule (hwnas: the source names no "
            "schedule)"
        ),
        epochs=360,
        batch_size=256,
        lr=0.1,
        momentum=0.9,
        nesterov=False,
        weight_decay=5e-4,
        augmentation="ImageNet random-resized crop and flip",
    ),
)
RECIPES.register(
    "ofa",
    Recipe(
        name="ofa",
        source=(
            "Once-for-All (Cai et al., ICLR 2020), Sec. 4.1: SGD, Nesterov momentum 0.9, "
            "weight decay 3e-5, initial lr 2.6 at batch 2048, cosine, 180 epochs (the full "
            "network); label smoothing 0.1 and no decay on batch norm and biases from the "
            "official code (train_ofa_net.py)"
        ),
        epochs=180,
        batch_size=2048,
        lr=2.6,
        momentum=0.9,
        nesterov=True,
        weight_decay=3e-5,
        label_smoothing=0.1,
        no_decay_bn_bias=True,
        augmentation="ImageNet random-resized crop, flip and colour distortion",
    ),
)


GENERIC = Recipe(
    name="generic",
    source=(
        "hwnas's default for a space without a declared recipe (the NAS-Bench-201 "
        "schedule): SGD, Nesterov momentum 0.9, lr 0.1 at batch 256, cosine, weight decay "
        "5e-4, 200 epochs"
    ),
    epochs=200,
    batch_size=256,
    lr=0.1,
)
"""The recipe of spaces whose paper's recipe hwnas does not declare (declared spaces such as
mobilenetv4 and vit, whose papers train with AdamW and data augmentation hwnas does not
apply); its card says so."""

SAME_NETWORKS = {"fbnet_declared": "fbnet", "ofa_declared": "ofa"}
"""Declared spaces that build the networks of a hand-written space, and so share its recipe."""


def recipe_for(space: str) -> Recipe:
    """The training recipe of ``space``: its paper's (:data:`RECIPES`, also for the declared
    spaces of :data:`SAME_NETWORKS`), else :data:`GENERIC`."""
    name = SAME_NETWORKS.get(space, space)
    return RECIPES.get(name) if name in RECIPES else GENERIC
