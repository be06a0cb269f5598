"""The Snakemake report as a user sees it: opened in headless Chromium (Debian's ``chromium``, driven by Playwright
for Python) at 1400x900, its menus read and every entry shown in turn (issue 32).

The report is one HTML page whose React app keeps its data in globals: ``categories`` (category -> subcategory ->
result paths), ``results`` (path -> data URI, MIME type) and ``app`` (whose ``setView`` shows an entry, as a click on
the entry's eye button does). An HTML entry is shown in an iframe, an image in an ``img``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

VIEWPORT = {"width": 1400, "height": 900}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def visit_report(report: Path, screenshots: Path | None = None, keep: set[str] = frozenset()) -> dict:
    """``menu``: category -> its subcategories in the order the menus show them; ``landing_height``: the landing
    page's height (px); ``entries``: per result path its kind, category, subcategory, the frame's width, text length
    and overflow (HTML) or the image's natural and shown width, its info panel's text and the sidebar's width while
    it lists the entry's (sub)category; ``errors``: every JavaScript error and console error of the visit.
    Screenshots of the landing page (``landing``) and of the entries whose file names are in ``keep`` go to
    ``screenshots``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
        page.on("console", lambda message: errors.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.goto(report.resolve().as_uri())
        page.wait_for_function("typeof app !== 'undefined' && typeof categories !== 'undefined'")
        page.wait_for_selector("#rulegraph canvas, #rulegraph svg")
        landing_height = page.evaluate("() => document.documentElement.scrollHeight")
        if screenshots is not None and "landing" in keep:
            page.screenshot(path=screenshots / "landing.png")
        menu = page.evaluate("""() => Object.fromEntries(Object.keys(categories).sort((a, b) => a.localeCompare(b))
            .map(c => [c, Object.keys(categories[c]).sort((a, b) => a.localeCompare(b))]))""")
        placed = page.evaluate("""() => Object.fromEntries(Object.entries(categories).flatMap(([c, subs]) =>
            Object.entries(subs).flatMap(([s, paths]) => paths.map(p => [p, [c, s]]))))""")
        entries = {}
        for path, mime, size in page.evaluate(
                "() => Object.entries(results).map(([k, v]) => [k, v.mime_type, v.data_uri.length])"):
            kind = "html" if mime == "text/html" else "img" if mime.startswith("image/") else "download"
            entry = {"kind": kind, "mime": mime, "category": placed.get(path, [None, None])[0],
                     "subcategory": placed.get(path, [None, None])[1], "data_uri_length": size}
            if kind != "download":
                page.evaluate("([path, kind]) => app.setView({content: kind, contentPath: results[path].data_uri, "
                              "resultPath: path})", [path, kind])
                entry.update(show_html(page, path) if kind == "html" else show_image(page, path))
                if screenshots is not None and Path(path).name in keep:
                    page.screenshot(path=screenshots / (Path(path).stem + ".png"))
            entry.update(show_info(page, path, entry["category"], entry["subcategory"]))
            entries[path] = entry
        browser.close()
    return {"menu": menu, "entries": entries, "errors": errors, "landing_height": landing_height}


def show_info(page, path: str, category: str | None, subcategory: str | None) -> dict:
    """The text of ``path``'s info panel (its eye button's neighbour), and the sidebar's width while it lists the
    entry's category or subcategory."""
    page.evaluate("path => app.setView({navbarMode: 'resultinfo', resultPath: path})", path)
    page.wait_for_function("path => document.querySelector('nav').innerText.includes(path)", arg=path)
    text = page.evaluate("() => document.querySelector('nav').innerText")
    page.evaluate("([category, subcategory]) => app.setView({navbarMode: subcategory ? 'subcategory' : 'category', "
                  "category: category, subcategory: subcategory})", [category, subcategory])
    page.wait_for_function("path => !document.querySelector('nav').innerText.includes(path)", arg=path)
    width = page.evaluate("() => document.querySelector('nav').getBoundingClientRect().width")
    page.evaluate("() => app.setView({navbarMode: 'menu', category: undefined, subcategory: undefined})")
    return {"info": text, "listing_sidebar_width": width}


def show_html(page, path: str) -> dict:
    """The shown page's frame width, text length and overflow (how many pixels the page, or a table, pre or image
    inside its box, is wider than its room: 0 when everything fits), once the iframe holds ``path``'s page (not the
    entry shown before: React updates the iframe after setView returns)."""
    page.wait_for_function("path => document.querySelector('iframe')?.src === results[path].data_uri", arg=path)
    frame = page.query_selector("iframe").content_frame()
    frame.wait_for_load_state()
    # Measured until two readings 0.1 s apart agree: on a busy machine the panes around the frame may still be
    # settling (a CI run once read a table 117 px too wide that fits once laid out).
    previous = None
    for _ in range(50):
        frame_width = page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().width")
        inside = frame.evaluate("""() => ({
            text: document.body ? document.body.innerText.trim().length : 0,
            overflow: Math.max(document.documentElement.scrollWidth - document.documentElement.clientWidth,
                               ...Array.from(document.querySelectorAll('table, img, pre'))
                                   .map(e => e.scrollWidth - e.parentElement.clientWidth)),
        })""")
        reading = {"frame_width": frame_width, **inside}
        if reading == previous:
            break
        previous = reading
        page.wait_for_timeout(100)
    return reading


def show_image(page, path: str) -> dict:
    page.wait_for_function("path => document.querySelector('div.p-3 > img')?.src === results[path].data_uri", arg=path)
    handle = page.query_selector("div.p-3 > img")  # the content pane's image, not the logo
    page.wait_for_function("img => img.complete", arg=handle)
    natural, shown = page.evaluate("img => [img.naturalWidth, img.getBoundingClientRect().width]", handle)
    return {"natural_width": natural, "shown_width": shown}
