"""The Vast.ai edge: the offer query language, typed models and the async HTTP client (the only door to the
marketplace, real or simulated). This package owns httpx; nothing else in vastui imports it."""
