"""Class embeddings, ATG's input: the npz file, the Beam job, its feature extractor and pre-training."""

# The modules are the API (each declares its own names).
__all__ = [
    "embeddings_file",
    "feature_extractor",
    "pipeline",
    "pretrain",
]
