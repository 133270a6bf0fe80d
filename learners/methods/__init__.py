"""What a learner is (the Learner interface, its config, the registry) and one module per method."""

__all__ = [
    "config_fields",
    "config_flags",
    "learner",
    "learner_config",
    "maml",
    "matching",
    "multiclass",
    "protonet",
    "registry",
    "relation",
]
