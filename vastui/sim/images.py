"""Container images as the simulator sees them: how big a pull is, and whether hosts tend to have it cached."""

from __future__ import annotations

# Compressed pull sizes in MB for images people actually rent with (approximate, for pull-time physics).
_SIZES_MB: tuple[tuple[str, float], ...] = (
    # the example workload's image, at the size its manifest declares (examples/resnet.toml): a user who states
    # their image's size states a fact, and a log that names no size (the daemon's) leaves only that to price by
    ("vastui/sim-resnet", 8_500.0),
    ("vllm/vllm-openai", 9_500.0),
    ("pytorch/pytorch", 3_600.0),
    ("vastai/pytorch", 6_500.0),
    ("vastai/base-image", 2_800.0),
    ("vastai/", 5_000.0),
    ("nvidia/cuda", 2_300.0),
    ("tensorflow/tensorflow", 2_600.0),
    ("ubuntu", 30.0),
    ("python", 400.0),
)
DEFAULT_SIZE_MB = 6_000.0
_POPULAR_PREFIXES = ("pytorch/pytorch", "vastai/", "nvidia/cuda")


def image_size_mb(image: str) -> float:
    """Pull size of ``image`` (tag ignored); unknown images count as a typical 6 GB ML image."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    for prefix, size in _SIZES_MB:
        if name == prefix or (prefix.endswith("/") and name.startswith(prefix)):
            return size
    return DEFAULT_SIZE_MB


def is_popular(image: str) -> bool:
    """Images a host may already hold before anyone asked for them."""
    return image.startswith(_POPULAR_PREFIXES)
