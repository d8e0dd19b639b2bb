"""vastui: rent Vast.ai GPUs by measured useful work."""

__version__ = "0.1.0"
