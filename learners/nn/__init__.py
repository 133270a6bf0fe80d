"""Building blocks of the networks: backbones, BatchNorm conventions, prototypes, heads."""
