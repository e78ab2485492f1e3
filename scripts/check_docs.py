"""Check the built book (`make docs` runs it after the build): python scripts/check_docs.py [DIR]

* every notebook of notebooks/ and every page of docs/ has its page, and so has the README;
* every local link, and its anchor, resolves to a file of the build and an id in it;
* every image loads: a local file (or a data: URI) whose bytes are a PNG, JPEG, GIF or SVG;
* nothing is loaded from the network when a page is viewed: no script, stylesheet, image, font
  or frame from another host, in the HTML or in the CSS it loads (links a reader clicks may
  leave the book; nothing else does).

Exit 0 and one summary line when all holds, else each problem on a line and exit 1.
"""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUILD = ROOT / "docs" / "_build" / "html"

#: Tags and attributes that load something when the page is shown (an <a> does not).
LOADS = {
    "img": ("src", "srcset"),
    "script": ("src",),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
}
#: <link rel=...> values that make the browser fetch the target.
FETCHING_RELS = {
    "stylesheet",
    "icon",
    "shortcut",
    "preload",
    "prefetch",
    "modulepreload",
    "manifest",
    "apple-touch-icon",
    "mask-icon",
}
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)['"]?\s*\)|@import\s+['"]([^'"]+)['"]""")


class Page(HTMLParser):
    """The ids a page defines, and every reference it makes: (tag, attribute, value, loads)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str, bool]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        if tag == "a" and "href" in a:
            self.refs.append((tag, "href", a["href"], False))
        elif tag == "link" and "href" in a:
            rels = set(a.get("rel", "").lower().split())
            self.refs.append((tag, "href", a["href"], bool(rels & FETCHING_RELS)))
        for attribute in LOADS.get(tag, ()):
            value = a.get(attribute)
            if not value:
                continue
            if attribute.endswith("srcset"):
                for candidate in value.split(","):
                    if candidate.strip():
                        self.refs.append((tag, attribute, candidate.split()[0], True))
            else:
                self.refs.append((tag, attribute, value, True))
        if "style" in a:
            self.styles.append(a["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def _remote(url: str) -> bool:
    scheme = urlsplit(url).scheme.lower()
    return url.startswith("//") or scheme in {"http", "https", "ftp", "ws", "wss"}


def _image_ok(data: bytes) -> bool:
    head = data[:512].lstrip()
    return data.startswith(IMAGE_MAGIC) or b"<svg" in data[:4096] or head.startswith(b"<?xml")


def _data_image(url: str) -> bool:
    meta, _, payload = url[5:].partition(",")
    if not meta.startswith("image/"):
        return False
    data = base64.b64decode(payload) if meta.endswith(";base64") else unquote(payload).encode()
    return _image_ok(data)


def check(build: Path) -> tuple[list[str], dict[str, int]]:
    problems: list[str] = []
    counts = {"pages": 0, "links": 0, "anchors": 0, "images": 0, "css": 0}
    if not build.is_dir():
        return [f"{build}: no build here (run make docs)"], counts

    expected = ["index.html", "docs/index.html", "README.html"]
    expected += [
        f"notebooks/{p.stem}.html" for p in sorted(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"))
    ]
    expected += [f"docs/{p.stem}.html" for p in sorted((ROOT / "docs").glob("*.md"))]
    for name in expected:
        if not (build / name).is_file():
            problems.append(f"missing page: {name}")

    pages: dict[Path, Page] = {}
    for path in sorted(build.rglob("*.html")):
        if "_static" in path.relative_to(build).parts:  # the theme's template fragments
            continue
        parser = Page()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        pages[path.resolve()] = parser
    counts["pages"] = len(pages)

    def ids_of(path: Path) -> set[str]:
        page = pages.get(path)
        return page.ids if page else set()

    css_files: set[Path] = set()
    for path, page in pages.items():
        where = path.relative_to(build.resolve())
        for tag, attribute, url, loads in page.refs:
            what = f"{where}: <{tag} {attribute}={url!r}>"
            if url.startswith("data:"):
                if tag == "img" and not _data_image(url):
                    problems.append(f"{what}: not an image")
                counts["images"] += tag == "img"
                continue
            if _remote(url):
                if loads:
                    problems.append(f"{what}: loaded from the network")
                continue
            parts = urlsplit(url)
            if parts.scheme:  # mailto:, javascript: ...
                continue
            counts["links"] += 1
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{what}: no such file")
                continue
            if tag == "img":
                counts["images"] += 1
                if not _image_ok(target.read_bytes()):
                    problems.append(f"{what}: not an image")
            if target.suffix == ".css":
                css_files.add(target)
            if parts.fragment and target.suffix == ".html":
                counts["anchors"] += 1
                if unquote(parts.fragment) not in ids_of(target):
                    problems.append(f"{what}: no id {parts.fragment!r} in {target.name}")
        for style in page.styles:
            for url in _css_urls(style):
                if _remote(url):
                    problems.append(f"{where}: style loads {url!r} from the network")

    for css in sorted(css_files):
        counts["css"] += 1
        for url in _css_urls(css.read_text(encoding="utf-8", errors="replace")):
            if _remote(url):
                problems.append(
                    f"{css.relative_to(build.resolve())}: loads {url!r} from the network"
                )
            elif not url.startswith(("data:", "#")):
                local = (css.parent / unquote(urlsplit(url).path)).resolve()
                if not local.is_file():
                    problems.append(
                        f"{css.relative_to(build.resolve())}: url({url!r}): no such file"
                    )
    return problems, counts


def _css_urls(text: str) -> Iterator[str]:
    for match in CSS_URL.finditer(text):
        yield (match.group(1) or match.group(2)).strip()


def main(argv: list[str]) -> int:
    build = Path(argv[1]) if len(argv) > 1 else DEFAULT_BUILD
    problems, counts = check(build)
    for problem in problems:
        print(problem)
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    if problems:
        print(f"check_docs: {len(problems)} problem(s) in {build} ({summary})")
        return 1
    print(
        f"check_docs: ok ({summary}): every page there, every local link, anchor and image "
        "resolves, nothing from the network"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
