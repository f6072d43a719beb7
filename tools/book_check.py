"""Check the built course website in headless Chromium, as a learner uses it (`make book-test`).

Why: a site can build without a warning and still show a lesson without its figures, launch the wrong notebook,
find nothing, or carry TensorFlow's start-up noise. Every check below opens the real pages in a real browser
(Playwright driving the system's Chromium; Playwright's own browser download is not needed), served on
127.0.0.1, with every request off this machine blocked, so the site is also proven to work offline:

- every lesson page renders each code cell and each figure of its executed copy (every image loaded), and its
  "Ran on" box;
- its launch links are the ones tools/links.py makes for that notebook (Colab, Kaggle, Binder), and no
  launch link on it opens another notebook;
- the built-in (JavaScript) search finds "BatchNormalization" and "ModelCheckpoint" in a lesson;
- every link between pages resolves, anchors included (the error index's links above all);
- no cell's stderr output carries native CUDA/absl start-up noise. The noise check is itself checked first:
  a one-page site with a planted noise block is built with the same Sphinx configuration and must be flagged.
- a screenshot of a lesson page (its first figure in view) is saved: an artifact, under an ignored folder.

Usage: python tools/book_check.py --site _build/book/html --executed _build/book/executed --out _output/book-test
(exit status 1 when a check fails). BOOK_BROWSER=/path/to/chromium picks the browser.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import book  # noqa: E402  (tools/book.py: lessons, noise patterns, tools/links.py)

ROOT = book.ROOT
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SEARCH_TERMS = ("BatchNormalization", "ModelCheckpoint")
PLANTED_NOISE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"

#: Facts a check needs from one page, read in the browser.
PAGE_FACTS = """() => ({
  cells: document.querySelectorAll('div.cell').length,
  figures: [...document.querySelectorAll('.cell_output img')].map(i => ({src: i.getAttribute('src'),
                                                                        ok: i.complete && i.naturalWidth > 0})),
  ranOn: (document.querySelector('.ran-on') || {innerText: ''}).innerText,
  launch: [...document.querySelectorAll('a[href]')].map(a => a.href)
            .filter(h => /colab\\.research\\.google\\.com\\/github|kaggle\\.com\\/kernels|mybinder\\.org\\/v2/.test(h)),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
  stderr: [...document.querySelectorAll('.cell_output .stderr')].map(e => e.innerText),
})"""


def find_browser(env: dict | None = None, which=shutil.which) -> str:
    """The Chromium to drive: $BOOK_BROWSER, else the first of :data:`BROWSERS` on PATH."""
    env = os.environ if env is None else env
    if env.get("BOOK_BROWSER"):
        return env["BOOK_BROWSER"]
    for name in BROWSERS:
        path = which(name)
        if path:
            return path
    raise RuntimeError("no Chromium found (tried $BOOK_BROWSER and " + ", ".join(BROWSERS) + " on PATH): install "
                       "one, e.g. 'apt-get install -y chromium' (Debian), or set BOOK_BROWSER=/path/to/chrome")


def image_outputs(nb: dict) -> int:
    """How many figures (image outputs) an executed notebook holds."""
    return sum(1 for c in nb.get("cells", []) if c.get("cell_type") == "code" for o in c.get("outputs", [])
               if o.get("output_type") in ("display_data", "execute_result")
               and any(k.startswith("image/") for k in o.get("data", {})))


def code_cells(nb: dict) -> int:
    return sum(1 for c in nb.get("cells", []) if c.get("cell_type") == "code")


def stderr_problems(stderr_blocks: list[str]) -> list[str]:
    """Noise lines found in a page's stderr output blocks."""
    return [line for block in stderr_blocks for line in book.noise_lines(block)]


