"""Episodes: dataset specs, record index and reader, the Meta-Dataset sampler, adapters."""
