"""The error every failed model load raises, whichever step failed (source, config, weights, tokenizer)."""


class ModelLoadError(ValueError):
    """A model that cannot be loaded; the message is one sentence a person can act on."""
