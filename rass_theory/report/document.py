"""A tiny document model rendered to both Markdown and standalone HTML.

The report is built once as a list of blocks (headings, paragraphs, figures, tables, notes) and
rendered twice, so ``index.md`` and ``index.html`` always say the same thing. Paragraph text
supports two inline forms only: ```code``` and ``[text](url)`` links; everything else is escaped.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = [
    "Heading", "Paragraph", "FigureBlock", "TableBlock", "BulletList", "CodeBlock", "Note",
    "Document", "render_markdown", "render_html",
]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    anchor: str | None = None


@dataclass(frozen=True)
class _TextBlock:
    """A block whose content is one string, ``text``."""

    text: str


class Paragraph(_TextBlock):
    """Running text; ```code``` and ``[text](url)`` are its only inline forms."""


@dataclass(frozen=True)
class FigureBlock:
    """A figure: ``image`` (PNG, relative path) shown inline, plus links to vector files and data."""

    image: str
    alt: str
    caption: str = ""
    links: tuple = ()          # ((label, relative path), ...)


@dataclass(frozen=True)
class TableBlock:
    header: tuple
    rows: tuple
    caption: str = ""
    align: tuple | None = None  # "l"/"r" per column


@dataclass(frozen=True)
class BulletList:
    items: tuple


class CodeBlock(_TextBlock):
    """Preformatted text, shown verbatim."""


@dataclass(frozen=True)
class Note(_TextBlock):
    """A highlighted remark; ``kind`` is ``"info"``, ``"unavailable"`` or ``"fail"``."""

    kind: str = "info"


@dataclass
class Document:
    title: str
    blocks: list = field(default_factory=list)

    def add(self, *blocks) -> "Document":
        self.blocks.extend(blocks)
        return self


# -- Markdown -------------------------------------------------------------------------------
def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Document) -> str:
    """Render ``doc`` as GitHub-flavoured Markdown."""
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            if b.anchor:
                out.append(f'<a id="{b.anchor}"></a>')
                out.append("")
            out += ["#" * max(2, min(b.level, 6)) + " " + b.text, ""]
        elif isinstance(b, Paragraph):
            out += [b.text, ""]
        elif isinstance(b, FigureBlock):
            out.append(f"![{b.alt}]({b.image})")
            out.append("")
            tail = []
            if b.caption:
                tail.append(f"*{b.caption}*")
            if b.links:
                tail.append(" · ".join(f"[{label}]({path})" for label, path in b.links))
            if tail:
                out += [" ".join(tail), ""]
        elif isinstance(b, TableBlock):
            if b.caption:
                out += [f"*{b.caption}*", ""]
            align = b.align or tuple("l" for _ in b.header)
            out.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            out.append("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
            for row in b.rows:
                out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
            out.append("")
        elif isinstance(b, BulletList):
            out += [f"- {item}" for item in b.items]
            out.append("")
        elif isinstance(b, CodeBlock):
            out += ["```", b.text.rstrip("\n"), "```", ""]
        elif isinstance(b, Note):
            prefix = {"info": "Note", "unavailable": "Unavailable", "fail": "FAILED"}.get(b.kind, "Note")
            out += [f"> **{prefix}:** {b.text}", ""]
        else:  # pragma: no cover - programming error
            raise TypeError(f"unknown block type {type(b).__name__}")
    return "\n".join(out).rstrip("\n") + "\n"


# -- HTML -----------------------------------------------------------------------------------
_INLINE = re.compile(r"`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*")


def _inline_html(text: str) -> str:
    """Escape ``text``, turning ``code``, ``**bold**`` and ``[t](url)`` into HTML."""
    parts, pos = [], 0
    for m in _INLINE.finditer(text):
        parts.append(html.escape(text[pos:m.start()]))
        if m.group(1) is not None:
            parts.append(f"<code>{html.escape(m.group(1))}</code>")
        elif m.group(2) is not None:
            parts.append(f'<a href="{html.escape(m.group(3), quote=True)}">{html.escape(m.group(2))}</a>')
        else:
            parts.append(f"<strong>{html.escape(m.group(4))}</strong>")
        pos = m.end()
    parts.append(html.escape(text[pos:]))
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:60rem;margin:2rem auto;
padding:0 1rem;line-height:1.5;color:#222}
h1,h2,h3{line-height:1.25}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.9rem;color:#444}
table{border-collapse:collapse;margin:.8rem 0;font-size:.88rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem}th{background:#f4f4f4}td.r{text-align:right;
font-variant-numeric:tabular-nums}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.88em}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto}
.note{border-left:4px solid #0072B2;background:#f2f7fb;padding:.4rem .8rem;margin:.8rem 0}
.note.unavailable{border-color:#E69F00;background:#fdf6e7}.note.fail{border-color:#D55E00;background:#fcefe8}
"""


def render_html(doc: Document) -> str:
    """Render ``doc`` as one standalone HTML5 page (inline CSS, relative image links)."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{html.escape(doc.title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
           f"<h1>{html.escape(doc.title)}</h1>"]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lvl = max(2, min(b.level, 6))
            anchor = f' id="{html.escape(b.anchor, quote=True)}"' if b.anchor else ""
            out.append(f"<h{lvl}{anchor}>{html.escape(b.text)}</h{lvl}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{_inline_html(b.text)}</p>")
        elif isinstance(b, FigureBlock):
            links = " · ".join(f'<a href="{html.escape(p, quote=True)}">{html.escape(l)}</a>' for l, p in b.links)
            cap = _inline_html(b.caption)
            out.append(f'<figure><img src="{html.escape(b.image, quote=True)}" alt="{html.escape(b.alt, quote=True)}">'
                       f"<figcaption>{cap}{' ' if cap and links else ''}{links}</figcaption></figure>")
        elif isinstance(b, TableBlock):
            align = b.align or tuple("l" for _ in b.header)
            rows = ["<table>"]
            if b.caption:
                rows.append(f"<caption>{_inline_html(b.caption)}</caption>")
            rows.append("<thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in b.header) + "</tr></thead>")
            rows.append("<tbody>")
            for r in b.rows:
                rows.append("<tr>" + "".join(
                    f'<td{" class=r" if a == "r" else ""}>{html.escape(str(c))}</td>' for c, a in zip(r, align)) + "</tr>")
            rows.append("</tbody></table>")
            out.append("".join(rows))
        elif isinstance(b, BulletList):
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, CodeBlock):
            out.append(f"<pre><code>{html.escape(b.text.rstrip())}</code></pre>")
        elif isinstance(b, Note):
            prefix = {"info": "Note", "unavailable": "Unavailable", "fail": "FAILED"}.get(b.kind, "Note")
            out.append(f'<div class="note {html.escape(b.kind)}"><strong>{prefix}:</strong> {_inline_html(b.text)}</div>')
        else:  # pragma: no cover
            raise TypeError(f"unknown block type {type(b).__name__}")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
