// kdflow's search for Snakemake's report (kdflow.reporting.report_search adds it to report.html). Snakemake 9.27
// matches the typed text against each result's file path only, case by case, so "Table 2" or "ALP" finds nothing
// a researcher looks for. Here the query, in any case, is matched against each result's path, name, labels, and
// the category and subcategory it is filed under: the results with the whole query in one of these, or where none
// has it, those with every word of it in some ("ALP-KD Table 2" is a category and a subcategory). A phrase first,
// since the report numbers its categories and names works by year, so "2" alone is in nearly every result.
// "re:<pattern>" keeps Snakemake's regular-expression search, now case-insensitive. Results update as the query is
// typed (Snakemake searches on Enter only), a query that finds nothing says so, and each result is listed in one
// column as where the report files it and its labels ("ALP-KD (Passban et al. 2021) · ALP-KD Table 2 · page"),
// without the numbers that order the menus (which the menus and breadcrumbs leave out too). A page's link to
// another result (kdflow.core.documents.Link) opens that result here, as its menu entry does.
(function () {
    if (typeof SearchResults !== "function" || typeof Breadcrumbs !== "function"
            || typeof AbstractMenu !== "function" || typeof Navbar !== "function" || typeof results !== "object"
            || typeof categories !== "object" || typeof ToggleViewManager !== "function") {
        return;  // not the report kdflow.reporting.report_search checked: leave Snakemake's search as it is
    }
    const places = {};  // result path -> [category, subcategory]
    for (const [category, subcategories] of Object.entries(categories)) {
        for (const [subcategory, paths] of Object.entries(subcategories)) {
            for (const path of paths) {
                places[path] = [category, subcategory];
            }
        }
    }
    const norm = (text) => String(text).toLowerCase().replace(/\s+/g, " ").trim();
    // kdflow.reporting.report_menu numbers each category and subcategory by its place ("02 Table 2") because the
    // menus sort by name; the reader sees the name without the number, in the menus, breadcrumbs and results.
    const unnumbered = (name) => String(name).replace(/^\d+ /, "");

    function fields(path, result) {
        const labels = Object.values(result.labels || {});
        return [path, result.name || "", result.filename || "", ...(places[path] || []), ...labels].map(norm);
    }

    // Found results span label schemes (a paper table's "table" and "format", an experiment's "experiment" and
    // "result", ...), and Snakemake gives each label a column: eight columns in a 20-rem sidebar. Each result is
    // listed under one label instead: its category, its subcategory and its label values in one line, leaving out
    // a place that a label already names ("Table 2" beside the label "ALP-KD Table 2"), so that a result named
    // only by what it shows ("teachers beside the thesis") says of which work and item.
    function listed(result, path) {
        const values = Object.values(result.labels || {}).filter((value) => value !== "");
        const place = (places[path] || []).map(unnumbered)
            .filter((name) => !values.some((value) => norm(value).includes(norm(name))));
        const parts = [...new Set([...place, ...values])];
        return {...result, labels: {result: values.length > 0 ? parts.join(" · ") : path}};
    }

    SearchResults.prototype.getResults = function () {
        const term = this.props.searchTerm || "";
        const entries = Object.entries(results).map(([path, result]) => ({path, result, texts: fields(path, result)}));
        let matched;
        if (term.startsWith("re:")) {
            let pattern;
            try {
                pattern = new RegExp(term.slice(3), "i");
            } catch (error) {
                return [];  // a pattern still being typed, e.g. "re:table (": nothing yet
            }
            matched = entries.filter(({texts}) => texts.some((text) => pattern.test(text)));
        } else {
            const phrase = norm(term);
            const has = (texts, part) => texts.some((text) => text.includes(part));
            matched = phrase === "" ? [] : entries.filter(({texts}) => has(texts, phrase));
            if (matched.length === 0) {
                const words = phrase.split(" ").filter((word) => word.length > 0);
                matched = entries.filter(({texts}) => words.length > 0 && words.every((word) => has(texts, word)));
            }
        }
        return matched.map(({path, result}) => [path, listed(result, path)]);
    };

    // A query that finds nothing says so: Snakemake shows an empty table.
    const listResults = SearchResults.prototype.render;
    SearchResults.prototype.render = function () {
        if (this.state.data.resultPathsToEntryLabels.size > 0) {
            return listResults.call(this);
        }
        const term = (this.props.searchTerm || "").trim();
        return React.createElement("p", {className: "text-white text-sm p-2", id: "kdflow-no-results"},
            term === "" ? "Type to search the results." : `No result matches “${term}”.`);
    };

    // Snakemake computes the listing once, when the results view is made, so a second query typed over the results
    // of a first kept listing the first one's results: recompute it when the query changes.
    SearchResults.prototype.componentDidUpdate = function (previous) {
        if (previous.searchTerm !== this.props.searchTerm) {
            const data = this.getData();
            this.setState({data, toggles: this.getInitToggleState(data.toggleLabels)});
        }
    };

    // Search as the query is typed: each change shows its results (Snakemake waits for Enter, which still works), and
    // clearing the box shows the menu again. The box is Snakemake's own element, its other properties kept.
    const searchBox = Breadcrumbs.prototype.renderSearch;
    Breadcrumbs.prototype.renderSearch = function () {
        const item = searchBox.call(this);
        const box = item.props.children;
        return React.cloneElement(item, {}, React.cloneElement(box, {
            onChange: (event) => {
                const term = event.target.value;
                this.setState({searchTerm: term});
                this.props.setView(term.trim() === "" ? {navbarMode: "menu"}
                    : {navbarMode: "searchresults", searchTerm: term});
            },
        }));
    };

    const menuItem = AbstractMenu.prototype.getMenuItem;
    AbstractMenu.prototype.getMenuItem = function (label, iconName, onClick) {
        return menuItem.call(this, unnumbered(label), iconName, onClick);
    };
    for (const crumb of ["getCategoryBreadcrumb", "getSubcategoryBreadcrumb"]) {
        const named = Navbar.prototype[crumb];
        Navbar.prototype[crumb] = function () {
            const entry = named.call(this);
            return entry === undefined ? entry : {...entry, name: unnumbered(entry.name)};
        };
    }

    // A page is shown in a frame of a data: URL, an origin of its own, which reaches the report by a message only:
    // a link posts the path of the result it names, and the report shows that result and lists its information.
    addEventListener("message", (event) => {
        const path = event.data && event.data.kdflowResult;
        if (typeof path !== "string" || !(path in results) || typeof app === "undefined") {
            return;
        }
        // one setView: Snakemake's builds each new state from the last rendered one, so a second call in the same
        // turn would undo the first
        let shown = false;
        const inOneView = {setView: (view) => { shown = true; app.setView({...view, navbarMode: "resultinfo"}); }};
        new ToggleViewManager(inOneView).handleSelectedResult(path);
        if (!shown) {  // a file the report offers as a download: its information, with the download button
            app.setView({navbarMode: "resultinfo", resultPath: path});
        }
    });
})();
