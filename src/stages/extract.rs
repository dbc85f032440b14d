//! Stage `extract`: the curation filters (R2E's rules), applied in a fixed order; the first that
//! excludes a function names it in `excluded_by`.

use crate::config::ExtractConfig;
use crate::python::summary::DefLayout;

/// The filter names, in the order they are tried (the README lists them).
pub const FILTERS: &[&str] = &[
    "no_docstring",
    "dunder",
    "name_prefix",
    "decorator",
    "no_params",
    "no_return",
    "one_statement",
    "too_long",
    "literal_returns",
    "keywords",
    "connectivity",
];

/// The first filter (all but `connectivity`, which needs the call graph) that excludes a
/// function, or `None`.
pub fn local_filters(cfg: &ExtractConfig, name: &str, layout: &DefLayout) -> Option<&'static str> {
    let f = &layout.features;
    let bare = name.rsplit('.').next().unwrap_or(name);
    if cfg.no_docstring
        && layout
            .docstring
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
    {
        return Some("no_docstring");
    }
    if cfg.dunder && bare.len() > 4 && bare.starts_with("__") && bare.ends_with("__") {
        return Some("dunder");
    }
    if cfg.name_prefix {
        let lower = bare.trim_start_matches('_').to_ascii_lowercase();
        if cfg
            .prefixes
            .iter()
            .any(|p| lower.starts_with(&p.to_ascii_lowercase()))
        {
            return Some("name_prefix");
        }
    }
    if cfg.decorator
        && f.decorators
            .iter()
            .any(|d| !cfg.allowed_decorators.contains(d))
    {
        return Some("decorator");
    }
    if cfg.no_params && f.params == 0 {
        return Some("no_params");
    }
    if cfg.no_return && f.value_returns == 0 {
        return Some("no_return");
    }
    if cfg.one_statement && f.body_statements <= 1 {
        return Some("one_statement");
    }
    if cfg.too_long && f.lines > cfg.max_lines {
        return Some("too_long");
    }
    if cfg.literal_returns && f.value_returns > 0 && f.literal_returns * 2 > f.value_returns {
        return Some("literal_returns");
    }
    if cfg.keywords {
        let lowered = layout
            .docstring
            .as_deref()
            .map(str::to_lowercase)
            .unwrap_or_default();
        let doc_words = doc_words(&lowered);
        let hit_doc = cfg.docstring_keywords.iter().any(|k| {
            let k = k.to_ascii_lowercase();
            if k.contains([' ', '-']) {
                let phrase: Vec<&str> = k.split([' ', '-']).collect();
                doc_words
                    .windows(phrase.len())
                    .any(|w| w == phrase.as_slice())
            } else {
                doc_words.contains(&k.as_str())
            }
        });
        let hit_body = cfg
            .body_keywords
            .iter()
            .any(|k| f.words.binary_search(&k.to_ascii_lowercase()).is_ok());
        if hit_doc || hit_body {
            return Some("keywords");
        }
    }
    None
}

fn doc_words(doc: &str) -> Vec<&str> {
    doc.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
}
