"""The Snakemake report as a user sees it: opened in headless Chromium (Debian's ``chromium``, driven by Playwright
for Python) at a window size, its menus read and every entry shown in turn (issues 32 and 52).

The report is one HTML page whose React app keeps its data in globals: ``categories`` (category -> subcategory ->
result paths), ``results`` (path -> data URI, MIME type) and ``app`` (whose ``setView`` shows an entry, as a click on
the entry's eye button does, or a listing in the sidebar). An HTML entry is shown in an iframe, an image in an
``img``, both in the content pane beside the sidebar. The sidebar is measured as Snakemake leaves it: its width is
whatever the listing shown gives it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

VIEWPORTS = {"1400x900": {"width": 1400, "height": 900}, "1024x768": {"width": 1024, "height": 768}}
SEARCHES = ("alp", "Table 2", "ALP-KD Table 2")

# How far (px) the content pane's first element starts above and left of the pane, scrolled to its start: content
# there cannot be scrolled to.
CLIPPED = """() => {
    const pane = document.querySelector('div.grow.h-screen');
    pane.scrollTop = 0; pane.scrollLeft = 0;
    const content = pane.firstElementChild.getBoundingClientRect(), room = pane.getBoundingClientRect();
    return {above: Math.max(0, room.top - content.top), left: Math.max(0, room.left - content.left)};
}"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def visit_report(report: Path, viewport: dict, screenshots: Path | None = None, keep: set[str] = frozenset()) -> dict:
    """What a user meets in ``report`` at window size ``viewport``:

    - ``menu``: category -> its subcategories in the order the menus show them;
    - ``landing``: the landing page's height and clipping (px above and left of the pane, :data:`CLIPPED`);
    - ``entries``: per result path its kind, category, subcategory and clipping; for HTML the frame's width, text
      length and overflow; for an image its natural and shown width; its info panel's text and the sidebar's width
      while it lists the entry's (sub)category;
    - ``sidebar``: the sidebar's width per listing (menu, a category, a subcategory, search results);
    - ``crumbs``: the height of each breadcrumb of the deepest listing, and of one line of the trail;
    - ``first_views``: per (category, subcategory) with a format toggle, the format it shows first;
    - ``searches``: per term of :data:`SEARCHES` typed into the search box, what it finds (:func:`search`);
    - ``errors``: every JavaScript error and console error of the visit.

    Screenshots of the landing page (``landing``), the results of the last search (``search``) and of the entries
    whose file names are in ``keep`` go to
    ``screenshots``, named with the window size."""
    from playwright.sync_api import sync_playwright

    size = f"{viewport['width']}x{viewport['height']}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport=viewport)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
        page.on("console", lambda message: errors.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.goto(report.resolve().as_uri())
        page.wait_for_function("typeof app !== 'undefined' && typeof categories !== 'undefined'")
        page.wait_for_selector("#rulegraph canvas, #rulegraph svg")
        landing = {"height": page.evaluate("() => document.documentElement.scrollHeight"), **page.evaluate(CLIPPED)}
        if screenshots is not None and "landing" in keep:
            page.screenshot(path=screenshots / f"landing_{size}.png")
        menu = page.evaluate("""() => Object.fromEntries(Object.keys(categories).sort((a, b) => a.localeCompare(b))
            .map(c => [c, Object.keys(categories[c]).sort((a, b) => a.localeCompare(b))]))""")
        placed = page.evaluate("""() => Object.fromEntries(Object.entries(categories).flatMap(([c, subs]) =>
            Object.entries(subs).flatMap(([s, paths]) => paths.map(p => [p, [c, s]]))))""")
        entries = {}
        for path, mime, length in page.evaluate(
                "() => Object.entries(results).map(([k, v]) => [k, v.mime_type, v.data_uri.length])"):
            kind = "html" if mime == "text/html" else "img" if mime.startswith("image/") else "download"
            entry = {"kind": kind, "mime": mime, "category": placed.get(path, [None, None])[0],
                     "subcategory": placed.get(path, [None, None])[1], "data_uri_length": length}
            if kind != "download":
                page.evaluate("([path, kind]) => app.setView({content: kind, contentPath: results[path].data_uri, "
                              "resultPath: path})", [path, kind])
                entry.update(show_html(page, path) if kind == "html" else show_image(page, path))
                entry.update(page.evaluate(CLIPPED))
                if screenshots is not None and Path(path).name in keep:
                    page.screenshot(path=screenshots / f"{Path(path).stem}_{size}.png")
            entry.update(show_info(page, path, entry["category"], entry["subcategory"]))
            entries[path] = entry
        visit = {"menu": menu, "landing": landing, "entries": entries, "sidebar": sidebar_widths(page, placed),
                 "crumbs": crumb_heights(page, placed), "first_views": first_views(page, placed),
                 "searches": {term: search(page, term) for term in SEARCHES}, "errors": errors}
        if screenshots is not None and "search" in keep:
            search(page, SEARCHES[-1], back_to_menu=False)
            page.screenshot(path=screenshots / f"search_{size}.png")
        browser.close()
    return visit


def listing(page, mode: str, **view) -> None:
    """Show a listing in the sidebar (``mode``: menu, category, subcategory or searchresults) and let it settle."""
    page.evaluate("view => app.setView(view)", {"navbarMode": mode, **view})
    page.wait_for_function("mode => app.state.navbarMode === mode", arg=mode)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")  # laid out
    # The sidebar is a `transition-all` element: on a busy machine its width can still be moving two frames on (the
    # menu read 322.5 px against 320 once in CI, 2026-11-28), so wait for every finite transition to end.
    page.evaluate("""() => Promise.all(document.getAnimations()
        .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
        .map(a => a.finished.catch(() => null)))""")


def sidebar_width(page) -> float:
    return page.evaluate("() => document.querySelector('nav').getBoundingClientRect().width")


def sidebar_widths(page, placed: dict) -> dict[str, float]:
    category, subcategory = next(iter(placed.values()))
    widths = {}
    for name, mode, view in [("menu", "menu", {}), ("category", "category", {"category": category}),
                             ("subcategory", "subcategory", {"category": category, "subcategory": subcategory}),
                             ("search results", "searchresults", {"searchTerm": "results"})]:
        listing(page, mode, **view)
        widths[name] = sidebar_width(page)
    listing(page, "menu", category=None, subcategory=None)
    return widths


def crumb_heights(page, placed: dict) -> dict:
    """The breadcrumbs of the listing with the longest trail (category and subcategory names): each crumb's height
    and the height of one line of text there; a crumb squeezed narrower than its words is several lines tall."""
    category, subcategory = max(placed.values(), key=lambda place: len(place[0]) + len(place[1] or ""))
    listing(page, "subcategory", category=category, subcategory=subcategory)
    heights = page.evaluate("""() => {
        const crumbs = Array.from(document.querySelectorAll('nav nav ol > li')).filter(li => !li.querySelector('input'));
        const line = parseFloat(getComputedStyle(crumbs[0]).lineHeight) || 16;
        return {line: line, crumbs: crumbs.map(li => [li.innerText, li.getBoundingClientRect().height])};
    }""")
    listing(page, "menu", category=None, subcategory=None)
    return heights


def first_views(page, placed: dict) -> dict[tuple, str]:
    """Per (category, subcategory) whose listing offers a format toggle, the value it starts on."""
    shown = {}
    for category, subcategory in sorted(set(map(tuple, placed.values())), key=str):
        listing(page, "subcategory" if subcategory else "category", category=category, subcategory=subcategory)
        checked = page.evaluate("() => document.querySelector('nav fieldset input:checked')?.value ?? null")
        if checked is not None:
            shown[(category, subcategory)] = checked
    listing(page, "menu", category=None, subcategory=None)
    return shown


def search(page, term: str, back_to_menu: bool = True) -> dict:
    """Type ``term`` into the report's search box and press Enter: the result paths the search finds (``paths``)
    and the rows the sidebar lists (``rows``, the text of their first cell; a page and its CSV share a row). ``back_to_menu`` shows
    the menu again afterwards; without it, the next search is typed over these results, as a user types a second
    query."""
    box = page.locator("nav nav input[type=text]")
    box.fill(term)
    box.press("Enter")
    page.wait_for_function("term => app.state.navbarMode === 'searchresults' && app.state.searchTerm === term",
                           arg=term)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    found = {"paths": page.evaluate(
        "term => new SearchResults({app: app, searchTerm: term}).getResults().map(([path]) => path)", term),
        "rows": page.evaluate("() => [...document.querySelectorAll('nav.transition-all table tbody tr')]"
                              ".map(row => row.cells[0].innerText.trim())")}
    if back_to_menu:
        listing(page, "menu", category=None, subcategory=None)
    return found


def show_info(page, path: str, category: str | None, subcategory: str | None) -> dict:
    """The text of ``path``'s info panel (its eye button's neighbour), and the sidebar's width while it lists the
    entry's category or subcategory."""
    page.evaluate("path => app.setView({navbarMode: 'resultinfo', resultPath: path})", path)
    page.wait_for_function("path => document.querySelector('nav').innerText.includes(path)", arg=path)
    text = page.evaluate("() => document.querySelector('nav').innerText")
    page.evaluate("([category, subcategory]) => app.setView({navbarMode: subcategory ? 'subcategory' : 'category', "
                  "category: category, subcategory: subcategory})", [category, subcategory])
    page.wait_for_function("path => !document.querySelector('nav').innerText.includes(path)", arg=path)
    width = sidebar_width(page)
    page.evaluate("() => app.setView({navbarMode: 'menu', category: undefined, subcategory: undefined})")
    return {"info": text, "listing_sidebar_width": width}


def show_html(page, path: str) -> dict:
    """The shown page's frame width, text length, height and overflow (how many pixels the page, or a pre, image or
    table outside a scrolling box, is wider than its room: 0 when everything fits), its tables shown as cards, its
    links to its own sections and those whose target is missing, its links to other results and those the report
    has no entry for, once the iframe holds ``path``'s page (not the entry shown before: React updates the iframe
    after setView returns)."""
    page.wait_for_function("path => document.querySelector('iframe')?.src === results[path].data_uri", arg=path)
    frame = page.query_selector("iframe").content_frame()
    frame.wait_for_load_state()
    # Measured until two readings 0.1 s apart agree: on a busy machine the panes around the frame may still be
    # settling (a CI run once read a table 117 px too wide that fits once laid out).
    previous = None
    for _ in range(50):
        frame_width = page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().width")
        # a table in its scrolling box (div.table) may be wider than the box: it scrolls there, the page does not
        inside = frame.evaluate("""() => ({
            text: document.body ? document.body.innerText.trim().length : 0,
            overflow: Math.max(document.documentElement.scrollWidth - document.documentElement.clientWidth,
                               ...Array.from(document.querySelectorAll('table, img, pre'))
                                   .filter(e => !e.parentElement.matches('div.table'))
                                   .map(e => e.scrollWidth - e.parentElement.clientWidth)),
            cards: document.querySelectorAll('table.cards').length,
            links: document.querySelectorAll('a[href^="#"]').length,
            broken_links: Array.from(document.querySelectorAll('a[href^="#"]'), a => a.getAttribute('href'))
                .filter(href => !document.getElementById(decodeURIComponent(href.slice(1)))),
            height: document.documentElement.scrollHeight,
            result_links: Array.from(document.querySelectorAll('a[data-result]'), a => a.dataset.result),
        })""")
        reading = {"frame_width": frame_width, **inside}
        if reading == previous:
            break
        previous = reading
        page.wait_for_timeout(100)
    # a link to another result opens it only if the report has an entry of that path
    reading["unknown_results"] = page.evaluate("targets => targets.filter(path => !(path in results))",
                                               reading["result_links"])
    return reading


def show_image(page, path: str) -> dict:
    page.wait_for_function("path => document.querySelector('div.p-3 > img')?.src === results[path].data_uri", arg=path)
    handle = page.query_selector("div.p-3 > img")  # the content pane's image, not the logo
    page.wait_for_function("img => img.complete", arg=handle)
    previous = None
    for _ in range(20):  # until two readings agree: a busy CI run once read a figure mid-layout, at 0.62x for 0.76x
        reading = page.evaluate("img => [img.naturalWidth, img.getBoundingClientRect().width]", handle)
        if reading == previous:
            break
        previous = reading
        page.wait_for_timeout(100)
    natural, shown = reading
    return {"natural_width": natural, "shown_width": shown}
