// kdflow's search for Snakemake's report (kdflow.reporting.report_search adds it to report.html). Snakemake 9.27
// matches the typed text against each result's file path only, case by case, so "Table 2" or "ALP" finds nothing
// a researcher looks for. Here the query, in any case, is matched against each result's path, name, labels, and
// the category and subcategory it is filed under: the results with the whole query in one of these, or where none
// has it, those with every word of it in some ("ALP-KD Table 2" is a category and a subcategory). A phrase first,
// since the report numbers its categories and names works by year, so "2" alone is in nearly every result.
// "re:<pattern>" keeps Snakemake's regular-expression search, now case-insensitive. Each result is listed in one
// column, its labels in one line, and a second query typed over the results of a first lists its own results.
(function () {
    if (typeof SearchResults !== "function" || typeof results !== "object" || typeof categories !== "object") {
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

    function fields(path, result) {
        const labels = Object.values(result.labels || {});
        return [path, result.name || "", result.filename || "", ...(places[path] || []), ...labels].map(norm);
    }

    // Found results span label schemes (a paper table's "table" and "format", an experiment's "experiment" and
    // "result", ...), and Snakemake gives each label a column: eight columns in a 20-rem sidebar. Each result is
    // listed under one label instead, its label values in one line.
    function listed(result, path) {
        const values = Object.values(result.labels || {}).filter((value) => value !== "");
        return {...result, labels: {result: values.length > 0 ? values.join(" · ") : path}};
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

    // Snakemake computes the listing once, when the results view is made, so a second query typed over the results
    // of a first kept listing the first one's results: recompute it when the query changes.
    SearchResults.prototype.componentDidUpdate = function (previous) {
        if (previous.searchTerm !== this.props.searchTerm) {
            const data = this.getData();
            this.setState({data, toggles: this.getInitToggleState(data.toggleLabels)});
        }
    };
})();
