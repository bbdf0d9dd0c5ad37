"""camelCase / PascalCase <-> snake_case."""

import re

# A lower-case letter or digit followed by an upper-case letter: "aB" -> "a_B".
_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
# An acronym followed by a capitalised word: "HTTPServer" -> "HTTP_Server".
_ACRONYM_WORD = re.compile(r"([A-Z]+)([A-Z][a-z])")


def camel_to_snake(name):
    """``"parseHTTPResponse"`` -> ``"parse_http_response"``.

    Existing underscores and dashes are kept as word separators (dashes become
    underscores); leading and trailing underscores are preserved.
    """
    if not name:
        return name
    lead = len(name) - len(name.lstrip("_"))
    trail = len(name) - len(name.rstrip("_"))
    core = name.strip("_").replace("-", "_")
    core = _ACRONYM_WORD.sub(r"\1_\2", core)
    core = _LOWER_UPPER.sub(r"\1_\2", core)
    core = re.sub(r"_+", "_", core).lower()
    return "_" * lead + core + "_" * trail


def snake_to_camel(name, upper_first=False):
    """``"parse_http_response"`` -> ``"parseHttpResponse"`` (or
    ``"ParseHttpResponse"`` with ``upper_first``). Leading underscores are kept."""
    lead = len(name) - len(name.lstrip("_"))
    parts = [p for p in name.strip("_").split("_") if p]
    if not parts:
        return name
    first = parts[0].capitalize() if upper_first else parts[0].lower()
    rest = "".join(p.capitalize() for p in parts[1:])
    return "_" * lead + first + rest
