"""Where simulated hosts are: cities with their country code, weighted like the real market (docs/simulator.md)."""

from __future__ import annotations

# (geolocation "City, CC", weight). North America ~40 %, Europe ~32 %, Asia ~23 %, other ~5 %.
PLACES: tuple[tuple[str, float], ...] = (
    ("Texas, US", 9), ("California, US", 8), ("Virginia, US", 5), ("Oregon, US", 3), ("Illinois, US", 3),
    ("Florida, US", 2), ("New Jersey, US", 3), ("Quebec, CA", 4), ("Ontario, CA", 3),
    ("Stockholm, SE", 4), ("Frankfurt, DE", 4), ("North Holland, NL", 3), ("Prague, CZ", 3), ("Warsaw, PL", 3),
    ("Helsinki, FI", 2), ("Bucharest, RO", 3), ("Kyiv, UA", 2), ("Madrid, ES", 2), ("Paris, FR", 2),
    ("Oslo, NO", 2), ("Sofia, BG", 2),
    ("Taipei, TW", 5), ("Guangdong, CN", 4), ("Hong Kong, HK", 3), ("Hanoi, VN", 3), ("Bangkok, TH", 2),
    ("Tokyo, JP", 2), ("Seoul, KR", 2), ("Singapore, SG", 1), ("Mumbai, IN", 1),
    ("New South Wales, AU", 2), ("Sao Paulo, BR", 2), ("Gauteng, ZA", 1),
)
