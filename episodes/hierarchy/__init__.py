"""Class hierarchies: WordNet, the ImageNet DAG and its eligible nodes."""

# The modules are the API (each declares its own names).
__all__ = [
    "imagenet_dag",
    "imagenet_nodes",
    "wordnet",
]
