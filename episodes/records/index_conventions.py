"""Class-index conventions of published split tables, and the name lists known offline.

The ATG paper prints class *indices* (App. A.6): CIFAR100 and EMNIST as implemented in
torchvision, LFW10 as in scikit-learn, mini- and tiered-ImageNet as in learn2learn.  The
CIFAR-100 and EMNIST orders are fixed by their datasets and given here; the others need the
class list of the user's copy (`SplitFile.with_class_names`).
"""

from __future__ import annotations

import string

__all__ = [
    "CIFAR100_COARSE_NAMES",
    "CIFAR100_FINE_NAMES",
    "CIFAR100_SUPERCLASS_MEMBERS",
    "CIFAR100_SUPERCLASS_OF",
    "CONVENTIONS",
    "EMNIST_BYCLASS_NAMES",
    "convention_class_names",
]

# CIFAR-100 superclasses (coarse label order) and their fine classes, as published with the
# dataset; fine label indices are the fine names in alphabetical order.
CIFAR100_SUPERCLASS_MEMBERS: dict[str, list[str]] = {
    "aquatic_mammals": ["beaver", "dolphin", "otter", "seal", "whale"],
    "fish": ["aquarium_fish", "flatfish", "ray", "shark", "trout"],
    "flowers": ["orchid", "poppy", "rose", "sunflower", "tulip"],
    "food_containers": ["bottle", "bowl", "can", "cup", "plate"],
    "fruit_and_vegetables": ["apple", "mushroom", "orange", "pear", "sweet_pepper"],
    "household_electrical_devices": ["clock", "keyboard", "lamp", "telephone", "television"],
    "household_furniture": ["bed", "chair", "couch", "table", "wardrobe"],
    "insects": ["bee", "beetle", "butterfly", "caterpillar", "cockroach"],
    "large_carnivores": ["bear", "leopard", "lion", "tiger", "wolf"],
    "large_man-made_outdoor_things": ["bridge", "castle", "house", "road", "skyscraper"],
    "large_natural_outdoor_scenes": ["cloud", "forest", "mountain", "plain", "sea"],
    "large_omnivores_and_herbivores": ["camel", "cattle", "chimpanzee", "elephant", "kangaroo"],
    "medium_mammals": ["fox", "porcupine", "possum", "raccoon", "skunk"],
    "non-insect_invertebrates": ["crab", "lobster", "snail", "spider", "worm"],
    "people": ["baby", "boy", "girl", "man", "woman"],
    "reptiles": ["crocodile", "dinosaur", "lizard", "snake", "turtle"],
    "small_mammals": ["hamster", "mouse", "rabbit", "shrew", "squirrel"],
    "trees": ["maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"],
    "vehicles_1": ["bicycle", "bus", "motorcycle", "pickup_truck", "train"],
    "vehicles_2": ["lawn_mower", "rocket", "streetcar", "tank", "tractor"],
}
CIFAR100_COARSE_NAMES: list[str] = list(CIFAR100_SUPERCLASS_MEMBERS)
CIFAR100_FINE_NAMES: list[str] = sorted(
    name for members in CIFAR100_SUPERCLASS_MEMBERS.values() for name in members
)
CIFAR100_SUPERCLASS_OF: dict[str, str] = {
    fine: coarse
    for fine in CIFAR100_FINE_NAMES
    for coarse, members in CIFAR100_SUPERCLASS_MEMBERS.items()
    if fine in members
}
EMNIST_BYCLASS_NAMES: list[str] = list(
    string.digits + string.ascii_uppercase + string.ascii_lowercase
)

CONVENTIONS: dict[str, str] = {
    "cifar100_fine": "CIFAR-100 fine label index (torchvision CIFAR100 targets; the 100 fine "
    "names in alphabetical order)",
    "mini_imagenet_l2l": "mini-ImageNet class index 0-99 as implemented in learn2learn "
    "(ATG paper App. A.6); the paper does not print the names",
    "emnist_byclass": "EMNIST byclass label index (torchvision EMNIST split='byclass': "
    "0-9, A-Z, a-z)",
    "lfw10_sklearn": "LFW people with at least 10 images, scikit-learn fetch_lfw_people("
    "min_faces_per_person=10) target index (target_names order)",
    "tiered_imagenet_l2l": "tiered-ImageNet class index 0-607 as implemented in learn2learn "
    "(ATG paper App. A.6); the paper does not print the names",
}

_KNOWN_NAMES: dict[str, list[str]] = {
    "cifar100_fine": CIFAR100_FINE_NAMES,
    "emnist_byclass": EMNIST_BYCLASS_NAMES,
}


def convention_class_names(convention: str) -> list[str] | None:
    """The class names in index order for `convention`, or None when they must be supplied."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown index convention {convention!r}; known: {sorted(CONVENTIONS)}")
    names = _KNOWN_NAMES.get(convention)
    return list(names) if names is not None else None
