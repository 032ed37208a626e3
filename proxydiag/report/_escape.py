"""Escaping user strings (run names, metric keys, evidence) for HTML pages and plotly text.

plotly renders a subset of HTML in titles, legends, tick labels and hover text, and only
decodes ``&lt; &gt; &amp;`` and numeric entities — so quotes are numeric (``&#34;``), which
both browsers and plotly turn back into the character. A key like
``<img src=x onerror=alert(1)>`` then shows as text everywhere.
"""

from __future__ import annotations

import re

_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
#: what can start emphasis, code, links or table cells inline (``[``/``]`` escaped: no links)
_MD = re.compile(r"([\\`*_\[\]|~])")
_MD_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def esc(text: object) -> str:
    """``text`` safe inside HTML text, attributes and plotly strings.

    >>> esc('<img src=x onerror="alert(1)">')
    '&lt;img src=x onerror=&#34;alert(1)&#34;&gt;'
    """
    return str(text).translate(_HTML)


def md(text: object) -> str:
    """``text`` safe inside Markdown (also in table cells): HTML and Markdown syntax escaped.

    >>> md("a|b <b>x</b> *y*")
    'a\\\\|b &lt;b&gt;x&lt;/b&gt; \\\\*y\\\\*'
    """
    return _MD.sub(r"\\\1", str(text)).translate(_MD_HTML).replace("\n", " ")


def script_json(text: str) -> str:
    """JSON text safe inside a ``<script>`` element (no ``</script>`` or ``<!--`` can occur).

    >>> script_json('{"a": "</script>"}')
    '{"a": "\\\\u003c/script>"}'
    """
    return text.replace("<", "\\u003c")