def launch_problems(path: str, launch: list[str], links) -> list[str]:
    """What is wrong with a lesson page's launch links (``path``: notebooks/NN_x.ipynb)."""
    problems = [f"no {name} link to {path}" for name, url in
                (("Colab", links.colab_url(path)), ("Kaggle", links.kaggle_url(path)),
                 ("Binder", links.binder_url(path))) if url not in launch]
    problems += [f"a launch link that opens another notebook: {h}" for h in launch if path not in unquote(h)]
    return problems


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D401 - no access log in the test output
        pass


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) in a daemon thread; return the server and its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def build_planted_site(out: Path) -> Path:
    """A one-lesson site, built with book/conf.py, whose only code cell has noise on stderr (and quotes it in prose)."""
    src, html = out / "src", out / "html"
    (src / "notebooks").mkdir(parents=True)
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                          "display_name": "Python 3"}},
          "cells": [{"cell_type": "markdown", "id": "t", "metadata": {},
                     "source": f"# Planted noise\n\nQuoted on purpose: `{PLANTED_NOISE}`"},
                    {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 1, "source": "import x",
                     "outputs": [{"output_type": "stream", "name": "stderr", "text": PLANTED_NOISE + "\n"},
                                 {"output_type": "stream", "name": "stdout", "text": PLANTED_NOISE + "\n"}]}]}
    (src / "notebooks" / "planted.ipynb").write_text(json.dumps(nb))
    (src / "index.md").write_text("# Planted\n\n```{toctree}\nnotebooks/planted\n```\n")
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(ROOT / "book"), str(src), str(html)],
                   check=True)
    return html


class Checker:
    """Runs the checks in one browser; collects failures instead of stopping at the first."""

    def __init__(self, browser, out: Path):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._offline)
        self.page = self.context.new_page()
        self.out = out
        self.failures: list[str] = []
        self.notes: list[str] = []

    @staticmethod
    def _offline(route):
        host = urlparse(route.request.url).hostname
        return route.continue_() if host in ("127.0.0.1", "localhost") else route.abort()

    def check(self, ok: bool, what: str) -> bool:
        (self.notes if ok else self.failures).append(("ok    " if ok else "FAIL  ") + what)
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        return ok

    def facts(self, url: str) -> dict | None:
        response = self.page.goto(url, wait_until="load")
        if response is None or response.status != 200:
            return None
        return self.page.evaluate(PAGE_FACTS)

    def planted(self, base: str) -> None:
        facts = self.facts(base + "notebooks/planted.html")
        found = stderr_problems(facts["stderr"]) if facts else []
        self.check(len(found) == 1, f"the noise check flags the planted stderr block, and only it ({len(found)} found)")

    def lesson(self, base: str, path: str, nb: dict, links) -> dict | None:
        name = Path(path).stem
        facts = self.facts(base + f"notebooks/{name}.html")
        if not self.check(facts is not None, f"{name}: page exists"):
            return None
        want_cells, want_figs = code_cells(nb), image_outputs(nb)
        loaded = [f for f in facts["figures"] if f["ok"]]
        self.check(facts["cells"] == want_cells, f"{name}: {facts['cells']} of {want_cells} code cells rendered")
        self.check(len(facts["figures"]) == want_figs and len(loaded) == want_figs,
                   f"{name}: {len(loaded)} of {want_figs} figures shown and loaded")
        self.check("Ran on" in facts["ranOn"] and "Keras" in facts["ranOn"],
                   f"{name}: labelled '{facts['ranOn'].splitlines()[0] if facts['ranOn'] else '(no label)'}'")
        problems = launch_problems(path, facts["launch"], links)
        self.check(not problems, f"{name}: {len(facts['launch'])} launch links, all to {path}"
                   + ("" if not problems else ": " + "; ".join(problems)))
        return facts

    def search(self, base: str, term: str) -> None:
        self.page.goto(base + f"search.html?q={term}", wait_until="load")
        self.page.wait_for_function(
            "() => { const s = document.querySelector('#search-results .search-summary');"
            " return s && /found|match/i.test(s.innerText); }", timeout=30_000)
        hits = self.page.evaluate("() => [...document.querySelectorAll('#search-results ul.search li a')]"
                                  ".map(a => a.href)")
        lessons = sorted({Path(urlparse(h).path).stem for h in hits if "/notebooks/" in h})
        self.check(bool(lessons), f"search finds {term!r} in lessons {', '.join(lessons) or '(none)'}")

    def links(self, pages: dict[str, dict], base: str) -> None:
        """Every link between pages resolves: the target exists and so does its anchor."""
        ids: dict[str, set] = {url: set(f["ids"]) for url, f in pages.items()}
        broken, checked, into_index = [], 0, 0
        for url, facts in pages.items():
            for href in facts["links"]:
                target, frag = urldefrag(href)
                if not target.startswith(base):
                    continue
                if target not in ids:
                    got = self.facts(target) if target.endswith(".html") else None
                    if got is None and not target.endswith(".html"):
                        status = self.page.request.get(target).status
                        ids[target] = set() if status == 200 else None
                    else:
                        ids[target] = set(got["ids"]) if got else None
                checked += 1
                into_index += "TROUBLESHOOTING.html" in target and bool(frag)
                if ids[target] is None or (frag and unquote(frag) not in ids[target]):
                    broken.append(f"{url[len(base):]} -> {href[len(base):]}")
        self.check(not broken, f"{checked} links between pages resolve ({into_index} into the error index's entries)"
                   + ("" if not broken else ": broken: " + "; ".join(sorted(set(broken))[:20])))
        self.check(into_index > 0, "the error index's entries are linked (and were checked)")

    def screenshot(self, url: str) -> Path:
        self.page.goto(url, wait_until="load")
        figure = self.page.query_selector(".cell_output img")
        if figure is not None:
            figure.scroll_into_view_if_needed()
        path = self.out / "lesson.png"
        self.page.screenshot(path=str(path))
        return path


def run(site: Path, executed: Path, out: Path, lesson_paths: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    executable = find_browser()
    print(f"browser: {executable}; site: {site}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        planted_site = build_planted_site(Path(tmp))
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        checker = Checker(browser, out)
        planted_server, planted_base = serve(planted_site)
        server, base = serve(site)
        try:
            checker.planted(planted_base)
            pages, with_figures = {}, []
            for path in lesson_paths:
                nb = json.loads((executed / Path(path).name).read_text())
                with_figures += [path] if image_outputs(nb) else []
                facts = checker.lesson(base, path, nb, book.links)
                if facts is not None:
                    pages[base + f"notebooks/{Path(path).stem}.html"] = facts
            for rel in ("index.html", "quickstart/train_2gpus.html", "TROUBLESHOOTING.html", "docs/workshop.html"):
                facts = checker.facts(base + rel)
                if checker.check(facts is not None, f"page {rel} exists"):
                    pages[base + rel] = facts
            noisy = {url[len(base):]: stderr_problems(f["stderr"]) for url, f in pages.items()}
            noisy = {k: v for k, v in noisy.items() if v}
            checker.check(not noisy, f"no CUDA/absl noise in any of {len(pages)} pages"
                          + ("" if not noisy else ": " + "; ".join(f"{k}: {v[0]}" for k, v in noisy.items())))
            for term in SEARCH_TERMS:
                checker.search(base, term)
            checker.links(pages, base)
            shown = (with_figures or lesson_paths)[0]   # a lesson with figures, scrolled to its first one
            shot = checker.screenshot(base + f"notebooks/{Path(shown).stem}.html")
            print(f"screenshot: {shot}")
        finally:
            server.shutdown()
            planted_server.shutdown()
            browser.close()
    (out / "report.txt").write_text("\n".join(checker.notes + checker.failures) + "\n")
    print(f"{len(checker.notes)} checks passed, {len(checker.failures)} failed (report: {out / 'report.txt'})")
    return 1 if checker.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, required=True, help="the built site (make book's html folder)")
    parser.add_argument("--executed", type=Path, required=True, help="the executed lessons the site was built from")
    parser.add_argument("--out", type=Path, required=True, help="where the screenshot and report go (ignored)")
    parser.add_argument("notebooks", nargs="*", help="the lessons the site holds (default: every lesson)")
    args = parser.parse_args(argv)
    return run(args.site, args.executed, args.out, book.lessons(args.notebooks or None))


if __name__ == "__main__":
    sys.exit(main())
